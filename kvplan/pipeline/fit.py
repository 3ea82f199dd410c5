"""`kvplan fit`: the cheapest deployment that serves `max_model_len` tokens at a concurrency.

Searches GPU type × tensor/pipeline sizes × KV dtype (only the dtypes the GPU runs natively and
the release accepts) × draft on/off. Each replica shape is planned once, with the same engine and
estimated budget as `kvplan check` (`deploy.evaluate`: weights sharded per rank, TP/PP rules);
data parallelism then adds whole replicas, so the smallest DP that reaches the concurrency is the
cheapest for that shape. Ranked by USD per hour, then GPU count.

Concurrency per replica counts whole requests: min(⌊vLLM's "Maximum concurrency"⌋, max_num_seqs).
The search is pure apart from `resolve` (reading the configs through `kvplan.sources.hub`).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from kvplan.budget import hardware
from kvplan.budget import kv_dtype_support as kvs
from kvplan.engines.vllm.profiles import get_profile
from kvplan.engines.vllm.workload import Workload
from kvplan.errors import InputError, KvplanError, StartupError
from kvplan.pipeline.deploy import Request, Resolved, evaluate, resolve
from kvplan.pipeline.fit_result import FitCandidate, FitMiss, FitResult, FitSkip, FitTarget
from kvplan.units import format_gib, normalize_kv_cache_dtype

DEFAULT_KV_DTYPES = ("auto", "fp8", "nvfp4")


# --------------------------------------------------------------------------------------------
# Prices


def parse_price(text: str) -> tuple[str, float]:
    """'H100=2.10' → (catalogue name, 2.10). Unknown GPU or bad number → InputError."""
    name, sep, value = str(text).partition("=")
    hint = "write GPU=USD per GPU-hour, e.g. --price H100=2.10 (names as in `kvplan gpus`)"
    if not sep or not name.strip() or not value.strip():
        raise InputError(f"--price {text!r}: expected GPU=USD", hint=hint)
    try:
        gpu = hardware.lookup_gpu(name.strip())
    except InputError as exc:
        raise InputError(f"--price {text!r}: {exc.message}", hint=exc.hint) from None
    try:
        usd = float(value.strip().lstrip("$"))
    except ValueError:
        raise InputError(f"--price {text!r}: {value.strip()!r} is not a number of USD per hour",
                         hint=hint) from None
    if not math.isfinite(usd) or usd < 0:
        raise InputError(f"--price {text!r}: the price must be a number ≥ 0", hint=hint)
    return gpu.name, usd


def parse_prices_file(text: str, where: str) -> dict[str, float]:
    """A prices file: a JSON object {"H100": 2.1, ...}, or lines `GPU=USD` (# comments)."""
    out: dict[str, float] = {}
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(data, dict):
            raise InputError(f"{where}: expected a JSON object of GPU name → USD per hour")
        entries = [f"{k}={v}" for k, v in data.items()]
    else:
        entries = [ln.split("#", 1)[0].strip() for ln in text.splitlines()]
    for i, entry in enumerate(e for e in entries if e):
        try:
            name, usd = parse_price(entry)
        except InputError as exc:
            raise InputError(f"{where}, entry {i + 1}: {exc.message.removeprefix('--price ')}",
                             hint="one GPU=USD per line (e.g. H100=2.10), or a JSON object "
                                  "{\"H100\": 2.10}") from None
        out[name] = usd
    return out


# --------------------------------------------------------------------------------------------
# Command lines


def _flag(name: str, value: object) -> list[str]:
    return [name, shlex.quote(str(value))]


def _shared_flags(req: Request, *, vllm_serve: bool) -> list[str]:
    """The user's flags that the search did not change, as vLLM names them."""
    d = req.deployment
    out: list[str] = []
    for name, value, default in (
            ("--dtype", d.dtype, "auto"), ("--max-num-batched-tokens", d.max_num_batched_tokens, None),
            ("--max-num-seqs", d.max_num_seqs, None), ("--block-size", d.block_size, None),
            ("--decode-context-parallel-size", d.decode_context_parallel_size, 1),
            ("--mamba-cache-dtype", d.mamba_cache_dtype, "auto"),
            ("--mamba-ssm-cache-dtype", d.mamba_ssm_cache_dtype, "auto"),
            ("--attention-backend", d.attention_backend, None),
            ("--gpu-memory-utilization", req.gpu_memory_utilization, None),
            ("--revision", req.revision, None)):
        if value is not None and value != default:
            out += _flag(name, value)
    if d.enable_prefix_caching is not None:  # None: vLLM's default for the model
        out.append("--enable-prefix-caching" if d.enable_prefix_caching
                   else "--no-enable-prefix-caching")
    if req.enforce_eager:
        out.append("--enforce-eager")
    if not vllm_serve:
        for name, value, default in (("--vllm", d.vllm_version, None),
                                     ("--draft-block-size", d.draft_block_size, None)):
            if value is not None and value != default:
                out += _flag(name, value)
        if d.with_fix:
            out.append("--with-fix")
    return out


def _speculative_json(req: Request, method: str | None) -> str:
    d = req.deployment
    cfg: dict[str, object] = {"method": method}
    if req.draft:
        cfg["model"] = req.draft
    cfg["num_speculative_tokens"] = d.num_speculative_tokens
    if d.draft_kv_cache_dtype:
        cfg["kv_cache_dtype"] = d.draft_kv_cache_dtype
    if d.draft_tensor_parallel_size:
        cfg["draft_tensor_parallel_size"] = d.draft_tensor_parallel_size
    return json.dumps({k: v for k, v in cfg.items() if v is not None}, separators=(",", ":"))


def command_lines(req: Request, *, gpu: str, dp: int, speculative: bool,
                  method: str | None) -> tuple[str, str]:
    """(`vllm serve …`, `kvplan check …`) for one planned request at data-parallel size `dp`."""
    d = req.deployment
    par = _flag("--max-model-len", d.max_model_len) + _flag("--tensor-parallel-size",
                                                           d.tensor_parallel_size)
    if d.pipeline_parallel_size > 1:
        par += _flag("--pipeline-parallel-size", d.pipeline_parallel_size)
    if dp > 1:
        par += _flag("--data-parallel-size", dp)
    if d.kv_cache_dtype != "auto":
        par += _flag("--kv-cache-dtype", d.kv_cache_dtype)
    spec = speculative and (method is not None or req.draft is not None)
    serve = ["vllm", "serve", shlex.quote(req.model), *par]
    if spec:
        serve += ["--speculative-config", shlex.quote(_speculative_json(req, method))]
    check = ["kvplan", "check", shlex.quote(req.model), *_flag("--gpu", gpu), *par]
    if spec:
        if req.draft:
            check += _flag("--draft", req.draft)
        if method:
            check += _flag("--speculative-method", method)
        if d.num_speculative_tokens:
            check += _flag("--num-speculative-tokens", d.num_speculative_tokens)
        if d.draft_kv_cache_dtype:
            check += _flag("--draft-kv-cache-dtype", d.draft_kv_cache_dtype)
        if d.draft_tensor_parallel_size:
            check += _flag("--draft-tensor-parallel-size", d.draft_tensor_parallel_size)
    serve += _shared_flags(req, vllm_serve=True)
    check += _shared_flags(req, vllm_serve=False)
    return " ".join(serve), " ".join(check)


# --------------------------------------------------------------------------------------------
# The search


@dataclass(frozen=True)
class Shape:
    """One replica shape to plan: GPU, TP, PP, KV dtype, draft on/off."""

    gpu: hardware.Gpu
    tp: int
    pp: int
    kv_dtype: str
    speculative: bool
    usd_per_gpu_hour: float | None
    price_source: str | None
    dequantised: bool = False  # the GPU serves this KV dtype only dequantised

    @property
    def lower_bound(self) -> tuple[float, int]:
        """No deployment of this shape costs less (DP ≥ 1) or uses fewer GPUs."""
        usd = math.inf if self.usd_per_gpu_hour is None else self.usd_per_gpu_hour * self.tp * self.pp
        return usd, self.tp * self.pp


def _powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def candidate_gpus(names: Sequence[str] | None, prices: Mapping[str, float],
                   vendors: Sequence[str] = ()) -> list[hardware.Gpu]:
    """The GPUs given (catalogue look-up), else every catalogue GPU with a price; only the
    `vendors` named (lower case), if any."""
    if names:
        gpus = list({g.name: g for g in (hardware.lookup_gpu(n) for n in names)}.values())
    else:
        gpus = [g for g in hardware.list_gpus()
                if g.name in prices or g.usd_per_hour is not None]
    return [g for g in gpus if not vendors or g.vendor.lower() in vendors]


def kv_gate(gpu: hardware.Gpu, dtypes: Sequence[str], *, vllm_version: str | None,
            use_mla: bool, allow_dequantised: bool) -> tuple[FitSkip | None, bool]:
    """(why this GPU is not tried with these KV dtypes, or None; whether it runs them
    dequantised) — the support table (`budget.kv_dtype_support`), as check and gpus read it."""
    dequantised = False
    for dt in dict.fromkeys(dtypes):
        reason = kvs.check_kv_dtype_supported(gpu, dt, vllm_version=vllm_version,
                                              use_mla=use_mla)
        if reason:
            return FitSkip(gpu=gpu.name, kv_cache_dtype=dtypes[0], reason=reason,
                           support=kvs.KvSupport.REFUSED.value), False
        answer = kvs.kv_dtype_support(gpu, dt, kvs.release(vllm_version), use_mla=use_mla)
        if answer is not None and answer.support is kvs.KvSupport.DEQUANTISED:
            if not allow_dequantised:
                return FitSkip(gpu=gpu.name, kv_cache_dtype=dtypes[0], reason=answer.text,
                               support=kvs.KvSupport.DEQUANTISED.value), False
            dequantised = True
    return None, dequantised


def _sort_key(c: FitCandidate) -> tuple:  # type: ignore[type-arg]
    """USD per hour (unpriced last), GPU count; then the draft on (it was asked for), more
    concurrency, and names for a stable order."""
    return (c.usd_per_hour is None, c.usd_per_hour or 0.0, c.num_gpus, not c.speculative,
            -(c.workload_concurrency or 0), -c.max_concurrency, c.gpu, c.tensor_parallel_size,
            c.pipeline_parallel_size,
            c.kv_cache_dtype)


def search(base: Request, *, max_model_len: int, concurrency: int,
           gpus: Sequence[str] | None = None, kv_dtypes: Sequence[str] = DEFAULT_KV_DTYPES,
           kv_dtypes_given: bool = False, vendors: Sequence[str] = (),
           max_gpus: int = 8, prices: Mapping[str, float] | None = None, top: int = 5,
           prune: bool = True, res: Resolved | None = None,
           progress: Callable[[int, int], None] | None = None,
           workload: Workload | None = None) -> FitResult:
    """Plan every replica shape (cheapest first) and keep the deployments that meet the target.

    `base` carries the user's model/draft/scheduler flags; its TP/PP/DP and KV dtype are searched.
    `kv_dtypes_given`: the user named the KV dtypes, so a GPU that serves one only dequantised
    (fp8 on Ampere through FlashInfer) is tried too, its rows marked; otherwise only native
    support counts. `vendors`: only these GPU vendors ("nvidia", "amd").
    `prune` stops once `top` deployments are found and no remaining shape can be cheaper (or as
    cheap on fewer GPUs). `progress(done, total)` is called after each shape.
    """
    if concurrency < 1:
        raise InputError(f"--concurrency must be ≥ 1, got {concurrency}")
    if max_gpus < 1:
        raise InputError(f"--max-gpus must be ≥ 1, got {max_gpus}")
    if top < 1:
        raise InputError(f"--top must be ≥ 1, got {top}")
    if not 1 <= max_model_len <= 2**31:
        raise InputError(f"--max-model-len {max_model_len} is out of range")
    dtypes = list(dict.fromkeys(kv_dtypes))
    if not dtypes:
        raise InputError("--kv-cache-dtype needs at least one value")
    for dt in dtypes:
        normalize_kv_cache_dtype(dt)  # unknown → InputError
    prices = dict(prices or {})
    gpu_rows = candidate_gpus(gpus, prices, vendors)
    if not gpu_rows:
        raise InputError("no GPU to search" + (f" from {', '.join(vendors)}" if vendors else ""),
                         hint="name some with --gpu H100,B200, give prices with --price "
                              "GPU=USD" + (" or drop --vendor" if vendors else ""))
    res_on = res or resolve(base)
    target = FitTarget(model=base.model, draft=base.draft if res_on.draft is not None else None,
                       max_model_len=max_model_len, concurrency=concurrency,
                       vllm_version=get_profile(base.deployment.vllm_version).version,
                       gpus=[g.name for g in gpu_rows], kv_cache_dtypes=dtypes,
                       kv_cache_dtypes_given=kv_dtypes_given, vendors=list(vendors),
                       max_gpus=max_gpus, workload=workload.label if workload is not None else None)
    refusal = model_refusal(base, res_on, max_model_len)
    if refusal is not None:  # the model itself: said once, before any shape
        return FitResult(target=target, candidates=[], num_fitting=0, refusal=refusal,
                         planned=0, pruned=0)
    has_draft = res_on.draft is not None
    res_off = replace(res_on, draft=None, draft_config=None) if has_draft else res_on
    method = base.deployment.speculative_method or (
        res_on.draft.draft_method if has_draft and res_on.draft is not None else None)
    use_mla = res_on.target.use_mla

    skipped: dict[FitSkip, None] = {}
    shapes: list[Shape] = []
    for g in gpu_rows:
        usd = prices.get(g.name, g.usd_per_hour)
        source = "--price" if g.name in prices else g.usd_per_hour_source
        for dt in dtypes:
            for spec in ([True, False] if has_draft else [False]):
                draft_dt = (base.deployment.draft_kv_cache_dtype or dt) if spec else dt
                skip, dequantised = kv_gate(g, [dt, draft_dt],
                                            vllm_version=base.deployment.vllm_version,
                                            use_mla=use_mla, allow_dequantised=kv_dtypes_given)
                if skip is not None:
                    skipped[skip] = None
                    continue
                for tp in _powers_of_two(max_gpus):
                    for pp in _powers_of_two(max_gpus // tp):
                        shapes.append(Shape(g, tp, pp, dt, spec, usd, source, dequantised))
    shapes.sort(key=lambda s: (s.lower_bound, s.gpu.name, s.kv_dtype, not s.speculative))

    found: list[FitCandidate] = []
    misses: list[FitMiss] = []
    planned = pruned = 0
    for i, shape in enumerate(shapes):
        if prune and len(found) >= top:
            kth = sorted(found, key=_sort_key)[top - 1]
            kth_key = (math.inf if kth.usd_per_hour is None else kth.usd_per_hour, kth.num_gpus)
            if shape.lower_bound > kth_key:
                pruned = len(shapes) - i  # sorted by the bound: none of the rest can enter
                break
        planned += 1
        outcome = _plan_shape(base, shape, res_on if shape.speculative else res_off,
                              max_model_len=max_model_len, concurrency=concurrency,
                              max_gpus=max_gpus, method=method, workload=workload)
        if isinstance(outcome, FitCandidate):
            _add_merged(found, outcome, _candidate_key)
        elif isinstance(outcome, FitMiss):
            _add_merged(misses, outcome, _miss_key)
        else:
            skipped[outcome] = None
        if progress is not None:
            progress(i + 1, len(shapes))
    found.sort(key=_sort_key)
    near: list[FitMiss] = []
    more: dict[str, int] = {}
    if not found:
        # closest first: the share of the target; at 0% the shape nearest to leaving KV memory
        near = sorted(misses, key=lambda m: (
            -m.closeness, -(m.available_kv_bytes_per_gpu or 0), m.usd_per_gpu_hour is None,
            (m.usd_per_gpu_hour or 0) * m.tensor_parallel_size * m.pipeline_parallel_size,
            m.gpu))[:top]
        more = _weights_need_more_gpus(base, res_off, gpu_rows, misses, max_gpus)
    return FitResult(target=target, candidates=found[:top], num_fitting=len(found), misses=near,
                     skipped=list(skipped), weights_need_more_gpus=more, planned=planned,
                     pruned=pruned)


def model_refusal(base: Request, res: Resolved, max_model_len: int) -> str | None:
    """What vLLM says when it refuses the model at this length whatever the deployment (the
    length above the derived maximum without VLLM_ALLOW_LONG_MAX_MODEL_LEN=1), else None."""
    from kvplan.models.resolution.max_len import verify_max_model_len

    try:
        verify_max_model_len(res.target, max_model_len,
                             allow_long=base.deployment.allow_long_max_model_len)
    except StartupError as exc:
        return exc.message + (f" ({exc.hint})" if exc.hint else "")
    return None


def _candidate_key(c: FitCandidate) -> tuple:  # type: ignore[type-arg]
    return (c.gpu, c.tensor_parallel_size, c.pipeline_parallel_size, c.data_parallel_size,
            c.speculative, c.max_concurrency, c.kv_cache_size_tokens, c.available_kv_bytes_per_gpu)


def _miss_key(m: FitMiss) -> tuple:  # type: ignore[type-arg]
    return (m.gpu, m.tensor_parallel_size, m.pipeline_parallel_size, m.speculative, m.closeness,
            m.lacks, m.available_kv_bytes_per_gpu)


def _add_merged(rows: list, new: FitCandidate | FitMiss, key: Callable) -> None:  # type: ignore[type-arg]
    """Append `new`, or fold its KV dtype into a row that planned identically (same numbers on
    the same shape: `auto` that resolves to `fp8` on this GPU)."""
    k = key(new)
    for i, row in enumerate(rows):
        if key(row) == k:
            rows[i] = row.model_copy(update={"merged_kv_cache_dtypes": [
                *row.merged_kv_cache_dtypes, new.kv_cache_dtype]})
            return
    rows.append(new)


def _weights_need_more_gpus(base: Request, res: Resolved, gpu_rows: Sequence[hardware.Gpu],
                            misses: Sequence[FitMiss], max_gpus: int) -> dict[str, int]:
    """For each GPU type whose every planned shape was weight-limited: the fewest GPUs whose
    share of the weights leaves KV memory (analysis.weights_limit), beyond --max-gpus."""
    from kvplan.analysis.weights_limit import fewest_gpus_for_weights
    from kvplan.pipeline.deploy import budget_at

    out: dict[str, int] = {}
    for g in gpu_rows:
        mine = [m for m in misses if m.gpu == g.name]
        if not mine or not all(m.weights_limited for m in mine):
            continue
        req = replace(base, gpu=g.name, explain=False, diagnose_weights=False,
                      deployment=replace(base.deployment, speculative_method=None,
                                         num_speculative_tokens=0),
                      draft=None)
        best = fewest_gpus_for_weights(budget_at(req, res), req.deployment.tensor_parallel_size,
                                       max_gpus + 1)
        if best is not None:
            out[g.name] = best[0]
    return dict(sorted(out.items(), key=lambda kv: kv[1]))


def _plan_shape(base: Request, shape: Shape, res: Resolved, *, max_model_len: int,
                concurrency: int, max_gpus: int, method: str | None,
                workload: Workload | None = None) -> FitCandidate | FitMiss | FitSkip:
    """Plan one replica; a candidate (with the smallest DP that reaches the target), a miss, or
    the reason it cannot be planned at all."""
    dep = replace(base.deployment, tensor_parallel_size=shape.tp, pipeline_parallel_size=shape.pp,
                  kv_cache_dtype=shape.kv_dtype, max_model_len=max_model_len,
                  auto_fit_max_model_len=False)
    if not shape.speculative:
        dep = replace(dep, speculative_method=None, num_speculative_tokens=0,
                      draft_kv_cache_dtype=None, draft_tensor_parallel_size=None,
                      draft_attention_backend=None, draft_block_size=None)
    req = replace(base, gpu=shape.gpu.name, deployment=dep, data_parallel_size=1, explain=False,
                  draft=base.draft if shape.speculative else None, diagnose_weights=False)
    try:
        ev = evaluate(req, res)
    except KvplanError as exc:
        return FitSkip(gpu=shape.gpu.name, kv_cache_dtype=None, tensor_parallel_size=shape.tp,
                       pipeline_parallel_size=shape.pp, reason=exc.message)
    p = ev.plan

    avail = ev.budget.available_kv_bytes_per_gpu

    def miss(closeness: float, lacks: str) -> FitMiss:
        return FitMiss(gpu=shape.gpu.name, tensor_parallel_size=shape.tp,
                       pipeline_parallel_size=shape.pp, kv_cache_dtype=shape.kv_dtype,
                       speculative=shape.speculative, usd_per_gpu_hour=shape.usd_per_gpu_hour,
                       closeness=round(max(0.0, min(closeness, 0.9999)), 4), lacks=lacks,
                       weights_limited=p.weights_limit is not None,
                       available_kv_bytes_per_gpu=avail)

    if p.weights_limit is not None:
        return miss(0.0, p.weights_limit.summary.replace(": no max_model_len fits", ""))
    if avail <= 0:
        return miss(0.0, f"weights and runtime overheads leave no KV memory per GPU "
                         f"(estimate {format_gib(avail)} GiB)")
    if not p.fits or p.max_concurrency is None or p.kv_cache_size_tokens is None:
        needed = max(p.total_bytes_needed, default=0)
        largest = min(p.estimated_max_model_len, default=0)
        if p.error_message and not needed:
            return miss(0.0, p.error_message)
        return miss(avail / needed / concurrency if needed else 0.0,
                    f"one {max_model_len:,}-token request needs {format_gib(needed)} GiB of KV per "
                    f"GPU, {format_gib(avail)} GiB available (short "
                    f"{format_gib(needed - avail)} GiB); largest max_model_len that fits: "
                    f"{largest:,}")
    seqs = ev.built.max_num_seqs  # the scheduler's cap on running requests
    per_replica = min(int(p.max_concurrency + 1e-9), seqs)
    if workload is not None:
        from kvplan.pipeline.workload import for_evaluation

        try:
            per_replica = for_evaluation(ev, req, [workload])[0].max_concurrent_without_preemption
        except KvplanError as exc:
            return FitSkip(gpu=shape.gpu.name, kv_cache_dtype=None, tensor_parallel_size=shape.tp,
                           pipeline_parallel_size=shape.pp, reason=exc.message)
        if per_replica < 1:
            return miss(0.0, f"not one {workload.label} request runs without preemption")
    if per_replica < 1:
        return miss(p.max_concurrency / concurrency, f"max concurrency {p.max_concurrency:.2f} at "
                                       f"{max_model_len:,} tokens: not one whole request")
    dp = math.ceil(concurrency / per_replica)
    per_dp_gpus = shape.tp * shape.pp
    if dp * per_dp_gpus > max_gpus:
        most = max_gpus // per_dp_gpus
        capped = " (max_num_seqs)" if per_replica == seqs else ""
        return miss(most * per_replica / concurrency,
                    f"{per_replica} request(s) per replica{capped}: {concurrency} need DP {dp} = "
                    f"{dp * per_dp_gpus} GPUs, more than --max-gpus {max_gpus} "
                    f"(at most {most * per_replica} requests)")
    total = p.max_concurrency * dp
    reached = per_replica * dp if workload is not None else total
    usd_gpu = shape.usd_per_gpu_hour
    serve, check = command_lines(req, gpu=shape.gpu.name, dp=dp, speculative=shape.speculative,
                                 method=method)
    if workload is not None:  # the check line answers the same question
        check += f" --workload {shlex.quote(workload.label)}"
    return FitCandidate(
        gpu=shape.gpu.name, num_gpus=dp * per_dp_gpus, tensor_parallel_size=shape.tp,
        pipeline_parallel_size=shape.pp, data_parallel_size=dp, kv_cache_dtype=shape.kv_dtype,
        speculative=shape.speculative, max_concurrency=round(total, 4),
        requests_per_replica=per_replica, kv_cache_size_tokens=p.kv_cache_size_tokens,
        available_kv_bytes_per_gpu=avail,
        headroom_pct=round((reached / concurrency - 1) * 100, 1),
        usd_per_hour=None if usd_gpu is None else round(usd_gpu * dp * per_dp_gpus, 4),
        usd_per_gpu_hour=usd_gpu,
        price_source=None if usd_gpu is None else shape.price_source,
        total_memory_nominal=shape.gpu.total_memory_nominal, vllm_serve=serve,
        kvplan_check=check, kv_cache_dequantised=shape.dequantised,
        workload_concurrency=per_replica * dp if workload is not None else None)
