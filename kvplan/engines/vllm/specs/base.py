"""The base of vLLM's KV cache specs (kv_cache_interface.KVCacheSpec), the slice of VllmConfig
their demand reads (`DemandSettings`) and the enums the specs and groups carry."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from math import gcd
from typing import ClassVar

from kvplan.units import cdiv


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
