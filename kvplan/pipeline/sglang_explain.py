"""`kvplan explain --engine sglang`: what-ifs in SGLang's own flags, each planned again by the
engine on the same loaded model (`plan_at`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.analysis.explain import WhatIf
from kvplan.analysis.serving import sglang_serving
from kvplan.engines.sglang.deployment import SglangGpu
from kvplan.engines.sglang.result import SglangResult
from kvplan.errors import KvplanError
from kvplan.units import format_gib

if TYPE_CHECKING:
    from kvplan.pipeline.sglang_run import SglangInputs, SglangRequest


def _what_if(change: str, req: SglangRequest, inputs: SglangInputs, gpu: SglangGpu,
             **flags: Any) -> WhatIf:
    from dataclasses import replace

    from kvplan.pipeline.sglang_run import plan_at

    try:
        dep = req.deployment.model_copy(update=flags)
        r = req
        if ("tp_size" in flags or "pp_size" in flags) and req.post_load_gib is not None:
            # the logged free memory held other weights per GPU: estimate them anew
            r = replace(req, post_load_gib=None)
        if "speculative_algorithm" in flags and flags["speculative_algorithm"] is None:
            # the draft gone: neither its layers nor its weights
            res = replace(inputs.res, draft=None, draft_config=None)
            inputs = replace(inputs, res=res, draft=None, standalone_weights=None)
            r = replace(r, draft=None)
        result, _ = plan_at(r, inputs, dep, gpu)
    except (KvplanError, ValueError) as exc:
        msg = exc.message if isinstance(exc, KvplanError) else str(exc).splitlines()[0]
        return WhatIf(change=change, fits=None, needed_gib=None, available_gib=None, note=msg)
    return _row(change, result, req.concurrency)


def _row(change: str, result: SglangResult, concurrency: int) -> WhatIf:
    if not result.fits or result.resolved is None:
        err = result.error.message if result.error is not None else "SGLang does not start"
        err = err.split(". ")[0].rstrip(".") + "."  # the first sentence (the plan has all)
        return WhatIf(change=change, fits=False, needed_gib=None,
                      available_gib=(format_gib(result.available_bytes)
                                     if result.available_bytes is not None else None),
                      note=f"SGLang refuses to start: {err}")
    context = result.resolved.context_len
    s = sglang_serving(result, context_length=context, concurrency=concurrency)
    page = result.page_size or 1
    tokens = result.max_total_num_tokens or 0
    largest = min(tokens // concurrency // page * page, context)
    return WhatIf(change=change, fits=s.holds, needed_gib=format_gib(s.kv_bytes_needed or 0),
                  available_gib=format_gib(s.kv_pool_bytes or 0),
                  estimated_max_model_len=largest,
                  note=f"{tokens:,} tokens: {s.requests_at_length:,} × {context:,} at once "
                       f"(max_running_requests {result.max_running_requests:,})")


def sglang_what_ifs(req: SglangRequest, inputs: SglangInputs, gpu: SglangGpu,
                    result: SglangResult) -> list[WhatIf]:
    """The flags that change SGLang's answer most often, each re-planned."""
    dep = req.deployment
    r = result.resolved
    out: list[WhatIf] = []
    if r is not None and r.kv_cache_torch_dtype in ("bfloat16", "float16"):
        out.append(_what_if("--kv-cache-dtype fp8_e4m3", req, inputs, gpu,
                            kv_cache_dtype="fp8_e4m3"))
    mfs = result.mem_fraction_static
    if mfs is not None and mfs < 0.95 and req.kv_budget_bytes is None:
        up = round(min(mfs + 0.05, 0.95), 3)
        out.append(_what_if(f"--mem-fraction-static {up:g}", req, inputs, gpu,
                            mem_fraction_static=up))
    if dep.tp_size * 2 <= 8 and req.kv_budget_bytes is None:
        out.append(_what_if(f"--tp-size {dep.tp_size * 2}", req, inputs, gpu,
                            tp_size=dep.tp_size * 2))
    if r is not None and result.max_total_num_tokens:
        page = result.page_size or 1
        fit_len = result.max_total_num_tokens // req.concurrency // page * page
        if 0 < fit_len < r.context_len:
            out.append(_what_if(f"--context-length {fit_len}", req, inputs, gpu,
                                context_length=fit_len))
    if (result.max_running_requests is not None
            and result.max_running_requests < req.concurrency):
        out.append(_what_if(f"--max-running-requests {req.concurrency}", req, inputs, gpu,
                            max_running_requests=req.concurrency))
    if result.max_mamba_cache_size is not None:
        if not dep.disable_radix_cache:
            out.append(_what_if("--disable-radix-cache", req, inputs, gpu,
                                disable_radix_cache=True))
        ratio = r.mamba_full_memory_ratio if r is not None else None
        if ratio is not None:
            out.append(_what_if(f"--mamba-full-memory-ratio {ratio * 2:g}", req, inputs, gpu,
                                mamba_full_memory_ratio=ratio * 2))
    if result.swa_max_total_num_tokens is not None and r is not None:
        ratio = r.swa_full_tokens_ratio or 0.8
        if ratio > 0.2:
            lower = round(ratio / 2, 3)
            out.append(_what_if(f"--swa-full-tokens-ratio {lower:g}", req, inputs, gpu,
                                swa_full_tokens_ratio=lower))
    if dep.speculative_algorithm:
        out.append(_what_if("without --speculative-algorithm", req, inputs, gpu,
                            speculative_algorithm=None, speculative_num_steps=None,
                            speculative_eagle_topk=None, speculative_num_draft_tokens=None,
                            speculative_draft_kv_cache_dtype=None))
    return out
