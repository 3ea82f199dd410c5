"""`kvplan fit --engine sglang` (and `vllm,sglang`): the cheapest SGLang deployments that serve
`max_model_len` tokens to `concurrency` requests at once.

The same search as vLLM's (`kvplan.pipeline.fit`): GPU type × tensor/pipeline sizes × KV dtype ×
draft on/off, each replica shape planned once by SGLang's engine on the model read once
(`plan_at`), then the smallest DP that reaches the concurrency. A replica holds min(⌊tokens /
(L rounded up to the page)⌋, max_running_requests) requests of L tokens (`sglang_serving`).
`merge_fits` ranks both engines' deployments in one list (USD per hour, then GPU count).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from kvplan.analysis.serving import sglang_serving
from kvplan.budget import hardware
from kvplan.budget.sglang_memory import sglang_gpu
from kvplan.engines.sglang.deployment import SglangGpu
from kvplan.engines.sglang.profiles import sglang_profile
from kvplan.errors import InputError, KvplanError
from kvplan.pipeline.fit import _add_merged, _powers_of_two, _sort_key, candidate_gpus
from kvplan.pipeline.fit_result import FitCandidate, FitMiss, FitResult, FitSkip, FitTarget
from kvplan.pipeline.sglang_run import (
    SglangInputs,
    SglangRequest,
    plan_at,
    resolve_sglang,
    sglang_launch_line,
)

# the KV dtypes of a fit (vLLM's names, as `--kv-cache-dtype auto,fp8,nvfp4`) → SGLang's
SGLANG_KV_DTYPES = {"auto": "auto", "fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3",
                    "fp8_e5m2": "fp8_e5m2", "nvfp4": "nvfp4", "mxfp8": "mxfp8",
                    "bf16": "bfloat16", "bfloat16": "bfloat16"}


def _check_line(req: SglangRequest, gpu: str, dp: int) -> str:
    import shlex

    d = req.deployment
    words = ["kvplan", "check", shlex.quote(req.model), "--engine", "sglang", "--gpu",
             shlex.quote(gpu), "--context-length", str(d.context_length), "--tp-size",
             str(d.tp_size)]
    if d.pp_size > 1:
        words += ["--pp-size", str(d.pp_size)]
    if d.kv_cache_dtype != "auto":
        words += ["--kv-cache-dtype", d.kv_cache_dtype]
    if d.speculative_algorithm:
        words += ["--speculative-algorithm", d.speculative_algorithm]
        if req.draft:
            words += ["--speculative-draft-model-path", shlex.quote(req.draft)]
    if d.mem_fraction_static is not None:
        words += ["--mem-fraction-static", str(d.mem_fraction_static)]
    if req.concurrency > 1:
        words += ["--concurrency", str(-(-req.concurrency // dp))]
    return " ".join(words)


def search_sglang(base: SglangRequest, *, max_model_len: int, concurrency: int,
                  gpus: Sequence[str] | None = None, kv_dtypes: Sequence[str] = ("auto",),
                  max_gpus: int = 8, prices: Mapping[str, float] | None = None, top: int = 5,
                  vendors: Sequence[str] = (), prune: bool = True,
                  kv_dtypes_given: bool = False, inputs: SglangInputs | None = None,
                  progress: Callable[[int, int], None] | None = None) -> FitResult:
    """Plan every SGLang replica shape, cheapest first; keep those that meet the target.

    `kv_dtypes_given`: the user named the KV dtypes, so a GPU that serves one only dequantised
    (FP8 on Ampere: no FP8 tensor cores, FlashInfer dequantises in its kernels) is tried too,
    its rows marked, as vLLM's search does; otherwise only native dtypes."""
    if concurrency < 1:
        raise InputError(f"--concurrency must be ≥ 1, got {concurrency}")
    if max_gpus < 1:
        raise InputError(f"--max-gpus must be ≥ 1, got {max_gpus}")
    dtypes = list(dict.fromkeys(SGLANG_KV_DTYPES.get(d.strip().lower(), d.strip().lower())
                                for d in kv_dtypes))
    prices = dict(prices or {})
    gpu_rows = candidate_gpus(gpus, prices, vendors)
    if not gpu_rows:
        raise InputError("no GPU to search" + (f" from {', '.join(vendors)}" if vendors else ""),
                         hint="name some with --gpu H100,B200 or give "
                                                  "prices with --price GPU=USD")
    base = replace(base, deployment=base.deployment.model_copy(
        update={"context_length": max_model_len, "dp_size": 1}))
    inputs = inputs or resolve_sglang(base)
    spec = base.deployment.speculative_algorithm is not None
    off = replace(inputs, draft=None, standalone_weights=None,
                  res=replace(inputs.res, draft=None, draft_config=None)) if spec else inputs
    shapes = []
    skipped: dict[FitSkip, None] = {}
    platforms = {}
    for g in gpu_rows:
        try:
            platforms[g.name] = sglang_gpu(g)
        except KvplanError as exc:  # a GPU kvplan's SGLang model does not cover
            skipped[FitSkip(engine="sglang", gpu=g.name,
                            reason=exc.message.removeprefix(f"{g.name}: "))] = None
    for g in gpu_rows:
        if g.name not in platforms:
            continue
        usd = prices.get(g.name, g.usd_per_hour)
        for dt in dtypes:
            why = _not_native(g, dt)
            if why and not kv_dtypes_given:
                skipped[FitSkip(engine="sglang", gpu=g.name, kv_cache_dtype=dt, reason=why,
                                support="dequantised")] = None
                continue
            for on in ([True, False] if spec else [False]):
                for tp in _powers_of_two(max_gpus):
                    for pp in _powers_of_two(max_gpus // tp):
                        bound = (math.inf if usd is None else usd * tp * pp, tp * pp)
                        shapes.append((bound, g, tp, pp, dt, on, usd, why is not None))
    shapes.sort(key=lambda s: (s[0], s[1].name, s[4], not s[5]))
    found: list[FitCandidate] = []
    misses: list[FitMiss] = []
    planned = pruned = 0
    for i, (bound, g, tp, pp, dt, on, usd, dequantised) in enumerate(shapes):
        if prune and len(found) >= top:
            kth = sorted(found, key=_sort_key)[top - 1]
            kth_key = (math.inf if kth.usd_per_hour is None else kth.usd_per_hour, kth.num_gpus)
            if bound > kth_key:
                pruned = len(shapes) - i
                break
        planned += 1
        out = _plan_shape(base, inputs if on else off, g, platforms[g.name], tp, pp, dt, on,
                          usd, prices, dequantised=dequantised,
                          max_model_len=max_model_len, concurrency=concurrency,
                          max_gpus=max_gpus)
        if isinstance(out, FitCandidate):
            _add_merged(found, out, _candidate_key)
        elif isinstance(out, FitMiss):
            _add_merged(misses, out, _miss_key)
        else:
            skipped[out] = None
        if progress is not None:
            progress(i + 1, len(shapes))
    found.sort(key=_sort_key)
    near = [] if found else sorted(misses, key=lambda m: (
        -m.closeness, m.usd_per_gpu_hour is None,
        (m.usd_per_gpu_hour or 0) * m.tensor_parallel_size * m.pipeline_parallel_size,
        m.gpu))[:top]
    target = FitTarget(model=base.model, draft=base.draft if spec else None,
                       max_model_len=max_model_len, concurrency=concurrency, vllm_version=None,
                       engines=["sglang"],
                       sglang_version=sglang_profile(base.deployment.sglang_version).version,
                       gpus=[g.name for g in gpu_rows], kv_cache_dtypes=dtypes, max_gpus=max_gpus)
    return FitResult(target=target, candidates=found[:top], num_fitting=len(found), misses=near,
                     skipped=list(skipped), planned=planned, pruned=pruned)


def _not_native(gpu: hardware.Gpu, kv_dtype: str) -> str | None:
    """The search's policy, as for vLLM's: by default a KV dtype is tried only where the GPU
    computes in it (FP8 tensor cores from sm89: Ada, Hopper, Blackwell). SGLang itself sizes an
    FP8 pool on older GPUs too (no server-argument check gates it) and FlashInfer, its default
    attention backend there, dequantises it in its kernels; its Triton kernels cannot read FP8
    E4M3 there (the engine: server_args.triton_fp8_kernel_error). NVFP4 / MXFP8 are SGLang's
    own Blackwell gate (the engine)."""
    cc = gpu.compute_capability
    if kv_dtype.startswith("fp8") and isinstance(cc, tuple) and cc < (8, 9):
        return (f"{kv_dtype} KV: {gpu.name} has no FP8 tensor cores (compute capability "
                f"{cc[0]}.{cc[1]}); SGLang serves it dequantised (FlashInfer), fit tries it "
                "only when --kv-cache-dtype names it")
    return None


def _candidate_key(c: FitCandidate) -> tuple:  # type: ignore[type-arg]
    return (c.engine, c.gpu, c.tensor_parallel_size, c.pipeline_parallel_size,
            c.data_parallel_size, c.speculative, c.max_concurrency, c.kv_cache_size_tokens,
            c.available_kv_bytes_per_gpu)


def _miss_key(m: FitMiss) -> tuple:  # type: ignore[type-arg]
    return (m.engine, m.gpu, m.tensor_parallel_size, m.pipeline_parallel_size, m.speculative,
            m.closeness, m.lacks, m.available_kv_bytes_per_gpu)


def _plan_shape(base: SglangRequest, inputs: SglangInputs, gpu: hardware.Gpu, sg: SglangGpu,
                tp: int, pp: int, kv_dtype: str, on: bool, usd: float | None,
                prices: Mapping[str, float], *, max_model_len: int, concurrency: int,
                max_gpus: int, dequantised: bool = False) -> FitCandidate | FitMiss | FitSkip:
    update: dict[str, object] = {"tp_size": tp, "pp_size": pp, "kv_cache_dtype": kv_dtype}
    if not on:
        update.update(speculative_algorithm=None, speculative_num_steps=None,
                      speculative_eagle_topk=None, speculative_num_draft_tokens=None,
                      speculative_draft_kv_cache_dtype=None)
    dep = base.deployment.model_copy(update=update)
    req = replace(base, gpu=gpu.name, deployment=dep, draft=base.draft if on else None,
                  explain=False, log=None, concurrency=concurrency)
    try:
        result, _ = plan_at(req, inputs, dep, sg)
    except KvplanError as exc:
        return FitSkip(engine="sglang", gpu=gpu.name, kv_cache_dtype=None,
                       tensor_parallel_size=tp, pipeline_parallel_size=pp, reason=exc.message)

    def miss(closeness: float, lacks: str, weights: bool = False) -> FitMiss:
        return FitMiss(engine="sglang", gpu=gpu.name, tensor_parallel_size=tp,
                       pipeline_parallel_size=pp, kv_cache_dtype=kv_dtype, speculative=on,
                       usd_per_gpu_hour=usd, closeness=round(max(0.0, min(closeness, 0.9999)), 4),
                       lacks=lacks, weights_limited=weights,
                       available_kv_bytes_per_gpu=result.available_bytes)

    if result.error is not None:
        err = result.error
        if (err.stage == "resolve_server_args" and "kv-cache-dtype" in err.message.replace(
                "kv_cache_dtype", "kv-cache-dtype")) or err.stage == "attention_kernel":
            # the dtype gate, or kernels that cannot read it: this GPU cannot
            return FitSkip(engine="sglang", gpu=gpu.name, kv_cache_dtype=kv_dtype,
                           reason=err.message)
        return miss(0.0, f"SGLang refuses to start: {err.message}",
                    weights=err.message.startswith("Loaded weights leave no GPU memory"))
    s = sglang_serving(result, context_length=max_model_len, concurrency=1)
    tokens = result.max_total_num_tokens or 0
    per_replica = s.requests_at_length
    if per_replica < 1:
        need = s.tokens_per_request or max_model_len
        return miss(tokens / need / concurrency,
                    f"one {max_model_len:,}-token request needs {need:,} KV tokens; "
                    f"max_total_num_tokens is {tokens:,}")
    dp = math.ceil(concurrency / per_replica)
    if dp * tp * pp > max_gpus:
        most = max_gpus // (tp * pp)
        capped = " (max_running_requests)" if per_replica == s.request_cap else ""
        return miss(most * per_replica / concurrency,
                    f"{per_replica} request(s) per replica{capped}: {concurrency} need DP {dp} = "
                    f"{dp * tp * pp} GPUs, more than --max-gpus {max_gpus}")
    per_replica_x = tokens / (s.tokens_per_request or max_model_len)
    if s.request_cap is not None:  # within SGLang's cap on running requests
        per_replica_x = min(per_replica_x, float(s.request_cap))
    total = per_replica_x * dp
    avail = result.available_bytes or 0
    line = sglang_launch_line(req.model, dep, draft=req.draft, dp_size=dp)
    return FitCandidate(
        engine="sglang", gpu=gpu.name, num_gpus=dp * tp * pp, tensor_parallel_size=tp,
        pipeline_parallel_size=pp, data_parallel_size=dp, kv_cache_dtype=kv_dtype,
        speculative=on, max_concurrency=round(total, 4), requests_per_replica=per_replica,
        kv_cache_size_tokens=tokens, available_kv_bytes_per_gpu=avail,
        headroom_pct=round((total / concurrency - 1) * 100, 1),
        usd_per_hour=None if usd is None else round(usd * dp * tp * pp, 4), usd_per_gpu_hour=usd,
        price_source=None if usd is None else ("--price" if gpu.name in prices
                                               else gpu.usd_per_hour_source),
        total_memory_nominal=gpu.total_memory_nominal, sglang_launch=line,
        kvplan_check=_check_line(req, gpu.name, dp), kv_cache_dequantised=dequantised)


def merge_fits(results: Sequence[FitResult], *, top: int) -> FitResult:
    """Both engines' searches as one ranking (USD per hour, then GPU count)."""
    if len(results) == 1:
        return results[0]
    found = sorted((c for r in results for c in r.candidates), key=_sort_key)
    misses: list[FitMiss] = []
    if not found:
        misses = sorted((m for r in results for m in r.misses),
                        key=lambda m: (-m.closeness, m.usd_per_gpu_hour is None,
                                       (m.usd_per_gpu_hour or 0) * m.tensor_parallel_size
                                       * m.pipeline_parallel_size, m.gpu, m.engine))[:top]
    first = results[0].target
    target = first.model_copy(update={
        "engines": [e for r in results for e in r.target.engines],
        "vllm_version": next((r.target.vllm_version for r in results
                              if r.target.vllm_version), None),
        "sglang_version": next((r.target.sglang_version for r in results
                                if r.target.sglang_version), None),
        "kv_cache_dtypes": list(dict.fromkeys(d for r in results
                                              for d in r.target.kv_cache_dtypes))})
    more: dict[str, int] = {}
    for r in results:
        more.update(r.weights_need_more_gpus)
    return FitResult(target=target, candidates=found[:top],
                     num_fitting=sum(r.num_fitting for r in results), misses=misses,
                     skipped=[s for r in results for s in r.skipped],
                     weights_need_more_gpus=more if not found else {},
                     planned=sum(r.planned for r in results),
                     pruned=sum(r.pruned for r in results),
                     # a model-level refusal speaks for the ranking only when every engine refused
                     refusal=(results[0].refusal if all(r.refusal for r in results) else None))

