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


def for_evaluation(ev: Evaluation, req: Request, workloads: Sequence[Workload]
                   ) -> list[WorkloadResult]:
    """The workload answers for one evaluated deployment (check, --serve, fit)."""
    if ev.built.runner == "pooling":
        raise UnsupportedError("--workload models generation; this deployment runs the pooling "
                               "runner", hint="drop --workload, or plan it with --runner generate")
    dep = req.deployment
    return workload_results(
        ev.result, ev.planner_input, workloads, max_num_seqs=ev.built.max_num_seqs,
        enable_chunked_prefill=True if dep.enable_chunked_prefill is None
        else dep.enable_chunked_prefill, enable_prefix_caching=ev.built.enable_prefix_caching)


def with_workload(plan: Plan, results: list[WorkloadResult]) -> Plan:
    return plan.model_copy(update={"workload": results})


NOT_STARTED = ("--workload: not answered, vLLM does not start with this deployment (no KV "
               "cache to run requests on)")


def not_started(plan: Plan) -> Plan:
    """A plan that does not fit gets no workload answers, and says so."""
    return plan.model_copy(update={"notes": [*plan.notes, NOT_STARTED]})
