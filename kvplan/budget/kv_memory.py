"""Available KV-cache memory per GPU: explicit, copied from a vLLM log, or estimated.

vLLM measures this at start-up (`Worker.determine_available_memory`, vllm/v1/worker/gpu_worker.py):

    requested = ceil(total × gpu_memory_utilization)               # v1/worker/utils.request_memory
    available = requested − (weights + non-torch + activation peak) − CUDA-graph estimate

Offline, only the weights are known well. The other terms are simple formulas whose constants are
fitted on real start-up logs (`kvplan/data/vllm-memory-profiles.jsonl`) by `bench/calibrate.py`;
`docs/calibration.md` shows how close they come. Every term of an estimate is listed with its
value and where it came from, so nothing is hidden. Prefer `--kv-cache-memory` or a copied
"Available KV cache memory: … GiB" line whenever you have a real run.
"""

from __future__ import annotations

import math
import re
from enum import StrEnum

from kvplan.budget.hardware import Gpu, gpu_total_memory_bytes, sm_version
from kvplan.engines.vllm.build.batch import get_batch_defaults
from kvplan.engines.vllm.profiles import PROFILES, VllmProfile
from kvplan.errors import InputError
from kvplan.frozen import FrozenStrict
from kvplan.units import GiB, format_gib, parse_size_bytes

# vLLM's EngineArgs.get_batch_defaults (one copy, in the vLLM engine): (max_num_batched_tokens,
# max_num_seqs) for a GPU
default_batch_limits = get_batch_defaults


class BudgetMode(StrEnum):
    EXPLICIT = "explicit_kv_cache_memory"  # --kv-cache-memory (vLLM's kv_cache_memory_bytes)
    FROM_LOG = "from_log"  # "Available KV cache memory: X GiB" from a real start-up
    ESTIMATED = "estimated"  # total × util − weights − non-torch − activation − CUDA graphs


class BudgetTerm(FrozenStrict):
    """One line of the estimate: signed bytes (+ requested, − deductions) and its provenance."""

    name: str
    num_bytes: int
    how: str

    @property
    def gib(self) -> str:
        return format_gib(self.num_bytes)


class TermComparison(FrozenStrict):
    """One memory term as vLLM's log reports it, beside kvplan's estimate of it."""

    name: str
    logged_bytes: int | None  # GiB as logged × 2^30 (±0.005 GiB)
    estimated_bytes: int | None

    @property
    def difference_bytes(self) -> int | None:
        if self.logged_bytes is None or self.estimated_bytes is None:
            return None
        return self.estimated_bytes - self.logged_bytes


class KvBudget(FrozenStrict):
    mode: BudgetMode
    available_kv_bytes_per_gpu: int
    breakdown: tuple[BudgetTerm, ...] = ()
    # vLLM's logged terms beside kvplan's estimate of each (a log with its memory lines + a GPU)
    log_comparison: tuple[TermComparison, ...] = ()
    warnings: tuple[str, ...] = ()
    vllm_version: str | None = None
    gpu_memory_utilization: float | None = None
    total_memory_bytes: int | None = None
    extensible_kv_cache: bool | None = None

    @property
    def available_kv_gib(self) -> str:
        """As vLLM prints it (`format_gib`: rounded to 2 decimals)."""
        return format_gib(self.available_kv_bytes_per_gpu)


# --------------------------------------------------------------------------------------------
# Explicit and logged budgets


def explicit_budget(num_bytes: int | str, *, gpu_memory_utilization: float | None = None
                    ) -> KvBudget:
    """`--kv-cache-memory` (vLLM `kv_cache_memory_bytes`): used as is, per GPU.

    vLLM still runs the profile pass but ignores gpu_memory_utilization; in 0.34 it also turns
    the extensible KV cache off. The multimodal IPC reservation (0 by default) is not subtracted.
    """
    b = num_bytes if isinstance(num_bytes, int) else parse_size_bytes(num_bytes)
    warnings = []
    if gpu_memory_utilization is not None:
        warnings.append("gpu_memory_utilization is ignored when the KV cache memory is given "
                        "(and vLLM 0.34 disables the extensible KV cache)")
    if b == 0:
        warnings.append("vLLM itself reads --kv-cache-memory 0 as unset and sizes the cache from "
                        "gpu_memory_utilization (gpu_worker.py: `if kv_cache_memory_bytes:`); "
                        "planned here as 0 bytes for the KV cache")
    return KvBudget(
        mode=BudgetMode.EXPLICIT, available_kv_bytes_per_gpu=b,
        breakdown=(BudgetTerm(name="kv_cache_memory_bytes", num_bytes=b,
                              how="given (vLLM: CacheConfig.kv_cache_memory_bytes)"),),
        warnings=tuple(warnings), extensible_kv_cache=False,
    )


def budget_from_log_gib(gib: float | str) -> KvBudget:
    """The number from a vLLM log line "Available KV cache memory: 12.34 GiB" → bytes.

    vLLM prints `format_gib` (bytes / 2^30 rounded to 2 decimals), so the true value is within
    ±0.005 GiB (±5.4 MB) of `gib × 2^30`.
    """
    try:
        value = float(str(gib).strip().removesuffix("GiB").strip())
    except ValueError:
        raise InputError(f"cannot read the logged KV memory {gib!r}",
                         hint="give the number from 'Available KV cache memory: 12.34 GiB'") from None
    if not math.isfinite(value):
        raise InputError(f"the logged KV memory must be a number, got {gib!r}",
                         hint="give the number from 'Available KV cache memory: 12.34 GiB'")
    b = int(round(value * GiB))
    warnings = [f"the log rounds to 2 decimals: the true value is within ±0.005 GiB "
                f"({int(0.005 * GiB):,} bytes) of {value} GiB"]
    if b <= 0:
        warnings.append(f"vLLM measured {value} GiB for the KV cache: the weights and the memory "
                        "reserved for activations, non-torch allocations and CUDA graphs take all "
                        "of the requested memory (total × gpu_memory_utilization) and more")
    return KvBudget(
        mode=BudgetMode.FROM_LOG, available_kv_bytes_per_gpu=b,
        breakdown=(BudgetTerm(name="available KV cache memory (logged)", num_bytes=b,
                              how=f"{value} GiB × 2^30 from vLLM's log"),),
        warnings=tuple(warnings),
    )


def explained_budget(budget: KvBudget, *, requested: tuple[int, str],
                     deductions: tuple[tuple[str, int, str], ...]) -> KvBudget:
    """The same budget, its breakdown written as vLLM measures it (gpu_worker.py
    determine_available_memory):

        available = requested − weights (− non-torch − activation peak − CUDA graphs)

    `requested` = (bytes, how); `deductions` = (name, bytes, how), e.g. the weights from the log's
    "Model loading took" line. What the deductions leave unexplained is one inferred term, so the
    lines add up to the given (or logged) available memory exactly."""
    given = budget.breakdown[0].how if budget.breakdown else "given"
    terms = [BudgetTerm(name="requested memory", num_bytes=requested[0], how=requested[1])]
    terms += [BudgetTerm(name=name, num_bytes=-b, how=how) for name, b, how in deductions]
    rest = sum(t.num_bytes for t in terms) - budget.available_kv_bytes_per_gpu
    if rest or not deductions:
        terms.append(BudgetTerm(
            name="everything else (inferred)", num_bytes=-rest,
            how=f"requested − the terms above − the available memory ({given})"))
    return budget.model_copy(update={"breakdown": tuple(terms)})


_LOG_RE = re.compile(r"Available KV cache memory:\s*(-?[0-9.]+)\s*GiB")


def budget_from_log_line(text: str) -> KvBudget:
    """Find "Available KV cache memory: X GiB" in pasted log text (the last occurrence wins)."""
    hits = _LOG_RE.findall(str(text))
    if not hits:
        raise InputError("no 'Available KV cache memory: … GiB' line in the text",
                         hint="copy the line vLLM logs at start-up (INFO, gpu_worker.py)")
    return budget_from_log_gib(hits[-1])


# --------------------------------------------------------------------------------------------
# Release rules (what the estimate needs per vLLM version)


def _version_tuple(version: str) -> tuple[int, int, int]:
    m = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if not m:
        raise InputError(f"cannot read vLLM version {version!r}", hint="e.g. 0.34.0")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def release_profile(vllm_version: str) -> VllmProfile:
    """The release profile of `vllm_version`; for a release kvplan does not plan (the budget also
    reads logs of older ones), the newest profile not after it, else the oldest."""
    v = _version_tuple(vllm_version)
    by_version = sorted(PROFILES.values(), key=lambda p: _version_tuple(p.version))
    before = [p for p in by_version if _version_tuple(p.version) <= v]
    return before[-1] if before else by_version[0]


def default_gpu_memory_utilization(vllm_version: str, *, extensible_kv_cache: bool) -> float:
    """vLLM: CacheConfig.resolved_gpu_memory_utilization (0.34) / the field default (≤ 0.33)."""
    v = _version_tuple(vllm_version)
    if v >= (0, 34, 0):
        return 1.0 if extensible_kv_cache else 0.92
    if v >= (0, 12, 0):
        return 0.92
    return 0.90  # V0-era logs with defaults show 0.90


def cudagraph_in_budget(vllm_version: str, *, enforce_eager: bool = False) -> bool:
    """Whether the CUDA-graph estimate is subtracted from the KV budget by default.

    VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 "since v0.21.0" (log text of 0.33/0.34);
    before that the pool came out of the (1 − util) headroom.
    """
    return not enforce_eager and _version_tuple(vllm_version) >= (0, 21, 0)


# --------------------------------------------------------------------------------------------
# Fitted constants — produced by `bench/calibrate.py` on kvplan/data/vllm-memory-profiles.jsonl
# (vLLM 0.19.0 start-up logs on H100, 21 rows). Re-run the script to refit; see docs/calibration.md.

# non-torch memory (CUDA context growth, cuBLAS workspaces, NCCL and custom all-reduce buffers)
NON_TORCH_TP1_GIB = 0.25  # median of the TP=1, PP=1 rows
NON_TORCH_PP_ONLY_GIB = 0.07  # the TP=1, PP=2 row
NON_TORCH_TP_BASE_GIB = 2.0133  # TP ≥ 2: base + per_log2 × log2(tp), least squares
NON_TORCH_TP_PER_LOG2_GIB = 0.0717
# activation peak = base + max(sampler, dense forward) + moe_coef × MoE workspace
ACT_BASE_GIB = 0.086
ACT_SAMPLER_BYTES_PER_LOGIT = 15.004  # × max_num_seqs × vocab_size (fp32 logits + sort indices …)
ACT_MOE_WORKSPACE_COEF = 1.082  # × fused-MoE workspace bytes (see _moe_workspace_bytes)
# CUDA-graph pool = base + per_layer_hidden × layers × hidden (+ per_layer_hidden_tp / tp) + MoE
CG_BASE_GIB = 0.5437
CG_PER_LAYER_HIDDEN_GIB = 9.2278e-07  # × layers on this stage × hidden_size
CG_PER_LAYER_HIDDEN_TP_GIB = 1.8069e-06  # × layers × hidden_size / tp
CG_MOE_GIB = 0.6064
# memory in use before vLLM's start-up snapshot (CUDA context, NCCL), for the 0.34 extensible cap
PRE_SNAPSHOT_SINGLE_GIB = 0.51  # "Free memory on device (78.68/79.19 GiB)" at TP=PP=1
PRE_SNAPSHOT_MULTI_GIB = 1.54  # median over the TP/PP > 1 rows
# vLLM: v1/worker/extensible_kv_cache.KV_CACHE_MARGIN_FLOOR_BYTES / KV_CACHE_MARGIN_FRACTION
EXTENSIBLE_MARGIN_FLOOR_BYTES = 1 << 30
EXTENSIBLE_MARGIN_FLOOR_BYTES_ROCM = 3 << 30
EXTENSIBLE_MARGIN_FRACTION = 0.75


def estimate_non_torch_bytes(tp: int, pp: int) -> tuple[int, str]:
    if tp <= 1 and pp <= 1:
        return int(round(NON_TORCH_TP1_GIB * GiB)), (
            f"{NON_TORCH_TP1_GIB} GiB: median of the TP=1 vLLM 0.19 logs (bench/calibrate.py)")
    if tp <= 1:
        return int(round(NON_TORCH_PP_ONLY_GIB * GiB)), (
            f"{NON_TORCH_PP_ONLY_GIB} GiB: the one PP-only log (TP=1, PP=2); single data point")
    g = NON_TORCH_TP_BASE_GIB + NON_TORCH_TP_PER_LOG2_GIB * math.log2(tp)
    return int(round(g * GiB)), (
        f"{NON_TORCH_TP_BASE_GIB} + {NON_TORCH_TP_PER_LOG2_GIB} × log2(tp={tp}) GiB = {g:.2f} GiB "
        "(NCCL + custom all-reduce buffers; fitted on TP 2/4 logs; GPUs without P2P use less)")


def _moe_workspace_bytes(max_num_batched_tokens: int, num_experts_per_tok: int,
                         moe_intermediate_size: int, hidden_size: int, tp: int) -> int:
    """Fused-MoE workspaces, bf16: M·topk·max(2I/tp, H) + M·topk·I/tp elements.

    The shapes of vLLM's TritonExperts.workspace_shapes (workspace13, workspace2).
    """
    if num_experts_per_tok <= 0 or moe_intermediate_size <= 0:
        return 0
    i = max(1, moe_intermediate_size // max(1, tp))
    m = max_num_batched_tokens * num_experts_per_tok
    return 2 * m * (max(2 * i, hidden_size) + i)


def estimate_activation_bytes(*, max_num_batched_tokens: int, max_num_seqs: int, hidden_size: int,
                              vocab_size: int, tp: int = 1, intermediate_size: int | None = None,
                              moe_intermediate_size: int | None = None,
                              num_experts_per_tok: int = 0, pooling: bool = False
                              ) -> tuple[int, str]:
    """Peak transient torch memory of the profile run (dummy forward + dummy sampler; a pooling
    model runs the pooler instead: vLLM v1/worker/gpu/model_runner.py profile_run)."""
    sampler = 0.0 if pooling else ACT_SAMPLER_BYTES_PER_LOGIT * max_num_seqs * vocab_size
    inter = (intermediate_size or 0) // max(1, tp)
    forward = 2 * max_num_batched_tokens * (3 * inter + 2 * hidden_size)  # MLP peak, bf16
    moe = ACT_MOE_WORKSPACE_COEF * _moe_workspace_bytes(
        max_num_batched_tokens, num_experts_per_tok, moe_intermediate_size or 0, hidden_size, tp)
    total = ACT_BASE_GIB * GiB + max(sampler, forward) + moe
    which = "sampler" if sampler >= forward else "dense forward"
    if pooling:
        which += "; pooling runner: no sampler"
    how = (f"{ACT_BASE_GIB} GiB + max(sampler {ACT_SAMPLER_BYTES_PER_LOGIT} B × {max_num_seqs} seqs "
           f"× {vocab_size} vocab, forward 2 B × {max_num_batched_tokens} tokens × (3·I/tp + 2·H))"
           f" [{which}]")
    if moe:
        how += (f" + {ACT_MOE_WORKSPACE_COEF} × fused-MoE workspace ({format_gib(int(moe))} GiB "
                f"for top-{num_experts_per_tok})")
    return int(round(total)), how


def estimate_cudagraph_bytes(*, num_layers: int, hidden_size: int, tp: int = 1,
                             is_moe: bool = False) -> tuple[int, str]:
    """CUDA-graph pool with the default capture sizes (up to 512 tokens)."""
    g = (CG_BASE_GIB + CG_PER_LAYER_HIDDEN_GIB * num_layers * hidden_size
         + CG_PER_LAYER_HIDDEN_TP_GIB * num_layers * hidden_size / max(1, tp)
         + (CG_MOE_GIB if is_moe else 0.0))
    return int(round(max(g, 0.0) * GiB)), (
        f"{CG_BASE_GIB} + layers×hidden×({CG_PER_LAYER_HIDDEN_GIB:.3g} + "
        f"{CG_PER_LAYER_HIDDEN_TP_GIB:.3g}/tp)" + (f" + {CG_MOE_GIB} (MoE)" if is_moe else "")
        + f" GiB = {g:.2f} GiB (fitted on vLLM 0.19 'CUDAGraph memory' logs)")


NO_KV_MEMORY_WARNING = "the estimate leaves no memory for the KV cache: vLLM would fail at start-up"


def estimate_budget(
    gpu_total_bytes: int | Gpu,
    gpu_memory_utilization: float | None,
    weight_bytes_per_rank: int,
    *,
    vllm_version: str = "0.34.0",
    tp: int = 1,
    pp: int = 1,
    hidden_size: int,
    vocab_size: int,
    num_layers: int,
    intermediate_size: int | None = None,
    moe_intermediate_size: int | None = None,
    num_experts_per_tok: int = 0,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    batch_defaults_note: str | None = None,
    enforce_eager: bool = False,
    extensible_kv_cache: bool | None = None,
    rocm: bool = False,
    gpu_name: str | None = None,
    weights_how: str = "given",
    gpu_memory_override: int | str | None = None,
    pooling: bool = False,
) -> KvBudget:
    """Estimate `available_kv_bytes_per_gpu` the way vLLM's start-up profile would measure it.

    `gpu_total_bytes` is the runtime total (or a catalogue `Gpu`; a row without a measured total
    raises `InputError` asking for --gpu-memory). `gpu_memory_utilization=None` takes the
    release default. `num_layers` is the model's decoder-layer count (split by `pp`);
    `weight_bytes_per_rank` comes from `kvplan.budget.weights` (`per_rank_bytes`).
    """
    warnings: list[str] = []
    if isinstance(gpu_total_bytes, Gpu):
        gpu_name = gpu_name or gpu_total_bytes.name
        rocm = rocm or gpu_total_bytes.is_amd
        total = gpu_total_memory_bytes(gpu_total_bytes, gpu_memory_override)
    else:
        total = parse_size_bytes(gpu_memory_override if gpu_memory_override is not None
                                 else gpu_total_bytes)
    if tp < 1 or pp < 1:
        raise InputError(f"tensor/pipeline parallel sizes must be >= 1 (got tp={tp}, pp={pp})")
    v = _version_tuple(vllm_version)
    extensible = bool(extensible_kv_cache) if extensible_kv_cache is not None else v >= (0, 34, 0)
    if extensible and v < (0, 34, 0):
        warnings.append(f"vLLM {vllm_version} has no extensible KV cache; ignored")
        extensible = False
    util = gpu_memory_utilization
    if util is None:
        util = default_gpu_memory_utilization(vllm_version, extensible_kv_cache=extensible)
        if (0, 12, 0) <= v < (0, 31, 0):
            warnings.append(f"the default gpu_memory_utilization of vLLM {vllm_version} is not "
                            f"verified ({util} assumed); pass it explicitly")
        util_how = f"vLLM {vllm_version} default" + (" with the extensible KV cache" if extensible else "")
    else:
        util_how = "given"
    if not 0 < util <= 1:
        raise InputError(f"gpu_memory_utilization must be in (0, 1], got {util}")
    mbt, seqs = max_num_batched_tokens, max_num_seqs
    if batch_defaults_note and mbt is not None and seqs is not None:
        warnings.append(f"max_num_batched_tokens={mbt}, max_num_seqs={seqs}: {batch_defaults_note}")
    elif mbt is None or seqs is None:
        sm = sm_version(gpu_total_bytes) if isinstance(gpu_total_bytes, Gpu) else None
        d_mbt, d_seqs = get_batch_defaults(total, gpu_name, sm=sm,
                                           profile=release_profile(vllm_version))
        mbt = mbt or d_mbt
        seqs = seqs or d_seqs
        warnings.append(f"max_num_batched_tokens={mbt}, max_num_seqs={seqs}: vLLM's `vllm serve` "
                        "defaults for this GPU (EngineArgs.get_batch_defaults)")
    requested = math.ceil(total * util)
    terms = [BudgetTerm(name="requested memory", num_bytes=requested,
                        how=f"ceil({total:,} B total × {util} ({util_how})) "
                            "(vLLM: v1/worker/utils.request_memory)"),
             BudgetTerm(name="model weights", num_bytes=-int(weight_bytes_per_rank), how=weights_how)]
    nt, nt_how = estimate_non_torch_bytes(tp, pp)
    terms.append(BudgetTerm(name="non-torch memory", num_bytes=-nt, how=nt_how))
    act, act_how = estimate_activation_bytes(
        max_num_batched_tokens=mbt, max_num_seqs=seqs, hidden_size=hidden_size,
        vocab_size=vocab_size, tp=tp, intermediate_size=intermediate_size,
        moe_intermediate_size=moe_intermediate_size, num_experts_per_tok=num_experts_per_tok,
        pooling=pooling)
    terms.append(BudgetTerm(name="activation peak", num_bytes=-act, how=act_how))
    layers_stage = math.ceil(num_layers / pp)
    is_moe = num_experts_per_tok > 0
    cg, cg_how = estimate_cudagraph_bytes(num_layers=layers_stage, hidden_size=hidden_size, tp=tp,
                                          is_moe=is_moe)
    if cudagraph_in_budget(vllm_version, enforce_eager=enforce_eager):
        terms.append(BudgetTerm(name="CUDA-graph estimate", num_bytes=-cg,
                                how=cg_how + "; subtracted since VLLM_MEMORY_PROFILER_ESTIMATE_"
                                    "CUDAGRAPHS=1 is the default (v0.21+)"))
    else:
        why = "--enforce-eager: no graphs" if enforce_eager else (
            f"not subtracted in vLLM {vllm_version}: the pool ({format_gib(cg)} GiB est.) comes out "
            "of the (1 − util) headroom")
        terms.append(BudgetTerm(name="CUDA-graph estimate", num_bytes=0, how=why))
        if not enforce_eager and total - requested < cg:
            warnings.append(f"the (1 − util) headroom ({format_gib(total - requested)} GiB) is "
                            f"smaller than the CUDA-graph pool (~{format_gib(cg)} GiB): start-up "
                            "may run out of memory during graph capture")
    if extensible:
        # vLLM: extensible_kv_cache.measure_kv_cache_bytes — available =
        #   min(requested − U, init_free − U − margin) − transient peak, U = memory in use
        floor = EXTENSIBLE_MARGIN_FLOOR_BYTES_ROCM if rocm else EXTENSIBLE_MARGIN_FLOOR_BYTES
        margin = max(floor, int(act * EXTENSIBLE_MARGIN_FRACTION))
        pre = PRE_SNAPSHOT_SINGLE_GIB if tp * pp == 1 else PRE_SNAPSHOT_MULTI_GIB
        init_free = total - int(round(pre * GiB))
        cap = max(0, requested - (init_free - margin))
        terms.append(BudgetTerm(
            name="extensible KV cache headroom", num_bytes=-cap,
            how=(f"vLLM 0.34 measure_kv_cache_bytes keeps max({format_gib(floor)} GiB, 0.75 × "
                 f"activation peak) = {format_gib(margin)} GiB free below the memory free at "
                 f"start-up (total − ~{pre} GiB in use before the snapshot, fitted); binding part "
                 "only")))
    available = sum(t.num_bytes for t in terms)
    if available <= 0:
        warnings.append(NO_KV_MEMORY_WARNING)
    warnings.append("estimated budget: non-torch, activation and CUDA-graph terms are fitted "
                    "formulas (median error 0.2% on vLLM 0.19 H100 logs, ~5% on 0.11, ~20% on V0, far "
                    "worse for multimodal encoders; see docs/calibration.md); use --kv-cache-memory or a "
                    "logged value to be sure")
    return KvBudget(mode=BudgetMode.ESTIMATED, available_kv_bytes_per_gpu=available,
                    breakdown=tuple(terms), warnings=tuple(warnings), vllm_version=vllm_version,
                    gpu_memory_utilization=util, total_memory_bytes=total,
                    extensible_kv_cache=extensible)
