"""The decision tree of vLLM's kv_cache_planning.get_kv_cache_groups: one uniform spec, one
uniform type, GLM-5.3 (0.31), packed (block-outermost layouts), unified page size, the
full-allocation fallback."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.grouping.glm5_next import glm5_next_groups
from kvplan.engines.vllm.grouping.merge import (
    KVCacheGroup,
    Specs,
    is_kv_cache_spec_uniform,
    make_group,
    uniform_type_specs,
)
from kvplan.engines.vllm.grouping.packed import packed_groups
from kvplan.engines.vllm.grouping.page_size import (
    add_hidden_state_groups,
    group_uniform_page_size,
    unify_page_size_fixed,
    unify_page_size_released,
)
from kvplan.engines.vllm.grouping.promote import full_allocation_fallback, unify_hybrid_specs
from kvplan.engines.vllm.specs import HiddenStateCacheSpec, KVCacheSpec


@dataclass(frozen=True, slots=True)
class GroupingResult:
    groups: tuple[KVCacheGroup, ...]
    path: str  # uniform_spec | uniform_type | uniform_page_size | full_allocation_fallback | empty
    specs: dict[str, KVCacheSpec]  # the specs after promotion/unification (what was grouped)
    padding_layers: tuple[tuple[int, float], ...] = ()  # (count, % of bucket) per padded bucket
    promoted_hybrid: bool = False
    hidden_state_block_sizes: tuple[tuple[str, int], ...] = ()  # (layer, block) as vLLM logs it


def get_kv_cache_groups(specs: Specs, *, disable_hybrid_kv_cache_manager: bool = False,
                        with_fix: bool = False, block_outermost: bool = False,
                        swa_mla_strict_merge: bool = True, glm5_next: bool = False
                        ) -> GroupingResult:
    """vLLM: kv_cache_planning.get_kv_cache_groups (`glm5_next`: 0.31's GLM-5.3 branch)."""
    strict = swa_mla_strict_merge
    promoted_hybrid = False
    if disable_hybrid_kv_cache_manager:
        specs, promoted_hybrid = unify_hybrid_specs(specs, strict)
    if not specs:
        return GroupingResult((), "empty", specs)
    if is_kv_cache_spec_uniform(specs, strict):
        return GroupingResult((make_group(specs, list(specs), strict),), "uniform_spec", specs,
                              promoted_hybrid=promoted_hybrid)
    uniform = uniform_type_specs(specs)
    if uniform is not None:
        return GroupingResult((KVCacheGroup(tuple(specs), uniform),), "uniform_type", specs,
                              promoted_hybrid=promoted_hybrid)
    if glm5_next:
        glm5 = glm5_next_groups(specs, strict)
        if glm5 is not None:
            return GroupingResult(tuple(glm5), "glm5_next", specs, promoted_hybrid=promoted_hybrid)
    # hidden-state layers keep their own block table: grouped apart, then page-aligned
    hidden = {n: s for n, s in specs.items() if isinstance(s, HiddenStateCacheSpec)}
    filtered = {n: s for n, s in specs.items() if not isinstance(s, HiddenStateCacheSpec)}
    if block_outermost:
        packed = packed_groups(filtered)
        if packed:
            packed += [KVCacheGroup((n,), s) for n, s in hidden.items()]
            return GroupingResult(tuple(packed), "packed", specs, promoted_hybrid=promoted_hybrid)
    unify = unify_page_size_fixed if with_fix else unify_page_size_released
    try:
        unified = unify(filtered)
    except NotImplementedError:
        fallback = full_allocation_fallback(specs, strict)
        if fallback is None:
            raise
        return GroupingResult(tuple(fallback), "full_allocation_fallback", specs,
                              promoted_hybrid=promoted_hybrid)
    groups, padding = group_uniform_page_size(unified, strict)
    hidden_blocks: list[tuple[str, int]] = []
    if hidden:
        groups, hidden_blocks = add_hidden_state_groups(groups, hidden)
        unified = {**unified, **{g.layer_names[0]: g.spec for g in groups[-len(hidden):]}}
    return GroupingResult(tuple(groups), "uniform_page_size", unified, tuple(padding),
                          promoted_hybrid, tuple(hidden_blocks))
