"""Specs seen as kinds: `UniformTypeKVCacheSpecs` (one group of same-type layers), vLLM's spec
kind (get_kv_cache_spec_kind), uniform-type base (KVCacheSpecRegistry) and
`is_uniform_with_collection`, which the grouping reads."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.specs.attention import (
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    KpoolTailSpec,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)
from kvplan.engines.vllm.specs.base import (
    DemandSettings,
    KVCacheSpec,
    SpecKind,
)
from kvplan.engines.vllm.specs.hisparse import HiSparseHotSpec, HiSparseResidentSpec
from kvplan.engines.vllm.specs.mamba import MambaSpec


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
