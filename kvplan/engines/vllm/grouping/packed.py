"""The packed grouping of block-outermost layouts with mixed page sizes (vLLM:
_get_packed_kv_cache_groups, _approximate_gcd)."""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.engines.vllm.grouping.merge import (
    KVCacheGroup,
    uniform_type_specs,
)
from kvplan.engines.vllm.specs import (
    CircularBufferSpec,
    KVCacheSpec,
    MambaSpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from kvplan.units import cdiv


# vLLM: _get_packed_kv_cache_groups / _approximate_gcd (kv_cache_planning.py; the same in
# 0.31–0.34): the grouping of block-outermost layouts with mixed page sizes
def approximate_gcd(values: Sequence[int], lower_bound: int | None = None) -> int:
    """vLLM: _approximate_gcd — the chunk in [lower_bound, max] with the least upward padding
    (ties prefer the larger)."""
    min_d = max(1, lower_bound if lower_bound is not None else 1)
    max_d = max(values)
    if min_d > max_d:
        return min_d
    best_d, best_pad = min_d, None
    for d in range(min_d, max_d + 1):
        pad = sum((d - (x % d)) % d for x in values)
        if best_pad is None or pad < best_pad or (pad == best_pad and d > best_d):
            best_pad, best_d = pad, d
    return best_d


def _max_layers_per_page_size(spec: UniformTypeKVCacheSpecs) -> int:
    counts: dict[int, int] = {}
    for _, s in spec.kv_cache_specs:
        counts[s.page_size_bytes] = counts.get(s.page_size_bytes, 0) + 1
    return max(counts.values())


def packed_groups(specs: dict[str, KVCacheSpec]) -> list[KVCacheGroup] | None:
    """vLLM: _get_packed_kv_cache_groups (block-outermost layouts, mixed page sizes)."""
    if len({s.page_size_bytes for s in specs.values()}) <= 1:
        return None
    buckets: list[dict[str, KVCacheSpec]] = []
    for name, spec in specs.items():
        for bucket in buckets:
            if uniform_type_specs({**bucket, name: spec}) is not None:
                bucket[name] = spec
                break
        else:
            buckets.append({name: spec})
    bucketed = []
    for bucket in buckets:
        uniform = uniform_type_specs(bucket)
        assert uniform is not None
        by_page: dict[int, list[str]] = {}
        for name, s in bucket.items():
            by_page.setdefault(s.page_size_bytes, []).append(name)
        balanced = len({len(v) for v in by_page.values()}) == 1
        bucketed.append((uniform, by_page, balanced))
    min_repeats = max((_max_layers_per_page_size(u) for u, by_page, bal in bucketed
                       if bal and len(by_page) > 1), default=0)
    repeats = (approximate_gcd([_max_layers_per_page_size(u) for u, _, bal in bucketed if bal],
                               lower_bound=min_repeats) if min_repeats else None)

    def num_groups_for(u: UniformTypeKVCacheSpecs, balanced: bool) -> int:
        return cdiv(_max_layers_per_page_size(u), repeats) if balanced and repeats else 1

    def widest(by_page: dict[int, list[str]], n: int) -> int:
        return sum(cdiv(len(names), n) * page for page, names in by_page.items())

    def is_state(u: UniformTypeKVCacheSpecs) -> bool:
        if isinstance(u.first_spec, MambaSpec | CircularBufferSpec):
            return True
        return repeats is None and isinstance(u.first_spec, SlidingWindowSpec)

    anchor = max((widest(by_page, len(u.kv_cache_specs) if is_state(u) else num_groups_for(u, bal))
                  for u, by_page, bal in bucketed), default=0)
    groups: list[KVCacheGroup] = []
    for u, by_page, bal in bucketed:
        n = num_groups_for(u, bal)
        if anchor and is_state(u):
            per_block = max(anchor // u.first_spec.page_size_bytes, 1)
            n = max(n, cdiv(len(u.kv_cache_specs), per_block))
        if n == 1:
            groups.append(KVCacheGroup(tuple(name for name, _ in u.kv_cache_specs), u))
            continue
        layer_specs = u.specs_by_layer
        pattern = list(zip(*by_page.values(), strict=False))
        for i in range(n):
            names = [name for rep in pattern[i::n] for name in rep]
            g = uniform_type_specs({name: layer_specs[name] for name in names})
            assert g is not None
            groups.append(KVCacheGroup(tuple(names), g))
    return groups
