"""vLLM's `<Spec>.merge` classmethods (the spec a group of layers gets) and the uniformity tests
of the grouping's decision tree (kv_cache_planning.is_kv_cache_spec_uniform,
UniformTypeKVCacheSpecs.from_specs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

from kvplan.engines.vllm.specs import (
    AttentionSpec,
    FullAttentionSpec,
    KVCacheGroupRole,
    KVCacheSpec,
    MLAAttentionSpec,
    RSWASpec,
    SlidingWindowMLASpec,
    UniformTypeKVCacheSpecs,
    is_uniform_with_collection,
)
from kvplan.units import KVQuantMode

Specs = dict[str, KVCacheSpec]


@dataclass(frozen=True, slots=True)
class KVCacheGroup:
    """vLLM: kv_cache_interface.KVCacheGroupSpec."""

    layer_names: tuple[str, ...]
    spec: KVCacheSpec
    role: KVCacheGroupRole = KVCacheGroupRole.DEFAULT



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


def make_group(specs: Specs, names: Sequence[str], strict: bool = True) -> KVCacheGroup:
    # vLLM: create_kv_cache_group_specs — the group's spec is specs[0].merge(specs)
    return KVCacheGroup(tuple(names), merge_specs([specs[n] for n in names], strict))
