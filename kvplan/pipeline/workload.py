"""--workload: the planned KV cache run through vLLM's scheduler (kvplan/engine/workload.py)
for each workload, attached to the plan."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvplan.analysis.plan import Plan
from kvplan.analysis.workload import WorkloadResult, workload_result
from kvplan.engines.vllm.planner import EngineResult, PlannerInput
from kvplan.engines.vllm.workload import Workload, estimate, rules_for_plan
from kvplan.errors import UnsupportedError

if TYPE_CHECKING:
    from kvplan.pipeline.deploy import Evaluation, Request


def workload_results(result: EngineResult, inp: PlannerInput, workloads: Sequence[Workload], *,
                     max_num_seqs: int, enable_chunked_prefill: bool,
                     enable_prefix_caching: bool, reserve_full_isl: bool = True
                     ) -> list[WorkloadResult]:
    """One WorkloadResult per workload on this plan's KV cache."""
    rules, groups = rules_for_plan(result, inp, max_num_seqs=max_num_seqs,
                                   enable_chunked_prefill=enable_chunked_prefill,
                                   enable_prefix_caching=enable_prefix_caching,
                                   reserve_full_isl=reserve_full_isl)
    return [workload_result(estimate(rules, groups, w), rules, result, w) for w in workloads]


def default_max_num_seqs(ev: Evaluation, req: Request) -> int:
    """--max-num-seqs, else vLLM's default for the GPU and release (EngineArgs.get_batch_defaults:
    total memory, device name, compute capability)."""
    from kvplan.engines.vllm.build.batch import get_batch_defaults
    from kvplan.engines.vllm.profiles import get_profile
    from kvplan.pipeline.request import catalogue_gpu as _gpu

    if req.deployment.max_num_seqs is not None:
        return req.deployment.max_num_seqs
    gpu, sm, _ = _gpu(req)
    total = req.gpu_memory_bytes or (gpu.total_memory_bytes if gpu is not None else 0) or 0
    return get_batch_defaults(total, gpu.name if gpu is not None else None, sm=sm,
                              profile=get_profile(req.deployment.vllm_version))[1]


def for_evaluation(ev: Evaluation, req: Request, workloads: Sequence[Workload]
                   ) -> list[WorkloadResult]:
    """The workload answers for one evaluated deployment (check, --serve, fit)."""
    if ev.built.runner == "pooling":
        raise UnsupportedError("--workload models generation; this deployment runs the pooling "
                               "runner", hint="drop --workload, or plan it with --runner generate")
    dep = req.deployment
    return workload_results(
        ev.result, ev.planner_input, workloads, max_num_seqs=default_max_num_seqs(ev, req),
        enable_chunked_prefill=True if dep.enable_chunked_prefill is None
        else dep.enable_chunked_prefill, enable_prefix_caching=ev.built.enable_prefix_caching)


def with_workload(plan: Plan, results: list[WorkloadResult]) -> Plan:
    return plan.model_copy(update={"workload": results})


NOT_STARTED = ("--workload: not answered, vLLM does not start with this deployment (no KV "
               "cache to run requests on)")


def not_started(plan: Plan) -> Plan:
    """A plan that does not fit gets no workload answers, and says so."""
    return plan.model_copy(update={"notes": [*plan.notes, NOT_STARTED]})
