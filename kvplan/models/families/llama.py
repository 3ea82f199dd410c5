"""Llama-style dense decoders (Llama 3.x, Mistral, Mixtral) and Llama 4 (chunked local attention)."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    head_dim_of,
    kv_heads_of,
    num_layers_of,
    text_cfg,
)
from kvplan.models.description import ModelDescription
from kvplan.models.families._shared import llama_layers
from kvplan.models.quant import quantization_info

# transformers defaults that matter for the KV cache when a field is absent.
_DEFAULTS = {
    # MistralConfig: sliding_window=4096, num_key_value_heads=8
    "mistral": {"sliding_window": 4096, "num_key_value_heads": 8},
}


def describe_llama(top: Cfg, hf_quant_config: dict | None, *, family: str = "llama"
                   ) -> ModelDescription:
    text = text_cfg(top)
    model_type = str(text.get("model_type", top.get("model_type", "")))
    defaults = _DEFAULTS.get(model_type, {})
    layers, window = llama_layers(text, window_default=defaults.get("sliding_window"),
                                  kv_default=defaults.get("num_key_value_heads"))
    return finish(top, text, family=family, layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=window)


def describe_llama4(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/llama4.py Llama4Attention — NoPE layers (no_rope_layers[i] == 0) are full
    attention; the others are chunked local attention when attention_chunk_size is set."""
    text = text_cfg(top)
    n = num_layers_of(text)
    kv = kv_heads_of(text)
    hd = head_dim_of(text, default=128)  # Llama4TextConfig.head_dim = 128
    if text.present("attention_chunk_size"):
        chunk = text.get_int("attention_chunk_size", None)
    else:
        chunk = 8192  # Llama4TextConfig.attention_chunk_size
        text.warn("'attention_chunk_size' is absent: used the transformers default 8192")
    nope = text.get("no_rope_layers")
    if nope:
        if not isinstance(nope, list) or len(nope) < n:
            raise text.error(f"field '{text.field('no_rope_layers')}' must list one 0/1 per layer")
        rope_layers = [int(v) != 0 for v in nope[:n]]
    else:
        # Llama4TextConfig.__post_init__: a NoPE layer every no_rope_layer_interval layers
        interval = text.get_int("no_rope_layer_interval", 4)
        assert interval is not None
        rope_layers = [(i + 1) % interval != 0 for i in range(n)]
    layers = []
    for i in range(n):
        use_chunk = chunk if (rope_layers[i] and chunk) else None
        layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd, chunk=use_chunk))
    return finish(top, text, family="llama4", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
