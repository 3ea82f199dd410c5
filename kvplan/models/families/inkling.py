"""Thinking Machines Inkling: full and sliding-window attention layers, each with a short-conv
state kept as a paged sliding-window cache of its own."""

from __future__ import annotations

from typing import Any

from kvplan.models._common import Cfg, attention, finish, num_layers_of, text_cfg
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.quant import quantization_info
from kvplan.models.resolution.resolved import encoder_cache_note

# vLLM: models/inkling/configs.py InklingModelConfig (model_type inkling_model; InklingMMConfig
# holds it as text_config) — the defaults vLLM reads when config.json leaves a field out
INKLING_DEFAULTS: dict[str, Any] = {
    "hidden_size": 1536, "num_hidden_layers": 16, "num_attention_heads": 12,
    "num_key_value_heads": 4, "sliding_window_size": 512}
SCONV_BACKEND, ATTN_BACKEND = "INKLING_SCONV_SWA", "FLASH_ATTN"  # vLLM backend names


def _int(text: Cfg, key: str, default: int) -> int:
    value = text.get_int(key, default)
    assert value is not None
    return value


def _conv_state(i: int, text: Cfg, kv_heads: int, head_dim: int, kernel: int
                ) -> LayerDescription:
    """vLLM: nvidia/sconv_swa_attn.py InklingConvState — the K, V, attention-output and
    MLP-output conv streams packed per KV head (head width 2·head_dim + 2·hidden/heads, rounded
    up to a power of two), a bf16 sliding window of sconv_kernel_size tokens in one
    kernel-size block, at model.layers.{i}.conv_state (registered before the attention)."""
    hidden = _int(text, "hidden_size", INKLING_DEFAULTS["hidden_size"])
    raw = 2 * head_dim + 2 * (hidden // kv_heads)
    return LayerDescription(
        index=i, name=f"model.layers.{i}.conv_state", kind=LayerKind.SLIDING_WINDOW,
        num_kv_heads=kv_heads, head_size=1 << (raw - 1).bit_length(), head_size_v=0,
        sliding_window=kernel, block_size=kernel, fixed_dtype="bfloat16", backend=SCONV_BACKEND)


def describe_inkling(top: Cfg, hf_quant_config: dict[str, Any] | None) -> ModelDescription:
    """vLLM: models/inkling/nvidia/model.py InklingDecoderLayer — layer i is local (sliding
    window sliding_window_size, swa_num_key_value_heads × swa_head_dim) iff i is in
    local_layer_ids, else global full attention (num_key_value_heads × head_dim); both on
    FlashAttentionBackend (attention.py InklingAttention.get_kv_cache_spec, K = V = head_dim).
    InklingForConditionalGeneration builds the same model at model. (the towers beside it)."""
    text = text_cfg(top)
    text = Cfg({**INKLING_DEFAULTS, **{k: v for k, v in text.data.items() if v is not None}},
               text.source, text.path, text.warnings)
    n = num_layers_of(text)
    heads = text.req_int("num_attention_heads")
    kv = text.req_int("num_key_value_heads")
    hd = _int(text, "head_dim", text.req_int("hidden_size") // heads)
    swa_kv = _int(text, "swa_num_key_value_heads", kv)
    swa_hd = _int(text, "swa_head_dim", hd)
    window = text.req_int("sliding_window_size")
    # InklingModelConfig: sconv_kernel_size, else the HF-format conv_kernel_size, else 4
    kernel = _int(text, "sconv_kernel_size", _int(text, "conv_kernel_size", 4))
    local_ids = text.get("local_layer_ids", [])
    if not isinstance(local_ids, list) or not all(isinstance(i, int) for i in local_ids):
        raise text.error(f"'{text.field('local_layer_ids')}' must be a list of layer indices")
    local = set(local_ids)
    layers: list[LayerDescription] = []
    for i in range(n):
        k, d = (swa_kv, swa_hd) if i in local else (kv, hd)
        layers.append(_conv_state(i, text, k, d, kernel))
        attn = attention(i, f"model.layers.{i}.attn", kv_heads=k, head_size=d,
                         window=window if i in local else None)
        layers.append(attn.model_copy(update={"backend": ATTN_BACKEND}))
    desc = finish(top, text, family="inkling", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  length_defaults={})  # InklingModelConfig sets no length of its own
    note = encoder_cache_note(desc.architectures)
    return desc.model_copy(update={"warnings": desc.warnings + (note,)}) if note else desc
