"""`kvplan check --from-log` with an SGLang start-up log: the request the log describes, and the
log's numbers set beside kvplan's (`SglangLogCheck`), each disagreement said out loud.

The plan uses the memory the log states (SGLang's "Load weight begin/end. avail mem"), so
kvplan's `max_total_num_tokens` must land on the log's `#tokens` within the rounding of those
two printed values (±0.005 GB each) and one page; the free memory, weights and
`mem_fraction_static` kvplan would estimate on its own are set beside the logged ones too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from kvplan.analysis.sglang_log_check import SglangLogCheck, SglangLogRow
from kvplan.engines.sglang.deployment import SglangGpu
from kvplan.engines.sglang.result import SglangResult
from kvplan.errors import KvplanError

if TYPE_CHECKING:
    from kvplan.pipeline.sglang_run import SglangInputs, SglangMemory, SglangRequest
    from kvplan.sources.sglang_log import SglangLog

# the log's GB values are printed with 2 decimals
_HALF_CENT = 0.005
# kvplan's own memory estimate further off than this is worth a warning
_ESTIMATE_TOLERANCE_GIB = 0.5

# server_args names → the keys a deployment takes (SglangDeployment / request), for the values a
# log's ServerArgs repr states
LOG_KEYS = ("tp_size", "pp_size", "dp_size", "enable_dp_attention", "mem_fraction_static",
            "max_total_tokens", "context_length", "page_size", "kv_cache_dtype",
            "max_running_requests", "chunked_prefill_size", "max_prefill_tokens",
            "disable_cuda_graph", "attention_backend", "swa_full_tokens_ratio",
            "disable_radix_cache", "disable_overlap_schedule", "mamba_full_memory_ratio",
            "max_mamba_cache_size", "speculative_algorithm", "speculative_num_steps",
            "speculative_eagle_topk", "speculative_num_draft_tokens",
            "speculative_draft_kv_cache_dtype", "speculative_draft_model_path", "revision")


def log_entry(log: SglangLog) -> tuple[dict[str, Any], list[str]]:
    """The SGLang flags a log's ServerArgs states (None values: SGLang's default), its memory,
    and notes. Values older releases resolved (`chunked_prefill_size`, `cuda_graph_max_bs`)
    are kept only where 0.5.23 has the flag."""
    entry: dict[str, Any] = {}
    notes: list[str] = []
    sa = log.server_args
    for key in LOG_KEYS:
        v = sa.get(key)
        if v is None or v == "" or (key == "enable_dp_attention" and v is False):
            continue
        if key in ("disable_cuda_graph", "disable_radix_cache", "disable_overlap_schedule") \
                and v is not True:
            continue
        if key == "attention_backend":
            continue  # older releases logged the backend they picked, not a flag given
        if key == "chunked_prefill_size":
            continue  # resolved per GPU by the release that logged it
        if (key in ("tp_size", "pp_size", "dp_size") and v == 1) or \
                (key == "kv_cache_dtype" and v == "auto") or \
                (key == "max_prefill_tokens" and v == 16384):  # SGLang's defaults
            continue
        entry[key] = v
    if "speculative_algorithm" not in entry:
        for key in ("speculative_num_steps", "speculative_eagle_topk",
                    "speculative_num_draft_tokens"):
            entry.pop(key, None)  # older releases logged these defaults without a draft
    if log.model:
        entry["model"] = log.model
    pre = log.pre_model_load_gib
    if pre is None and log.post_load_gib is not None and log.weights_gib is not None:
        pre = round(log.post_load_gib + log.weights_gib, 2)
        notes.append(f"the log has no 'Load weight begin' line: free memory before the weights "
                     f"taken as {log.post_load_gib} + {log.weights_gib} (its 'Load weight end' "
                     f"avail mem + mem usage) = {pre} GB")
    if pre is not None and log.post_load_gib is not None:
        entry["pre_model_load_gib"] = pre
        entry["post_load_gib"] = log.post_load_gib
    if log.draft_loaded:
        notes.append("the log loads a second model on each rank (a draft): the free memory "
                     "after the last load is the profile's")
    return entry, notes


def _tokens_at(req: SglangRequest, inputs: SglangInputs, gpu: SglangGpu, pre: float,
               post: float) -> int | None:
    from kvplan.pipeline.sglang_run import plan_at

    r = replace(req, pre_model_load_gib=pre, post_load_gib=post, kv_budget_bytes=None)
    try:
        result, _ = plan_at(r, inputs, gpu=gpu)
    except KvplanError:
        return None
    return result.max_total_num_tokens


def _row(name: str, logged: float | None, mine: float | None, tolerance: float | None,
         note: str = "") -> SglangLogRow:
    agrees = None
    if logged is not None and mine is not None and tolerance is not None:
        agrees = abs(logged - mine) <= tolerance
    return SglangLogRow(name=name, logged=logged, kvplan=mine, agrees=agrees, note=note)


# the largest baseline gap (GB) the known "baseline before 'Load weight begin'" reading explains
_BASELINE_GAP_MAX_GIB = 0.25


def _baseline_gap_gib(result: SglangResult, logged_tokens: int | None) -> float | None:
    """How far above the log's "Load weight begin" free memory SGLang's baseline would have to
    be for its slack (1 − mem_fraction_static) × baseline to take kvplan's extra tokens:
    distributed/bootstrap.measure_pre_model_load_memory reads the free memory when
    torch.distributed is up, before model_runner.load_model prints "Load weight begin", so
    whatever the process takes in between (imports, library workspaces) is charged to the
    slack but is not in the log. None unless kvplan is above the log by such a small gap."""
    tokens, cell, mfs = (result.max_total_num_tokens, result.cell_size_bytes_per_token,
                         result.mem_fraction_static)
    if logged_tokens is None or tokens is None or not cell or mfs is None or mfs >= 1 \
            or tokens <= logged_tokens:
        return None
    gap = (tokens - logged_tokens) * cell / (1 - mfs) / (1 << 30)
    return gap if gap <= _BASELINE_GAP_MAX_GIB else None


def compare_with_log(req: SglangRequest, inputs: SglangInputs, gpu: SglangGpu,
                     result: SglangResult, mem: SglangMemory) -> SglangLogCheck:
    """The log's numbers beside kvplan's; the disagreements as loud warnings."""
    from kvplan.pipeline.sglang_run import memory_for
    from kvplan.units import GiB

    log = req.log
    assert log is not None
    rows: list[SglangLogRow] = []
    loud: list[str] = []
    pre, post = req.pre_model_load_gib, req.post_load_gib
    # kvplan's own estimate of the memory terms (no log)
    try:
        est = memory_for(replace(req, pre_model_load_gib=None, post_load_gib=None,
                                 kv_budget_bytes=None), inputs, gpu, req.deployment)
        est_pre = est.pre_model_load_gib
        est_w = est.weights_bytes / GiB if est.weights_bytes is not None else None
    except KvplanError:
        est_pre = est_w = None
    logged_w = log.weights_gib if log.weights_gib is not None else (
        round(log.pre_model_load_gib - log.post_load_gib, 2)
        if log.pre_model_load_gib is not None and log.post_load_gib is not None else None)
    for name, logged, mine in (
            ("free before the weights (GB)", log.pre_model_load_gib, est_pre),
            ("weights per GPU (GB)", logged_w, est_w),
            ("free after the weights (GB)", log.post_load_gib,
             est_pre - est_w if est_pre is not None and est_w is not None else None)):
        row = _row(name, logged, round(mine, 2) if mine is not None else None,
                   _ESTIMATE_TOLERANCE_GIB, "kvplan's estimate without the log")
        rows.append(row)
        if row.agrees is False:
            loud.append(f"the log's {name.removesuffix(' (GB)')} is {logged:.2f} GB; kvplan "
                        f"would have estimated {mine:.2f} GB (the plan uses the logged value)")
    mfs = result.mem_fraction_static
    default_note = ""
    if log.mem_fraction_static is None and result.resolved is not None \
            and not result.resolved.mem_fraction_static_is_default:
        default_note = "not in the log: taken from the command line"
    elif log.mem_fraction_static is None and result.resolved is not None:
        default_note = "not in the log: SGLang's default taken"
        loud.append(f"the log does not state mem_fraction_static: kvplan took SGLang "
                    f"{result.sglang_version}'s default {mfs:g} for this GPU; pass "
                    "--mem-fraction-static as the server had it")
    rows.append(_row("mem_fraction_static", log.mem_fraction_static, mfs, 1e-9, default_note))
    logged_tokens = log.max_total_num_tokens or log.kv_tokens
    low = high = None
    if pre is not None and post is not None and result.fits:
        page = result.page_size or 1
        # a free-before derived from "avail mem + mem usage" carries both roundings
        pre_err = _HALF_CENT if log.pre_model_load_gib is not None else 2 * _HALF_CENT
        lo = _tokens_at(req, inputs, gpu, pre + pre_err, post - _HALF_CENT)
        hi = _tokens_at(req, inputs, gpu, pre - pre_err, post + _HALF_CENT)
        if lo is not None and hi is not None:
            low, high = max(0, lo - page), hi + page
    tokens_row = SglangLogRow(
        name="max_total_num_tokens", logged=logged_tokens, kvplan=result.max_total_num_tokens,
        agrees=(low <= logged_tokens <= high) if logged_tokens is not None and low is not None
        and high is not None else None,
        note=(f"kvplan {low:,}–{high:,} over the rounding of the logged memory and one page"
              if low is not None and high is not None else ""))
    rows.append(tokens_row)
    if tokens_row.agrees is False:
        baseline = _baseline_gap_gib(result, logged_tokens)
        loud.append(f"DISAGREES: the log's max_total_num_tokens {logged_tokens:,} is outside "
                    f"kvplan's {low:,}–{high:,}, planned from the memory the log states "
                    + (f"(kvplan is {result.max_total_num_tokens - logged_tokens:,} tokens "
                       f"above it, as if SGLang's baseline were {baseline:.2f} GB above the "
                       "log's 'Load weight begin' free memory: SGLang takes the baseline of "
                       "its slack when torch.distributed is up, before that line, so memory "
                       "the process takes in between is not in the log — a known gap, "
                       "docs/sglang-engine.md)"
                       if baseline is not None and result.max_total_num_tokens is not None
                       and logged_tokens is not None else
                       f"(SGLang {result.sglang_version}'s rules; the log may be from another "
                       "release or other flags)"))
    if log.max_running_requests is not None:
        rows.append(_row("max_running_requests", log.max_running_requests,
                         result.max_running_requests, 0,
                         f"SGLang {result.sglang_version}'s rule; older releases differ"))
    if log.context_len is not None and result.resolved is not None:
        row = _row("context_len", log.context_len, result.resolved.context_len, 0)
        rows.append(row)
        if row.agrees is False:
            loud.append(f"the log's context_len is {log.context_len:,}, kvplan's "
                        f"{result.resolved.context_len:,}")
    for name, logged, mine in (("full_max_total_num_tokens", log.full_tokens,
                                result.full_max_total_num_tokens),
                               ("swa_max_total_num_tokens", log.swa_tokens,
                                result.swa_max_total_num_tokens),
                               ("max_mamba_cache_size", log.max_mamba_cache_size,
                                result.max_mamba_cache_size)):
        if logged is not None:
            rows.append(_row(name, logged, mine, 0))
    for err in log.errors:
        loud.append(f"the log ends in SGLang's error: {err}")
    return SglangLogCheck(rows=rows, tokens_low=low, tokens_high=high, disagreements=loud)
