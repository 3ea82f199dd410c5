"""The attention layers' KV cache specs, mirroring `vllm/v1/kv_cache_interface.py`.

Frozen dataclasses (not pydantic) because the engine creates and hashes thousands of them per
second in sweeps; equality and hashing follow vLLM's dataclass semantics exactly (`is_draft`
never takes part), which is what grouping relies on.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kvplan.engines.vllm.specs.base import (
    DemandSettings,
    KVCacheSpec,
    SparseCacheRole,
)
from kvplan.units import KVQuantMode, cdiv, dtype_size_bytes, round_up


@dataclass(frozen=True, kw_only=True, slots=True)
class AttentionSpec(KVCacheSpec):
    """vLLM: kv_cache_interface.AttentionSpec (dtype is the storage torch dtype name)."""

    dcp_sharded: bool = True
    max_tp_shards: int | None = None
    num_kv_heads: int
    head_size: int
    dtype: str
    head_size_v: int | None = None
    kv_quant_mode: KVQuantMode = KVQuantMode.NONE
    page_size_padded: int | None = None
    num_head_slots: int | None = None
    state_content_bytes: int | None = None
    kv_head_major_slots: bool = False
    tokens_per_state: int | Fraction = 1

    def __post_init__(self) -> None:
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)

    @property
    def num_heads(self) -> int:
        return self.num_head_slots if self.num_head_slots is not None else self.num_kv_heads

    @property
    def num_states(self) -> int:
        if self.tokens_per_state > 0:
            return int(self.block_size // self.tokens_per_state)
        return 1

    @property
    def state_content_size_bytes(self) -> int:
        """Bytes per (head slot, state): K + V elements × dtype size, unless packed."""
        if self.state_content_bytes is not None:
            return self.state_content_bytes
        assert self.head_size_v is not None
        return (self.head_size + self.head_size_v) * dtype_size_bytes(self.dtype)

    @property
    def unpadded_page_size_bytes(self) -> int:
        return self.num_heads * self.num_states * self.state_content_size_bytes

    @property
    def page_size_bytes(self) -> int:
        if self.page_size_padded is not None:
            if self.page_size_padded < self.unpadded_page_size_bytes:
                # vLLM: a bare assert (stale padding smaller than the real page)
                raise AssertionError()
            return self.page_size_padded
        return self.unpadded_page_size_bytes

    def max_num_blocks_per_req(self, s: DemandSettings, max_len: int) -> int:
        shards = s.decode_context_parallel_size if self.dcp_sharded else 1
        return cdiv(max_len, self.block_size * shards)


@dataclass(frozen=True, kw_only=True, slots=True)
class FullAttentionSpec(AttentionSpec):
    """vLLM: FullAttentionSpec — blocks for every token of max_model_len."""

    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    non_causal: bool = False

    def blocks_per_request(self, s: DemandSettings) -> int:
        # vLLM: FullAttentionSpec.max_memory_usage_bytes (DCP shards the context)
        max_model_len = s.max_model_len
        if self.dcp_sharded and s.decode_context_parallel_size > 1:
            max_model_len = cdiv(max_model_len, s.decode_context_parallel_size)
        return cdiv(max_model_len, self.block_size)


def _apply_alignment_padding(spec: MLAAttentionSpec | SlidingWindowMLASpec) -> None:
    """vLLM: kv_cache_interface._apply_alignment_padding — pad the page to `alignment`."""
    if spec.alignment is not None:
        real = spec.unpadded_page_size_bytes
        padded = round_up(real, spec.alignment)
        if padded != real:
            object.__setattr__(spec, "page_size_padded", padded)


@dataclass(frozen=True, kw_only=True, slots=True)
class MLAAttentionSpec(FullAttentionSpec):
    """vLLM: MLAAttentionSpec — one latent vector per token, no V.

    `cache_role` INDEXER marks a sparse-attention indexer's K cache (DeepSeek-V3.2, GLM-5);
    `topk_buffer_width` exists from 0.33, `storage_block_size` only in 0.31 (profiles.py).
    """

    cache_dtype_str: str | None = None
    topk_buffer_width: int | None = None
    alignment: int | None = None
    model_version: str | None = None
    cache_role: SparseCacheRole = SparseCacheRole.SPARSE
    is_index_group_leader: bool = False
    non_causal_multi_token_decode: bool = False
    storage_block_size: int | None = None
    head_size_v: int | None = 0

    def __post_init__(self) -> None:
        _apply_alignment_padding(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class HiddenStateCacheSpec(MLAAttentionSpec):
    """vLLM: HiddenStateCacheSpec — hidden states kept for extract_hidden_states; grouped apart
    (kv_cache_planning.get_kv_cache_groups), its block fitted to the common page."""

    @property
    def bytes_per_token_unpacked(self) -> int:
        # vLLM: get_kv_cache_groups / _ensure_min_page_size — heads × head × dtype size
        return self.num_kv_heads * self.head_size * dtype_size_bytes(self.dtype)


@dataclass(frozen=True, kw_only=True, slots=True)
class RSWASpec(FullAttentionSpec):
    """vLLM: RSWASpec — reference sliding window: sized like full attention (RSWAManager frees
    gap blocks at run time only), grouped with full attention (uniform base FullAttentionSpec)."""

    rswa_window: int


@dataclass(frozen=True, kw_only=True, slots=True)
class SinkFullAttentionSpec(FullAttentionSpec):
    """vLLM: SinkFullAttentionSpec — sized exactly like full attention."""

    sink_len: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SlidingWindowSpec(AttentionSpec):
    """vLLM: SlidingWindowSpec."""

    sliding_window: int
    extra_retained_tokens: int = 0

    def blocks_per_request(self, s: DemandSettings) -> int:
        # vLLM: SlidingWindowSpec.max_admission_blocks_per_request (+1: window may straddle)
        if self.dcp_sharded and s.decode_context_parallel_size != 1:
            raise AssertionError("DCP not support sliding window.")
        num_tokens = min(
            self.sliding_window - 1 + self.extra_retained_tokens + s.max_in_flight_tokens,
            s.max_model_len,
        )
        return cdiv(num_tokens, self.block_size) + 1


@dataclass(frozen=True, kw_only=True, slots=True)
class SlidingWindowMLASpec(SlidingWindowSpec):
    """vLLM: SlidingWindowMLASpec."""

    cache_dtype_str: str | None = None
    alignment: int | None = None
    model_version: str | None = None
    bounded_replay: bool = False
    non_causal_multi_token_decode: bool = False
    head_size_v: int | None = 0

    def __post_init__(self) -> None:
        _apply_alignment_padding(self)

    @property
    def prefix_cacheable(self) -> bool:
        return not self.bounded_replay  # vLLM: SlidingWindowMLASpec.prefix_cacheable


class _OneBlockPerRequest:
    """A self-addressed ring: one block per request, not prefix-cacheable, no slot mapping."""

    __slots__ = ()
    PREFIX_CACHEABLE = False
    USES_SLOT_MAPPING = False

    def blocks_per_request(self, s: DemandSettings) -> int:
        return 1

    def max_num_blocks_per_req(self, s: DemandSettings, max_len: int) -> int:
        return 1


@dataclass(frozen=True, kw_only=True, slots=True)
class KpoolTailSpec(_OneBlockPerRequest, SlidingWindowSpec):
    """vLLM 0.31 only: KpoolTailSpec — one-block circular scratch of a kpool indexer's raw tail
    (max_admission_blocks_per_request = 1)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CircularBufferSpec(_OneBlockPerRequest, AttentionSpec):
    """vLLM: CircularBufferSpec — one ring block per request (block_size = ring capacity) for the
    raw keys of the token group still being compressed (max_memory_usage_bytes = one page)."""

    BLOCK_TABLE_TOKEN_ALIGNMENT = None



@dataclass(frozen=True, kw_only=True, slots=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    """vLLM: ChunkedLocalAttentionSpec (no +1)."""

    attention_chunk_size: int

    def blocks_per_request(self, s: DemandSettings) -> int:
        # vLLM: ChunkedLocalAttentionSpec.max_admission_blocks_per_request
        num_tokens = min(self.attention_chunk_size + s.max_in_flight_tokens, s.max_model_len)
        return cdiv(num_tokens, self.block_size)


@dataclass(frozen=True, kw_only=True, slots=True)
class CrossAttentionSpec(AttentionSpec):
    """vLLM: CrossAttentionSpec — caches the encoder states."""

    def blocks_per_request(self, s: DemandSettings) -> int:
        return cdiv(s.max_num_encoder_input_tokens, self.block_size)


@dataclass(frozen=True, kw_only=True, slots=True)
class EncoderOnlyAttentionSpec(AttentionSpec):
    """vLLM: EncoderOnlyAttentionSpec — no KV cache needed."""

    def blocks_per_request(self, s: DemandSettings) -> int:
        return 0



def bytes_per_token(spec: AttentionSpec) -> int | Fraction:
    page = spec.unpadded_page_size_bytes
    return page // spec.block_size if page % spec.block_size == 0 else Fraction(page, spec.block_size)
