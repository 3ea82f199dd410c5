"""The steps of one SGLang deployment: the request, its loaded model (`resolve_sglang`: the
configs read once), the GPU and the memory SGLang's profile sees, and `plan_at`, which plans the
same model under other flags (the plan, what-ifs, fit shapes, sweep points), each through the
engine; the `launch_server` line of a deployment. `kvplan.pipeline.sglang` assembles the plan."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kvplan.engines.sglang.deployment import (
    KvBudget,
    Platform,
    ProfiledMemory,
    SglangDeployment,
    SglangGpu,
)
from kvplan.engines.sglang.result import SglangResult
from kvplan.engines.sglang.sizing import plan_sglang
from kvplan.errors import InputError
from kvplan.units import GiB

if TYPE_CHECKING:
    from kvplan.budget.kv_memory import KvBudget as PlanBudget
    from kvplan.models.description import ModelDescription
    from kvplan.pipeline.request import Request, Resolved
    from kvplan.sources.sglang_log import SglangLog

# SGLang's --speculative-algorithm → the draft-head reader kvplan uses for the draft's config
_DRAFT_METHOD = {"EAGLE": "eagle", "NEXTN": "eagle", "EAGLE3": "eagle3", "DFLASH": "dflash"}


@dataclass(frozen=True)
class SglangRequest:
    """What a user says about one SGLang deployment."""

    model: str
    deployment: SglangDeployment
    revision: str | None = None
    draft: str | None = None  # --speculative-draft-model-path
    gpu: str | None = None
    gpu_memory_mib: float | None = None  # nvidia-smi memory.total, overrides the catalogue
    kv_budget_bytes: int | None = None  # kvplan's --kv-cache-memory: the pools' budget itself
    pre_model_load_gib: float | None = None  # a logged "Load weight begin. avail mem=X GB"
    post_load_gib: float | None = None  # a logged "Load weight end. … avail mem=Y GB"
    hf_overrides: str | None = None
    concurrency: int = 1  # requests of the context length to hold at once
    explain: bool = False
    log: SglangLog | None = None  # a start-up log to set beside kvplan's numbers
    label: str | None = None


@dataclass(frozen=True)
class SglangInputs:
    """The loaded model (and draft) of a request: read once, re-planned under other flags."""

    res: Resolved  # the configs and descriptions (vLLM's loader; weights memoised per TP/PP)
    draft: ModelDescription | None  # the draft as SGLang plans it
    standalone_weights: Any = None  # a STANDALONE draft's WeightBytes (a whole second model)
    notes: tuple[str, ...] = ()
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)


def _loader_request(req: SglangRequest, dep: SglangDeployment | None = None) -> Request:
    from kvplan.engines.vllm.build import Deployment
    from kvplan.pipeline.request import Request

    d = dep or req.deployment
    spec = (d.speculative_algorithm or "").upper()
    standalone = spec == "STANDALONE"
    return Request(model=req.model, revision=req.revision,
                   draft=None if standalone else req.draft,
                   deployment=Deployment(speculative_method=_DRAFT_METHOD.get(spec)
                                         if req.draft else None,
                                         tensor_parallel_size=d.tp_size,
                                         pipeline_parallel_size=d.pp_size),
                   kv_cache_memory_bytes=req.kv_budget_bytes, hf_overrides=req.hf_overrides,
                   # SGLang's config.json reading is what kvplan mirrors for it; vLLM's
                   # Mistral-format reading (params.json) is vLLM's alone
                   config_format="hf", diagnose_weights=False)


def resolve_sglang(req: SglangRequest) -> SglangInputs:
    """Read the target's (and the draft's) configs."""
    from kvplan import models as config
    from kvplan.pipeline.request import resolve
    from kvplan.sources import hub

    res = resolve(_loader_request(req))
    draft = res.draft
    standalone = None
    if (req.deployment.speculative_algorithm or "").upper() == "STANDALONE" and req.draft:
        # a whole model as the draft (STANDALONE): read as a target, its weights on each rank
        from kvplan.budget import weights

        files = hub.load_model_files(req.draft)
        draft = config.describe_model(files.config, source=req.draft,
                                      hf_quant_config=files.hf_quant_config)
        standalone = weights.weight_bytes_from_config(files.config,
                                                      hf_quant_config=files.hf_quant_config)
    return SglangInputs(res=res, draft=draft, standalone_weights=standalone, notes=res.notes)


def sglang_gpu_of(req: SglangRequest) -> tuple[SglangGpu, str | None, list[str]]:
    """The GPU as SGLang sees it (catalogue nvidia-smi total, or --gpu-memory), its name."""
    from kvplan.budget import hardware
    from kvplan.budget.sglang_memory import sglang_gpu

    if req.gpu is not None:
        g = hardware.lookup_gpu(req.gpu)
        return sglang_gpu(g, total_memory_mib=req.gpu_memory_mib), g.name, []
    if req.gpu_memory_mib is not None:
        return (SglangGpu(total_memory_mib=req.gpu_memory_mib, platform=Platform.SM90), None,
                ["no --gpu: SGLang's defaults taken for a Hopper (sm90) GPU"])
    raise InputError("no GPU for SGLang's memory defaults: give a GPU",
                     hint="pass --gpu NAME (see `kvplan gpus`)")


def _weights_per_gpu(req: SglangRequest, inputs: SglangInputs, dep: SglangDeployment
                     ) -> tuple[int, str]:
    from kvplan.pipeline.deploy import weights_per_rank

    per_rank, how = weights_per_rank(_loader_request(req, dep), inputs.res)
    if inputs.standalone_weights is not None:
        per_rank += inputs.standalone_weights.per_rank_bytes(dep.tp_size)
        how += " + the STANDALONE draft model per rank"
    return per_rank, how


@dataclass(frozen=True)
class SglangMemory:
    memory: ProfiledMemory | KvBudget
    mode: str  # estimated | explicit | from_log
    notes: tuple[str, ...]
    weights_bytes: int | None = None
    pre_model_load_gib: float | None = None


def memory_for(req: SglangRequest, inputs: SglangInputs, gpu: SglangGpu,
               dep: SglangDeployment) -> SglangMemory:
    """What SGLang's profile sees: the given pool budget, a log's free memory, or kvplan's
    estimate (catalogue total less the CUDA context, less the weights per GPU)."""
    from kvplan.budget.sglang_memory import PRE_MODEL_LOAD_OVERHEAD_GIB, profiled_memory

    if req.kv_budget_bytes is not None:
        return SglangMemory(memory=KvBudget(budget_bytes=(req.kv_budget_bytes,)),
                            mode="explicit", notes=())
    if req.post_load_gib is not None and req.pre_model_load_gib is not None:
        mem = ProfiledMemory(pre_model_load_gib=req.pre_model_load_gib,
                             available_gib=(req.post_load_gib,) * dep.pp_size)
        return SglangMemory(memory=mem, mode="from_log",
                            notes=(f"SGLang memory profile from the log: {req.pre_model_load_gib}"
                                   f" GB free before the weights, {req.post_load_gib} GB after",),
                            pre_model_load_gib=req.pre_model_load_gib)
    per_rank, how = _weights_per_gpu(req, inputs, dep)
    est = profiled_memory(gpu, (per_rank,) * dep.pp_size,
                          pre_model_load_gib=req.pre_model_load_gib)
    pre_how = ("logged (Load weight begin)" if req.pre_model_load_gib is not None else
               f"nvidia-smi total {gpu.total_memory_mib:,.0f} MiB less "
               f"{PRE_MODEL_LOAD_OVERHEAD_GIB} GiB CUDA context, estimated")
    return SglangMemory(memory=est.memory, mode="estimated",
                        notes=(f"SGLang memory profile: free before the weights "
                               f"{est.pre_model_load_gib:.2f} GB ({pre_how}); weights per GPU "
                               f"{per_rank / GiB:.2f} GiB ({how})",),
                        weights_bytes=per_rank, pre_model_load_gib=est.pre_model_load_gib)


def budget_breakdown(mem: SglangMemory, result: SglangResult, gpu: SglangGpu) -> PlanBudget:
    """The pool budget as terms (kvplan's `KvBudget`): free before the weights, the weights,
    SGLang's static reserve (1 − mem_fraction_static) × that free memory, the rest."""
    from kvplan.budget.kv_memory import BudgetMode, BudgetTerm
    from kvplan.budget.kv_memory import KvBudget as PlanKvBudget

    avail = result.available_bytes or 0
    total = int(gpu.total_memory_mib * 2**20)
    if isinstance(mem.memory, KvBudget):
        return PlanKvBudget(mode=BudgetMode.EXPLICIT, available_kv_bytes_per_gpu=avail,
                            breakdown=(BudgetTerm(name="--kv-cache-memory", num_bytes=avail,
                                                  how="the pools' budget as given (no profile)"),),
                            total_memory_bytes=total)
    pre = mem.memory.pre_model_load_gib
    post = min(mem.memory.available_gib)
    terms = [BudgetTerm(name="free before the weights", num_bytes=int(pre * GiB),
                        how="logged" if mem.mode == "from_log" else
                        "nvidia-smi total less the CUDA context (estimate)")]
    terms.append(BudgetTerm(name="weights per GPU", num_bytes=-int((pre - post) * GiB),
                            how="logged (free before − free after)" if mem.mode == "from_log"
                            else "estimate"))
    mfs = result.mem_fraction_static
    if mfs is not None:
        reserve = int(pre * (1 - mfs) * GiB)
        rest = avail - (terms[0].num_bytes + terms[1].num_bytes - reserve)
        carve = abs(rest) > 2**20
        if not carve:
            reserve -= rest  # the bytes SGLang's int() dropped: the terms add up exactly
        terms.append(BudgetTerm(name="static reserve", num_bytes=-reserve,
                                how=f"(1 − mem_fraction_static {mfs:g}) × free before the "
                                    "weights"))
        if carve:
            what = ("the Mamba / linear-attention state pool" if result.max_mamba_cache_size
                    else "SGLang's multimodal reservation")
            terms.append(BudgetTerm(name=what, num_bytes=rest, how="SGLang's carve-out"))
    mode = BudgetMode.FROM_LOG if mem.mode == "from_log" else BudgetMode.ESTIMATED
    return PlanKvBudget(mode=mode, available_kv_bytes_per_gpu=avail, breakdown=tuple(terms),
                        total_memory_bytes=total)


def plan_at(req: SglangRequest, inputs: SglangInputs, dep: SglangDeployment | None = None,
            gpu: SglangGpu | None = None) -> tuple[SglangResult, SglangMemory]:
    """SGLang's sizing of the loaded model under `dep` (default: the request's flags)."""
    d = dep or req.deployment
    g = gpu or sglang_gpu_of(req)[0]
    mem = memory_for(req, inputs, g, d)
    return plan_sglang(inputs.res.target, d, gpu=g, memory=mem.memory, draft=inputs.draft), mem


def with_flags(req: SglangRequest, **changes: Any) -> SglangRequest:
    """The request with some SGLang flags changed."""
    return replace(req, deployment=req.deployment.model_copy(update=changes))


def sglang_launch_line(model: str, dep: SglangDeployment, *, draft: str | None = None,
                       dp_size: int | None = None) -> str:
    """The `python -m sglang.launch_server …` line of a deployment: the flags that differ from
    SGLang's defaults, under SGLang's names."""
    import shlex

    words = ["python", "-m", "sglang.launch_server", "--model-path", shlex.quote(model)]
    dp = dp_size if dp_size is not None else dep.dp_size
    for flag, value, default in (
            ("--context-length", dep.context_length, None), ("--tp-size", dep.tp_size, 1),
            ("--pp-size", dep.pp_size, 1), ("--dp-size", dp, 1),
            ("--kv-cache-dtype", dep.kv_cache_dtype, "auto"),
            ("--mem-fraction-static", dep.mem_fraction_static, None),
            ("--max-total-tokens", dep.max_total_tokens, None),
            ("--page-size", dep.page_size, None),
            ("--max-running-requests", dep.max_running_requests, None),
            ("--chunked-prefill-size", dep.chunked_prefill_size, None),
            ("--cuda-graph-max-bs-decode", dep.cuda_graph_max_bs_decode, None),
            ("--attention-backend", dep.attention_backend, None),
            ("--swa-full-tokens-ratio", dep.swa_full_tokens_ratio, None),
            ("--mamba-full-memory-ratio", dep.mamba_full_memory_ratio, None),
            ("--max-mamba-cache-size", dep.max_mamba_cache_size, None),
            ("--speculative-algorithm", dep.speculative_algorithm, None),
            ("--speculative-draft-model-path", draft if dep.speculative_algorithm else None,
             None),
            ("--speculative-num-steps", dep.speculative_num_steps, None),
            ("--speculative-eagle-topk", dep.speculative_eagle_topk, None),
            ("--speculative-num-draft-tokens", dep.speculative_num_draft_tokens, None),
            ("--speculative-draft-kv-cache-dtype", dep.speculative_draft_kv_cache_dtype, None)):
        if value is not None and value != default:
            words += [flag, shlex.quote(str(value))]
    if dep.enable_dp_attention:
        words.append("--enable-dp-attention")
    for flag, on in (("--disable-radix-cache", dep.disable_radix_cache),
                     ("--disable-overlap-schedule", dep.disable_overlap_schedule),
                     ("--disable-cuda-graph", dep.disable_cuda_graph)):
        if on:
            words.append(flag)
    return " ".join(words)
