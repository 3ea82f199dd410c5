"""An SGLang pool sizing (`SglangResult`) as a `Plan` (`engine: "sglang"`): the shared fields a
report or CI reads (verdict, tokens, concurrency at the context length, the error), SGLang's own
numbers under SGLang's names in `plan.sglang`, the verdict at `--context-length` ×
`--concurrency` in `plan.serving`, and a start-up log's numbers beside kvplan's in
`plan.sglang_log`."""

from __future__ import annotations

from kvplan.analysis.explain import Cause, Explanation
from kvplan.analysis.plan import FailureCause, Plan, Verdict
from kvplan.analysis.serving import sglang_serving
from kvplan.analysis.sglang_log_check import SglangLogCheck
from kvplan.budget.kv_memory import KvBudget
from kvplan.engines.sglang.profiles import sglang_profile
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
    if r is None or result.max_total_num_tokens is None or result.error is not None:
        return None  # (an error after the pools are sized stops the server before this line)
    return (f"max_total_num_tokens={result.max_total_num_tokens}, "
            f"chunked_prefill_size={r.chunked_prefill_size}, "
            f"max_running_requests={result.max_running_requests}, "
            f"context_len={r.context_len}")


def below_context_warning(result: SglangResult) -> str | None:
    """SGLang's start-up warning when one full-length request cannot fit (tp_worker)."""
    r = result.resolved
    tokens = result.max_total_num_tokens
    if r is None or tokens is None or not result.fits or tokens >= r.context_len:
        return None
    return sglang_profile(result.sglang_version).messages["kv_below_context"].format(
        tokens=tokens, context_len=r.context_len)


def sglang_causes(result: SglangResult) -> list[Cause]:
    """What one token costs, pool by pool (the share of the bytes per token), then what sized
    the budget."""
    out: list[Cause] = []
    per_token = [p for p in result.pools if p.bytes_per_token]
    total = sum(p.bytes_per_token or 0 for p in per_token) or 1
    for p in sorted(per_token, key=lambda p: -(p.bytes_per_token or 0)):
        b = p.bytes_per_token or 0
        out.append(Cause(share_of_blocks_pct=round(b / total * 100, 1),
                         text=f"{p.pool} pool: {p.layers} layers, {b:,.0f} B per token"
                              + (f" ({p.note})" if p.note else "")))
    for p in result.pools:
        if p.bytes_per_request:
            out.append(Cause(share_of_blocks_pct=None,
                             text=f"{p.pool} state: {p.bytes_per_request / 2**20:,.1f} MiB per "
                                  f"slot, {p.slots or 0:,} slots ({p.note})"))
    r = result.resolved
    if r is not None:
        how = ("SGLang's default for this GPU and these flags" if r.mem_fraction_static_is_default
               else "as given")
        reserve = (f"; reserve {r.reserved_mem_mib:,.0f} MiB for activations and CUDA graphs"
                   if r.reserved_mem_mib is not None else "")
        vlm = "; reduced for a multimodal model" if r.vlm_adjusted else ""
        out.append(Cause(share_of_blocks_pct=None,
                         text=f"mem_fraction_static {r.mem_fraction_static:g} ({how}{reserve}"
                              f"{vlm}): the pools get the free memory after the weights less "
                              f"{1 - r.mem_fraction_static:.3g} × the free memory before them"))
    return out


def build_sglang_plan(result: SglangResult, *, model: str, draft: str | None = None,
                      gpu: str | None = None, budget_mode: str = "estimated",
                      data_parallel_size: int = 1, context_length: int | None = None,
                      concurrency: int = 1, budget: KvBudget | None = None,
                      explanation: Explanation | None = None,
                      log_check: SglangLogCheck | None = None,
                      warnings: tuple[str, ...] = (), notes: tuple[str, ...] = ()) -> Plan:
    """The plan: it fits when SGLang starts and holds `concurrency` requests of the context
    length at once (SGLang itself starts below one request, warning; kvplan says it does not
    serve that length)."""
    r = result.resolved
    context = r.context_len if r is not None else (context_length or 0)
    tokens = result.max_total_num_tokens
    concurrency_x = round(tokens / context, 2) if tokens and context else None
    err = result.error
    serving = sglang_serving(result, context_length=context, concurrency=concurrency) \
        if context else None
    fits = result.fits and (serving is None or serving.holds)
    cause = _cause(result)
    if result.fits and not fits:
        cause = FailureCause.KV_CACHE
    below = below_context_warning(result)
    all_warnings = [*warnings, *result.warnings, *([below] if below else []),
                    *(log_check.disagreements if log_check is not None else [])]
    estimated_len = []
    capped = (serving is not None and serving.request_cap is not None
              and serving.request_cap < concurrency)  # no length holds that many at once
    if result.fits and tokens and concurrency and not capped:
        page = result.page_size or 1
        estimated_len = [min(tokens // concurrency // page * page, context)]
    return Plan(
        engine="sglang", model=model, draft=draft, vllm_version=None, with_fix=False, gpu=gpu,
        budget_mode=budget_mode,
        available_kv_bytes=[result.available_bytes] if result.available_bytes is not None else [],
        max_model_len=context, max_model_len_after_planning=context,
        max_num_batched_tokens=r.chunked_prefill_size if r is not None else 0,
        max_in_flight_tokens=tokens or 0,
        verdict=Verdict.FITS if fits else Verdict.DOES_NOT_FIT, fits=fits,
        groups=[], num_groups=0, pool_bytes_per_block=[], total_blocks_per_request=0,
        total_bytes_needed=[], total_gib_needed=[], check_memory_bytes=[], check_gib=[],
        margin_bytes=None, estimated_max_model_len=estimated_len, num_blocks=None,
        max_concurrency=concurrency_x, kv_cache_size_tokens=tokens,
        capacity_log_line=capacity_log_line(result), capacity_is_hypothetical=False,
        error_type=err.type if err else None, error_message=err.message if err else None,
        failure_cause=cause if not fits else None, grouping_path=None,
        padding_layer_warnings=[], warnings=list(dict.fromkeys(all_warnings)), notes=list(notes),
        explanation=explanation, budget=budget, data_parallel_size=data_parallel_size,
        total_max_concurrency=(concurrency_x * data_parallel_size if concurrency_x is not None
                               else None),
        sglang_version=result.sglang_version, sglang=result, serving=serving,
        sglang_log=log_check)
