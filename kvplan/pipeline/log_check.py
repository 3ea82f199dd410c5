"""`kvplan check --from-log`: plan what a vLLM start-up log describes and hold the plan against
every figure the log states (`analysis.log_agreement`): a disagreement is a `warning:` and an
entry of `disagreements`, never a quiet note."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from kvplan.analysis.log_agreement import compare_with_log, disagreement_warning
from kvplan.analysis.plan import Plan
from kvplan.pipeline.batch import _norm, capacity_error_budget_gib
from kvplan.pipeline.deploy import Evaluation, Request, Resolved, evaluate
from kvplan.units import GiB


def budget_is_capacity_error(log: Any, source: Mapping[str, str]) -> bool:
    """The plan's budget is the capacity error's available memory (see `log_entry`)."""
    return source.get("available_kv_gib") == "log" and capacity_error_budget_gib(log) is not None


def evaluate_log(req: Request, log: Any, source: Mapping[str, str],
                 res: Resolved | None = None) -> Evaluation:
    """`evaluate(req)`; when the budget is the capacity error's "available KV cache memory",
    which vLLM states after holding back the null block (`kv_cache_planning.
    check_enough_kv_cache_memory` plans against available − one pool block), plan again with
    that block added back, so the check sees what vLLM's did. `res`: the request resolved."""
    ev = evaluate(req, res)
    if log is None or req.available_kv_gib is None or not budget_is_capacity_error(log, source):
        return ev
    pool = max(ev.plan.pool_bytes_per_block, default=0)
    if not pool:
        return ev
    return evaluate(replace(req, available_kv_gib=req.available_kv_gib + pool / GiB), res)


def with_log_findings(plan: Plan, log: Any, *, source: Mapping[str, str],
                      log_keys: Sequence[str], unmodelled: Sequence[str]) -> Plan:
    """The plan with the log's disagreements as warnings and under `disagreements`."""
    found = compare_with_log(log, plan, provenance=source,
                             log_keys=[_norm(k) for k in log_keys],
                             unmodelled=unmodelled,
                             budget_from_capacity_error=budget_is_capacity_error(log, source))
    if not found:
        return plan
    return plan.model_copy(update={"disagreements": found,
                                   "warnings": [*plan.warnings, disagreement_warning(found)]})
