"""`kvplan sweep`: the largest fitting context and the concurrency per GPU × KV dtype × length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvplan import __version__
from kvplan.engines.vllm.planner import plan_lengths
from kvplan.errors import InputError, KvplanError
from kvplan.frozen import Frozen
from kvplan.models.resolution.max_len import derived_max_model_len
from kvplan.pipeline.deploy import Request, evaluate, resolve
from kvplan.units import read_tokens


class SweepPoint(Frozen):
    max_model_len: int
    fits: bool
    needed_bytes: int
    max_concurrency: float


class SweepRow(Frozen):
    engine: str = "vllm"  # the server planned: vllm | sglang
    gpu: str
    kv_cache_dtype: str
    available_kv_bytes: int | None
    budget_mode: str | None
    largest_fitting_max_model_len: int | None
    points: list[SweepPoint]
    error: str | None = None
    warnings: list[str] = []


class SweepWarning(Frozen):
    """One warning, said once, with the rows (GPU · KV dtype) it applies to."""

    text: str
    applies_to: list[str]
    every_row: bool


class Sweep(Frozen):
    schema_version: int = 1
    kvplan_version: str = __version__
    model: str
    draft: str | None
    vllm_version: str | None
    sglang_version: str | None = None  # set when SGLang rows are in the sweep
    lengths: list[int]
    rows: list[SweepRow]
    plans_evaluated: int
    warnings: list[SweepWarning] = []


def row_label(row: SweepRow) -> str:
    return f"{row.gpu} · {row.kv_cache_dtype}"


def grouped_warnings(rows: Sequence[SweepRow]) -> list[SweepWarning]:
    """Each distinct warning once, in first-seen order, with the rows that carry it."""
    seen: dict[str, list[str]] = {}
    for r in rows:
        for w in dict.fromkeys(r.warnings):
            seen.setdefault(w, []).append(row_label(r))
    return [SweepWarning(text=w, applies_to=labels, every_row=len(labels) == len(rows))
            for w, labels in seen.items()]


def parse_lengths(text: str) -> list[int]:
    """'8K..1M' → doubling from 8,192 to 1,048,576; '8k,32k,131072' → that list (8,000, 32,000,
    131,072). Each length is read as vLLM reads --max-model-len (k = 10^3, K = 2^10)."""
    def one(t: str) -> int:
        if not t.strip():
            raise InputError(f"empty length in --max-model-len {text!r}",
                             hint="use 8K..1M or a list such as 8k,32k,131072")
        return read_tokens(t, "--max-model-len")

    if ".." in text:
        lo, hi = (one(x) for x in text.split("..", 1))
        if lo > hi:
            raise InputError(f"empty range {text!r}")
        out, v = [], lo
        while v <= hi:
            out.append(v)
            v *= 2
        if out[-1] != hi:
            out.append(hi)
        return out
    return sorted({one(x) for x in text.split(",") if x.strip()})


def run_sweep(base: Request, *, gpus: Sequence[str | None], kv_dtypes: Sequence[str],
              lengths: Sequence[int]) -> Sweep:
    """Every GPU × KV dtype, with the grouping reused across lengths (exact per length)."""
    res = resolve(replace(base, gpu=gpus[0] if gpus else None))
    # vLLM refuses lengths past the config's derived max_model_len unless told otherwise:
    # those points are planned (for the numbers) but never fit
    derived, key = derived_max_model_len(res.target)
    limit = None if base.deployment.allow_long_max_model_len or derived is None else int(derived)
    refused = ([f"lengths above {limit:,} ({key}) are refused by vLLM at start-up "
                "(VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 allows them)"]
               if limit is not None and max(lengths) > limit else [])
    rows, count = [], 0
    for gpu in gpus:
        for kv in kv_dtypes:
            dep = replace(base.deployment, kv_cache_dtype=kv, max_model_len=max(lengths),
                          auto_fit_max_model_len=False, allow_long_max_model_len=True)
            req = replace(base, gpu=gpu, deployment=dep, explain=False, diagnose_weights=False)
            try:
                ev = evaluate(req, res)
            except KvplanError as exc:
                rows.append(SweepRow(gpu=gpu or "-", kv_cache_dtype=kv, available_kv_bytes=None,
                                     budget_mode=None, largest_fitting_max_model_len=None,
                                     points=[], error=exc.message))
                continue
            result, points = plan_lengths(ev.planner_input, lengths)
            count += len(points) + 1
            largest = min(result.estimated_max_model_len) if result.estimated_max_model_len else 0
            if limit is not None:
                largest = min(largest, limit)
            starts = ev.kv_refusal is None  # no backend for the KV dtype: no length fits
            rows.append(SweepRow(
                gpu=ev.plan.gpu or gpu or "-", kv_cache_dtype=kv,
                available_kv_bytes=ev.budget.available_kv_bytes_per_gpu,
                budget_mode=ev.plan.budget_mode,
                largest_fitting_max_model_len=largest if starts else 0,
                points=[SweepPoint(max_model_len=p.max_model_len,
                                   fits=starts and p.fits and (limit is None
                                                               or p.max_model_len <= limit),
                                   needed_bytes=p.total_bytes_needed,
                                   max_concurrency=p.max_concurrency) for p in points],
                error=None if result.grouping_error is None else result.grouping_error.message,
                warnings=[*ev.dtype_warnings, *refused]))
    return Sweep(model=base.model, draft=base.draft, vllm_version=base.deployment.vllm_version,
                 lengths=sorted(set(lengths)), rows=rows, plans_evaluated=count,
                 warnings=grouped_warnings(rows))

