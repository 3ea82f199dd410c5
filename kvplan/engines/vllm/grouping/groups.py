"""KV cache grouping, mirroring `vllm/v1/core/kv_cache_planning.py` (0.31–0.34 are identical here).

Exceptions are vLLM's own types (AssertionError, ValueError, NotImplementedError) with vLLM's
messages, so a grouping failure reads exactly as vLLM would report it; the planner turns them
into a `grouping_error`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from math import gcd

from kvplan.engines.vllm.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KpoolTailSpec,
    KVCacheGroupRole,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
    is_uniform_with_collection,
)
from kvplan.units import KVQuantMode, cdiv, dtype_size_bytes

Specs = dict[str, KVCacheSpec]


@dataclass(frozen=True, slots=True)
class KVCacheGroup:
    """vLLM: kv_cache_interface.KVCacheGroupSpec."""

    layer_names: tuple[str, ...]
    spec: KVCacheSpec
    role: KVCacheGroupRole = KVCacheGroupRole.DEFAULT


@dataclass(frozen=True, slots=True)
class GroupingResult:
    groups: tuple[KVCacheGroup, ...]
    path: str  # uniform_spec | uniform_type | uniform_page_size | full_allocation_fallback | empty
    specs: dict[str, KVCacheSpec]  # the specs after promotion/unification (what was grouped)
    padding_layers: tuple[tuple[int, float], ...] = ()  # (count, % of bucket) per padded bucket
    promoted_hybrid: bool = False
    hidden_state_block_sizes: tuple[tuple[str, int], ...] = ()  # (layer, block) as vLLM logs it


_ATTENTION_COMPARE_FIELDS = tuple(f.name for f in fields(AttentionSpec) if f.compare)


# ---- merge: vLLM's <Spec>.merge classmethods ---------------------------------------------------

def _merge_window_sizes(values: set[int]) -> int | None:
    # vLLM: FullAttentionSpec.merge_window_sizes
    if not values:
        return None
    if len(values) == 1:
        return next(iter(values))
    raise ValueError(
        "All attention layers in the same KV cache group must have the same window size."
    )


def _check_attention_fields(specs: Sequence[KVCacheSpec], merged: KVCacheSpec) -> None:
    for spec in specs:
        for name in _ATTENTION_COMPARE_FIELDS:
            if getattr(spec, name) != getattr(merged, name):
                raise AssertionError(
                    "All attention layers in the same KV cache group must have the same "
                    "attention spec."
                )


def merge_specs(specs: Sequence[KVCacheSpec], swa_mla_strict: bool = True) -> KVCacheSpec:
    """vLLM: type(specs[0]).merge(specs).

    `swa_mla_strict`: SlidingWindowMLASpec.merge also requires one kv_quant_mode and one
    alignment (0.33+); before, the merged spec drops both to their defaults.
    """
    first = specs[0]
    if isinstance(first, SlidingWindowMLASpec):
        if not all(isinstance(s, SlidingWindowMLASpec) for s in specs):
            raise AssertionError("All attention layers in the same KV cache group must be "
                                 "SlidingWindowMLASpec.")
        keys: tuple[str, ...] = (
            "cache_dtype_str", "tokens_per_state", "model_version", "sliding_window",
            "extra_retained_tokens", "bounded_replay", "block_stride_alignment", "dcp_sharded",
            "max_tp_shards")
        if swa_mla_strict:
            keys += ("kv_quant_mode", "alignment")
        if any(len({getattr(s, k) for s in specs}) != 1 for k in keys):
            raise AssertionError(
                "All attention layers in the same KV cache group must use the same "
                "quantization method, tokens per state, model version, sliding window size, "
                "retained token count, replay policy, KV quant mode and alignment.")
        ncm = any(s.non_causal_multi_token_decode for s in specs
                  if isinstance(s, SlidingWindowMLASpec))
        if not swa_mla_strict:  # cls(...) without them: defaults; the page keeps its padding
            return first.with_changes(is_draft=False, non_causal_multi_token_decode=ncm,
                                      kv_quant_mode=KVQuantMode.NONE, alignment=None)
        return first.with_changes(is_draft=False, non_causal_multi_token_decode=ncm)
    if isinstance(first, MLAAttentionSpec):
        if not all(isinstance(s, MLAAttentionSpec) for s in specs):
            raise AssertionError("All attention layers in the same KV cache group must be "
                                 "MLAAttentionSpec.")
        # topk_buffer_width (0.33+) and storage_block_size (0.31) are None where a release
        # lacks them (refused in planner/validate.py), so one key list serves every release
        keys = ("cache_dtype_str", "topk_buffer_width",
                "tokens_per_state", "model_version", "cache_role", "is_index_group_leader",
                "storage_block_size", "block_stride_alignment")
        if any(len({getattr(s, k) for s in specs}) != 1 for k in keys):
            raise AssertionError(
                "All attention layers in the same KV cache group must use the same "
                "quantization method, top-k buffer width, tokens per state, model version, "
                "cache role, index-sharing role, and block stride alignment.")
        # MLAAttentionSpec.merge rebuilds cls(...) without windows or alignment
        merged = first.with_changes(
            is_draft=False, sliding_window=None, attention_chunk_size=None, alignment=None,
            non_causal=False, non_causal_multi_token_decode=any(
                s.non_causal_multi_token_decode for s in specs if isinstance(s, MLAAttentionSpec)))
        _check_attention_fields(specs, merged)
        return merged
    if isinstance(first, FullAttentionSpec):  # Full and SinkFull
        if not all(isinstance(s, FullAttentionSpec) for s in specs):
            raise AssertionError("All attention layers in the same KV cache group must be "
                                 "FullAttentionSpec.")
        full = [s for s in specs if isinstance(s, FullAttentionSpec)]
        windows = {s.sliding_window for s in full if s.sliding_window is not None}
        chunks = {s.attention_chunk_size for s in full if s.attention_chunk_size is not None}
        sliding_window = _merge_window_sizes(windows)
        chunk = _merge_window_sizes(chunks)
        if any(isinstance(s, MLAAttentionSpec) for s in specs):
            raise AssertionError("MLAAttentionSpec should be merged in MLAAttentionSpec.merge")
        changes: dict[str, object] = dict(
            is_draft=False, sliding_window=sliding_window, attention_chunk_size=chunk,
            non_causal=any(s.non_causal for s in full))
        if isinstance(first, RSWASpec):  # vLLM: RSWASpec.merge, then FullAttentionSpec.merge
            if not all(isinstance(s, RSWASpec) for s in specs):
                raise AssertionError("All attention layers in the same KV cache group must be "
                                     "RSWASpec.")
            windows_rswa = {s.rswa_window for s in specs if isinstance(s, RSWASpec)}
            if len(windows_rswa) != 1:
                raise AssertionError("All R-SWA layers must share the same rswa_window, got "
                                     f"{windows_rswa}")
        merged = first.with_changes(**changes)
        _check_attention_fields(specs, merged)
        if sliding_window is not None and chunk is not None:
            raise AssertionError("Model with both sliding window layers and chunked local "
                                 "attention layers is not supported.")
        return merged
    # vLLM: KVCacheSpec.merge — every spec must be equal
    if not all(s == first for s in specs[1:]):
        raise AssertionError("All layers in the same KV cache group must be the same.")
    return first


# ---- the decision tree ---------------------------------------------------------------------

def is_kv_cache_spec_uniform(specs: Specs, strict: bool = True) -> bool:
    """vLLM: is_kv_cache_spec_uniform (catches AssertionError only)."""
    if not specs:
        return True
    try:
        merge_specs(list(specs.values()), strict)
    except AssertionError:
        return False
    return True


def uniform_type_specs(specs: Specs) -> UniformTypeKVCacheSpecs | None:
    """vLLM: UniformTypeKVCacheSpecs.from_specs / is_uniform_type."""
    values = list(specs.values())
    if len({s.block_size for s in values}) > 1:
        return None
    if len({s.dcp_sharded for s in values}) > 1:
        return None
    if not is_uniform_with_collection(values[0], values):
        return None
    return UniformTypeKVCacheSpecs(block_size=values[0].block_size,
                                   dcp_sharded=values[0].dcp_sharded,
                                   kv_cache_specs=tuple(specs.items()))


def unify_page_size_released(specs: Specs) -> Specs:
    """vLLM: unify_kv_cache_spec_page_size as released (pad branch keeps block_size)."""
    page_sizes = {s.page_size_bytes for s in specs.values()}
    if len(page_sizes) <= 1:
        return specs
    max_page = max(page_sizes)
    out: Specs = {}
    for name, spec in specs.items():
        page = spec.page_size_bytes
        if page == max_page:
            new = spec
        elif isinstance(spec, MambaSpec):
            new = spec.with_changes(page_size_padded=max_page)
        elif max_page % page == 0:
            new = spec.with_changes(block_size=spec.block_size * (max_page // page))
        elif isinstance(spec, AttentionSpec) and not isinstance(spec, MLAAttentionSpec):
            new = spec.with_changes(page_size_padded=max_page)
        else:
            raise NotImplementedError(
                f"Layer {name}: page size is not divisible by the maximum page size and "
                "cannot be padded. Padding is only supported for non-MLA attention layers.")
        if new.page_size_bytes != max_page:
            raise AssertionError()  # vLLM: bare assert new_spec.page_size_bytes == max_page_size
        out[name] = new
    return out


def _plain_attention(spec: KVCacheSpec) -> bool:
    return isinstance(spec, AttentionSpec) and not isinstance(spec, MLAAttentionSpec)


def _scale_then_pad(spec: AttentionSpec, max_page: int) -> KVCacheSpec:
    """PR #53499: ratio from the unpadded page, scale by its whole part, then pad the rest."""
    ratio = max_page // spec.unpadded_page_size_bytes
    block_size = spec.block_size * ratio if ratio >= 2 else spec.block_size
    new = spec.with_changes(block_size=block_size, page_size_padded=None)
    assert isinstance(new, AttentionSpec)
    if new.unpadded_page_size_bytes != max_page:
        new = new.with_changes(page_size_padded=max_page)
    return new


def unify_page_size_fixed(specs: Specs) -> Specs:
    """unify_kv_cache_spec_page_size with the scale-before-pad fix of vLLM PR #53499.

    Non-MLA attention layers that the released code pads (or scales from a stale padded page)
    are recomputed from their unpadded page; MLA and Mamba keep the released behaviour.
    """
    page_sizes = {s.page_size_bytes for s in specs.values()}
    if len(page_sizes) <= 1:
        return specs
    max_page = max(page_sizes)
    held_back = {
        name for name, s in specs.items()
        if _plain_attention(s) and s.page_size_padded is not None  # type: ignore[attr-defined]
        and s.page_size_bytes != max_page and max_page % s.page_size_bytes == 0
    }
    released = unify_page_size_released({n: s for n, s in specs.items() if n not in held_back})
    out: Specs = {}
    for name, spec in specs.items():
        if name in held_back:
            new = _scale_then_pad(spec, max_page)  # type: ignore[arg-type]
        else:
            new = released[name]
            if (_plain_attention(spec) and spec.page_size_bytes != max_page
                    and new.block_size == spec.block_size
                    and new.page_size_padded == max_page):  # type: ignore[attr-defined]
                new = _scale_then_pad(spec, max_page)  # type: ignore[arg-type]
        if new.page_size_bytes != max_page:
            raise AssertionError()
        out[name] = new
    return out


def group_uniform_page_size(specs: Specs, strict: bool = True
                            ) -> tuple[list[KVCacheGroup], list[tuple[int, float]]]:
    """vLLM: _get_kv_cache_groups_uniform_page_size (buckets, group_size, layers[i::n])."""
    same_type: dict[KVCacheSpec, list[str]] = {}
    for name, spec in specs.items():
        same_type.setdefault(spec, []).append(name)
    layer_buckets: list[list[str]] = []
    spec_buckets: list[list[KVCacheSpec]] = []
    for spec, names in same_type.items():
        for bucket_names, bucket_specs in zip(layer_buckets, spec_buckets, strict=True):
            try:
                merge_specs([*bucket_specs, spec], strict)
            except (AssertionError, ValueError):
                continue
            bucket_names.extend(names)
            bucket_specs.append(spec)
            break
        else:
            layer_buckets.append(list(names))
            spec_buckets.append([spec])
    min_layers = min(len(b) for b in layer_buckets)
    max_layers = max(len(b) for b in layer_buckets)
    group_size = max_layers if max_layers < min_layers * 1.5 else min_layers
    grouped: list[list[str]] = []
    padding: list[tuple[int, float]] = []
    for layers in layer_buckets:
        num_padding = group_size - len(layers) % group_size
        if num_padding != group_size:
            padding.append((num_padding, num_padding / len(layers) * 100))
        num_groups = cdiv(len(layers), group_size)
        for i in range(num_groups):
            grouped.append(layers[i::num_groups])
    return [_make_group(specs, names, strict) for names in grouped], padding


def _make_group(specs: Specs, names: Sequence[str], strict: bool = True) -> KVCacheGroup:
    # vLLM: create_kv_cache_group_specs — the group's spec is specs[0].merge(specs)
    return KVCacheGroup(tuple(names), merge_specs([specs[n] for n in names], strict))


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


def _full_allocation_fallback(specs: Specs, strict: bool = True) -> list[KVCacheGroup] | None:
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
        return GroupingResult((_make_group(specs, list(specs), strict),), "uniform_spec", specs,
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
        fallback = _full_allocation_fallback(specs, strict)
        if fallback is None:
            raise
        return GroupingResult(tuple(fallback), "full_allocation_fallback", specs,
                              promoted_hybrid=promoted_hybrid)
    groups, padding = group_uniform_page_size(unified, strict)
    hidden_blocks: list[tuple[str, int]] = []
    if hidden:
        groups, hidden_blocks = _add_hidden_state_groups(groups, hidden)
        unified = {**unified, **{g.layer_names[0]: g.spec for g in groups[-len(hidden):]}}
    return GroupingResult(tuple(groups), "uniform_page_size", unified, tuple(padding),
                          promoted_hybrid, tuple(hidden_blocks))


def _largest_divisor_at_most(value: int, limit: int) -> int:
    """vLLM: kv_cache_planning._largest_divisor_at_most."""
    for candidate in range(min(value, limit), 0, -1):
        if value % candidate == 0:
            return candidate
    return 1


def _add_hidden_state_groups(groups: list[KVCacheGroup], hidden: dict[str, HiddenStateCacheSpec]
                             ) -> tuple[list[KVCacheGroup], list[tuple[str, int]]]:
    """vLLM: get_kv_cache_groups' hidden-state tail + _ensure_min_page_size."""
    pages = {g.spec.page_size_bytes for g in groups}
    if len(pages) != 1:
        raise AssertionError()  # vLLM: get_uniform_page_size's bare assert
    common_page = pages.pop()
    max_per_token = max(s.bytes_per_token_unpacked for s in hidden.values())
    if max_per_token > common_page:  # TP may shrink the common page below one hidden state
        scale = cdiv(max_per_token, common_page)
        common_page *= scale
        scaled = []
        for g in groups:
            changes: dict[str, object] = {"block_size": g.spec.block_size * scale}
            padded = getattr(g.spec, "page_size_padded", None)
            if isinstance(g.spec, AttentionSpec | MambaSpec) and padded is not None:
                changes["page_size_padded"] = padded * scale
            scaled.append(KVCacheGroup(g.layer_names, g.spec.with_changes(**changes), g.role))
        groups = scaled
    group_block = 0
    for g in groups:
        group_block = gcd(group_block, g.spec.block_size)
    out = list(groups)
    blocks = []
    for name, spec in hidden.items():
        per_token = spec.num_kv_heads * spec.head_size * dtype_size_bytes(spec.dtype)
        block = _largest_divisor_at_most(group_block, max(common_page // per_token, 1))
        out.append(KVCacheGroup((name,), spec.with_changes(block_size=block,
                                                           page_size_padded=common_page)))
        blocks.append((name, block))
    return out, blocks


def glm5_next_groups(specs: Specs, strict: bool = True) -> list[KVCacheGroup] | None:
    """vLLM 0.31: kv_cache_utils._get_kv_cache_groups_glm5_next (one pipeline stage).

    Mamba next to plain MLA layers, some of which hold compressed index pages
    (tokens_per_state > 1): all MLA in one uniform-type group, the kpool tails padded to the
    index page in a second, the Mamba states padded to the MLA page and dealt round-robin
    into cdiv(#mamba, #mla) groups.
    """
    mamba = {n: s for n, s in specs.items() if isinstance(s, MambaSpec)}
    tails = {n: s for n, s in specs.items() if isinstance(s, KpoolTailSpec)}
    attn = {n: s for n, s in specs.items() if not isinstance(s, MambaSpec | KpoolTailSpec)}
    if not mamba or not all(type(s) is MLAAttentionSpec for s in attn.values()):
        return None
    mla = {n: s for n, s in attn.items() if isinstance(s, MLAAttentionSpec)}
    idx_pages = {s.page_size_bytes for s in mla.values() if s.tokens_per_state > 1}
    if not idx_pages:
        return None
    if any(s.page_size_padded is not None for s in mla.values()) or len(idx_pages) != 1:
        raise AssertionError()  # vLLM: bare asserts
    mla_names = [n for n, s in mla.items() if s.tokens_per_state == 1]
    mla_pages = {mla[n].page_size_bytes for n in mla_names}
    if len(mla_pages) != 1:
        raise AssertionError()
    mla_page = mla_pages.pop()
    uniform = uniform_type_specs(attn)
    if uniform is None:
        raise AssertionError()
    groups = [KVCacheGroup(tuple(attn), uniform)]
    if tails:
        idx_page = next(iter(idx_pages))
        tail_uniform = uniform_type_specs({n: s.with_changes(page_size_padded=idx_page)
                                           for n, s in tails.items()})
        if tail_uniform is None:
            raise AssertionError()
        groups.append(KVCacheGroup(tuple(tails), tail_uniform))
    first = next(iter(mamba.values()))
    if any(s != first for s in mamba.values()):
        raise AssertionError()
    if first.unpadded_page_size_bytes > mla_page:
        raise ValueError(
            f"the mamba state page ({first.unpadded_page_size_bytes} bytes) does not fit the MLA "
            f"page ({mla_page} bytes); increase tensor parallelism or use a wider KV cache dtype")
    padded = {n: first.with_changes(page_size_padded=mla_page) for n in mamba}
    num_groups = cdiv(len(mamba), len(mla_names))
    dealt: list[list[str]] = [[] for _ in range(num_groups)]
    for i, name in enumerate(mamba):
        dealt[i % num_groups].append(name)
    return groups + [_make_group(padded, names, strict) for names in dealt]


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
