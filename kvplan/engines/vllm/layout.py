"""KV cache layout resolution.

Mirrors `resolve_kv_cache_layout` (vllm/v1/attention/backends/utils.py). The block-outermost
("packed") grouping it selects lives in `kvplan.engines.vllm.grouping`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvplan.engines.vllm.specs import (
    AttentionSpec,
    KVCacheSpec,
)
from kvplan.errors import InputError

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
