"""Page-size unification (vLLM: unify_kv_cache_spec_page_size, as released and with the
scale-before-pad fix of PR #53499), the grouping of layers with one page size
(_get_kv_cache_groups_uniform_page_size) and the hidden-state groups fitted to that page."""

from __future__ import annotations

from math import gcd

from kvplan.engines.vllm.grouping.merge import (
    KVCacheGroup,
    Specs,
    make_group,
    merge_specs,
)
from kvplan.engines.vllm.specs import (
    AttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
)
from kvplan.units import cdiv, dtype_size_bytes


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
    return [make_group(specs, names, strict) for names in grouped], padding


def _largest_divisor_at_most(value: int, limit: int) -> int:
    """vLLM: kv_cache_planning._largest_divisor_at_most."""
    for candidate in range(min(value, limit), 0, -1):
        if value % candidate == 0:
            return candidate
    return 1


def add_hidden_state_groups(groups: list[KVCacheGroup], hidden: dict[str, HiddenStateCacheSpec]
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
