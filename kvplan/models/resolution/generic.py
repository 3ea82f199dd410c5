"""A fallback for model types neither kvplan nor transformers knows, whose config states its layer
kinds (everything transformers knows goes through `resolved.py`)."""

from __future__ import annotations

from kvplan.errors import UnsupportedError
from kvplan.models._common import (
    SPECS_HINT,
    Cfg,
    architectures,
    attention,
    attn_name,
    finish,
    head_dim_of,
    kv_heads_of,
    layer_types,
    model_level_window,
    num_layers_of,
    positive_window,
    text_cfg,
)
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.families._shared import gdn_dims
from kvplan.models.quant import quantization_info

_KNOWN = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention")


def describe_generic(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """Plan from `layer_types` alone, assuming Llama-style attention (num_key_value_heads,
    head_dim or hidden_size // num_attention_heads), `sliding_window` for sliding layers,
    `attention_chunk_size` for chunked ones, and Qwen-style gated delta nets (linear_* fields)
    for "linear_attention". Every assumption is written to the description's warnings."""
    text = text_cfg(top)
    model_type = str(text.get("model_type", top.get("model_type", "?")))
    archs = ", ".join(architectures(top)) or "none"
    if not text.has("layer_types"):  # the missing adapter is the cause, not a missing field
        raise UnsupportedError(
            f"{top.source}: no kvplan adapter for model_type {model_type!r} "
            f"(architectures: {archs}), transformers has no configuration class for it, and "
            "the config has no 'layer_types' field stating each layer's kind",
            hint=SPECS_HINT)
    n = num_layers_of(text)
    types = layer_types(text, n)
    assert types is not None
    unknown = sorted(set(types) - set(_KNOWN))
    if unknown:
        raise UnsupportedError(
            f"{top.source}: no kvplan adapter for model_type {model_type!r}; its layer_types "
            f"contain {', '.join(map(repr, unknown))}, which kvplan cannot size without one",
            hint=SPECS_HINT)
    kv = kv_heads_of(text)
    hd = head_dim_of(text)
    text.warn(f"no kvplan adapter for model_type {model_type!r} (architectures: {archs}): "
              f"planned from layer_types with assumed Llama-style attention "
              f"({kv} KV heads, head size {hd}); vLLM's model code for it was not checked")
    chunk = text.get_int("attention_chunk_size", None)
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        if t == "full_attention":
            layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd))
        elif t == "sliding_attention":
            window = text.req_int("sliding_window", "the sliding_attention layers")
            layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd, window=window))
        elif t == "chunked_attention":
            size = chunk or text.req_int("attention_chunk_size", "the chunked_attention layers")
            layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd, chunk=size))
        else:
            if not text.has("linear_num_key_heads"):
                raise UnsupportedError(
                    f"{top.source}: model_type {model_type!r} has 'linear_attention' layers but "
                    "no 'linear_num_key_heads' (or other linear_* fields) to size their state",
                    hint=SPECS_HINT)
            text.warn("'linear_attention' layers planned as Qwen-style gated delta nets from the "
                      "linear_* fields")
            layers.append(LayerDescription(index=i, name=f"model.layers.{i}.linear_attn",
                                           kind=LayerKind.GDN, gdn=gdn_dims(text)))
    return finish(top, text, family="generic", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(positive_window(text), types))
