"""An SGLang pool sizing (`SglangResult`) as a `Plan` (`engine: "sglang"`): the shared fields a
report or CI reads (verdict, tokens, concurrency at the context length, the error), SGLang's own
numbers under SGLang's names in `plan.sglang`."""

from __future__ import annotations

from kvplan.analysis.plan import FailureCause, Plan, Verdict
from kvplan.engines.sglang.result import SglangResult


def _cause(result: SglangResult) -> FailureCause | None:
    if result.error is None:
        return None
    msg = result.error.message
    if msg.startswith("Loaded weights leave no GPU memory"):
        return FailureCause.WEIGHTS
    if msg.startswith("Not enough memory."):
        return FailureCause.NO_KV_MEMORY
    if result.error.stage in ("pool_sizing", "max_running_requests", "profile"):
        return FailureCause.KV_CACHE
    return FailureCause.OTHER


def capacity_log_line(result: SglangResult) -> str | None:
    """The scheduler's start-up line (managers/scheduler.py), without its live free memory."""
    r = result.resolved
    if r is None or result.max_total_num_tokens is None:
        return None
    return (f"max_total_num_tokens={result.max_total_num_tokens}, "
            f"chunked_prefill_size={r.chunked_prefill_size}, "
            f"max_running_requests={result.max_running_requests}, "
            f"context_len={r.context_len}")


def build_sglang_plan(result: SglangResult, *, model: str, draft: str | None = None,
                      gpu: str | None = None, budget_mode: str = "estimated",
                      data_parallel_size: int = 1, context_length: int | None = None,
                      warnings: tuple[str, ...] = (), notes: tuple[str, ...] = ()) -> Plan:
    r = result.resolved
    context = r.context_len if r is not None else (context_length or 0)
    tokens = result.max_total_num_tokens
    concurrency = round(tokens / context, 2) if tokens and context else None
    err = result.error
    return Plan(
        engine="sglang", model=model, draft=draft, vllm_version=None, with_fix=False, gpu=gpu,
        budget_mode=budget_mode,
        available_kv_bytes=[result.available_bytes] if result.available_bytes is not None else [],
        max_model_len=context, max_model_len_after_planning=context,
        max_num_batched_tokens=r.chunked_prefill_size if r is not None else 0,
        max_in_flight_tokens=tokens or 0,
        verdict=Verdict.FITS if result.fits else Verdict.DOES_NOT_FIT, fits=result.fits,
        groups=[], num_groups=0, pool_bytes_per_block=[], total_blocks_per_request=0,
        total_bytes_needed=[], total_gib_needed=[], check_memory_bytes=[], check_gib=[],
        margin_bytes=None, estimated_max_model_len=[], num_blocks=None,
        max_concurrency=concurrency, kv_cache_size_tokens=tokens,
        capacity_log_line=capacity_log_line(result), capacity_is_hypothetical=False,
        error_type=err.type if err else None, error_message=err.message if err else None,
        failure_cause=_cause(result), grouping_path=None, padding_layer_warnings=[],
        warnings=list(warnings) + list(result.warnings), notes=list(notes),
        data_parallel_size=data_parallel_size,
        total_max_concurrency=(concurrency * data_parallel_size if concurrency is not None
                               else None),
        sglang_version=result.sglang_version, sglang=result)
