"""HiSparse's raw KV pages (vLLM: kv_cache_interface.HiSparseHotSpec / HiSparseResidentSpec)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.specs.base import (
    DemandSettings,
    KVCacheSpec,
)
from kvplan.units import cdiv


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
