"""KV cache layout resolution and block-outermost ("packed") grouping.

Mirrors `resolve_kv_cache_layout` (vllm/v1/attention/backends/utils.py) and
`_get_packed_kv_cache_groups` / `_approximate_gcd` (kv_cache_planning.py; the same in 0.31–0.34).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvplan.engine.grouping import KVCacheGroup, uniform_type_specs
from kvplan.errors import InputError
from kvplan.specs import (
    AttentionSpec,
    CircularBufferSpec,
    KVCacheSpec,
    MambaSpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from kvplan.units import cdiv

LAYOUTS = ("LBNHC", "LBHNC", "BLNHC", "BLHNC", "BHLNC", "LHBNC")
DEFAULT_LAYOUT_PREFERENCE = LAYOUTS  # vLLM: _DEFAULT_LAYOUT_PREFERENCE
LEGACY_NAMES = {"NHD": "LBNHC", "HND": "LBHNC"}


def layout_name(name: str) -> str:
    n = LEGACY_NAMES.get(str(name).strip().upper(), str(name).strip().upper())
    if n not in LAYOUTS:
        raise InputError(f"unknown KV cache layout {name!r}", hint=f"layouts: {', '.join(LAYOUTS)}")
    return n


def is_block_compact(layout: str) -> bool:
    """L and B are the two outermost dimensions: every page is one contiguous run."""
    return set(layout[:2]) == {"L", "B"}


def is_block_outermost(layout: str) -> bool:
    return layout[0] == "B"


def _hnc(spec: KVCacheSpec) -> tuple[int, int, int]:
    if isinstance(spec, AttentionSpec):
        return spec.num_heads, spec.num_states, spec.page_size_bytes
    return 1, 1, spec.page_size_bytes  # MambaSpec: one head slot, one state


def resolve_layout(specs: Iterable[KVCacheSpec], explicit: str | None = None,
                   supported: Sequence[str] | None = None, num_workers: int = 1,
                   dcp_skips_self_addressed: bool = True) -> str:
    """vLLM: resolve_kv_cache_layout (every worker reporting the same supported list).

    Specs without per-layer views take no part; from 0.32 neither do self-addressed rings
    (`uses_slot_mapping` False) in the DCP-sharding test."""
    if explicit:
        return layout_name(explicit)
    reported = [list(supported or DEFAULT_LAYOUT_PREFERENCE)] * num_workers  # as vLLM prints it
    candidates = [layout_name(n) for n in (supported or DEFAULT_LAYOUT_PREFERENCE)]
    if not candidates:
        raise InputError("no supported KV cache layout given")
    all_specs = [s for s in specs if s.has_layer_views]
    if len({_hnc(s) for s in all_specs}) > 1:
        candidates = [c for c in candidates if is_block_compact(c)]
        if not candidates:
            raise InputError("Specs with mixed HNC shapes need a block-compact layout, but none "
                             f"is in every supported set: {reported}.")
    sharding = {s.dcp_sharded for s in all_specs if isinstance(s, AttentionSpec)
                and (s.uses_slot_mapping or not dcp_skips_self_addressed)}
    if len(sharding) > 1 and len({s.page_size_bytes for s in all_specs}) > 1:
        candidates = [c for c in candidates if is_block_outermost(c)]
        if not candidates:
            raise InputError("DCP with a replicated draft and mixed KV page sizes requires a "
                             f"block-outer KV cache layout; supported sets: {reported}.")
    return candidates[0]


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
