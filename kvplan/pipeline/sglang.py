"""One SGLang deployment, end to end: hub → configs → weights → SGLang's memory profile →
kvplan.engines.sglang → `Plan` (engine "sglang"). The glue the API's `engine="sglang"` uses."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.analysis.plan import Plan
from kvplan.analysis.sglang_plan import build_sglang_plan
from kvplan.engines.sglang.deployment import (
    KvBudget,
    Platform,
    ProfiledMemory,
    SglangDeployment,
    SglangGpu,
)
from kvplan.engines.sglang.sizing import plan_sglang
from kvplan.errors import InputError

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
    hf_overrides: str | None = None


def evaluate_sglang(req: SglangRequest) -> Plan:
    from kvplan import models as config
    from kvplan.budget import hardware
    from kvplan.budget.sglang_memory import profiled_memory, sglang_gpu
    from kvplan.engines.vllm.build import Deployment
    from kvplan.pipeline.deploy import Request, resolve, weights_per_rank
    from kvplan.sources import hub

    dep = req.deployment
    spec = (dep.speculative_algorithm or "").upper()
    standalone = spec == "STANDALONE"
    vreq = Request(model=req.model, revision=req.revision,
                   draft=None if standalone else req.draft,
                   deployment=Deployment(speculative_method=_DRAFT_METHOD.get(spec)
                                         if req.draft else None,
                                         tensor_parallel_size=dep.tp_size,
                                         pipeline_parallel_size=dep.pp_size),
                   kv_cache_memory_bytes=req.kv_budget_bytes, hf_overrides=req.hf_overrides,
                   diagnose_weights=False)
    res = resolve(vreq)
    draft = res.draft
    notes = list(res.notes)
    extra_weights = 0
    if standalone and req.draft is not None:
        # a whole model as the draft (STANDALONE): read as a target, its weights on each rank
        from kvplan.budget import weights

        files = hub.load_model_files(req.draft)
        draft = config.describe_model(files.config, source=req.draft,
                                      hf_quant_config=files.hf_quant_config)
        extra_weights = weights.weight_bytes_from_config(
            files.config, hf_quant_config=files.hf_quant_config).per_rank_bytes(dep.tp_size)
    gpu_name = None
    if req.gpu is not None:
        g = hardware.lookup_gpu(req.gpu)
        gpu = sglang_gpu(g, total_memory_mib=req.gpu_memory_mib)
        gpu_name = g.name
    elif req.gpu_memory_mib is not None:
        gpu = SglangGpu(total_memory_mib=req.gpu_memory_mib, platform=Platform.SM90)
        notes.append("no --gpu: SGLang's defaults taken for a Hopper (sm90) GPU")
    else:
        raise InputError("no GPU for SGLang's memory defaults: give a GPU",
                         hint="pass --gpu NAME (see `kvplan gpus`)")
    memory: ProfiledMemory | KvBudget
    if req.kv_budget_bytes is not None:
        memory = KvBudget(budget_bytes=(req.kv_budget_bytes,))
        mode = "explicit"
    else:
        per_rank, how = weights_per_rank(vreq, res)
        est = profiled_memory(gpu, (per_rank + extra_weights,) * dep.pp_size,
                              pre_model_load_gib=req.pre_model_load_gib)
        memory = est.memory
        notes.append(f"SGLang memory profile: {est.how} ({how})")
        mode = "estimated"
    result = plan_sglang(res.target, dep, gpu=gpu, memory=memory, draft=draft)
    return build_sglang_plan(result, model=req.model, draft=req.draft, gpu=gpu_name,
                             budget_mode=mode,
                             data_parallel_size=1 if dep.enable_dp_attention else dep.dp_size,
                             context_length=dep.context_length, notes=tuple(notes))
