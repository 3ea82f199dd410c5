"""vLLM's KV-cache startup planner: groups → pool stride → demand → check → blocks → capacity.

Mirrors `get_global_kv_cache_groups` + `get_kv_cache_configs` (vllm/v1/core/kv_cache_planning.py,
0.33/0.34; kv_cache_utils.py in 0.31/0.32). Pure: no printing, logging, environment or files.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvplan.engines.vllm.grouping import KVCacheGroup, get_kv_cache_groups
from kvplan.engines.vllm.layout import is_block_outermost, resolve_layout
from kvplan.engines.vllm.planner.demand import (
    estimate_max_model_len,
    group_demands,
    layer_spec,
    needed_bytes,
    pool_bytes_per_block,
    project_groups,
)
from kvplan.engines.vllm.planner.messages import (
    auto_fit_error_text,
    capacity_error_text,
    capacity_line,
    no_memory_error_text,
)
from kvplan.engines.vllm.planner.result import EngineResult, LengthPoint, PlanError, PlannerInput
from kvplan.engines.vllm.planner.settings import demand_settings, max_concurrent_batches, num_prefill_lookahead_tokens
from kvplan.engines.vllm.planner.validate import check_pool_probe, validate
from kvplan.engines.vllm.profiles import get_profile
from kvplan.engines.vllm.specs import AttentionSpec, KVCacheSpec, SlidingWindowSpec, UniformTypeKVCacheSpecs
from kvplan.errors import InputError


def plan(inp: PlannerInput) -> EngineResult:
    """Run vLLM's startup KV-cache planning for one deployment."""
    profile = get_profile(inp.vllm_version)
    validate(inp, profile)
    batches = max_concurrent_batches(inp, profile)
    in_flight = batches * inp.max_num_batched_tokens
    lookahead = num_prefill_lookahead_tokens(inp)
    extra = max(0, lookahead - 1)
    common: dict[str, Any] = dict(
        profile=profile, with_fix=inp.with_fix, max_in_flight_tokens=in_flight,
        max_concurrent_batches=batches, extra_retained_tokens=extra,
        num_prefill_lookahead_tokens=lookahead, max_model_len=inp.max_model_len)

    # vLLM: get_global_kv_cache_groups — merge workers, tag SW specs, group
    merged: dict[str, KVCacheSpec] = {}
    worker_specs = [dict(w) for w in inp.worker_specs]
    if not profile.has_is_draft:  # KVCacheSpec.is_draft exists from 0.33 on
        worker_specs = [{n: s.with_changes(is_draft=False) for n, s in w.items()}
                        for w in worker_specs]
    for worker in worker_specs:
        for name, spec in worker.items():
            if name in merged and merged[name] != spec:
                raise InputError(f"layer {name} has different specs on two workers")
            merged.setdefault(name, spec)
    # vLLM: resolve_kv_cache_layout (EngineCore, before grouping)
    layout = resolve_layout([s for w in worker_specs for s in w.values()], inp.kv_cache_layout,
                            inp.supported_kv_cache_layouts, num_workers=len(worker_specs),
                            dcp_skips_self_addressed=profile.dcp_layout_skips_self_addressed)
    common["kv_cache_layout"] = layout
    for name, spec in merged.items():
        if isinstance(spec, SlidingWindowSpec):
            merged[name] = spec.with_changes(extra_retained_tokens=extra)
    try:
        grouping = get_kv_cache_groups(
            merged, disable_hybrid_kv_cache_manager=inp.disable_hybrid_kv_cache_manager,
            with_fix=inp.with_fix, block_outermost=is_block_outermost(layout),
            swa_mla_strict_merge=profile.swa_mla_merge_checks_quant_alignment,
            glm5_next=profile.glm5_next_grouping and inp.pipeline_parallel_size == 1)
    except (AssertionError, ValueError, NotImplementedError) as exc:
        err = PlanError(type(exc).__name__, str(exc))
        return EngineResult(grouping=None, grouping_error=err, error=err, fits=False,
                            max_model_len_after_planning=inp.max_model_len, **common)

    groups = list(grouping.groups)
    check_pool_probe(groups, profile)
    projected = [project_groups(groups, w) for w in worker_specs]
    if grouping.path == "glm5_next" and _glm5_tails_match(groups):
        # vLLM 0.31 _glm5_next_tensor_layout: a block holds each MLA and index page once (the
        # Mamba states and kpool tails alias them), with no stride-alignment rounding
        first = groups[0].spec
        assert isinstance(first, UniformTypeKVCacheSpecs)
        pools = [first.page_size_bytes]
    else:
        pools = [pool_bytes_per_block(p, profile, layout) for p in projected]
    if groups and 0 in pools:
        stage = pools.index(0)
        raise InputError(f"pipeline stage {stage} holds no KV cache bytes (a zero-size page, or no "
                         "layers on that stage)",
                         hint="check the head sizes and KV heads, or use fewer pipeline stages")
    available = list(inp.available_kv_bytes)
    log: list[str] = []
    if inp.num_gpu_blocks_override is not None:
        for i, (p, pool) in enumerate(zip(projected, pools, strict=True)):
            if p:
                log.append(f"Overriding num_gpu_blocks={available[i] // pool} with "
                           f"num_gpu_blocks_override={inp.num_gpu_blocks_override}")
                available[i] = inp.num_gpu_blocks_override * pool
    # vLLM reserves the null block: the check runs against available − one pool block
    check = [a - pool if p else a for a, pool, p in zip(available, pools, projected, strict=True)]
    # reported like the golden files: from the profiled memory, before any override
    check_profiled = [a - pool if p else a
                      for a, pool, p in zip(inp.available_kv_bytes, pools, projected, strict=True)]

    base = demand_settings(inp, in_flight, inp.max_model_len)
    demands = group_demands(groups, base, profile, layout)
    total_blocks = sum(d.blocks_per_request for d in demands)
    needed = [needed_bytes(p, base, pool) for p, pool in zip(projected, pools, strict=True)]
    estimates = [estimate_max_model_len(p, base, pool, cm, inp.max_model_len) if p else 0
                 for p, pool, cm in zip(projected, pools, check_profiled, strict=True)]
    # the same search against the memory the check uses: only differs under an override
    fit_estimates = estimates if check == check_profiled else [
        estimate_max_model_len(p, base, pool, cm, inp.max_model_len) if p else 0
        for p, pool, cm in zip(projected, pools, check, strict=True)]

    max_model_len = inp.max_model_len
    error: PlanError | None = None
    if inp.auto_fit_max_model_len:
        # vLLM: _auto_fit_max_model_len
        fit = min([inp.max_model_len, *(e for e, p in zip(fit_estimates, projected,
                                                            strict=True) if p)])
        if fit <= 0:
            error = PlanError("ValueError", auto_fit_error_text(profile, inp))
        elif fit < inp.max_model_len:
            max_model_len = fit
    if error is None:
        for i, (p, pool, cm) in enumerate(zip(projected, pools, check, strict=True)):
            if not p:
                continue
            if cm <= 0:
                error = PlanError("ValueError", no_memory_error_text(profile, inp))
                break
            s = demand_settings(inp, in_flight, max_model_len)
            need = needed[i] if max_model_len == inp.max_model_len else needed_bytes(p, s, pool)
            if need > cm:
                # the search already run, unless auto-fit changed the upper bound
                est = (fit_estimates[i] if max_model_len == inp.max_model_len
                       else estimate_max_model_len(p, s, pool, cm, max_model_len))
                error = PlanError("ValueError", capacity_error_text(
                    profile, inp, max_model_len, need, cm, est))
                break

    # vLLM: _check_enough_kv_cache_memory runs at the auto-fitted max_model_len
    needed_after = needed if max_model_len == inp.max_model_len else [
        needed_bytes(p, demand_settings(inp, in_flight, max_model_len), pool)
        for p, pool in zip(projected, pools, strict=True)]
    common["bytes_needed_after_planning"] = tuple(needed_after)
    if not profile.pool_probe_needs_layer_views and any(
            not layer_spec(g, n).has_layer_views for g in groups for n in g.layer_names):
        # vLLM 0.31/0.32: get_kv_cache_config_from_groups lays the tensors out per layer and
        # fails on a HiSparse page (KVCacheSpec.num_heads raises NotImplementedError), after the
        # memory check; no KV cache config exists, so neither do its capacity figures
        return EngineResult(
            grouping=grouping, grouping_error=None, groups=tuple(demands),
            pool_bytes_per_block=tuple(pools), total_blocks_per_request=total_blocks,
            total_bytes_needed=tuple(needed), check_memory_bytes=tuple(check_profiled),
            effective_check_memory_bytes=tuple(check), available_kv_bytes=tuple(available),
            estimated_max_model_len=tuple(estimates), fits=False,
            error=error or PlanError("NotImplementedError", ""),
            max_model_len_after_planning=max_model_len, capacity_is_hypothetical=True,
            log=tuple(log), **common)
    # vLLM: get_kv_cache_configs → num_blocks = available // pool, min over workers
    # (the oracle reports what would be allocated when the check fails: raw memory, no override)
    if groups:
        mem = available if error is None else list(inp.available_kv_bytes)
        # (never below 0: a negative budget allocates nothing — vLLM raises before this)
        num_blocks = min(max(0, m // pool) if p else 1 for m, pool, p in zip(mem, pools, projected,
                                                                               strict=True))
        if inp.num_gpu_blocks_override is not None:
            # vLLM: may_override_num_blocks in get_kv_cache_config_from_groups
            num_blocks = inp.num_gpu_blocks_override
    else:
        num_blocks = 1
    # vLLM: get_max_concurrency_for_kv_cache_config on the scheduler copy (first layer spec
    # of a UniformTypeKVCacheSpecs group), worker 0's projection
    s_final = demand_settings(inp, in_flight, max_model_len)
    per_req = 0
    for g in projected[0]:
        spec = g.spec.first_spec if isinstance(g.spec, UniformTypeKVCacheSpecs) else g.spec
        per_req += spec.blocks_per_request(s_final)
    concurrency = num_blocks / per_req if per_req else None
    tokens = int(concurrency * max_model_len) if concurrency is not None else None
    return EngineResult(
        grouping=grouping, grouping_error=None, groups=tuple(demands),
        pool_bytes_per_block=tuple(pools), total_blocks_per_request=total_blocks,
        total_bytes_needed=tuple(needed), check_memory_bytes=tuple(check_profiled),
        effective_check_memory_bytes=tuple(check),
        available_kv_bytes=tuple(available), estimated_max_model_len=tuple(estimates),
        fits=error is None, error=error, max_model_len_after_planning=max_model_len,
        num_blocks=num_blocks, capacity_is_hypothetical=error is not None,
        max_concurrency=concurrency, kv_cache_size_tokens=tokens,
        capacity_log_line=(capacity_line(tokens, max_model_len, concurrency)
                           if tokens is not None and concurrency is not None else None),
        log=tuple(log), **common)


def _glm5_tails_match(groups: Sequence[KVCacheGroup]) -> bool:
    """vLLM 0.31 _glm5_next_tensor_layout recognises the layout only with one tail per index."""
    first = groups[0].spec
    assert isinstance(first, UniformTypeKVCacheSpecs)
    num_idx = sum(1 for _, s in first.kv_cache_specs
                  if isinstance(s, AttentionSpec) and s.tokens_per_state > 1)
    tails = [g for g in groups[1:] if isinstance(g.spec, UniformTypeKVCacheSpecs)]
    return not tails or len(tails[0].layer_names) == num_idx


def plan_lengths(inp: PlannerInput, lengths: Sequence[int]) -> tuple[EngineResult, list[LengthPoint]]:
    """`plan` at the largest length, then the same groups re-costed at each length.

    vLLM forms the groups once from the specs; only the demand formulas depend on
    max_model_len (as in `_estimate_max_model_len_from_groups`), so a sweep over lengths reuses
    the grouping and pool stride and is as exact as planning each length alone.
    """
    top = max(lengths)
    base = plan(replace_input(inp, max_model_len=top))
    if base.grouping is None:
        return base, []
    groups = list(base.grouping.groups)
    profile = base.profile
    projected = [project_groups(groups, w) for w in inp.worker_specs]
    pools = [pool_bytes_per_block(p, profile, base.kv_cache_layout) for p in projected]
    checks = list(base.effective_check_memory_bytes)
    points = []
    for length in sorted(set(lengths)):
        s = demand_settings(inp, base.max_in_flight_tokens, length)
        needed = [needed_bytes(p, s, pool) for p, pool in zip(projected, pools, strict=True)]
        fits = all(n <= c for n, c in zip(needed, checks, strict=True))
        per_req = sum((g.spec.first_spec if isinstance(g.spec, UniformTypeKVCacheSpecs)
                       else g.spec).blocks_per_request(s) for g in projected[0])
        conc = (base.num_blocks or 0) / per_req if per_req else 0.0
        points.append(LengthPoint(length, max(needed), fits, conc, int(conc * length)))
    return base, points


def replace_input(inp: PlannerInput, **changes: Any) -> PlannerInput:
    from dataclasses import replace

    return replace(inp, **changes)
