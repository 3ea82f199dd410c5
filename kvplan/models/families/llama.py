"""Llama-style dense decoders (Llama 3.x, Mistral, Mixtral) and Llama 4 (chunked local attention)."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
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
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.quant import quantization_info

# transformers defaults that matter for the KV cache when a field is absent.
_DEFAULTS = {
    # MistralConfig: sliding_window=4096, num_key_value_heads=8
    "mistral": {"sliding_window": 4096, "num_key_value_heads": 8},
}


def llama_layers(cfg: Cfg, *, window_default: int | None = None, kv_default: int | None = None,
                 first_index: int = 0, is_draft: bool = False,
                 target_window: int | None = None,
                 ) -> tuple[list[LayerDescription], int | None]:
    """LlamaAttention layers (vLLM: models/llama.py LlamaAttention.__init__).

    A `layer_types` entry "sliding_attention" gives that layer `sliding_window`; every other layer
    gets the model-level window (set only when layer_types is absent or all sliding).
    `first_index` numbers the layers from there (a draft head's layers follow the target's:
    vLLM start_layer_id); `layer_types` stays draft-relative (vLLM: config.target_layer_count).
    A draft head (`is_draft`) shares the target's CacheConfig, so its fallback is the target's
    model-level window `target_window`, not one from the draft config.
    Returns the layers and the model-level window.
    """
    n = num_layers_of(cfg)
    kv = kv_heads_of(cfg, kv_default)
    hd = head_dim_of(cfg)
    if cfg.present("sliding_window"):
        sw = positive_window(cfg)
    else:
        sw = window_default
    types = layer_types(cfg, n)
    fallback = target_window if is_draft else model_level_window(sw, types)
    layers = []
    for i in range(n):
        window = fallback
        if types is not None and types[i] == "sliding_attention":
            window = sw
        idx = first_index + i
        layers.append(attention(idx, attn_name(idx), kv_heads=kv, head_size=hd,
                                window=window))
    return layers, fallback


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
