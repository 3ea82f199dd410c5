"""vLLM's KV-cache startup planner: groups → pool stride → demand → check → blocks → capacity.

Mirrors `get_global_kv_cache_groups` + `get_kv_cache_configs` (vllm/v1/core/kv_cache_planning.py,
0.33/0.34; kv_cache_utils.py in 0.31/0.32). Pure: no printing, logging, environment or files.

Modules: `result.py` what goes in and comes out (`PlannerInput`, `EngineResult`, ...);
`settings.py` the VllmConfig settings the demand reads; `demand.py` the per-worker arithmetic
(pool stride, blocks per request, bytes needed, the max-length search); `messages.py` vLLM's error
and log texts, per release; `validate.py` what the planner refuses before it starts;
`planning.py` `plan` and `plan_lengths`.
"""

from kvplan.engines.vllm.planner.demand import (
    block_table_width,
    estimate_max_model_len,
    group_blocks_per_request,
    group_page_sum,
    needed_bytes,
    pool_bytes_per_block,
    project_groups,
    stride_alignment,
    stride_rule,
)
from kvplan.engines.vllm.planner.messages import (
    DOCS_URL,
    auto_fit_error_text,
    capacity_error_text,
    capacity_line,
    more_memory_hint,
    no_memory_error_text,
)
from kvplan.engines.vllm.planner.planning import plan, plan_lengths, replace_input
from kvplan.engines.vllm.planner.result import EngineResult, GroupDemand, LengthPoint, PlanError, PlannerInput
from kvplan.engines.vllm.planner.settings import (
    EAGLE_FAMILY,
    demand_settings,
    max_concurrent_batches,
    num_prefill_lookahead_tokens,
)

__all__ = [
    "DOCS_URL", "EAGLE_FAMILY", "EngineResult", "GroupDemand", "LengthPoint", "PlanError",
    "PlannerInput", "auto_fit_error_text", "block_table_width", "capacity_error_text",
    "capacity_line", "demand_settings", "estimate_max_model_len", "group_blocks_per_request",
    "group_page_sum", "max_concurrent_batches", "more_memory_hint", "needed_bytes",
    "no_memory_error_text", "num_prefill_lookahead_tokens", "plan", "plan_lengths",
    "pool_bytes_per_block", "project_groups", "replace_input", "stride_alignment", "stride_rule",
]
