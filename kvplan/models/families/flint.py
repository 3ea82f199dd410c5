"""Flint: hybrid sliding-window / full attention with learned sinks (logits, not KV cache)."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    layer_types,
    model_level_window,
    num_layers_of,
    text_cfg,
    unsupported_layer_type,
)
from kvplan.models.description import AttentionConstraint, ModelDescription
from kvplan.models.quant import quantization_info

# vLLM: models/flint/configs.py FlintConfig defaults (vLLM registers the class itself)
FLINT_DEFAULTS = {"num_hidden_layers": 49, "num_key_value_heads": 4, "head_dim": 128,
                  "max_position_embeddings": 262144, "sliding_window": 513}


def describe_flint(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/flint/model.py FlintAttention (0.33+) — every layer has num_key_value_heads ×
    head_dim; a "sliding_attention" layer gets config.sliding_window (FlintConfig: None when
    use_sliding_window is false), the others full attention. layer_types absent → all full
    (FlintConfig). The per-head sinks are parameters, not cache; no layer shares another's KV
    (FlintAttention asserts kv_sharing_target_layer_name is None)."""
    text = text_cfg(top)
    absent = {k: v for k, v in FLINT_DEFAULTS.items() if not text.present(k)}
    if absent:
        text.warn("absent from config.json, so vLLM's FlintConfig defaults apply: "
                  + ", ".join(f"{text.field(k)} = {v}" for k, v in absent.items()))
        text = Cfg({**text.data, **absent}, text.source, text.path, text.warnings)
    n = num_layers_of(text)
    sw = text.get_int("sliding_window", None) if text.get("use_sliding_window", True) else None
    types = layer_types(text, n) or ["full_attention"] * n
    kv = text.req_int("num_key_value_heads")
    hd = text.req_int("head_dim")
    layers = []
    for i, t in enumerate(types):
        if t not in ("sliding_attention", "full_attention"):
            raise unsupported_layer_type(text, "layer_types", t, "flint")
        layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd,
                                window=sw if t == "sliding_attention" else None))
    desc = finish(top, text, family="flint", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(sw, types))
    # vLLM: models/flint/model.py FlintAttention asserts a FlashInfer impl, a bfloat16 model and
    # an auto / bfloat16 KV cache (its fused kernels write the cache themselves)
    return desc.model_copy(update={"attention_constraint": AttentionConstraint(
        name="Flint", backend="FLASHINFER", model_dtypes=("bfloat16",),
        kv_cache_dtypes=("auto", "bfloat16"))})
