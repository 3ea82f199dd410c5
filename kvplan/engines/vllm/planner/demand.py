"""The planner's per-worker arithmetic: groups projected on a worker, the pool stride (bytes per
block), blocks and bytes one request needs, the block-table width, and the max-length search
(vLLM: kv_cache_planning.py / kv_cache_utils.py)."""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd

from kvplan.engines.vllm.grouping import KVCacheGroup
from kvplan.engines.vllm.planner.result import GroupDemand
from kvplan.engines.vllm.profiles import PoolStrideRule, VllmProfile
from kvplan.engines.vllm.specs import (
    DemandSettings,
    HiSparseHotSpec,
    KVCacheSpec,
    UniformTypeKVCacheSpecs,
)
from kvplan.units import cdiv, lcm, round_up


def layer_spec(group: KVCacheGroup, name: str) -> KVCacheSpec:
    spec = group.spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return spec.specs_by_layer[name]
    return spec


def project_groups(groups: Sequence[KVCacheGroup], worker: dict[str, KVCacheSpec]
                   ) -> list[KVCacheGroup]:
    """vLLM: _project_kv_cache_groups_to_worker (empty groups are kept)."""
    out = []
    for g in groups:
        names = tuple(n for n in g.layer_names if n in worker)
        if len(names) == len(g.layer_names):
            out.append(g)
            continue
        spec = g.spec
        if names and isinstance(spec, UniformTypeKVCacheSpecs):
            by_layer = spec.specs_by_layer
            spec = UniformTypeKVCacheSpecs(block_size=spec.block_size,
                                           dcp_sharded=spec.dcp_sharded,
                                           kv_cache_specs=tuple((n, by_layer[n]) for n in names))
        out.append(KVCacheGroup(names, spec))
    return out


def stride_alignment(spec: KVCacheSpec, profile: VllmProfile) -> int:
    """vLLM: <Spec>.get_block_stride_alignment (HiSparseHotSpec: lcm with its page, 0.34)."""
    alignment = spec.get_block_stride_alignment()
    if isinstance(spec, HiSparseHotSpec) and profile.hisparse_hot_stride_lcm:
        return lcm(spec.page_size, alignment)
    return alignment


def group_page_sum(group: KVCacheGroup, rule: PoolStrideRule, profile: VllmProfile) -> int:
    if rule is PoolStrideRule.PER_LAYER_ROUND:  # layer-outermost layouts, 0.32+
        # vLLM 0.32+: _get_layer_block_stride = round_up(page, get_block_stride_alignment())
        return sum(round_up(s.page_size_bytes, stride_alignment(s, profile))
                   for s in (layer_spec(group, n) for n in group.layer_names))
    return sum(layer_spec(group, n).page_size_bytes for n in group.layer_names)


def stride_rule(profile: VllmProfile, layout: str) -> PoolStrideRule:
    """0.32+ lay out layer-outermost layouts per layer; block-outermost ones (and all of 0.31)
    sum the pages and round once."""
    if layout.startswith("B"):
        return PoolStrideRule.SUM_THEN_ROUND
    return profile.pool_stride_rule


def pool_bytes_per_block(groups: Sequence[KVCacheGroup], profile: VllmProfile,
                         layout: str = "LBNHC") -> int:
    """vLLM: _pool_bytes_per_block(_from_builder) → _get_kv_cache_bytes_per_block."""
    if not groups:
        return 0
    rule = stride_rule(profile, layout)
    widest = max(group_page_sum(g, rule, profile) for g in groups)
    if rule is PoolStrideRule.SUM_THEN_ROUND:
        # round the widest group up to the lcm of every layer's block-stride alignment
        # (0.31: the raw int field; 0.32+: get_block_stride_alignment)
        if profile.multiple_of_stride_alignment:
            aligns = [stride_alignment(layer_spec(g, n), profile)
                      for g in groups for n in g.layer_names]
        else:
            aligns = [a if isinstance(a := layer_spec(g, n).block_stride_alignment, int) else 1
                      for g in groups for n in g.layer_names]
        # vLLM: _get_kv_cache_bytes_per_block also aligns to every HiSparse hot group's page
        aligns += [g.spec.page_size_bytes for g in groups if isinstance(g.spec, HiSparseHotSpec)]
        widest = round_up(widest, lcm(*[a or 1 for a in aligns]))
    return widest


def block_table_width(spec: KVCacheSpec, s: DemandSettings, max_len: int,
                      profile: VllmProfile) -> int:
    """vLLM 0.34: get_block_table_width(max_num_blocks_per_req, block_size,
    token_alignment=spec.block_table_token_alignment) — rows padded to whole 128-token runs."""
    width = spec.max_num_blocks_per_req(s, max_len)
    alignment = spec.block_table_token_alignment if profile.block_table_token_alignment else None
    if alignment is not None:
        step = alignment // gcd(alignment, spec.block_size)
        width = cdiv(width, step) * step
    return width


def group_blocks_per_request(spec: KVCacheSpec, s: DemandSettings) -> int:
    """Blocks one request at max_model_len takes from the pool for this group."""
    # vLLM: cdiv(max_memory_usage_bytes, page_size_bytes), which is the spec's block count
    return spec.blocks_per_request(s)


def needed_bytes(groups: Sequence[KVCacheGroup], s: DemandSettings, pool: int) -> int:
    """vLLM: _max_memory_usage_bytes_from_groups = pool stride × Σ blocks per request."""
    if not groups:
        return 0
    return pool * sum(group_blocks_per_request(g.spec, s) for g in groups)



def estimate_max_model_len(groups: Sequence[KVCacheGroup], base: DemandSettings, pool: int,
                           available: int, upper: int) -> int:
    """vLLM: _estimate_max_model_len_from_groups — binary search over [1, upper]."""
    from dataclasses import replace

    def fits(length: int) -> bool:
        return needed_bytes(groups, replace(base, max_model_len=length), pool) <= available

    if not fits(1):
        return 0
    left, right, result = 1, upper, 1
    while left <= right:
        mid = (left + right) // 2
        if fits(mid):
            result, left = mid, mid + 1
        else:
            right = mid - 1
    return result


def group_demands(groups: Sequence[KVCacheGroup], s: DemandSettings, profile: VllmProfile,
                   layout: str = "LBNHC") -> list[GroupDemand]:
    out = []
    for i, g in enumerate(groups):
        out.append(GroupDemand(
            group_id=i, group=g, blocks_per_request=group_blocks_per_request(g.spec, s),
            max_memory_usage_bytes=g.spec.max_memory_usage_bytes(s),
            max_num_blocks_per_req=g.spec.max_num_blocks_per_req(s, s.max_model_len),
            page_sum_bytes=group_page_sum(g, stride_rule(profile, layout), profile),
            block_table_width=block_table_width(g.spec, s, s.max_model_len, profile)))
    return out
