"""Each attention layer's KV cache spec per rank (vLLM: <Layer>.get_kv_cache_spec), by kind."""

from __future__ import annotations

from typing import Any

from kvplan.engines.vllm.backends import Backend, customize_spec
from kvplan.engines.vllm.parallel import kv_heads_per_rank
from kvplan.engines.vllm.profiles import VllmProfile
from kvplan.engines.vllm.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    KVCacheSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    SparseCacheRole,
)
from kvplan.errors import InputError, UnsupportedError
from kvplan.models.description import LayerDescription, LayerKind
from kvplan.units import (
    KVQuantMode,
    cdiv,
    kv_cache_storage_dtype,
    kv_quant_mode,
)

DSV4 = "deepseek_v4"
DSV4_RECORD_BYTES = 584  # vLLM: DeepSeek-V4 fp8_ds_mla record per token
DSV4_PAGE_ALIGNMENT = 576  # vLLM: packed_page_alignment (FlashMLA)


MLA_BLOB_BYTES = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}  # vLLM: MLAAttention.get_kv_cache_spec


def dsv4_spec(layer: LayerDescription, *, block_size: int, kv_dtype: str,
               is_draft: bool) -> AttentionSpec:
    """A DeepSeek-V4 cache layer's spec with the fp8_ds_mla layout (kv_dtype fp8_ds_mla):
    584-byte records (448 B NoPE + 128 B RoPE + 8 B scales) and pages padded to 576 B.

    vLLM: sparse_swa.py DeepseekV4SWACache.get_kv_cache_spec (SlidingWindowMLASpec),
    deepseek_v4/attention.py DeepseekV4Attention.get_kv_cache_spec / DeepseekV4IndexerCache
    (MLAAttentionSpec, tokens_per_state = compress ratio), compressor.py CompressorStateCache
    (SlidingWindowMLASpec, fp32).
    """
    assert layer.head_size is not None
    common: dict[str, Any] = dict(block_size=block_size, num_kv_heads=1, max_tp_shards=1,
                                  head_size=layer.head_size, alignment=DSV4_PAGE_ALIGNMENT,
                                  is_draft=is_draft)
    if layer.kind is LayerKind.COMPRESSOR_STATE:
        assert layer.sliding_window is not None
        return SlidingWindowMLASpec(dtype="float32", sliding_window=layer.sliding_window,
                                    **common)
    if layer.kind is LayerKind.MLA_INDEXER:  # cache_role stays SPARSE, as vLLM builds it
        return MLAAttentionSpec(dtype="uint8", tokens_per_state=layer.tokens_per_state or 1,
                                **common)
    common.update(dtype="uint8", cache_dtype_str=kv_dtype, model_version=DSV4,
                  kv_quant_mode=kv_quant_mode(kv_dtype), state_content_bytes=DSV4_RECORD_BYTES)
    if layer.kind is LayerKind.SLIDING_WINDOW_MLA:
        assert layer.sliding_window is not None
        return SlidingWindowMLASpec(sliding_window=layer.sliding_window, **common)
    return MLAAttentionSpec(tokens_per_state=layer.tokens_per_state or 1, **common)


def attention_spec(layer: LayerDescription, *, block_size: int, kv_dtype: str, tp: int,
                    model_dtype: str, backend: Backend, profile: VllmProfile,
                    sw_block: int | None = None, is_draft: bool = False) -> KVCacheSpec:
    storage = kv_cache_storage_dtype(kv_dtype, model_dtype)
    quant = kv_quant_mode(kv_dtype)
    if layer.fixed_dtype and layer.kind.is_attention and layer.kind is not LayerKind.MLA_INDEXER:
        storage, quant = layer.fixed_dtype, KVQuantMode.NONE  # e.g. Inkling's bf16 conv state
    kind = layer.kind
    if kind is LayerKind.COMPRESSOR_STATE or layer.model_version == DSV4:
        return dsv4_spec(layer, block_size=block_size, kv_dtype=kv_dtype, is_draft=is_draft)
    if kind is LayerKind.MLA_INDEXER:
        # vLLM: DeepseekV32IndexerCache.get_kv_cache_spec (uint8 rows, max_tp_shards 1) /
        # minimax_m3 common/indexer.py MiniMaxM3IndexerCache (bf16 index keys, no max_tp_shards);
        # neither sets cache_dtype_str
        # GLM-5.3-Flash glm5next/common/attention.py Glm5NextIndexerCache: the same spec with
        # tokens_per_state = index_kpool (one stored entry per pool)
        assert layer.head_size is not None
        dtype = layer.fixed_dtype or "uint8"
        return MLAAttentionSpec(block_size=block_size, num_kv_heads=1,
                                max_tp_shards=1 if dtype == "uint8" else None,
                                head_size=layer.head_size, dtype=dtype,
                                cache_role=SparseCacheRole.INDEXER, is_draft=is_draft,
                                tokens_per_state=layer.tokens_per_state or 1)
    if kind is LayerKind.KPOOL_TAIL:
        # vLLM: glm5next/common/attention.py Glm5NextTailCache.get_kv_cache_spec — one ring
        # block of [raw K, gate score] per request (block_size = the ring, from the caller)
        assert layer.head_size is not None
        return CircularBufferSpec(block_size=block_size, num_kv_heads=2, head_size=layer.head_size,
                                  head_size_v=0, dtype=layer.fixed_dtype or "bfloat16",
                                  dcp_sharded=False, is_draft=is_draft)
    if kind in (LayerKind.MLA, LayerKind.SLIDING_WINDOW_MLA):
        if layer.kv_lora_rank is None:
            raise InputError(f"{layer.name}: an MLA layer needs kv_lora_rank")
        head = layer.kv_lora_rank + (layer.qk_rope_head_dim or 0)
        kw: dict[str, object] = dict(block_size=block_size, num_kv_heads=1, head_size=head,
                                     dtype=storage, kv_quant_mode=quant, max_tp_shards=1,
                                     cache_dtype_str=kv_dtype, is_draft=is_draft)
        if kv_dtype in MLA_BLOB_BYTES:
            kw["state_content_bytes"] = (profile.fp8_ds_mla_row_bytes if kv_dtype == "fp8_ds_mla"
                                         else MLA_BLOB_BYTES[kv_dtype])
        if kind is LayerKind.MLA:
            # vLLM: MLAAttention.get_kv_cache_spec — is_index_group_leader = has an indexer
            spec: AttentionSpec = MLAAttentionSpec(
                is_index_group_leader=layer.index_head_dim is not None, **kw)  # type: ignore[arg-type]
        else:
            spec = SlidingWindowMLASpec(sliding_window=layer.sliding_window or 0, **kw)  # type: ignore[arg-type]
        return customize_spec(backend, spec)
    if kv_dtype in MLA_BLOB_BYTES:
        raise InputError(f"KV cache dtype {kv_dtype} exists only for MLA models")
    if layer.num_kv_heads is None or layer.head_size is None:
        raise InputError(f"{layer.name}: an attention layer needs num_kv_heads and head_size")
    kv_heads = (layer.num_kv_heads if layer.tp_replicated  # e.g. zaya.py ReplicatedLinear
                else kv_heads_per_rank(layer.num_kv_heads, tp, layer=layer.name))
    common = dict(block_size=block_size, num_kv_heads=kv_heads,
                  head_size=layer.head_size, head_size_v=layer.head_size_v, dtype=storage,
                  kv_quant_mode=quant, is_draft=is_draft)
    if kind is LayerKind.SLIDING_WINDOW:
        assert layer.sliding_window is not None
        common["block_size"] = sw_block or block_size
        spec = SlidingWindowSpec(sliding_window=layer.sliding_window, **common)  # type: ignore[arg-type]
    elif kind is LayerKind.CHUNKED_LOCAL:
        assert layer.attention_chunk_size is not None
        spec = ChunkedLocalAttentionSpec(attention_chunk_size=layer.attention_chunk_size,
                                         **common)  # type: ignore[arg-type]
    elif kind is LayerKind.CROSS_ATTENTION:
        spec = CrossAttentionSpec(**common)  # type: ignore[arg-type]
    elif kind is LayerKind.ENCODER_ONLY:
        spec = EncoderOnlyAttentionSpec(**common)  # type: ignore[arg-type]
    elif kind is LayerKind.SINK_FULL_ATTENTION:
        check_sink_layer(layer, tp=tp, block_size=block_size)
        spec = SinkFullAttentionSpec(sink_len=layer.sink_len, **common)  # type: ignore[arg-type]
    else:
        spec = FullAttentionSpec(**common)  # type: ignore[arg-type]
    try:
        return customize_spec(backend, spec)
    except ValueError as exc:
        raise UnsupportedError(f"{layer.name}: {exc}") from None


def check_sink_layer(layer: LayerDescription, *, tp: int, block_size: int) -> None:
    """What vLLM refuses at start-up for a static-sink layer: KV heads fewer than the TP size
    (models/openpangu.py OpenPanguSinkAttention: no replication) and sink tokens that are not
    whole blocks (v1/core/single_type_kv_cache_manager.py SinkFullAttentionManager)."""
    assert layer.num_kv_heads is not None
    if layer.num_kv_heads < tp:
        raise UnsupportedError(
            f"{layer.name}: {layer.num_kv_heads} KV heads is less than tensor parallel size {tp}; "
            "vLLM's sink attention does not replicate KV heads",
            hint=f"use a tensor parallel size of at most {layer.num_kv_heads}")
    if layer.sink_len and layer.sink_len % block_size:
        raise UnsupportedError(
            f"{layer.name}: {layer.sink_len} sink tokens are not a whole number of "
            f"{block_size}-token blocks (vLLM's SinkFullAttentionManager asserts it)",
            hint="pick a --block-size that divides the sink length")


def sw_per_token(layer: LayerDescription, kv_dtype: str, tp: int, model_dtype: str,
                  backend: Backend, profile: VllmProfile) -> int:
    probe = layer.model_copy(update={"kind": LayerKind.SLIDING_WINDOW})
    spec = attention_spec(probe, block_size=1, kv_dtype=kv_dtype, tp=tp,
                           model_dtype=model_dtype, backend=backend, profile=profile)
    assert isinstance(spec, AttentionSpec)
    return spec.unpadded_page_size_bytes


def kpool_tail_ring(index_kpool: int, num_spec: int, block_size: int) -> int:
    """vLLM: Glm5NextTailCache.get_kv_cache_spec — index_kpool × next_power_of_2(cdiv(index_kpool
    + num_speculative_tokens, index_kpool)) slots, which must divide the attention block."""
    ring = index_kpool * (1 << (cdiv(index_kpool + num_spec, index_kpool) - 1).bit_length())
    if block_size % ring:
        raise InputError(f"Glm5NextTailCache: cache_config.block_size ({block_size}) must be a "
                         f"multiple of the tail ring ({ring})",
                         hint="pick a --block-size that is a multiple of the ring")
    return ring
