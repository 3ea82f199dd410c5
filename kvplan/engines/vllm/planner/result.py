"""What the planner takes and returns: `PlannerInput` (per-worker layer specs and the
scheduler/cache knobs), `EngineResult` (groups, pool stride, demand, check, capacity) and the
parts of each."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.engines.vllm.grouping import GroupingResult, KVCacheGroup
from kvplan.engines.vllm.profiles import VllmProfile
from kvplan.engines.vllm.specs import KVCacheSpec
from kvplan.units import format_gib


@dataclass(frozen=True)
class PlannerInput:
    """Everything the planner reads: per-worker layer specs plus the scheduler/cache knobs."""

    worker_specs: tuple[dict[str, KVCacheSpec], ...]  # one dict per pipeline stage
    available_kv_bytes: tuple[int, ...]  # per worker (the profiled KV memory)
    max_model_len: int
    max_num_batched_tokens: int
    auto_fit_max_model_len: bool = False
    max_num_encoder_input_tokens: int | None = None
    async_scheduling: bool = True
    use_v2_model_runner: bool = True
    pipeline_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    mamba_cache_mode: str = "none"
    num_speculative_tokens: int = 0
    speculative_method: str | None = None
    num_nextn_predict_layers: int = 1
    disable_hybrid_kv_cache_manager: bool = False
    num_gpu_blocks_override: int | None = None
    enable_extensible_kv_cache: bool = False
    gpu_memory_utilization: float | None = None
    vllm_version: str | None = None
    with_fix: bool = False  # PR #53499 scale-before-pad
    kv_cache_layout: str | None = None  # explicit (cache_config.kv_cache_layout)
    supported_kv_cache_layouts: tuple[str, ...] | None = None  # what the backends declare


@dataclass(frozen=True)
class GroupDemand:
    group_id: int
    group: KVCacheGroup
    blocks_per_request: int
    max_memory_usage_bytes: int
    max_num_blocks_per_req: int
    page_sum_bytes: int  # Σ per-layer block strides of the group (its share of one pool block)
    block_table_width: int = 0  # the worker's block-table row (block_table_width)


@dataclass(frozen=True)
class PlanError:
    type: str
    message: str


@dataclass(frozen=True)
class EngineResult:
    profile: VllmProfile
    with_fix: bool
    max_in_flight_tokens: int
    kv_cache_layout: str
    max_concurrent_batches: int
    extra_retained_tokens: int
    num_prefill_lookahead_tokens: int
    grouping: GroupingResult | None
    grouping_error: PlanError | None
    groups: tuple[GroupDemand, ...] = ()
    pool_bytes_per_block: tuple[int, ...] = ()
    total_blocks_per_request: int = 0
    total_bytes_needed: tuple[int, ...] = ()
    check_memory_bytes: tuple[int, ...] = ()  # profiled memory − one pool block (null block)
    effective_check_memory_bytes: tuple[int, ...] = ()  # what the check used (after override)
    available_kv_bytes: tuple[int, ...] = ()  # after num_gpu_blocks_override
    estimated_max_model_len: tuple[int, ...] = ()
    fits: bool = False
    error: PlanError | None = None
    max_model_len: int = 0  # as requested
    max_model_len_after_planning: int = 0
    # KV bytes one request needs per worker at max_model_len_after_planning: what vLLM's capacity
    # check compares after auto-fit (= total_bytes_needed when the length is kept)
    bytes_needed_after_planning: tuple[int, ...] = ()
    num_blocks: int | None = None
    capacity_is_hypothetical: bool = False
    max_concurrency: float | None = None
    kv_cache_size_tokens: int | None = None
    capacity_log_line: str | None = None
    log: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total_gib_needed(self) -> tuple[str, ...]:
        return tuple(format_gib(b) for b in self.total_bytes_needed)



@dataclass(frozen=True)
class LengthPoint:
    max_model_len: int
    total_bytes_needed: int  # on the tightest worker
    fits: bool
    max_concurrency: float
    kv_cache_size_tokens: int
