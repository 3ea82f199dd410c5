"""Typed per-layer KV cache specs, mirroring `vllm/v1/kv_cache_interface.py`.

Frozen dataclasses (not pydantic) because the engine creates and hashes thousands of them per
second in sweeps; equality and hashing follow vLLM's dataclass semantics exactly (`is_draft`
never takes part), which is what grouping relies on.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from fractions import Fraction
from math import gcd, prod
from typing import ClassVar

from kvplan.units import KVQuantMode, cdiv, dtype_size_bytes, round_up


@dataclass(frozen=True, slots=True)
class MultipleOf:
    """vLLM: v1.attention.backend.MultipleOf — 'any multiple of base' kernel block sizes."""

    base: int


class SpecKind(StrEnum):
    """vLLM: kv_cache_interface.KVCacheSpecKind."""

    FULL_ATTENTION = "full_attention"
    MLA_ATTENTION = "mla_attention"
    SLIDING_WINDOW = "sliding_window"
    SLIDING_WINDOW_MLA = "sliding_window_mla"
    MAMBA = "mamba"
    CHUNKED_LOCAL_ATTENTION = "chunked_local_attention"
    SINK_FULL_ATTENTION = "sink_full_attention"
    ENCODER_ONLY_ATTENTION = "encoder_only_attention"
    CROSS_ATTENTION = "cross_attention"
    UNKNOWN = "unknown"


class SparseCacheRole(StrEnum):
    """vLLM: kv_cache_interface.SparseCacheRole — an MLA cache is the sparse latent or the indexer."""

    SPARSE = "sparse"
    INDEXER = "indexer"


class KVCacheGroupRole(StrEnum):
    """vLLM: kv_cache_interface.KVCacheGroupRole (only HiSparse's layout sets a non-default role)."""

    DEFAULT = "default"
    HISPARSE_SOURCE = "hisparse_source"
    HISPARSE_INDEXER = "hisparse_indexer"


@dataclass(frozen=True, slots=True)
class DemandSettings:
    """The slice of VllmConfig that `max_memory_usage_bytes` reads."""

    max_model_len: int
    max_in_flight_tokens: int
    max_num_encoder_input_tokens: int
    mamba_cache_mode: str = "none"
    decode_context_parallel_size: int = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class KVCacheSpec:
    """vLLM: kv_cache_interface.KVCacheSpec."""

    block_size: int
    dcp_sharded: bool = False
    block_stride_alignment: int | MultipleOf | None = None
    is_draft: bool = field(default=False, compare=False)

    @property
    def page_size_bytes(self) -> int:
        raise NotImplementedError

    @property
    def spec_type(self) -> str:
        return type(self).__name__

    # vLLM's KVCacheSpec properties, constant per class: prefix_cacheable (the group takes part
    # in prefix caching), block_table_token_alignment (None: none), has_layer_views (False: raw
    # storage, left out of the layout choice), uses_slot_mapping (False: self-addressed pages)
    PREFIX_CACHEABLE: ClassVar[bool] = True
    BLOCK_TABLE_TOKEN_ALIGNMENT: ClassVar[int | None] = 128
    HAS_LAYER_VIEWS: ClassVar[bool] = True
    USES_SLOT_MAPPING: ClassVar[bool] = True

    @property
    def prefix_cacheable(self) -> bool:
        return self.PREFIX_CACHEABLE

    @property
    def block_table_token_alignment(self) -> int | None:
        return self.BLOCK_TABLE_TOKEN_ALIGNMENT

    @property
    def has_layer_views(self) -> bool:
        return self.HAS_LAYER_VIEWS

    @property
    def uses_slot_mapping(self) -> bool:
        return self.USES_SLOT_MAPPING

    def get_block_stride_alignment(self) -> int:
        """vLLM: KVCacheSpec.get_block_stride_alignment."""
        alignment = self.block_stride_alignment
        if not isinstance(alignment, MultipleOf):
            return alignment or 1
        kernel_block_size = gcd(alignment.base, self.block_size)
        if kernel_block_size == self.block_size:
            return 1
        return self.with_changes(block_size=kernel_block_size).page_size_bytes

    def blocks_per_request(self, s: DemandSettings) -> int:
        """Blocks one request at max_model_len holds: max_memory_usage_bytes / page."""
        raise NotImplementedError

    def max_memory_usage_bytes(self, s: DemandSettings) -> int:
        """vLLM: <Spec>.max_memory_usage_bytes."""
        return self.blocks_per_request(s) * self.page_size_bytes

    def max_num_blocks_per_req(self, s: DemandSettings, max_len: int) -> int:
        return cdiv(max_len, self.block_size)

    def with_changes(self, **changes: object) -> KVCacheSpec:
        kwargs = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        kwargs.update(changes)
        return type(self)(**kwargs)


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
class _HiSparseSpec(KVCacheSpec):
    """HiSparse's raw pages: a `page_size` field, no per-layer views, not prefix-cacheable."""

    page_size: int
    PREFIX_CACHEABLE = False
    HAS_LAYER_VIEWS = False

    @property
    def page_size_bytes(self) -> int:
        return self.page_size


@dataclass(frozen=True, kw_only=True, slots=True)
class HiSparseHotSpec(_HiSparseSpec):
    """vLLM: HiSparseHotSpec — a fixed number of ephemeral hot-cache pages per request.

    vLLM's field `blocks_per_request` is `hot_blocks_per_request` here (kvplan's
    `blocks_per_request` is the demand method every spec has).
    """

    hot_blocks_per_request: int
    USES_SLOT_MAPPING = False
    BLOCK_TABLE_TOKEN_ALIGNMENT = None

    def blocks_per_request(self, s: DemandSettings) -> int:
        return self.hot_blocks_per_request  # vLLM: HiSparseHotSpec.max_memory_usage_bytes

    def max_num_blocks_per_req(self, s: DemandSettings, max_len: int) -> int:
        return self.hot_blocks_per_request


@dataclass(frozen=True, kw_only=True, slots=True)
class HiSparseResidentSpec(_HiSparseSpec):
    """vLLM: HiSparseResidentSpec — reclaimable GPU pages of host-backed HiSparse KV."""

    def blocks_per_request(self, s: DemandSettings) -> int:
        # vLLM: HiSparseResidentSpec.max_admission_blocks_per_request
        return cdiv(min(s.max_in_flight_tokens, s.max_model_len), self.block_size)


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


class MambaType(StrEnum):
    """vLLM: v1.attention.backends.registry.MambaAttentionBackendEnum (names)."""

    MAMBA1 = "MAMBA1"
    MAMBA2 = "MAMBA2"
    SHORT_CONV = "SHORT_CONV"
    LINEAR = "LINEAR"
    GDN_ATTN = "GDN_ATTN"
    KDA = "KDA"


@dataclass(frozen=True, kw_only=True, slots=True)
class MambaSpec(KVCacheSpec):
    """vLLM: MambaSpec — a fixed-size state per request, page = Σ state bytes."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    state_alignment: int = 1
    page_size_padded: int | None = None
    mamba_type: MambaType = MambaType.MAMBA2
    mamba_cache_mode: str = "none"
    num_speculative_blocks: int = 0
    num_prefill_checkpoint_blocks: int = 0
    prefill_checkpoint_alignment: int | None = None
    tp_replicated: bool = False
    _state_bytes: int = field(default=0, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.dtypes):
            raise ValueError("MambaSpec needs one dtype per state shape")
        # vLLM: MambaSpec.state_content_size_bytes (each state rounded to state_alignment)
        object.__setattr__(self, "_state_bytes", sum(
            round_up(prod(shape) * dtype_size_bytes(dt), self.state_alignment)
            for shape, dt in zip(self.shapes, self.dtypes, strict=True)))

    @property
    def state_content_size_bytes(self) -> int:
        return self._state_bytes

    @property
    def unpadded_page_size_bytes(self) -> int:
        return self.state_content_size_bytes

    @property
    def page_size_bytes(self) -> int:
        page = self.state_content_size_bytes
        if self.page_size_padded is not None:
            if self.page_size_padded < page:
                raise AssertionError()  # vLLM: bare assert
            return self.page_size_padded
        return page

    def state_blocks_per_request(self, mamba_cache_mode: str) -> int:
        # vLLM: MambaSpec.max_memory_usage_bytes
        if mamba_cache_mode == "align":
            return 2 + self.num_speculative_blocks + self.num_prefill_checkpoint_blocks
        return 1 + self.num_speculative_blocks

    def blocks_per_request(self, s: DemandSettings) -> int:
        if s.mamba_cache_mode == "all":  # vLLM 0.31 only: a state per block of the context
            return cdiv(s.max_model_len, self.block_size) + self.num_speculative_blocks
        return self.state_blocks_per_request(s.mamba_cache_mode)

    def max_num_blocks_per_req(self, s: DemandSettings, max_len: int) -> int:
        if s.mamba_cache_mode == "align":
            return cdiv(max_len, self.block_size) + self.num_speculative_blocks
        return self.blocks_per_request(s)


@dataclass(frozen=True, kw_only=True, slots=True)
class UniformTypeKVCacheSpecs(KVCacheSpec):
    """vLLM: UniformTypeKVCacheSpecs — one group of same-type layers with different pages."""

    kv_cache_specs: tuple[tuple[str, KVCacheSpec], ...]

    @property
    def specs_by_layer(self) -> dict[str, KVCacheSpec]:
        return dict(self.kv_cache_specs)

    @property
    def first_spec(self) -> KVCacheSpec:
        return self.kv_cache_specs[0][1]

    @property
    def prefix_cacheable(self) -> bool:
        return all(spec.prefix_cacheable for _, spec in self.kv_cache_specs)

    @property
    def block_table_token_alignment(self) -> int | None:
        return self.first_spec.block_table_token_alignment

    @property
    def uses_slot_mapping(self) -> bool:
        return self.first_spec.uses_slot_mapping

    @property
    def page_size_bytes(self) -> int:
        return sum(spec.page_size_bytes for _, spec in self.kv_cache_specs)

    def max_memory_usage_pages(self, s: DemandSettings) -> int:
        return max(spec.blocks_per_request(s) for _, spec in self.kv_cache_specs)

    def blocks_per_request(self, s: DemandSettings) -> int:
        return self.max_memory_usage_pages(s)

    def max_num_blocks_per_req(self, s: DemandSettings, max_len: int) -> int:
        widths = {spec.max_num_blocks_per_req(s, max_len) for _, spec in self.kv_cache_specs}
        if len(widths) != 1:
            raise AssertionError(
                "All layers in the same KV cache group must need the same number "
                f"of block table entries, got {sorted(widths)}."
            )
        return widths.pop()


def spec_kind(spec: KVCacheSpec) -> SpecKind:
    """vLLM: kv_cache_interface.get_kv_cache_spec_kind (subclasses first)."""
    if isinstance(spec, UniformTypeKVCacheSpecs):
        kinds = {spec_kind(s) for _, s in spec.kv_cache_specs}
        if len(kinds) == 1:
            return kinds.pop()
        if all(uniform_type_base(s) is FullAttentionSpec for _, s in spec.kv_cache_specs):
            return SpecKind.FULL_ATTENTION
        return SpecKind.UNKNOWN
    for cls, kind in _KIND_ORDER:
        if isinstance(spec, cls):
            return kind
    return SpecKind.UNKNOWN


# HiddenStateCacheSpec → MLA_ATTENTION, RSWASpec → FULL_ATTENTION, KpoolTailSpec → SLIDING_WINDOW
# by inheritance; CircularBufferSpec and the HiSparse specs have no kind of their own (UNKNOWN).
_KIND_ORDER: tuple[tuple[type, SpecKind], ...] = (
    (SlidingWindowMLASpec, SpecKind.SLIDING_WINDOW_MLA),
    (MLAAttentionSpec, SpecKind.MLA_ATTENTION),
    (SinkFullAttentionSpec, SpecKind.SINK_FULL_ATTENTION),
    (FullAttentionSpec, SpecKind.FULL_ATTENTION),
    (ChunkedLocalAttentionSpec, SpecKind.CHUNKED_LOCAL_ATTENTION),
    (SlidingWindowSpec, SpecKind.SLIDING_WINDOW),
    (MambaSpec, SpecKind.MAMBA),
    (EncoderOnlyAttentionSpec, SpecKind.ENCODER_ONLY_ATTENTION),
    (CrossAttentionSpec, SpecKind.CROSS_ATTENTION),
)

# vLLM: single_type_kv_cache_manager.register_all_kvcache_specs (uniform_type_base_spec).
_UNIFORM_BASES: tuple[tuple[type, type], ...] = (
    (SlidingWindowMLASpec, SlidingWindowMLASpec),
    (KpoolTailSpec, KpoolTailSpec),
    (FullAttentionSpec, FullAttentionSpec),  # Full, MLA, Sink, RSWA, HiddenState
    (CircularBufferSpec, CircularBufferSpec),
    (HiSparseHotSpec, HiSparseHotSpec),
    (HiSparseResidentSpec, HiSparseResidentSpec),
    (SlidingWindowSpec, SlidingWindowSpec),
    (MambaSpec, MambaSpec),
    (ChunkedLocalAttentionSpec, ChunkedLocalAttentionSpec),
    (CrossAttentionSpec, CrossAttentionSpec),
)


def uniform_type_base(spec: KVCacheSpec) -> type | None:
    """vLLM: KVCacheSpecRegistry.get_uniform_type_base_spec (MRO walk)."""
    for cls, base in _UNIFORM_BASES:
        if isinstance(spec, cls):
            return base
    return None


def is_uniform_with_collection(first: KVCacheSpec, specs: list[KVCacheSpec]) -> bool:
    """vLLM: <Spec>.is_uniform_with_collection."""
    if isinstance(first, ChunkedLocalAttentionSpec):
        return all(isinstance(s, ChunkedLocalAttentionSpec)
                   and s.attention_chunk_size == first.attention_chunk_size for s in specs)
    if isinstance(first, SlidingWindowMLASpec):
        return all(isinstance(s, SlidingWindowMLASpec)
                   and s.sliding_window == first.sliding_window
                   and s.bounded_replay == first.bounded_replay for s in specs)
    if isinstance(first, KpoolTailSpec | CircularBufferSpec):
        return all(isinstance(s, type(first)) for s in specs)
    if isinstance(first, SlidingWindowSpec):
        return all(isinstance(s, SlidingWindowSpec)
                   and s.sliding_window == first.sliding_window for s in specs)
    if isinstance(first, MambaSpec):
        return all(
            isinstance(s, MambaSpec)
            and s.num_speculative_blocks == first.num_speculative_blocks
            and s.num_prefill_checkpoint_blocks == first.num_prefill_checkpoint_blocks
            and s.prefill_checkpoint_alignment == first.prefill_checkpoint_alignment
            and s.page_size_bytes == first.page_size_bytes
            and s.state_alignment == first.state_alignment
            and s.tp_replicated == first.tp_replicated
            for s in specs
        )
    base = uniform_type_base(first)
    if base is None:
        raise AssertionError(f"Unsupported KV cache spec type: {type(first).__name__}.")
    return all(isinstance(s, base) for s in specs)


def bytes_per_token(spec: AttentionSpec) -> int | Fraction:
    page = spec.unpadded_page_size_bytes
    return page // spec.block_size if page % spec.block_size == 0 else Fraction(page, spec.block_size)
