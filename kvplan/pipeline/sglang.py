"""One SGLang deployment, end to end: hub → configs → weights → SGLang's memory profile →
kvplan.engines.sglang → `Plan` (engine "sglang"), with what-ifs and a start-up log's numbers
beside kvplan's. The glue the API's `engine="sglang"` and the CLI's `--engine sglang` use; the
steps live in `kvplan.pipeline.sglang_run`."""

from __future__ import annotations

from kvplan.analysis.plan import Plan
from kvplan.analysis.sglang_plan import build_sglang_plan
from kvplan.pipeline.sglang_run import (
    SglangInputs,
    SglangRequest,
    budget_breakdown,
    plan_at,
    resolve_sglang,
    sglang_gpu_of,
    sglang_launch_line,
)

__all__ = ["SglangInputs", "SglangRequest", "evaluate_sglang", "plan_at", "resolve_sglang",
           "sglang_launch_line"]


def evaluate_sglang(req: SglangRequest, inputs: SglangInputs | None = None) -> Plan:
    """The plan of one SGLang deployment (with what-ifs when `req.explain`, and a log's numbers
    beside kvplan's when `req.log`)."""
    inputs = inputs or resolve_sglang(req)
    gpu, gpu_name, gpu_notes = sglang_gpu_of(req)
    result, mem = plan_at(req, inputs, gpu=gpu)
    dep = req.deployment
    explanation = None
    if req.explain:
        from kvplan.analysis.explain import Explanation
        from kvplan.analysis.sglang_plan import sglang_causes
        from kvplan.pipeline.sglang_explain import sglang_what_ifs

        explanation = Explanation(causes=sglang_causes(result),
                                  what_ifs=sglang_what_ifs(req, inputs, gpu, result))
    log_check = None
    if req.log is not None:
        from kvplan.pipeline.sglang_logs import compare_with_log

        log_check = compare_with_log(req, inputs, gpu, result, mem)
    budget = budget_breakdown(mem, result, gpu) if result.available_bytes is not None else None
    return build_sglang_plan(
        result, model=req.label or req.model, draft=req.draft, gpu=gpu_name,
        budget_mode=mem.mode, data_parallel_size=1 if dep.enable_dp_attention else dep.dp_size,
        context_length=dep.context_length, concurrency=req.concurrency, budget=budget,
        explanation=explanation, log_check=log_check,
        notes=(*inputs.notes, *gpu_notes, *mem.notes))
