"""KV cache grouping, mirroring `vllm/v1/core/kv_cache_planning.py` (0.31–0.34 are identical here).

Exceptions are vLLM's own types (AssertionError, ValueError, NotImplementedError) with vLLM's
messages, so a grouping failure reads exactly as vLLM would report it; the planner turns them
into a `grouping_error`.

Modules: `merge.py` vLLM's `<Spec>.merge` and the uniformity tests (`KVCacheGroup`); `page_size.py`
page-size unification (as released and with PR #53499) and grouping by page size, hidden-state
groups; `promote.py` local attention promoted to full (`--disable-hybrid-kv-cache-manager`) and
the full-allocation fallback; `packed.py` the packed grouping of block-outermost layouts;
`glm5_next.py` 0.31's GLM-5.3 branch; `groups.py` the decision tree `get_kv_cache_groups`.
"""

from kvplan.engines.vllm.grouping.glm5_next import glm5_next_groups
from kvplan.engines.vllm.grouping.groups import GroupingResult, get_kv_cache_groups
from kvplan.engines.vllm.grouping.merge import (
    KVCacheGroup,
    Specs,
    is_kv_cache_spec_uniform,
    make_group,
    merge_specs,
    uniform_type_specs,
)
from kvplan.engines.vllm.grouping.packed import approximate_gcd, packed_groups
from kvplan.engines.vllm.grouping.page_size import (
    group_uniform_page_size,
    unify_page_size_fixed,
    unify_page_size_released,
)
from kvplan.engines.vllm.grouping.promote import (
    full_allocation_fallback,
    promote_local_specs,
    unify_hybrid_specs,
)

__all__ = [
    "GroupingResult", "KVCacheGroup", "Specs", "approximate_gcd", "full_allocation_fallback",
    "get_kv_cache_groups", "glm5_next_groups", "group_uniform_page_size",
    "is_kv_cache_spec_uniform", "make_group", "merge_specs", "packed_groups", "promote_local_specs",
    "unify_hybrid_specs", "unify_page_size_fixed", "unify_page_size_released",
    "uniform_type_specs",
]
