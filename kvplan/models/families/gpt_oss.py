"""gpt-oss: alternating sliding-window and full attention, attention sinks without KV."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    finish,
    kv_heads_of,
    layer_types,
    model_level_window,
    num_layers_of,
    text_cfg,
)
from kvplan.models.description import ModelDescription
from kvplan.models.quant import quantization_info


def describe_gpt_oss(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/gpt_oss.py OAIAttention._build_attention — `config.sliding_window` on every
    even layer (layer_idx % 2 == 0), full attention on odd ones; layer_types is not read. The
    sinks are per-head logits (a parameter), not KV cache. Module: model.layers.{i}.attn.attn."""
    text = text_cfg(top)
    n = num_layers_of(text)
    sw = text.req_int("sliding_window", "the sliding-window layers")
    kv = kv_heads_of(text)
    hd = text.req_int("head_dim", "the attention head size")
    types = layer_types(text, n)
    expected = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if types is not None:
        if types != expected:
            text.warn("layer_types differs from the even-sliding/odd-full pattern vLLM's gpt-oss "
                      "model uses; planned with vLLM's pattern")
    layers = [attention(i, f"model.layers.{i}.attn.attn", kv_heads=kv, head_size=hd,
                        window=sw if i % 2 == 0 else None) for i in range(n)]
    # GptOssConfig derives the same alternating layer_types when absent
    return finish(top, text, family="gpt_oss", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(sw, types or expected))
