"""One deployment, end to end: hub → configs → weights → budget → specs → engine → `Plan`.

The glue every command shares (`check`, `ci`, `sweep`, `--serve`, `--from-log`). It reads files
only through `kvplan.sources.hub` (`request.resolve`); everything else is the pure modules in
order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import Field

from kvplan.analysis.plan import Plan, WeightsLimit, build_plan, refused_plan
from kvplan.analysis.weights_limit import BudgetAt, weights_limit
from kvplan.budget.kv_memory import (
    NO_KV_MEMORY_WARNING,
    BudgetMode,
    KvBudget,
    TermComparison,
    budget_from_log_gib,
    estimate_budget,
    explained_budget,
    explicit_budget,
)
from kvplan.engines.vllm.build import BuildResult, Deployment, build
from kvplan.engines.vllm.planner import EngineResult, PlannerInput, plan
from kvplan.errors import InputError, KvplanError, StartupError, UnsupportedError
from kvplan.frozen import Frozen
from kvplan.pipeline.request import Request, Resolved, catalogue_gpu, resolve, text_config
from kvplan.units import GiB

if TYPE_CHECKING:
    from kvplan.sources.vllm_log import LoggedMemory


def budget_for(req: Request, res: Resolved, built: BuildResult, gpu: Any) -> KvBudget:
    """Explicit, from a log, or estimated (weights + overhead terms) — the mode is always named."""
    if req.kv_cache_memory_bytes is not None:
        return explicit_budget(req.kv_cache_memory_bytes,
                               gpu_memory_utilization=req.gpu_memory_utilization)
    if req.available_kv_gib is not None:
        return budget_from_log_gib(req.available_kv_gib)
    if gpu is None and req.gpu_memory_bytes is None:
        raise InputError("no KV cache budget: give a GPU or the memory",
                         hint="pass --gpu NAME (see `kvplan gpus`), --gpu-memory SIZE, "
                              "--kv-cache-memory SIZE or --available-kv-gib X")
    dep = built.planner_input
    tp, pp = req.deployment.tensor_parallel_size, req.deployment.pipeline_parallel_size
    text = text_config(res.target_config, req.model)
    layers = text.get("num_hidden_layers")
    per_rank, how = weights_per_rank(req, res)
    moe = text.get("moe_intermediate_size")
    return estimate_budget(
        gpu if gpu is not None else int(req.gpu_memory_bytes or 0), req.gpu_memory_utilization,
        per_rank, vllm_version=dep.vllm_version or "0.34.0", tp=tp, pp=pp,
        hidden_size=int(text.get("hidden_size") or 0), vocab_size=int(text.get("vocab_size") or 0),
        num_layers=int(layers or 0), intermediate_size=text.get("intermediate_size"),
        moe_intermediate_size=moe, num_experts_per_tok=int(text.get("num_experts_per_tok") or 0),
        max_num_batched_tokens=dep.max_num_batched_tokens,
        max_num_seqs=built.max_num_seqs, batch_defaults_note=batch_defaults_note(req.deployment),
        enforce_eager=req.enforce_eager,
        gpu_name=getattr(gpu, "name", None), weights_how=how,
        gpu_memory_override=req.gpu_memory_bytes, pooling=built.runner == "pooling")


def batch_defaults_note(d: Deployment) -> str | None:
    """Where the scheduler's batch limits come from when the user left one to vLLM."""
    if d.max_num_batched_tokens is not None and d.max_num_seqs is not None:
        return None
    doubled = (", doubled by --performance-mode throughput" if d.performance_mode == "throughput"
               else "")
    return f"vLLM's `vllm serve` defaults for this GPU{doubled} (EngineArgs.get_batch_defaults)"


def weights_per_rank(req: Request, res: Resolved) -> tuple[int, str]:
    """(weight bytes on the fullest rank, how they were obtained): safetensors headers when
    `res` has them, else the config's parameter counts; + the draft's."""
    from kvplan.budget import weights
    tp, pp = req.deployment.tensor_parallel_size, req.deployment.pipeline_parallel_size
    text = text_config(res.target_config, req.model)
    # fields the config leaves to transformers' defaults (LLaVA's text_config) come from the
    # description the adapters built
    kv_heads = text.get("num_key_value_heads") or next(
        (layer.num_kv_heads for layer in res.target.layers if layer.num_kv_heads), None)
    w = res.memo.get("target_weights")  # fit and sweeps re-plan the same model
    if w is None:
        if res.weight_headers:
            layers = text.get("num_hidden_layers") or len(res.target.layers)
            w = weights.weight_bytes_from_safetensors(res.weight_headers, num_layers=layers,
                                                      num_kv_heads=kv_heads)
        else:
            w = weights.weight_bytes_from_config(res.target_config,
                                                 hf_quant_config=res.target_quant)
        res.memo["target_weights"] = w
    key = ("target_per_rank", tp, pp, req.deployment.pp_layer_partition, kv_heads)
    if key not in res.memo:
        res.memo[key] = w.max_per_rank_bytes(tp, pp_size=pp,
                                             pp_partition=req.deployment.pp_layer_partition,
                                             num_kv_heads=kv_heads)
    per_rank = res.memo[key]
    how = f"{w.method}{' (estimated)' if w.estimated else ''}, per rank at TP {tp}, PP {pp}"
    if res.draft is not None and res.draft_config is not None:
        dw = res.memo.get("draft_weights")
        if dw is None:
            dw = weights.weight_bytes_from_config(res.draft_config,
                                                  draft_method=res.draft.draft_method)
            res.memo["draft_weights"] = dw
        dtp = req.deployment.draft_tensor_parallel_size or tp
        if ("draft_per_rank", dtp) not in res.memo:
            res.memo[("draft_per_rank", dtp)] = dw.per_rank_bytes(dtp)
        per_rank += res.memo[("draft_per_rank", dtp)]
        how += f" + draft {dw.method} (estimated)"
    return per_rank, how


def _gib_bytes(gib: float) -> int:
    return int(round(gib * GiB))


def _estimate_beside(req: Request, res: Resolved, built: BuildResult, gpu: Any
                     ) -> KvBudget | None:
    """kvplan's own estimate of a given or logged budget (weights from the checkpoint's headers
    when they can be read), for the terms beside vLLM's; None without a GPU or its memory."""
    log = req.logged_memory
    total = req.gpu_memory_bytes
    if gpu is None and total is None and log is not None and log.total_gib:
        total = _gib_bytes(log.total_gib)
    if gpu is None and total is None:
        return None
    util = req.gpu_memory_utilization or (log.gpu_memory_utilization if log else None)
    est_req = replace(req, kv_cache_memory_bytes=None, available_kv_gib=None,
                      gpu_memory_bytes=total, gpu_memory_utilization=util, explain=False)
    try:
        est_res = resolve(est_req)  # now with the weight headers, when they can be read
        return budget_for(est_req, est_res, built, gpu)
    except KvplanError:
        return None


def _explain_budget(req: Request, res: Resolved, built: BuildResult, gpu: Any,
                    budget: KvBudget) -> KvBudget:
    """A given or logged budget, explained: requested memory − weights − the rest, from the log's
    memory lines or kvplan's estimate; and vLLM's logged terms beside kvplan's estimates."""
    log = req.logged_memory
    if budget.mode is BudgetMode.ESTIMATED or (log is None and budget.available_kv_bytes_per_gpu > 0):
        return budget
    est = _estimate_beside(req, res, built, gpu)
    est_terms = {t.name: t for t in est.breakdown} if est is not None else {}
    requested: tuple[int, str] | None = None
    if log is not None and log.requested_gib is not None:
        requested = (_gib_bytes(log.requested_gib),
                     f"{log.requested_gib} GiB as logged ('Desired GPU memory utilization is "
                     f"({log.gpu_memory_utilization}, {log.requested_gib} GiB)')")
    elif "requested memory" in est_terms:
        requested = (est_terms["requested memory"].num_bytes,
                     est_terms["requested memory"].how)
    deductions: list[tuple[str, int, str]] = []
    if log is not None and log.consumed_gib is not None:
        deductions.append(("weights + non-torch memory (logged)", _gib_bytes(log.consumed_gib),
                           f"{log.consumed_gib} GiB 'for consumed memory (weights + non-torch)'"))
    elif log is not None and log.weights_gib is not None:
        deductions.append(("model weights (logged)", _gib_bytes(log.weights_gib),
                           f"{log.weights_gib} GiB: 'Model loading took {log.weights_gib} GiB'"))
    elif "model weights" in est_terms:
        t = est_terms["model weights"]
        deductions.append(("model weights (kvplan)", -t.num_bytes, t.how))
    else:
        deductions.append(("model weights (kvplan)", *weights_per_rank(req, res)))
    if log is not None:
        for name, value in (("non-torch memory (logged)",
                             log.non_torch_gib if log.consumed_gib is None else None),
                            ("activation peak (logged)", log.peak_activation_gib),
                            ("CUDA graphs (logged)", log.cudagraph_gib)):
            if value is not None:
                deductions.append((name, _gib_bytes(value), f"{value} GiB as logged"))
    warnings = list(budget.warnings)
    if requested is not None:
        budget = explained_budget(budget, requested=requested, deductions=tuple(deductions))
    elif budget.available_kv_bytes_per_gpu <= 0:
        weights = next((f"{b / GiB:.2f} GiB per GPU ({how})" for n, b, how in deductions
                        if "weights" in n), None)
        warnings.append("no memory for the KV cache" + (f": the weights alone take {weights}"
                                                        if weights else "")
                        + "; give --gpu (or --gpu-memory) to see them beside the requested memory")
    comparison = _compare_with_log(log, est) if log is not None and est is not None else ()
    return budget.model_copy(update={"warnings": tuple(warnings), "log_comparison": comparison})


def _compare_with_log(log: LoggedMemory, est: KvBudget) -> tuple[TermComparison, ...]:
    """vLLM's logged memory terms beside kvplan's estimate of each (the rows the log has)."""
    terms = {t.name: -t.num_bytes for t in est.breakdown}
    terms["requested memory"] = -terms.get("requested memory", 0)
    rows = [("requested memory", log.requested_gib, terms.get("requested memory")),
            ("weights + non-torch memory", log.consumed_gib,
             terms.get("model weights", 0) + terms.get("non-torch memory", 0)),
            ("model weights", log.weights_gib, terms.get("model weights")),
            ("non-torch memory", log.non_torch_gib, terms.get("non-torch memory")),
            ("activation peak", log.peak_activation_gib, terms.get("activation peak")),
            ("CUDA graphs", log.cudagraph_gib, terms.get("CUDA-graph estimate")),
            ("available KV cache memory", log.available_kv_gib, est.available_kv_bytes_per_gpu)]
    return tuple(TermComparison(name=name, logged_bytes=_gib_bytes(logged),
                                estimated_bytes=estimated)
                 for name, logged, estimated in rows if logged is not None)


@dataclass(frozen=True)
class Evaluation:
    plan: Plan
    result: EngineResult
    built: BuildResult
    budget: KvBudget
    planner_input: PlannerInput
    dtype_warnings: tuple[str, ...] = ()  # the GPU serves a KV dtype dequantised, or refuses it
    kv_refusal: str | None = None  # no attention backend takes the KV dtype: vLLM does not start


def evaluate(req: Request, res: Resolved | None = None) -> Evaluation:
    """Plan one request. Pass `res` to reuse loaded configs (sweeps, what-ifs)."""
    if req.data_parallel_size < 1:
        raise InputError("--data-parallel-size must be ≥ 1")
    if req.gpu_memory_utilization is not None and not 0 < req.gpu_memory_utilization <= 1:
        raise InputError(f"gpu_memory_utilization must be in (0, 1], got {req.gpu_memory_utilization}")
    res = res or resolve(req)
    gpu, sm, gpu_note = catalogue_gpu(req)
    dep = req.deployment
    if gpu is not None:
        dep = replace(dep, sm=sm, gpu_name=gpu.name,
                      gpu_total_memory_bytes=req.gpu_memory_bytes or gpu.total_memory_bytes)
    elif req.gpu_memory_bytes is not None:
        dep = replace(dep, gpu_total_memory_bytes=req.gpu_memory_bytes)
    if dep.decode_context_parallel_size > 1 and any(
            layer.kind.value in ("sliding_window", "sliding_window_mla")
            for layer in res.target.layers):
        raise InputError("decode context parallelism does not support sliding-window layers "
                         "(vLLM asserts 'DCP not support sliding window.')",
                         hint="drop --decode-context-parallel-size for this model")
    built = build(res.target, dep, res.draft)
    # the GPU's KV-dtype gates come first (budget.kv_dtype_support: one table for check, gpus,
    # fit and sweep): dequantised is a warning, refused a plan that does not fit
    gates, kv_refusal = kv_dtype_gates(gpu, sm, built, use_mla=res.target.use_mla)
    budget = _explain_budget(req, res, built, gpu, budget_for(req, res, built, gpu))
    # an estimate with nothing left for the KV cache: the weights are the cause (one warning)
    tp, pp = req.deployment.tensor_parallel_size, req.deployment.pipeline_parallel_size
    search = budget_at(replace(req, diagnose_weights=False, explain=False), res) \
        if req.diagnose_weights else None  # fit turns the search off
    limit = weights_limit(budget, tp=tp, pp=pp, model=req.model, gpu=gpu,
                          quantized=res.target_quant is not None,
                          max_model_len=built.planner_input.max_model_len, budget_at=search)
    budget_warning = limit.summary if limit is not None else None
    extensible = bool(budget.extensible_kv_cache) and budget.mode is BudgetMode.ESTIMATED
    inp = replace(built.planner_input,
                  available_kv_bytes=(budget.available_kv_bytes_per_gpu,)
                  * len(built.planner_input.worker_specs),
                  enable_extensible_kv_cache=extensible,
                  gpu_memory_utilization=budget.gpu_memory_utilization if extensible else None)
    result = plan(inp)
    draft_layers = frozenset(p.name for p in built.layers if p.is_draft)
    explanation = None
    if req.explain and limit is not None:
        from kvplan.analysis.explain import Cause, Explanation

        explanation = Explanation(causes=[Cause(share_of_blocks_pct=None, text=limit.summary)],
                                  what_ifs=_weights_what_ifs(req, res, limit))
    elif req.explain:
        from kvplan.analysis.explain import explain_model

        explanation = explain_model(res.target, replace(dep, available_kv_bytes=budget
                                                        .available_kv_bytes_per_gpu),
                                    res.draft, result, built, inp, draft_layers,
                                    budget_per_gpu_fixed=budget.mode is not BudgetMode.ESTIMATED)
        if budget.mode is BudgetMode.ESTIMATED:
            from kvplan.analysis.explain import as_planned, changes_something

            base_row = as_planned(result)
            explanation = explanation.model_copy(update={"what_ifs": [
                *explanation.what_ifs, *(w for w in _budget_what_ifs(req, res, gpu, budget)
                                         if changes_something(w, base_row))]})
    if gpu is not None and gpu.is_amd:
        gpu_note = (gpu_note + "; " if gpu_note else "") + (
            "ROCm: backends are chosen by CUDA's rules here (ROCm's AITER/Triton backends may pick "
            "other kernel blocks)")
    budget_notes = [w for w in budget.warnings if limit is None or w != NO_KV_MEMORY_WARNING]
    notes = [*res.notes, *([gpu_note] if gpu_note else []), *built.warnings, *budget_notes,
             *([budget_warning] if budget_warning else [])]
    notes += [g for g in gates if g != kv_refusal]
    the_plan = build_plan(
        result, model=req.label or req.model, draft=req.draft or (
            f"{req.model} (MTP)" if dep.speculative_method == "mtp" else None),
        gpu=gpu.name if gpu is not None else None, budget_mode=_budget_label(budget),
        max_num_batched_tokens=built.max_num_batched_tokens, max_num_seqs=built.max_num_seqs,
        warnings=tuple(dict.fromkeys(notes)),
        draft_layers=draft_layers, explanation=explanation, budget=budget,
        data_parallel_size=req.data_parallel_size, weights_limit=limit)
    if kv_refusal is not None:
        the_plan = refused_kv_dtype(the_plan, built.kv_cache_dtype, kv_refusal)
    return Evaluation(plan=the_plan, result=result, built=built, budget=budget, planner_input=inp,
                      dtype_warnings=tuple(gates), kv_refusal=kv_refusal)


def kv_dtype_gates(gpu: Any, sm: int | None, built: BuildResult, *,
                   use_mla: bool) -> tuple[list[str], str | None]:
    """(warnings, the refusal or None) of the KV dtypes `built` uses on `gpu`, from the support
    table: a dequantised path is a warning, no backend at all is a refusal (vLLM fails at
    start-up). Below Ampere no release has a kernel: an error, nothing to plan."""
    if gpu is None:
        return [], None
    from kvplan.budget import kv_dtype_support as kvs

    version = built.planner_input.vllm_version
    gates: list[str] = []
    refusal = None
    for dt in dict.fromkeys((built.kv_cache_dtype,
                             built.draft_kv_cache_dtype or built.kv_cache_dtype)):
        reason = kvs.check_kv_dtype_supported(gpu, dt, vllm_version=version, use_mla=use_mla)
        if reason and (sm is None or sm < 80):
            raise UnsupportedError(reason, hint="pick another --kv-cache-dtype or GPU")
        if reason:
            refusal = refusal or reason
            gates.append(reason)
            continue
        answer = kvs.kv_dtype_support(gpu, dt, kvs.release(version), use_mla=use_mla)
        if answer is not None and answer.support is kvs.KvSupport.DEQUANTISED:
            gates.append(answer.text)
    return gates, refusal


def refused_kv_dtype(plan: Plan, kv_cache_dtype: str, reason: str) -> Plan:
    """A plan whose KV dtype no attention backend takes on its GPU: vLLM does not start
    (`CudaPlatform.get_attn_backend_cls` raises when every backend is invalid; its message then
    lists each backend's reason, summed up here by kvplan's)."""
    from kvplan.analysis.plan import FailureCause, Verdict

    return plan.model_copy(update={
        "verdict": Verdict.DOES_NOT_FIT, "fits": False, "failure_cause": FailureCause.OTHER,
        "error_type": "ValueError",
        "error_message": f"No valid attention backend found for cuda with kv_cache_dtype="
                         f"{kv_cache_dtype}. kvplan: {reason}",
        "estimated_max_model_len": [], "capacity_log_line": None, "max_concurrency": None,
        "kv_cache_size_tokens": None, "num_blocks": None, "total_max_concurrency": None})


def evaluate_plan(req: Request, res: Resolved | None = None) -> Plan:
    """`evaluate(req).plan`; a deployment vLLM refuses before it sizes the KV cache (a
    `StartupError`: length past the derived maximum, custom code without --trust-remote-code,
    a configuration vLLM rejects) is a plan too, that does not fit and says why — never only an
    error (check, explain, --serve, --from-log and ci report it like a capacity miss)."""
    try:
        res = res or resolve(req)
        return evaluate(req, res).plan
    except StartupError as exc:
        return refusal(req, exc, res)


def refusal(req: Request, exc: StartupError, res: Resolved | None) -> Plan:
    """The plan of a deployment vLLM refuses at start-up: what was asked, vLLM's error, why."""
    from kvplan.engines.vllm.profiles import get_profile
    from kvplan.models.resolution.max_len import derived_max_model_len

    dep = req.deployment
    gpu, _, gpu_note = catalogue_gpu(req)
    mml = dep.max_model_len
    if mml is None and res is not None:
        derived, _ = derived_max_model_len(res.target)
        mml = int(derived) if derived is not None else None
    budget_mode = "estimated"
    available: tuple[int, ...] = ()
    if req.kv_cache_memory_bytes is not None:
        budget_mode, available = "explicit (--kv-cache-memory)", (req.kv_cache_memory_bytes,)
    elif req.available_kv_gib is not None:
        budget_mode, available = "from a vLLM log line", (_gib_bytes(req.available_kv_gib),)
    elif gpu is None and req.gpu_memory_bytes is None:
        budget_mode = "none (vLLM refuses before it measures the memory)"
    notes = [*(res.notes if res is not None else ()), *([gpu_note] if gpu_note else [])]
    return refused_plan(
        model=req.label or req.model, draft=req.draft or (
            f"{req.model} (MTP)" if dep.speculative_method == "mtp" else None),
        vllm_version=get_profile(dep.vllm_version).version, with_fix=dep.with_fix,
        gpu=gpu.name if gpu is not None else None, budget_mode=budget_mode,
        available_kv_bytes=available, max_model_len=mml or 0,
        max_num_batched_tokens=dep.max_num_batched_tokens or 0,
        error_type=exc.error_type, error_message=exc.vllm_message, cause=exc.cause,
        hint=exc.hint, warnings=tuple(dict.fromkeys(notes)),
        data_parallel_size=req.data_parallel_size)


def budget_at(req: Request, res: Resolved) -> BudgetAt:
    """`req`'s estimated KV memory per GPU at another TP × PP (on another catalogue GPU), for
    the weights-limit search; None: that shape is invalid."""

    def at(tp: int, pp: int, gpu_name: str | None) -> int | None:
        r = replace(req, gpu=gpu_name or req.gpu,
                    deployment=replace(req.deployment, tensor_parallel_size=tp,
                                       pipeline_parallel_size=pp))
        g, sm, _ = catalogue_gpu(r)
        try:
            built = build(res.target, replace(r.deployment, sm=sm) if g is not None else r.deployment,
                          res.draft)
            return budget_for(r, res, built, g).available_kv_bytes_per_gpu
        except KvplanError:
            return None

    return at


def _what_if(change: str, r: Request, res: Resolved) -> Any:
    """One what-if row: `r` planned again (budget re-estimated), or why it is invalid."""
    from kvplan.analysis.explain import WhatIf

    try:
        p = evaluate(r, res).plan
    except KvplanError as exc:
        return WhatIf(change=change, fits=None, needed_gib=None, available_gib=None,
                      note=exc.message)
    return WhatIf(change=change, fits=p.fits, needed_gib=max(p.total_gib_needed, default=None),
                  available_gib=min(p.check_gib, default=None),
                  estimated_max_model_len=min(p.estimated_max_model_len, default=None))


def _weights_what_ifs(req: Request, res: Resolved, limit: WeightsLimit) -> list[Any]:
    """What-ifs that act on the weights: the fewest GPUs that hold them, a bigger GPU."""
    out = []
    base = replace(req, explain=False, diagnose_weights=False)
    if limit.min_num_gpus is not None:
        t, p = limit.min_tensor_parallel_size or 1, limit.min_pipeline_parallel_size or 1
        out.append(_what_if(f"-tp {t} -pp {p} ({limit.min_num_gpus} GPUs: the fewest whose share "
                            "of the weights leaves KV memory)",
                            replace(base, deployment=replace(req.deployment, tensor_parallel_size=t,
                                                             pipeline_parallel_size=p)), res))
    for name in limit.bigger_gpus[:2]:
        out.append(_what_if(f"--gpu {name!r}", replace(base, gpu=name), res))
    return out


def _budget_what_ifs(req: Request, res: Resolved, gpu: Any, budget: KvBudget) -> list[Any]:
    """More memory utilization, and the next larger GPUs of the catalogue (budget re-estimated)."""
    from kvplan.analysis.explain import WhatIf
    from kvplan.budget import hardware

    def one(change: str, r: Request) -> WhatIf:
        return _what_if(change, r, res)

    out = []
    tp2 = req.deployment.tensor_parallel_size * 2
    out.append(one(f"--tensor-parallel-size {tp2} (weights split, budget re-estimated)",
                   replace(req, explain=False, diagnose_weights=False,
                           deployment=replace(req.deployment, tensor_parallel_size=tp2))))
    # the given utilization, else the release default the estimate used
    util = req.gpu_memory_utilization or budget.gpu_memory_utilization
    if util is not None and util < 0.98:
        new = round(min(0.98, util + 0.05), 2)
        out.append(one(f"--gpu-memory-utilization {new}",
                       replace(req, gpu_memory_utilization=new, explain=False, diagnose_weights=False)))
    if gpu is not None and gpu.total_memory_bytes:
        bigger = sorted((g for g in hardware.list_gpus()
                         if g.vendor == gpu.vendor and g.total_memory_bytes
                         and g.total_memory_bytes > gpu.total_memory_bytes),
                        key=lambda g: g.total_memory_bytes or 0)[:2]
        for g in bigger:
            out.append(one(f"--gpu {g.name!r} ({(g.total_memory_bytes or 0) / 2**30:.0f} GiB)",
                           replace(req, gpu=g.name, explain=False, diagnose_weights=False)))
    return out


def _budget_label(b: KvBudget) -> str:
    return {BudgetMode.EXPLICIT: "explicit (--kv-cache-memory)",
            BudgetMode.FROM_LOG: "from a vLLM log line",
            BudgetMode.ESTIMATED: "estimated"}.get(b.mode, str(b.mode))


class LayerRow(Frozen):
    """One layer as kvplan understood it (`kvplan layers`)."""

    index: int
    name: str
    kind: str
    draft: bool
    heads_x_dim: str
    window: int | None
    dtype: str
    backend: str | None
    block_size_tokens: int
    page_bytes_per_token: str = Field(description="per rank; state layers: bytes per request")


def layer_rows(req: Request) -> tuple[list[LayerRow], tuple[str, ...]]:
    """The per-layer specs `evaluate` would plan, one row each."""
    from kvplan.engines.vllm.specs import AttentionSpec, MambaSpec, bytes_per_token

    res = resolve(req)
    gpu, sm, note = catalogue_gpu(req)
    dep = replace(req.deployment, sm=sm) if gpu is not None else req.deployment
    built = build(res.target, dep, res.draft)
    rows = []
    for i, lp in enumerate(built.layers):
        spec = lp.spec
        if isinstance(spec, AttentionSpec):
            heads = f"{spec.num_kv_heads} × {spec.head_size}"
            if spec.head_size_v not in (spec.head_size, None, 0):  # 0: MLA, no separate V
                heads += f"/{spec.head_size_v}"
            per_tok = str(bytes_per_token(spec))
            dtype = spec.dtype if spec.kv_quant_mode.value == "NONE" else \
                f"{spec.dtype} ({spec.kv_quant_mode.value})"
            window = getattr(spec, "sliding_window", None) or getattr(
                spec, "attention_chunk_size", None)
        else:
            assert isinstance(spec, MambaSpec)
            heads = " + ".join("×".join(map(str, s)) for s in spec.shapes)
            per_tok = f"{spec.unpadded_page_size_bytes:,} state"
            dtype = "/".join(spec.dtypes)
            window = None
        rows.append(LayerRow(index=i, name=lp.name, kind=lp.kind, draft=lp.is_draft,
                             heads_x_dim=heads, window=window, dtype=dtype, backend=lp.backend,
                             block_size_tokens=spec.block_size, page_bytes_per_token=per_tok))
    notes = (*res.notes, *([note] if note else []), *built.warnings)
    return rows, tuple(dict.fromkeys(notes))


def log_notes(log: Any, ev: Evaluation) -> list[str]:
    """Where the memory went according to a vLLM log, next to what kvplan computes."""
    from kvplan.units import format_gib

    notes = []
    if log.model_loading_gib:
        notes.append(f"log: model loading took {max(log.model_loading_gib):.2f} GiB per GPU")
    for m in log.memory_summaries[:1]:
        notes.append(f"log: {m.total_gib:.2f} GiB total × {m.gpu_memory_utilization} = "
                     f"{m.requested_gib:.2f} GiB requested; {m.consumed_gib:.2f} GiB consumed, "
                     f"activation peak {m.peak_activation_gib:.2f} GiB, CUDA graphs "
                     f"{m.cudagraph_gib:.2f} GiB")
    if log.available_kv_cache_gib:
        notes.append("log: Available KV cache memory "
                     + " / ".join(f"{g} GiB" for g in log.available_kv_cache_gib)
                     + " (the budget planned here)")
    err = log.capacity_error
    p = ev.plan
    if err is not None and err.needed_gib is not None and any(
            abs(float(x) - err.needed_gib) <= 0.0051 for x in p.total_gib_needed):
        # a figure that differs is a warning (analysis.log_agreement), not a note
        notes.append(f"log: vLLM needed {err.needed_gib} GiB vs {err.available_gib} GiB; kvplan's "
                     f"{max(p.total_gib_needed)} GiB matches it")
    if log.kv_cache_size_tokens and p.kv_cache_size_tokens is not None:
        notes.append(f"log: GPU KV cache size {log.kv_cache_size_tokens[0]:,} tokens; kvplan "
                     f"computes {p.kv_cache_size_tokens:,}")
    if ev.budget is not None and log.available_kv_cache_gib:
        notes.append(f"kvplan budget {format_gib(ev.budget.available_kv_bytes_per_gpu)} GiB "
                     "from the log line")
    return notes
