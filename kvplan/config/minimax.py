"""MiniMax-M2 (full attention) and MiniMax-Text-01 / M1 (lightning linear attention hybrid)."""

from __future__ import annotations

from kvplan.config._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    head_dim_of,
    kv_heads_of,
    layer_types,
    model_level_window,
    num_layers_of,
    pattern_list,
    positive_window,
    text_cfg,
    unsupported_layer_type,
)
from kvplan.config.quant import quantization_info
from kvplan.model import LayerDescription, LayerKind, LinearAttentionDims, ModelDescription


def describe_minimax_m2(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/minimax_m2.py MiniMaxM2DecoderLayer — every layer is MiniMaxM2Attention
    (attn_window_size None → the model-level window); `attn_type_list` is not read. The
    checkpoint's `num_mtp_modules` are recorded, but vLLM 0.34 has no MiniMax-M2 MTP drafter
    (config/speculative.py hf_config_override has no minimax_m2 branch)."""
    text = text_cfg(top)
    n = num_layers_of(text)
    if text.has("attn_type_list"):
        kinds = pattern_list(text, "attn_type_list", n)
        if any(int(k) != 1 for k in kinds):
            text.warn("attn_type_list marks some layers as linear attention, but vLLM's "
                      "MiniMaxM2 model builds full attention on every layer; planned as full")
    kv = kv_heads_of(text)
    hd = head_dim_of(text)
    window = model_level_window(positive_window(text), layer_types(text, n))
    layers = [attention(i, attn_name(i), kv_heads=kv, head_size=hd, window=window)
              for i in range(n)]
    n_mtp = 0
    if text.get("use_mtp", True):
        n_mtp = text.get_int("num_mtp_modules", 0, minimum=0) or 0
    return finish(top, text, family="minimax_m2", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  num_nextn_predict_layers=n_mtp, model_sliding_window=window)


def describe_minimax_linear(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """MiniMax-Text-01 / MiniMax-M1: lightning (linear) attention with a softmax attention layer
    every few layers. `attn_type_list[i]` 0 = linear, 1 = softmax (hub configs); transformers
    MiniMaxConfig uses layer_types ("linear_attention"/"full_attention", default alternating
    full/linear). Linear layers keep a (num_attention_heads, head_dim, head_dim) state
    (vLLM ≤0.22 minimax_text_01.py MiniMaxText01LinearAttention); head_dim defaults to
    hidden_size // num_attention_heads.
    """
    text = text_cfg(top)
    n = num_layers_of(text)
    if text.has("attn_type_list"):
        raw = pattern_list(text, "attn_type_list", n)
        types = []
        for v in raw:
            if v in (0, "0"):
                types.append("linear_attention")
            elif v in (1, "1"):
                types.append("full_attention")
            else:
                raise unsupported_layer_type(text, "attn_type_list", v, "minimax")
    else:
        found = layer_types(text, n)
        if found is None:
            text.warn("neither 'attn_type_list' nor 'layer_types': used transformers' default "
                      "(full attention on even layers, linear on odd)")
            found = ["full_attention" if (i + 1) % 2 else "linear_attention" for i in range(n)]
        types = found
    heads = text.req_int("num_attention_heads")
    hd = head_dim_of(text)
    kv = kv_heads_of(text)
    window = model_level_window(positive_window(text), types)
    lin = LinearAttentionDims(num_heads=heads, head_dim=hd)
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        if t == "linear_attention":
            layers.append(LayerDescription(index=i, name=f"model.layers.{i}.self_attn",
                                           kind=LayerKind.LINEAR_ATTENTION,
                                           linear_attention=lin))
        elif t == "full_attention":
            layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd, window=window))
        else:
            raise unsupported_layer_type(text, "layer_types", t, "minimax")
    # vLLM: model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS lists
    # MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM as removed after 0.23.0.
    text.warn("vLLM removed MiniMaxText01ForCausalLM / MiniMaxM1ForCausalLM after 0.23.0; "
              "this plan follows the model's own layer list, not a current vLLM model file")
    return finish(top, text, family="minimax_linear", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=window)
