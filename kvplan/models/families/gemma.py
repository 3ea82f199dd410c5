"""Gemma 2 / Gemma 3 (interleaved sliding window), Gemma 3n and Gemma 4 (KV sharing; Gemma 4:
per-layer head dims)."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    architectures,
    attention,
    attn_name,
    finish,
    head_dim_of,
    kv_heads_of,
    layer_types,
    model_level_window,
    no_kv,
    num_layers_of,
    text_cfg,
    unsupported_layer_type,
    without_pipeline_parallel,
)
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.quant import quantization_info
from kvplan.models.resolution.resolved import encoder_cache_note


def _window(cfg: Cfg, default: int | None, *, halve_if_bidirectional: bool) -> int | None:
    if cfg.present("sliding_window"):
        sw = cfg.get_int("sliding_window", None, minimum=None)
    else:
        sw = default
    if sw is not None and halve_if_bidirectional:
        # transformers Gemma3TextConfig/Gemma4TextConfig.__post_init__: bidirectional attention
        # stores the window as a radius, (sliding_window // 2) + 1
        sw = sw // 2 + 1
    return sw


def _types(cfg: Cfg, n: int, pattern: int, family: str) -> list[str]:
    """layer_types, else transformers' pattern: sliding unless (i + 1) % pattern == 0; only
    sliding / full attention are known to these families."""
    types = layer_types(cfg, n)
    if types is None:
        types = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)]
    for t in types:
        if t not in ("sliding_attention", "full_attention"):
            raise unsupported_layer_type(cfg, "layer_types", t, family)
    return types


def describe_gemma2_3(top: Cfg, hf_quant_config: dict | None, *, family: str) -> ModelDescription:
    """vLLM: models/gemma2.py / gemma3.py — a "sliding_attention" layer gets
    config.sliding_window; the others are full attention."""
    text = text_cfg(top)
    n = num_layers_of(text)
    if family == "gemma2":
        # Gemma2Config: head_dim 256, num_key_value_heads 4, sliding_window 4096, 1:1 pattern
        pattern, bidirectional = 2, False
    else:
        # Gemma3TextConfig: head_dim 256, num_key_value_heads 4, sliding_window 4096,
        # sliding_window_pattern 6
        pattern = text.get_int("sliding_window_pattern", 6) or 6
        bidirectional = bool(text.get("use_bidirectional_attention", False))
    sw = _window(text, 4096, halve_if_bidirectional=bidirectional)
    types = _types(text, n, pattern, family)
    kv = kv_heads_of(text, 4)
    hd = head_dim_of(text, default=256)
    layers = []
    for i, t in enumerate(types):
        window = sw if t == "sliding_attention" else None
        layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd, window=window))
    desc = finish(top, text, family=family, layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(sw, types))
    # vLLM 0.31–0.34: gemma3.py Gemma3Model (Gemma3TextModel, the embedding model) is not
    # SupportsPP; Gemma3ForCausalLM and Gemma3ForConditionalGeneration are
    return without_pipeline_parallel(desc, top, ("Gemma3TextModel",))


def describe_gemma4(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/gemma4.py Gemma4DecoderLayer / Gemma4Attention.

    Per layer (transformers Gemma4TextConfig per_layer_config): full-attention layers use
    `global_head_dim` and, with `attention_k_eq_v`, `num_global_key_value_heads`; sliding layers
    use `head_dim` / `num_key_value_heads` and `sliding_window`. The last `num_kv_shared_layers`
    layers read the KV cache of the last earlier layer of the same type
    (kv_sharing_target_layer_name) and own no cache.
    """
    text = text_cfg(top)
    n = num_layers_of(text)
    bidirectional = text.get("use_bidirectional_attention") == "all"
    sw = _window(text, 512, halve_if_bidirectional=bidirectional)  # Gemma4TextConfig: 512
    types = _types(text, n, 6, "gemma4")
    if types and types[-1] != "full_attention":
        # Gemma4TextConfig.__post_init__ forces the last layer to full attention
        text.warn("layer_types[-1] is not full_attention: transformers forces it to full")
        types[-1] = "full_attention"
    kv_local = kv_heads_of(text, 4)
    hd_local = head_dim_of(text, default=256)
    hd_global = text.get_int("global_head_dim", 512)
    assert hd_global is not None
    kv_global = kv_local
    if text.get("attention_k_eq_v", False) and text.has("num_global_key_value_heads"):
        kv_global = text.req_int("num_global_key_value_heads")
    shared = text.get_int("num_kv_shared_layers", 0, minimum=0) or 0
    first_shared = n - shared
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        if shared > 0 and i >= first_shared:
            if t not in types[:first_shared]:
                raise text.error(f"layer {i} shares the KV cache of an earlier {t} layer, but "
                                 "no non-shared layer has that type")
            layers.append(no_kv(i, attn_name(i)))
            continue
        if t == "sliding_attention":
            layers.append(attention(i, attn_name(i), kv_heads=kv_local, head_size=hd_local,
                                    window=sw))
        else:
            layers.append(attention(i, attn_name(i), kv_heads=kv_global, head_size=hd_global))
    return finish(top, text, family="gemma4", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(sw, types))


def describe_gemma3n(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/gemma3n.py Gemma3nAttention (Gemma3nForCausalLM, and the language model of
    gemma3n_mm.py Gemma3nForConditionalGeneration).

    Every layer has num_key_value_heads × head_dim; a "sliding_attention" layer gets
    config.sliding_window (no bidirectional halving). Layers from num_hidden_layers −
    num_kv_shared_layers on read the cache of layer first_shared − 2 (sliding) or − 1 (full)
    through kv_sharing_target_layer_name, and own none (v1/worker/gpu/attn_utils.py
    get_kv_cache_spec skips them); when that index is negative, vLLM gives no target and the
    layer keeps its own cache. Defaults: transformers Gemma3nTextConfig (35 layers, 2 KV heads,
    head_dim 256, window 512, 15 shared layers, every 5th layer full).
    """
    text = text_cfg(top)
    n = num_layers_of(text)
    sw = text.get_int("sliding_window", 512)
    types = _types(text, n, 5, "gemma3n")  # Gemma3nTextConfig.__post_init__: every 5th full
    kv = kv_heads_of(text, 2)
    hd = head_dim_of(text, default=256)
    shared = text.get_int("num_kv_shared_layers", 15, minimum=0) or 0
    first_shared = n - shared
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        sliding = t == "sliding_attention"
        if i >= first_shared and first_shared - (2 if sliding else 1) >= 0:
            layers.append(no_kv(i, attn_name(i)))
            continue
        layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd,
                                window=sw if sliding else None))
    desc = finish(top, text, family="gemma3n", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(sw, types))
    note = encoder_cache_note(architectures(top))
    if note is not None:
        desc = desc.model_copy(update={"warnings": desc.warnings + (note,)})
    # vLLM 0.31–0.34: gemma3n.py Gemma3nForCausalLM and gemma3n_mm.py
    # Gemma3nForConditionalGeneration are not SupportsPP
    return without_pipeline_parallel(desc, top)
