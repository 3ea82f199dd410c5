"""LFM2: short-convolution blocks with a few attention layers."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    kv_heads_of,
    layer_types,
    num_layers_of,
    text_cfg,
    unsupported_layer_type,
)
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription, ShortConvDims
from kvplan.models.quant import quantization_info


def describe_lfm2(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/lfm2.py — layer_types[i] == "full_attention" → Lfm2Attention
    (model.layers.{i}.self_attn.attn, head = hidden // heads), else ShortConv
    (model.layers.{i}.short_conv; state (conv_L_cache - 1, conv_dim)). Lfm2Config: layer_types
    from full_attn_idxs (default: all attention), conv_L_cache 3, num_key_value_heads 8;
    `conv_dim` has no transformers default (vLLM reads config.conv_dim)."""
    text = text_cfg(top)
    n = num_layers_of(text)
    types = layer_types(text, n)
    if types is None:
        idxs = text.get("full_attn_idxs")
        if idxs is None:
            text.warn("neither 'layer_types' nor 'full_attn_idxs': transformers' default is "
                      "attention on every layer")
            idxs = list(range(n))
        types = ["full_attention" if i in set(idxs) else "conv" for i in range(n)]
    kv = kv_heads_of(text, 8)
    hd = text.req_int("hidden_size") // text.req_int("num_attention_heads")
    conv: ShortConvDims | None = None
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        if t == "full_attention":
            layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd))
        elif t == "conv":
            if conv is None:
                conv = ShortConvDims(conv_dim=text.req_int("conv_dim", "the short-conv state"),
                                     l_cache=text.int_default("conv_L_cache", 3))
            layers.append(LayerDescription(index=i, name=f"model.layers.{i}.short_conv",
                                           kind=LayerKind.SHORT_CONV, short_conv=conv))
        else:
            raise unsupported_layer_type(text, "layer_types", t, "lfm2")
    return finish(top, text, family="lfm2", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
