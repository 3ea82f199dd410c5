"""vLLM's KV-cache startup planner: groups → pool stride → demand → check → blocks → capacity.

Mirrors `get_global_kv_cache_groups` + `get_kv_cache_configs` (vllm/v1/core/kv_cache_planning.py,
0.33/0.34; kv_cache_utils.py in 0.31/0.32). Pure: no printing, logging, environment or files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import gcd
from typing import Any

from kvplan.engines.vllm.grouping import GroupingResult, KVCacheGroup, get_kv_cache_groups
from kvplan.engines.vllm.layout import is_block_outermost, resolve_layout
from kvplan.engines.vllm.profiles import PROFILES, ErrorText, PoolStrideRule, VllmProfile, get_profile
from kvplan.engines.vllm.specs import (
    AttentionSpec,
    DemandSettings,
    HiSparseHotSpec,
    KVCacheSpec,
    MLAAttentionSpec,
    MultipleOf,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from kvplan.errors import InputError, UnsupportedError
from kvplan.units import cdiv, format_gib, lcm, round_up

EAGLE_FAMILY = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})
DOCS_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"


@dataclass(frozen=True)
class PlannerInput:
    """Everything the planner reads: per-worker layer specs plus the scheduler/cache knobs."""

    worker_specs: tuple[dict[str, KVCacheSpec], ...]  # one dict per pipeline stage
    available_kv_bytes: tuple[int, ...]  # per worker (the profiled KV memory)
    max_model_len: int
    max_num_batched_tokens: int
    auto_fit_max_model_len: bool = False
    max_num_encoder_input_tokens: int | None = None
    async_scheduling: bool = True
    use_v2_model_runner: bool = True
    pipeline_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    mamba_cache_mode: str = "none"
    num_speculative_tokens: int = 0
    speculative_method: str | None = None
    num_nextn_predict_layers: int = 1
    disable_hybrid_kv_cache_manager: bool = False
    num_gpu_blocks_override: int | None = None
    enable_extensible_kv_cache: bool = False
    gpu_memory_utilization: float | None = None
    vllm_version: str | None = None
    with_fix: bool = False  # PR #53499 scale-before-pad
    kv_cache_layout: str | None = None  # explicit (cache_config.kv_cache_layout)
    supported_kv_cache_layouts: tuple[str, ...] | None = None  # what the backends declare


@dataclass(frozen=True)
class GroupDemand:
    group_id: int
    group: KVCacheGroup
    blocks_per_request: int
    max_memory_usage_bytes: int
    max_num_blocks_per_req: int
    page_sum_bytes: int  # Σ per-layer block strides of the group (its share of one pool block)
    block_table_width: int = 0  # the worker's block-table row (block_table_width)


@dataclass(frozen=True)
class PlanError:
    type: str
    message: str


@dataclass(frozen=True)
class EngineResult:
    profile: VllmProfile
    with_fix: bool
    max_in_flight_tokens: int
    kv_cache_layout: str
    max_concurrent_batches: int
    extra_retained_tokens: int
    num_prefill_lookahead_tokens: int
    grouping: GroupingResult | None
    grouping_error: PlanError | None
    groups: tuple[GroupDemand, ...] = ()
    pool_bytes_per_block: tuple[int, ...] = ()
    total_blocks_per_request: int = 0
    total_bytes_needed: tuple[int, ...] = ()
    check_memory_bytes: tuple[int, ...] = ()  # profiled memory − one pool block (null block)
    effective_check_memory_bytes: tuple[int, ...] = ()  # what the check used (after override)
    available_kv_bytes: tuple[int, ...] = ()  # after num_gpu_blocks_override
    estimated_max_model_len: tuple[int, ...] = ()
    fits: bool = False
    error: PlanError | None = None
    max_model_len: int = 0  # as requested
    max_model_len_after_planning: int = 0
    # KV bytes one request needs per worker at max_model_len_after_planning: what vLLM's capacity
    # check compares after auto-fit (= total_bytes_needed when the length is kept)
    bytes_needed_after_planning: tuple[int, ...] = ()
    num_blocks: int | None = None
    capacity_is_hypothetical: bool = False
    max_concurrency: float | None = None
    kv_cache_size_tokens: int | None = None
    capacity_log_line: str | None = None
    log: tuple[str, ...] = field(default_factory=tuple)

    @property
    def total_gib_needed(self) -> tuple[str, ...]:
        return tuple(format_gib(b) for b in self.total_bytes_needed)


# ---- settings -------------------------------------------------------------------------------

def max_concurrent_batches(inp: PlannerInput, profile: VllmProfile) -> int:
    """vLLM: VllmConfig.max_concurrent_batches."""
    pp = inp.pipeline_parallel_size
    if inp.async_scheduling:
        if inp.use_v2_model_runner or profile.v1_runner_async_pp_plus_one:
            return pp + 1
        if pp <= 1:
            return 2
    return pp


def num_prefill_lookahead_tokens(inp: PlannerInput) -> int:
    """vLLM: VllmConfig.num_prefill_lookahead_tokens (speculator_config in 0.34)."""
    method = inp.speculative_method
    if method is None and inp.num_speculative_tokens > 0:
        method = "eagle"
    if method is None or method not in EAGLE_FAMILY:
        return 0
    if method == "mtp" and min(inp.num_nextn_predict_layers, inp.num_speculative_tokens) > 1:
        return inp.num_speculative_tokens  # multi-module MTP
    return 1


# ---- per-worker arithmetic -----------------------------------------------------------------

def _layer_spec(group: KVCacheGroup, name: str) -> KVCacheSpec:
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
                   for s in (_layer_spec(group, n) for n in group.layer_names))
    return sum(_layer_spec(group, n).page_size_bytes for n in group.layer_names)


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
            aligns = [stride_alignment(_layer_spec(g, n), profile)
                      for g in groups for n in g.layer_names]
        else:
            aligns = [a if isinstance(a := _layer_spec(g, n).block_stride_alignment, int) else 1
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


def _settings(inp: PlannerInput, max_in_flight: int, max_model_len: int) -> DemandSettings:
    return DemandSettings(
        max_model_len=max_model_len,
        max_in_flight_tokens=max_in_flight,
        max_num_encoder_input_tokens=(inp.max_num_encoder_input_tokens
                                      if inp.max_num_encoder_input_tokens is not None
                                      else inp.max_num_batched_tokens),
        mamba_cache_mode=inp.mamba_cache_mode,
        decode_context_parallel_size=inp.decode_context_parallel_size,
    )


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


def more_memory_hint(inp: PlannerInput, profile: VllmProfile) -> str:
    """vLLM 0.34: _more_kv_cache_memory_hint."""
    if profile.error_text is ErrorText.B and inp.enable_extensible_kv_cache:
        util = inp.gpu_memory_utilization if inp.gpu_memory_utilization is not None else 1.0
        used_by = "the model and its activations"
        if util < 1.0:
            return (f"The KV cache gets what is left after {used_by} within "
                    f"`gpu_memory_utilization`={util}; increase it (with the extensible KV "
                    "cache it defaults to 1.0) or decrease `max_model_len` or `max_num_seqs`.")
        return ("The extensible KV cache already takes all device memory left after "
                f"{used_by}; decrease `max_model_len` or `max_num_seqs`, or the model needs "
                "a device with more memory.")
    return ("Try increasing `gpu_memory_utilization` when initializing the engine (this flag "
            "also controls CPU memory reservation on the CPU backend, despite its name).")


def capacity_error_text(profile: VllmProfile, inp: PlannerInput, max_model_len: int,
                        needed: int, available: int, estimated: int) -> str:
    """vLLM: _check_enough_kv_cache_memory's message, per release."""
    est = (f"Based on the available memory, the estimated maximum model length is "
           f"{estimated}. " if estimated > 0 else "")
    head = (f"To serve at least one request with the model's max seq len ({max_model_len}), "
            f"({format_gib(needed)} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({format_gib(available)} GiB). {est}")
    if profile.error_text is ErrorText.A:
        tail = ("Try increasing `gpu_memory_utilization` (which also controls CPU memory on the "
                "CPU backend) or decreasing `max_model_len` when initializing the engine. ")
    else:
        tail = (f"{more_memory_hint(inp, profile)} Decreasing `max_model_len` also reduces "
                "what is needed. ")
    return f"{head}{tail}See {DOCS_URL} for more details."


def no_memory_error_text(profile: VllmProfile, inp: PlannerInput) -> str:
    return f"No available memory for the cache blocks. {more_memory_hint(inp, profile)} " \
           f"See {DOCS_URL} for more details."


def auto_fit_error_text(profile: VllmProfile, inp: PlannerInput) -> str:
    hint = ("Try increasing `gpu_memory_utilization`." if profile.error_text is ErrorText.A
            else more_memory_hint(inp, profile))
    return ("Cannot auto-fit max_model_len: not enough GPU memory available to serve even a "
            f"single token. {hint}")


def capacity_line(tokens: int, max_model_len: int, concurrency: float) -> str:
    """vLLM: update_kv_cache_capacity's log line on a CUDA device."""
    return (f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for "
            f"{max_model_len:,} tokens per request: {concurrency:.2f}x")


# ---- the whole startup ---------------------------------------------------------------------

def plan(inp: PlannerInput) -> EngineResult:
    """Run vLLM's startup KV-cache planning for one deployment."""
    profile = get_profile(inp.vllm_version)
    _validate(inp, profile)
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
    _check_pool_probe(groups, profile)
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

    base = _settings(inp, in_flight, inp.max_model_len)
    demands = _group_demands(groups, base, profile, layout)
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
            s = _settings(inp, in_flight, max_model_len)
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
        needed_bytes(p, _settings(inp, in_flight, max_model_len), pool)
        for p, pool in zip(projected, pools, strict=True)]
    common["bytes_needed_after_planning"] = tuple(needed_after)
    if not profile.pool_probe_needs_layer_views and any(
            not _layer_spec(g, n).has_layer_views for g in groups for n in g.layer_names):
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
    s_final = _settings(inp, in_flight, max_model_len)
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


def _group_demands(groups: Sequence[KVCacheGroup], s: DemandSettings, profile: VllmProfile,
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


def _validate(inp: PlannerInput, profile: VllmProfile) -> None:
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


def _glm5_tails_match(groups: Sequence[KVCacheGroup]) -> bool:
    """vLLM 0.31 _glm5_next_tensor_layout recognises the layout only with one tail per index."""
    first = groups[0].spec
    assert isinstance(first, UniformTypeKVCacheSpecs)
    num_idx = sum(1 for _, s in first.kv_cache_specs
                  if isinstance(s, AttentionSpec) and s.tokens_per_state > 1)
    tails = [g for g in groups[1:] if isinstance(g.spec, UniformTypeKVCacheSpecs)]
    return not tails or len(tails[0].layer_names) == num_idx


def _check_pool_probe(groups: Sequence[KVCacheGroup], profile: VllmProfile) -> None:
    """vLLM 0.33+: _pool_bytes_per_block_from_builder places one block through per-layer views;
    a spec without them (HiSparse pages outside HiSparse's own layout) fails in
    compute_layer_kv_cache_shape_bytes (KVCacheSpec.num_heads raises NotImplementedError)."""
    if not profile.pool_probe_needs_layer_views:
        return
    for g in groups:
        for name in g.layer_names:
            spec = _layer_spec(g, name)
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


@dataclass(frozen=True)
class LengthPoint:
    max_model_len: int
    total_bytes_needed: int  # on the tightest worker
    fits: bool
    max_concurrency: float
    kv_cache_size_tokens: int


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
        s = _settings(inp, base.max_in_flight_tokens, length)
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
