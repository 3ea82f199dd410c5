"""LFM2 / LFM2-MoE / LFM3 (and their VL / audio wrappers): short-convolution blocks with a few
attention layers."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    kv_heads_of,
    layer_types,
    model_level_window,
    num_layers_of,
    positive_window,
    text_cfg,
    unsupported_layer_type,
)
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription, ShortConvDims
from kvplan.models.quant import quantization_info


def _short_conv(i: int, prefix: str, dims: ShortConvDims) -> LayerDescription:
    return LayerDescription(index=i, name=f"{prefix}.{i}.short_conv", kind=LayerKind.SHORT_CONV,
                            short_conv=dims)


def describe_lfm2(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/lfm2.py — layer_types[i] == "full_attention" → Lfm2Attention
    (model.layers.{i}.self_attn.attn, head = hidden // heads), else ShortConv
    (model.layers.{i}.short_conv; state (conv_L_cache - 1, conv_dim)). Lfm2Config: layer_types
    from full_attn_idxs (default: all attention), conv_L_cache 3, num_key_value_heads 8;
    `conv_dim` has no transformers default (vLLM reads config.conv_dim)."""
    text = text_cfg(top)
    n = num_layers_of(text)
    # vLLM: lfm2_vl.py builds the text_config's model under the prefix "language"
    prefix = "language.model.layers" if text is not top else "model.layers"
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
            layers.append(attention(i, attn_name(i, prefix), kv_heads=kv, head_size=hd))
        elif t == "conv":
            if conv is None:
                conv = ShortConvDims(conv_dim=text.req_int("conv_dim", "the short-conv state"),
                                     l_cache=text.int_default("conv_L_cache", 3))
            layers.append(_short_conv(i, prefix, conv))
        else:
            raise unsupported_layer_type(text, "layer_types", t, "lfm2")
    return finish(top, text, family="lfm2", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))


def describe_lfm2_moe(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/lfm2_moe.py — layer_types[i] == "full_attention" → Lfm2MoeAttention
    (model.layers.{i}.self_attn.attn, head = hidden // heads), else ShortConv(dim=hidden_size)
    at model.layers.{i}.short_conv. Lfm2MoeConfig: no layer_types default (vLLM indexes it),
    conv_L_cache 3, num_key_value_heads 8."""
    text = text_cfg(top)
    n = num_layers_of(text)
    prefix = "language.model.layers" if text is not top else "model.layers"
    types = layer_types(text, n)
    if types is None:
        raise text.error("'layer_types' is missing (vLLM's Lfm2MoeForCausalLM reads it per layer)")
    kv = kv_heads_of(text, 8)
    hidden = text.req_int("hidden_size")
    hd = hidden // text.req_int("num_attention_heads")
    conv = ShortConvDims(conv_dim=hidden, l_cache=text.int_default("conv_L_cache", 3))
    layers = [attention(i, attn_name(i, prefix), kv_heads=kv, head_size=hd)
              if t == "full_attention" else _short_conv(i, prefix, conv)
              for i, t in enumerate(types)]
    return finish(top, text, family="lfm2_moe", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))


def describe_lfm2_vl(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/lfm2_vl.py — the SigLIP2 tower has no KV cache; the language model is
    the text_config's own architecture (Lfm2ForCausalLM, or Lfm2MoeForCausalLM by model_type),
    built under the prefix "language". Only the language model is planned."""
    text = text_cfg(top)
    adapter = describe_lfm2_moe if text.get("model_type") == "lfm2_moe" else describe_lfm2
    return with_encoder_note(adapter(top, hf_quant_config))


def with_encoder_note(desc: ModelDescription) -> ModelDescription:
    """`desc` with the encoder-cache note of a multimodal wrapper (vLLM: SupportsMultiModal)."""
    from kvplan.models.resolution.resolved import encoder_cache_note  # lazy: the fast path stays light
    note = encoder_cache_note(desc.architectures)
    return desc if note is None else desc.model_copy(update={"warnings": desc.warnings + (note,)})


_LFM3_ATTENTION = ("full_attention", "sliding_attention")


def describe_lfm3(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/lfm3.py — layer_types[i] in (full_attention, sliding_attention) →
    Lfm3Attention (model.layers.{i}.self_attn.attn, config.head_dim, per-layer window
    config.sliding_window on sliding_attention), any other type → ShortConv(dim=hidden_size) at
    model.layers.{i}.short_conv. Lfm3Config (vllm/transformers_utils/configs/lfm3.py): 24 layers,
    num_key_value_heads 4, head_dim 128, sliding_window 256, conv_L_cache 7, layer_types
    full at i % 4 == 2, sliding at i % 4 == 0 (i > 0), conv elsewhere.
    Lfm3VlForConditionalGeneration / Lfm3AudioForConditionalGeneration (lfm3_vl.py,
    lfm3_audio.py): Lfm3ForCausalLM on text_config under "language_model"; their towers (MM
    encoder attention, a transformers Lfm2Model for audio) own no KV cache."""
    text = text_cfg(top)
    if text is top and top.sub("lfm") is not None:  # Lfm3AudioConfig: the hub's `lfm` key
        text = top.sub("lfm") or top
    n = text.int_default("num_hidden_layers", 24)
    prefix = "language_model.model.layers" if text is not top else "model.layers"
    types = layer_types(text, n)
    if types is None:
        text.warn("no 'layer_types': Lfm3Config's default pattern (full at i % 4 == 2, sliding "
                  "at i % 4 == 0 after layer 0, conv elsewhere)")
        types = ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0
                 else "conv" for i in range(n)]
    kv = kv_heads_of(text, 4)
    hd = text.int_default("head_dim", 128)
    window = positive_window(text) if text.present("sliding_window") else 256  # class default
    conv = ShortConvDims(conv_dim=text.req_int("hidden_size"),
                         l_cache=text.int_default("conv_L_cache", 7))
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        if t in _LFM3_ATTENTION:
            layers.append(attention(i, attn_name(i, prefix), kv_heads=kv, head_size=hd,
                                    window=window if t == "sliding_attention" else None))
        else:
            layers.append(_short_conv(i, prefix, conv))
    desc = finish(top, text, family="lfm3", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(window, types))
    return with_encoder_note(desc) if text is not top else desc
