"""SGLang's start-up pool sizing end to end (KVCacheConfigurator._resolve_memory_pool_config):
the free-memory profile, the Mamba state carve-out, config_from_budget (configurator, user token
cap, PP min), resolve_max_num_reqs and finalize — per pipeline stage. Pure."""

from __future__ import annotations

import math
from typing import Any

from kvplan.engines.sglang.deployment import (
    KvBudget,
    ProfiledMemory,
    SglangDeployment,
    SglangGpu,
)
from kvplan.engines.sglang.dsv4 import DSV4PoolConfigurator
from kvplan.engines.sglang.mamba import (
    GIB,
    MambaCarveOut,
    handle_max_mamba_cache,
    mamba_cache_per_req,
    mamba_ratio,
    pp_indices,
)
from kvplan.engines.sglang.model import AttentionArch, SglangModel, sglang_draft, sglang_model
from kvplan.engines.sglang.pools import (
    DefaultPoolConfigurator,
    DraftLayers,
    HybridSWAPoolConfigurator,
    PoolConfig,
    Stage,
    SWARequestCapPoolConfigurator,
)
from kvplan.engines.sglang.profiles import SglangProfile, sglang_profile
from kvplan.engines.sglang.result import (
    PoolRow,
    SglangError,
    SglangResolved,
    SglangResult,
    SglangStage,
)
from kvplan.engines.sglang.server_args import (
    ELEMENT_SIZE,
    KV_STORAGE,
    ResolvedArgs,
    StartupError,
    resolve,
    triton_fp8_kernel_error,
)
from kvplan.errors import InputError, UnsupportedError
from kvplan.models.description import ModelDescription

Configurator = DefaultPoolConfigurator | HybridSWAPoolConfigurator | DSV4PoolConfigurator


def create_configurator(model: SglangModel, args: ResolvedArgs, stage: Stage,
                        draft: DraftLayers, profile: SglangProfile) -> Configurator:
    """pool_configurator.create_memory_pool_configurator."""
    if model.attention_arch is AttentionArch.DSV4:
        return DSV4PoolConfigurator(model, args, stage, profile)
    if model.is_hybrid_swa:
        if SWARequestCapPoolConfigurator.is_applicable(model, args, stage):
            return SWARequestCapPoolConfigurator(model, args, stage, draft, profile)
        return HybridSWAPoolConfigurator(model, args, stage, draft, profile)
    return DefaultPoolConfigurator(model, args, stage, draft, profile)


def draft_layers(model: SglangModel, draft: SglangModel | None, args: ResolvedArgs
                 ) -> DraftLayers:
    """spec_aux_hidden_state.resolve_spec_aux_hidden_state_config + KVCacheConfigurator's
    DFLASH draft cell (draft_kv_budget.resolve_dflash_draft_cell_size)."""
    spec = args.speculative_algorithm
    if spec is None:
        return DraftLayers()
    if spec == "DFLASH":
        if draft is None:
            raise InputError("DFLASH needs the draft model (--speculative-draft-model-path)")
        layers = draft.num_hidden_layers
        # kv_cache_dtype.configure_kv_cache_dtype for the draft worker (model=None): the draft's
        # own --speculative-draft-kv-cache-dtype, else the server's; auto → the draft's dtype
        kv = args.speculative_draft_kv_cache_dtype or args.kv_cache_dtype
        kv_size = ELEMENT_SIZE[draft.dtype] if kv == "auto" else ELEMENT_SIZE[
            KV_STORAGE.get(kv, "bfloat16")]
        # dflash_utils.dflash_draft_cell_size_per_token: the draft's own heads per attention-TP
        # rank × (head_dim + v_head_dim) × its layers × the draft KV dtype (the draft model's
        # dtype under auto)
        cell = draft.num_kv_heads(args.attn_tp_size) * (draft.head_dim + draft.v_head_dim) * (
            layers * kv_size)
        return DraftLayers(dflash_cell_size=cell)
    # EAGLE / EAGLE3 / STANDALONE: a separate draft's num_nextn_predict_layers, else its layer
    # count; path-less (MTP): the target config's num_nextn_predict_layers key (DeepSeek-family
    # MTP reads it from its draft-mode config, the same key)
    if draft is not None:
        n = draft.num_nextn_predict_layers
        if n is None:
            n = draft.num_hidden_layers
        swa = len(draft.swa_layer_ids) if draft.is_hybrid_swa else 0
    else:
        n = model.num_nextn_predict_layers or 0
        swa = 0
    return DraftLayers(eagle_num_layers=n, eagle_swa_num_layers=swa)


def _profile_available_gb(model: SglangModel, args: ResolvedArgs, pre_gb: float,
                          available_gb: float, profile: SglangProfile) -> float:
    """KVCacheConfigurator._profile_available_bytes before the Mamba carve-out: free memory
    after the weights less the runtime slack pre × (1 − mem_fraction_static) and the multimodal
    embedding cache (mm_runtime_reservation_gb, SGLANG_VLM_CACHE_SIZE_MB)."""
    slack_gb = pre_gb * (1 - args.mem_fraction_static)
    mm_gb = profile.vlm_cache_reservation_mb / 1024 if model.is_multimodal else 0.0
    return available_gb - slack_gb - mm_gb


def plan_sglang(target: ModelDescription, deployment: SglangDeployment, *, gpu: SglangGpu,
                memory: ProfiledMemory | KvBudget, draft: ModelDescription | None = None
                ) -> SglangResult:
    """What SGLang's start-up decides about its KV pools for this deployment (per GPU).

    SGLang's own start-up errors come back as `result.error` (`fits=False`), word for word;
    deployments kvplan does not model raise `UnsupportedError`."""
    profile = sglang_profile(deployment.sglang_version)
    model = sglang_model(target, profile)
    draft_model = sglang_draft(draft, profile) if draft is not None else None
    try:
        args = resolve(model, deployment, gpu, profile, draft_model)
    except StartupError as exc:
        return SglangResult(sglang_version=profile.version, fits=False, error=exc.error)
    resolved = _resolved(args)
    warnings = list(args.warnings)
    pp = args.pp_size
    if deployment.pp_size > 1 and args.speculative_algorithm == "DFLASH":
        raise UnsupportedError("DFLASH with --pp-size > 1 is refused by SGLang itself")
    per_stage = _per_stage(memory, pp)
    stages = [Stage(*pp_indices(model.num_hidden_layers, r, pp)) if pp > 1
              else Stage(0, model.num_hidden_layers) for r in range(pp)]
    drafts = draft_layers(model, draft_model, args)
    base: dict[str, Any] = dict(sglang_version=profile.version, resolved=resolved,
                mem_fraction_static=args.mem_fraction_static, page_size=args.page_size)
    try:
        stage_results = [_stage_budget(model, args, stage, drafts, profile, value, memory)
                         for stage, value in zip(stages, per_stage, strict=True)]
    except StartupError as exc:
        return SglangResult(**base, fits=False, error=exc.error, warnings=tuple(warnings))
    # _apply_token_constraints: the user cap, then the PP MIN all-reduce
    capacities = []
    for _conf, config, _carve, _avail in stage_results:
        cap = config.max_total_num_tokens
        if args.max_total_tokens is not None:
            if args.max_total_tokens > cap:
                warnings.append(profile.messages["max_total_tokens_above"].format(
                    max_total_tokens=args.max_total_tokens, profiled=cap))
            cap = min(cap, args.max_total_tokens)
        capacities.append(cap)
    tokens = min(capacities)
    finals = []
    try:
        for (conf, config, carve, avail) in stage_results:
            if tokens != config.max_total_num_tokens:
                config = conf.calculate_pool_sizes_from_max_tokens(tokens, args.page_size)
            finals.append((conf, config, carve, avail))
        conf, config, carve, avail = finals[0]
        mrr, mrr_warnings = resolve_max_num_reqs(config.max_total_num_tokens, args, carve,
                                                 profile)
        warnings += mrr_warnings
        if isinstance(conf, DSV4PoolConfigurator):
            config = conf.finalize(config, mrr)
    except StartupError as exc:
        return SglangResult(**base, fits=False, error=exc.error, warnings=tuple(warnings),
                            pool_configurator=conf.name, cell_size_bytes_per_token=conf.cell_size,
                            available_bytes=avail)
    rows = conf.rows(config)
    mamba_per_req = None
    if carve is not None and model.linear is not None:
        mamba_per_req = carve.per_req
        rows.append(PoolRow(pool="mamba", layers=len(model.linear.layer_ids),
                            bytes_per_request=carve.stage_per_req,
                            slots=carve.max_mamba_cache_size,
                            note=f"{mamba_ratio(args, profile)} state slots per request"))
    # the pools are sized and logged; an FP8 E4M3 cache the Triton kernels cannot compile for
    # on Ampere stops the server after that, at the CUDA-graph capture
    late = triton_fp8_kernel_error(args)
    return SglangResult(
        **base, fits=late is None, error=late, pool_configurator=conf.name,
        cell_size_bytes_per_token=conf.cell_size,
        available_bytes=avail, max_total_num_tokens=config.max_total_num_tokens,
        full_max_total_num_tokens=config.full_max_total_num_tokens,
        swa_max_total_num_tokens=config.swa_max_total_num_tokens, max_running_requests=mrr,
        max_mamba_cache_size=carve.max_mamba_cache_size if carve else None,
        mamba_cache_per_req_bytes=mamba_per_req,
        c4_max_total_num_tokens=config.c4_max_total_num_tokens or None,
        c128_max_total_num_tokens=config.c128_max_total_num_tokens or None,
        c4_state_pool_size=config.c4_state_pool_size or None,
        c128_state_pool_size=config.c128_state_pool_size or None,
        pools=tuple(rows),
        stages=tuple(SglangStage(pp_rank=r, start_layer=s.start_layer, end_layer=s.end_layer,
                                 available_bytes=f[3], cell_size_bytes_per_token=f[0].cell_size,
                                 max_total_num_tokens=f[1].max_total_num_tokens)
                     for r, (s, f) in enumerate(zip(stages, finals, strict=True))),
        warnings=tuple(dict.fromkeys(warnings)))


def _per_stage(memory: ProfiledMemory | KvBudget, pp: int) -> list[float | int]:
    values: tuple[float | int, ...] = (memory.available_gib if isinstance(memory, ProfiledMemory)
                                       else memory.budget_bytes)
    if len(values) == 1:
        return [values[0]] * pp
    if len(values) != pp:
        raise InputError(f"{len(values)} memory values for {pp} pipeline stages")
    return list(values)


def _stage_budget(model: SglangModel, args: ResolvedArgs, stage: Stage, draft: DraftLayers,
                  profile: SglangProfile, value: float | int,
                  memory: ProfiledMemory | KvBudget
                  ) -> tuple[Configurator, PoolConfig, MambaCarveOut | None, int]:
    """One stage: the budget in bytes, then configurator.calculate_pool_sizes."""
    conf = create_configurator(model, args, stage, draft, profile)
    carve: MambaCarveOut | None = None
    if isinstance(memory, ProfiledMemory):
        pre = memory.pre_model_load_gib
        rest = _profile_available_gb(model, args, pre, float(value), profile)
        if model.linear is not None:
            carve = handle_max_mamba_cache(rest, model.linear, args, profile,
                                           model.num_hidden_layers)
            rest = carve.rest_gb
        if rest <= 0:
            minimum = 1 - float(value) / pre
            raise StartupError(SglangError(
                type="ValueError", stage="profile",
                message=profile.messages["weights_leave_no_memory"].format(
                    mem_fraction_static=args.mem_fraction_static,
                    suggested=math.ceil(minimum * 1000) / 1000, minimum=minimum)))
        available = int(rest * GIB)
    else:
        available = int(value)
        kv_bytes = available
        if model.linear is not None:
            carve = handle_max_mamba_cache(available / GIB, model.linear, args, profile,
                                           model.num_hidden_layers)
            kv_bytes = int(carve.rest_gb * GIB)
        return conf, conf.calculate_pool_sizes(kv_bytes, args.page_size), carve, available
    config = conf.calculate_pool_sizes(available, args.page_size)
    return conf, config, carve, available


def resolve_max_num_reqs(token_capacity: int, args: ResolvedArgs, carve: MambaCarveOut | None,
                         profile: SglangProfile) -> tuple[int, list[str]]:
    """KVCacheConfigurator.resolve_max_num_reqs: --max-running-requests per DP worker (else
    capacity / context × 512 within [2048, 4096]), at most half the tokens, at most the Mamba
    state slots / ratio."""
    msgs = profile.messages
    warnings: list[str] = []
    estimated = int(token_capacity / args.context_len * 512)
    estimated = max(min(estimated, 4096), 2048)
    requested: int | None = None
    if args.max_running_requests is not None:
        requested = max(1, args.max_running_requests // args.attn_dp_size)
        max_num = min(requested, token_capacity // 2)
    else:
        max_num = min(estimated, token_capacity // 2)
    capped = False
    if carve is not None:
        ratio = mamba_ratio(args, profile)
        cap = carve.max_mamba_cache_size // ratio
        if cap < max_num:
            capped = True
            warnings.append(msgs["mrr_capped_by_mamba"].format(
                cap=cap, max_mamba_cache_size=carve.max_mamba_cache_size, ratio=ratio))
        max_num = min(max_num, cap)
        if max_num <= 0:
            raise StartupError(SglangError(
                type="RuntimeError", stage="max_running_requests",
                message=msgs["mamba_too_small"].format(
                    max_mamba_cache_size=carve.max_mamba_cache_size, ratio=ratio,
                    max_num_reqs=max_num)))
    if requested is not None and max_num < requested and not capped:
        warnings.append(msgs["mrr_reduced"].format(requested=requested, max_num_reqs=max_num))
    return max_num, warnings


def _resolved(a: ResolvedArgs) -> SglangResolved:
    return SglangResolved(
        gpu_total_memory_mib=a.gpu_total_memory_mib, chunked_prefill_size=a.chunked_prefill_size,
        cuda_graph_max_bs_decode=a.cuda_graph_max_bs_decode,
        prefill_cuda_graph=a.prefill_cuda_graph,
        prefill_cuda_graph_bs_count=a.prefill_cuda_graph_bs_count,
        reserved_mem_mib=a.reserved_mem_mib, mem_fraction_static=a.mem_fraction_static,
        mem_fraction_static_is_default=a.mem_fraction_static_is_default,
        vlm_adjusted=a.vlm_adjusted, attention_backend=a.attention_backend,
        page_size=a.page_size, kv_cache_dtype=a.kv_cache_dtype,
        kv_cache_torch_dtype=a.kv_cache_torch_dtype, context_len=a.context_len,
        max_running_requests=a.max_running_requests, attn_tp_size=a.attn_tp_size,
        attn_dp_size=a.attn_dp_size, swa_full_tokens_ratio=a.swa_full_tokens_ratio,
        mamba_full_memory_ratio=a.mamba_full_memory_ratio,
        mamba_extra_buffer=a.mamba_extra_buffer, speculative_algorithm=a.speculative_algorithm,
        speculative_num_steps=a.speculative_num_steps,
        speculative_eagle_topk=a.speculative_eagle_topk,
        speculative_num_draft_tokens=a.speculative_num_draft_tokens)


__all__ = ["create_configurator", "draft_layers", "mamba_cache_per_req", "plan_sglang",
           "resolve_max_num_reqs"]
