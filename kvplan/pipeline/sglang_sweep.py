"""`kvplan sweep --engine sglang`: per GPU × KV dtype, what SGLang's pools hold at each context
length — every point planned by the engine (`plan_at`, on the model read once), since SGLang's
defaults (max_running_requests, the SWA request cap) follow --context-length."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvplan.analysis.serving import sglang_serving
from kvplan.engines.sglang.profiles import sglang_profile
from kvplan.errors import KvplanError
from kvplan.pipeline.sglang_fit import SGLANG_KV_DTYPES
from kvplan.pipeline.sglang_run import SglangRequest, plan_at, resolve_sglang, sglang_gpu_of
from kvplan.pipeline.sweep import Sweep, SweepPoint, SweepRow


def sglang_rows(base: SglangRequest, *, gpus: Sequence[str], kv_dtypes: Sequence[str],
                lengths: Sequence[int]) -> tuple[list[SweepRow], int]:
    """The SGLang rows of a sweep and how many plans they took."""
    inputs = resolve_sglang(base)
    rows: list[SweepRow] = []
    count = 0
    for gpu in gpus:
        for raw in kv_dtypes:
            kv = SGLANG_KV_DTYPES.get(raw.strip().lower(), raw.strip().lower())
            req = replace(base, gpu=gpu)
            try:
                g, gpu_name, _ = sglang_gpu_of(req)
            except KvplanError as exc:
                rows.append(SweepRow(engine="sglang", gpu=gpu, kv_cache_dtype=kv,
                                     available_kv_bytes=None, budget_mode=None,
                                     largest_fitting_max_model_len=None, points=[],
                                     error=exc.message))
                continue
            points: list[SweepPoint] = []
            error, avail, mode, largest = None, None, None, 0
            warnings: list[str] = []
            for length in sorted(set(lengths)):
                dep = req.deployment.model_copy(update={"kv_cache_dtype": kv,
                                                        "context_length": length})
                try:
                    result, mem = plan_at(req, inputs, dep, g)
                except KvplanError as exc:
                    error = exc.message
                    break
                count += 1
                if result.error is not None:
                    if result.error.stage == "resolve_server_args" and not points:
                        error = result.error.message  # refused whatever the length
                        break
                    points.append(SweepPoint(max_model_len=length, fits=False, needed_bytes=0,
                                             max_concurrency=0.0))
                    warnings.append(f"{length:,}: {result.error.message}")
                    continue
                s = sglang_serving(result, context_length=length, concurrency=1)
                cell = result.cell_size_bytes_per_token or 0
                per = s.tokens_per_request or length
                tokens = result.max_total_num_tokens or 0
                avail, mode = result.available_bytes, mem.mode
                page = result.page_size or 1
                largest = max(largest, min(tokens // page * page,
                                           result.resolved.context_len if result.resolved
                                           else length))
                conc = tokens / per  # within SGLang's cap on running requests
                if s.request_cap is not None:
                    conc = min(conc, float(s.request_cap))
                points.append(SweepPoint(max_model_len=length, fits=s.holds,
                                         needed_bytes=int(per * cell),
                                         max_concurrency=round(conc, 4)))
            rows.append(SweepRow(engine="sglang", gpu=gpu_name or gpu, kv_cache_dtype=kv,
                                 available_kv_bytes=avail, budget_mode=mode,
                                 largest_fitting_max_model_len=largest if points else None,
                                 points=points, error=error,
                                 warnings=list(dict.fromkeys(warnings))[:3]))
    return rows, count


def run_sglang_sweep(base: SglangRequest, *, gpus: Sequence[str], kv_dtypes: Sequence[str],
                     lengths: Sequence[int]) -> Sweep:
    rows, count = sglang_rows(base, gpus=gpus, kv_dtypes=kv_dtypes, lengths=lengths)
    return Sweep(model=base.model, draft=base.draft, vllm_version=None,
                 sglang_version=sglang_profile(base.deployment.sglang_version).version,
                 lengths=sorted(set(lengths)), rows=rows, plans_evaluated=count)
