"""What the planner refuses before it plans: bad settings, spec types and fields the release does
not define, and (0.33+) pages without per-layer views where the pool probe needs them."""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.engines.vllm.grouping import KVCacheGroup
from kvplan.engines.vllm.planner.demand import layer_spec
from kvplan.engines.vllm.planner.result import PlannerInput
from kvplan.engines.vllm.profiles import PROFILES, VllmProfile
from kvplan.engines.vllm.specs import MLAAttentionSpec, MultipleOf, SlidingWindowMLASpec
from kvplan.errors import InputError, UnsupportedError


def validate(inp: PlannerInput, profile: VllmProfile) -> None:
    if inp.max_model_len < 1:
        raise InputError(f"max_model_len must be ≥ 1, got {inp.max_model_len}",
                         hint="use --max-model-len auto to let vLLM fit it")
    if inp.max_num_batched_tokens < 1:
        raise InputError(f"max_num_batched_tokens must be ≥ 1, got {inp.max_num_batched_tokens}")
    if inp.mamba_cache_mode not in profile.mamba_cache_modes:
        raise InputError(
            f"mamba_cache_mode {inp.mamba_cache_mode!r} does not exist in vLLM {profile.version}",
            hint=f"valid: {', '.join(profile.mamba_cache_modes)}")
    if len(inp.available_kv_bytes) != len(inp.worker_specs):
        raise InputError("one available-memory figure is needed per pipeline stage")
    if inp.num_gpu_blocks_override is not None and inp.num_gpu_blocks_override < 1:
        raise InputError("num_gpu_blocks_override must be ≥ 1")
    _validate_spec_types(inp, profile)
    if not profile.multiple_of_stride_alignment and any(
            isinstance(s.block_stride_alignment, MultipleOf)
            for w in inp.worker_specs for s in w.values()):
        raise InputError(f"block_stride_alignment {{'multiple_of': n}} needs vLLM 0.32.0 or later "
                         f"(vLLM {profile.version} takes an int only)")


def check_pool_probe(groups: Sequence[KVCacheGroup], profile: VllmProfile) -> None:
    """vLLM 0.33+: _pool_bytes_per_block_from_builder places one block through per-layer views;
    a spec without them (HiSparse pages outside HiSparse's own layout) fails in
    compute_layer_kv_cache_shape_bytes (KVCacheSpec.num_heads raises NotImplementedError)."""
    if not profile.pool_probe_needs_layer_views:
        return
    for g in groups:
        for name in g.layer_names:
            spec = layer_spec(g, name)
            if not spec.has_layer_views:
                raise UnsupportedError(
                    f"layer {name}: vLLM {profile.version} sizes the KV pool by laying out one "
                    f"block with per-layer views, which {spec.spec_type} does not have (vLLM "
                    "raises NotImplementedError)",
                    hint="HiSparse pages are planned only inside HiSparse's own layout "
                         "(attention_config.hisparse_config), which kvplan does not model")


_RELEASE_MLA_FIELDS = ("topk_buffer_width", "storage_block_size")


def _validate_spec_types(inp: PlannerInput, profile: VllmProfile) -> None:
    """Refuse what the release's kv_cache_interface.py does not define, naming the release."""
    for worker in inp.worker_specs:
        for name, spec in worker.items():
            if spec.spec_type not in profile.spec_types:
                have = sorted(v for v, p in PROFILES.items() if spec.spec_type in p.spec_types)
                raise InputError(f"layer {name}: {spec.spec_type} does not exist in vLLM "
                                 f"{profile.version}",
                                 hint=f"vLLM {', '.join(have)} define{'s' if len(have) == 1 else ''}"
                                      " it" if have else "no supported release defines it")
            if isinstance(spec, MLAAttentionSpec):
                checks = [(a, "mla_fields") for a in _RELEASE_MLA_FIELDS]
            elif isinstance(spec, SlidingWindowMLASpec):
                checks = [("non_causal_multi_token_decode", "swa_mla_fields")]
            else:
                continue
            for attr, where in checks:
                if getattr(spec, attr) in (None, False) or attr in getattr(profile, where):
                    continue
                have = sorted(v for v, p in PROFILES.items() if attr in getattr(p, where))
                raise InputError(f"layer {name}: {type(spec).__name__}.{attr} does not exist in "
                                 f"vLLM {profile.version}", hint=f"vLLM {', '.join(have)} define"
                                 f"{'s' if len(have) == 1 else ''} it")
