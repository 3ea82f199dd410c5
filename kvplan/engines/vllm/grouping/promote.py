"""Local attention allocated as full attention (vLLM: _promote_local_kv_cache_specs,
unify_hybrid_kv_cache_specs — `--disable-hybrid-kv-cache-manager`) and the full-allocation
fallback of MLA next to sliding-window layers."""

from __future__ import annotations

from dataclasses import fields

from kvplan.engines.vllm.grouping.merge import (
    KVCacheGroup,
    Specs,
    is_kv_cache_spec_uniform,
    uniform_type_specs,
)
from kvplan.engines.vllm.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)

_PROMOTIONS: tuple[tuple[type, type], ...] = (
    (SlidingWindowMLASpec, MLAAttentionSpec),
    (SlidingWindowSpec, FullAttentionSpec),
    (ChunkedLocalAttentionSpec, FullAttentionSpec),
)


def _replace_as(spec: KVCacheSpec, target: type, **changes: object) -> KVCacheSpec:
    """vLLM: kv_cache_interface.replace_as (drops extra_retained_tokens)."""
    target_fields = {f.name for f in fields(target)}
    kwargs = {f.name: getattr(spec, f.name) for f in fields(spec)
              if f.name in target_fields and f.name != "extra_retained_tokens"}
    kwargs.update(changes)
    return target(**kwargs)  # type: ignore[no-any-return]


def promote_local_specs(specs: Specs, strict: bool = True) -> Specs:
    """vLLM: _promote_local_kv_cache_specs — local attention allocated as full attention."""
    promoted = dict(specs)
    if is_kv_cache_spec_uniform(promoted, strict) or uniform_type_specs(promoted) is not None:
        return promoted
    values = list(promoted.values())
    has_full = any(isinstance(s, FullAttentionSpec) for s in values)
    has_sw = any(isinstance(s, SlidingWindowSpec) for s in values)
    has_chunked = any(isinstance(s, ChunkedLocalAttentionSpec) for s in values)
    full_blocks = {s.block_size for s in values if isinstance(s, FullAttentionSpec)}
    full_block = next(iter(full_blocks)) if len(full_blocks) == 1 else None
    if has_full and (has_sw or has_chunked):
        for name, spec in specs.items():
            target = next((t for c, t in _PROMOTIONS if isinstance(spec, c)), None)
            if target is None:
                continue
            assert isinstance(spec, AttentionSpec)
            block_size = full_block or spec.block_size
            padded = None
            if spec.page_size_padded is not None:
                unpadded = spec.unpadded_page_size_bytes * block_size // spec.block_size
                padded = max(spec.page_size_padded, unpadded)
            promoted[name] = _replace_as(spec, target, block_size=block_size,
                                         page_size_padded=padded)
    if not (is_kv_cache_spec_uniform(promoted, strict)
            or uniform_type_specs(promoted) is not None):
        raise ValueError("Failed to promote local KV cache specs to one unified type.")
    return promoted


def unify_hybrid_specs(specs: Specs, strict: bool = True) -> tuple[Specs, bool]:
    """vLLM: unify_hybrid_kv_cache_specs (run separately for replicated / DCP-sharded specs)."""
    parts: dict[bool, Specs] = {}
    for name, spec in specs.items():
        replicated = isinstance(spec, AttentionSpec) and not spec.dcp_sharded
        parts.setdefault(replicated, {})[name] = spec
    out = dict(specs)
    changed = False
    for part in parts.values():
        promoted = promote_local_specs(part, strict)
        if promoted != part:
            out.update(promoted)
            changed = True
    return out, changed


def full_allocation_fallback(specs: Specs, strict: bool = True) -> list[KVCacheGroup] | None:
    """vLLM: _try_get_full_allocation_fallback_groups (MLA next to a sliding-window layer)."""
    values = list(specs.values())
    if any(isinstance(s, HiddenStateCacheSpec | ChunkedLocalAttentionSpec) for s in values):
        return None
    if not (any(isinstance(s, MLAAttentionSpec) for s in values)
            and any(isinstance(s, SlidingWindowSpec) for s in values)):
        return None
    try:
        promoted = promote_local_specs(specs, strict)
    except ValueError:
        return None
    uniform = uniform_type_specs(promoted)
    if uniform is None:
        return None
    return [KVCacheGroup(tuple(promoted), uniform)]
