"""One answer per question: does vLLM serve an fp8 / nvfp4 KV cache on this GPU, in this
release, and how. `check`, `gpus`, `fit` and `sweep` all read this table.

Three answers:

- **native**: vLLM has a backend for it and the GPU has the format in hardware (FP8 from sm89
  and on CDNA3+, FP4 on Blackwell);
- **dequantised**: vLLM accepts it, but the GPU has no such hardware; the kernel converts the
  cache to 16-bit before the attention math (fp8 on Ampere through FlashInfer, nvfp4 on
  Ampere/Ada/Hopper through FlashInfer's FA2 path). The memory is as planned, the attention is
  no faster than bfloat16;
- **refused**: no attention backend accepts it on this GPU; vLLM fails at start-up ("No valid
  attention backend found").

The rows mirror the CUDA backend selection of each release (`platforms/cuda.py
_get_backend_priorities` walks FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION; each backend's
`supports_compute_capability` and `supports_kv_cache_dtype`): FlashAttention takes fp8 only as
FA3 on sm90 / FA4 on sm100 (`fa_utils.flash_attn_supports_kv_cache_dtype`); FlashInfer takes
fp8 / fp8_e5m2 / nvfp4 from sm80 to sm121 (`FlashInferBackend.supports_compute_capability`),
nvfp4 through the TRT-LLM kernels on the sm100 family in every release and, from 0.32, through
its FA2 path on the sm80/sm90/sm120 families, plain `nvfp4` only (`_nvfp4_kv_on_fa2`,
`FlashInferBackend.supports_kv_cache_dtype`); the XQA decode kernel reads NVFP4 on sm12x
(`FlashInferMetadataBuilder`); Triton's fp8 needs SM89 (`TritonAttentionImpl.__init__`). MLA:
fp8 needs SM89+ (Triton MLA, FlashMLA, FlashInfer MLA), plain nvfp4 is refused
(`VllmConfig.validate_nvfp4_kv_cache_with_mla`). ROCm: `RocmPlatform.supports_fp8()` is true on
every CDNA part, with or without FP8 units; no NVFP4 KV kernels. The facts are read from each
release's source by `tools/kv_dtype_facts.py` and the table is tested against them.

What depends on the model (head size 64 or sinks on the FA2 path, DCP) stays in
`hardware.check_kv_dtype_supported`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from kvplan.budget.hardware import Gpu, sm_version
from kvplan.errors import InputError
from kvplan.units import normalize_kv_cache_dtype

# the releases the table answers for: engines/vllm/profiles.py's (a test keeps them equal; not
# imported, so that `kvplan gpus` loads no engine)
MODELLED_RELEASES = ("0.31.0", "0.32.0", "0.33.0", "0.34.0")


class KvSupport(StrEnum):
    NATIVE = "native"
    DEQUANTISED = "dequantised"
    REFUSED = "refused"


@dataclass(frozen=True)
class SupportRow:
    """From `since` (a release) on, `kv_format` with `attention` on `hardware` is `support`,
    through `path` (or refused for that reason), mirroring the vLLM code in `mirrors`."""

    kv_format: str  # "fp8" (fp8, fp8_e4m3, fp8_e5m2), "nvfp4", "nvfp4_variant" (nvfp4_4over6)
    attention: str  # "mha" (MHA/GQA backends) or "mla"
    hardware: str  # a HARDWARE class
    since: str
    support: KvSupport
    path: str
    mirrors: str


# hardware classes: the catalogue GPU → class rule is `hardware_class`
HARDWARE = {
    "sm70-sm75": "NVIDIA Volta/Turing",
    "sm80-sm86": "NVIDIA Ampere",
    "sm89": "NVIDIA Ada",
    "sm90": "NVIDIA Hopper",
    "sm100-family": "NVIDIA Blackwell (sm100/sm103)",
    "sm120-family": "NVIDIA Blackwell (sm120/sm121)",
    "amd-fp8": "AMD with FP8 units (CDNA3+)",
    "amd-no-fp8": "AMD without FP8 units (CDNA2)",
}

N, D, R = KvSupport.NATIVE, KvSupport.DEQUANTISED, KvSupport.REFUSED
_FI = "FlashInferBackend.supports_kv_cache_dtype / supports_compute_capability (sm80-sm121)"
_FA2_NVFP4 = "FlashInfer's FA2 path (_nvfp4_kv_on_fa2: families 80, 90, 120)"
_NO_NVFP4 = ("FlashInfer, the only backend with an NVFP4 KV cache, reads it only through the "
             "TRT-LLM kernels of the sm100 family in this release")

SUPPORT: tuple[SupportRow, ...] = (
    # fp8 (fp8 / fp8_e4m3 / fp8_e5m2), MHA / GQA attention
    SupportRow("fp8", "mha", "sm70-sm75", "0.31.0", R,
               "no backend: FlashAttention and FlashInfer need SM80+, Triton's fp8 needs SM89+",
               "FlashInferBackend.supports_compute_capability; TritonAttentionImpl.__init__"),
    SupportRow("fp8", "mha", "sm80-sm86", "0.31.0", D,
               "FlashInfer (FlashAttention 2 takes no fp8 KV; Triton's fp8 needs SM89)",
               f"flash_attn_supports_kv_cache_dtype; {_FI}"),
    SupportRow("fp8", "mha", "sm89", "0.31.0", N, "FlashInfer (FP8 tensor cores)", _FI),
    SupportRow("fp8", "mha", "sm90", "0.31.0", N, "FlashAttention 3",
               "flash_attn_supports_kv_cache_dtype (FA3 on sm90)"),
    SupportRow("fp8", "mha", "sm100-family", "0.31.0", N, "FlashInfer (TRT-LLM kernels)", _FI),
    SupportRow("fp8", "mha", "sm120-family", "0.31.0", N, "FlashInfer", _FI),
    SupportRow("fp8", "mha", "amd-fp8", "0.31.0", N, "ROCm attention (FP8 units)",
               "RocmPlatform.supports_fp8"),
    SupportRow("fp8", "mha", "amd-no-fp8", "0.31.0", D,
               "ROCm attention", "RocmPlatform.supports_fp8"),
    # fp8 with MLA: Triton MLA checks fp8e4nv (SM89); FlashMLA / FlashInfer MLA need sm90/sm100
    SupportRow("fp8", "mla", "sm70-sm75", "0.31.0", R, "no MLA backend takes fp8 below SM89",
               "TritonMLAImpl (fp8e4nv needs SM89)"),
    SupportRow("fp8", "mla", "sm80-sm86", "0.31.0", R, "no MLA backend takes fp8 below SM89",
               "TritonMLAImpl (fp8e4nv needs SM89)"),
    SupportRow("fp8", "mla", "sm89", "0.31.0", N, "Triton MLA", "TritonMLAImpl"),
    SupportRow("fp8", "mla", "sm90", "0.31.0", N, "FlashMLA / FlashAttention MLA",
               "_get_backend_priorities (MLA, sm90)"),
    SupportRow("fp8", "mla", "sm100-family", "0.31.0", N, "FlashInfer MLA",
               "_get_backend_priorities (MLA, sm100)"),
    SupportRow("fp8", "mla", "sm120-family", "0.31.0", N, "Triton MLA",
               "_get_backend_priorities (MLA, sm120)"),
    SupportRow("fp8", "mla", "amd-fp8", "0.31.0", N, "ROCm MLA (FP8 units)",
               "RocmPlatform.supports_fp8"),
    SupportRow("fp8", "mla", "amd-no-fp8", "0.31.0", D, "ROCm MLA",
               "RocmPlatform.supports_fp8"),
    # plain nvfp4, MHA / GQA attention: FlashInfer only
    SupportRow("nvfp4", "mha", "sm70-sm75", "0.31.0", R,
               "FlashInfer, the only backend with an NVFP4 KV cache, needs SM80+", _FI),
    SupportRow("nvfp4", "mha", "sm80-sm86", "0.31.0", R, _NO_NVFP4, _FI),
    SupportRow("nvfp4", "mha", "sm80-sm86", "0.32.0", D,
               f"{_FA2_NVFP4}, to the model dtype", _FI),
    SupportRow("nvfp4", "mha", "sm89", "0.31.0", R, _NO_NVFP4, _FI),
    SupportRow("nvfp4", "mha", "sm89", "0.32.0", D, f"{_FA2_NVFP4}, to the model dtype", _FI),
    SupportRow("nvfp4", "mha", "sm90", "0.31.0", R, _NO_NVFP4, _FI),
    SupportRow("nvfp4", "mha", "sm90", "0.32.0", D,
               f"{_FA2_NVFP4}, prefill and decode to the model dtype", _FI),
    SupportRow("nvfp4", "mha", "sm100-family", "0.31.0", N, "FlashInfer's TRT-LLM kernels", _FI),
    SupportRow("nvfp4", "mha", "sm120-family", "0.31.0", R, _NO_NVFP4, _FI),
    SupportRow("nvfp4", "mha", "sm120-family", "0.32.0", N,
               "FlashInfer: XQA decode reads NVFP4 on sm12x, FA2 prefill dequantises",
               f"{_FI}; FlashInferMetadataBuilder (XQA on family 120)"),
    SupportRow("nvfp4", "mha", "amd-fp8", "0.31.0", R, "ROCm has no NVFP4 KV kernels",
               "RocmPlatform (no FlashInfer)"),
    SupportRow("nvfp4", "mha", "amd-no-fp8", "0.31.0", R, "ROCm has no NVFP4 KV kernels",
               "RocmPlatform (no FlashInfer)"),
    # nvfp4_4over6 (a scale-searching writer): the TRT-LLM kernels of the sm100 family only
    *(SupportRow("nvfp4_variant", "mha", hw, "0.31.0", R,
                 "the TRT-LLM kernels of the sm100 family only; the FA2 path writes plain nvfp4",
                 "FlashInferBackend.supports_kv_cache_dtype")
      for hw in HARDWARE if hw != "sm100-family"),
    SupportRow("nvfp4_variant", "mha", "sm100-family", "0.31.0", N,
               "FlashInfer's TRT-LLM kernels", _FI),
    # plain nvfp4 with MLA: refused everywhere (nvfp4_ds_mla is MLA's own layout)
    *(SupportRow("nvfp4", "mla", hw, "0.31.0", R,
                 "vLLM refuses a plain nvfp4 KV cache with MLA (use fp8, auto or nvfp4_ds_mla)",
                 "VllmConfig.validate_nvfp4_kv_cache_with_mla")
      for hw in HARDWARE),
    *(SupportRow("nvfp4_variant", "mla", hw, "0.31.0", R,
                 "vLLM refuses an nvfp4 KV cache with MLA (use fp8, auto or nvfp4_ds_mla)",
                 "VllmConfig.validate_nvfp4_kv_cache_with_mla")
      for hw in HARDWARE),
)


@dataclass(frozen=True)
class KvDtypeSupport:
    """The answer for one GPU, KV dtype and release."""

    kv_cache_dtype: str
    gpu: str
    vllm_version: str
    support: KvSupport
    path: str
    mirrors: str

    @property
    def text(self) -> str:
        """One sentence for warnings and reasons."""
        fmt = "FP4" if self.kv_cache_dtype.startswith("nvfp4") else "FP8"
        units = "units" if "AMD" in self.gpu else "tensor cores"
        if self.support is KvSupport.REFUSED:
            return (f"vLLM {self.vllm_version} has no attention backend for an "
                    f"{self.kv_cache_dtype} KV cache on {self.gpu} ({self.path}): it fails at "
                    "start-up")
        if self.support is KvSupport.DEQUANTISED:
            return (f"vLLM {self.vllm_version} serves an {self.kv_cache_dtype} KV cache on "
                    f"{self.gpu} only dequantised, through {self.path}: no {fmt} {units}, so "
                    "the memory is as planned but attention is no faster than bfloat16")
        return (f"vLLM {self.vllm_version} serves an {self.kv_cache_dtype} KV cache on {self.gpu} "
                f"natively ({self.path})")


def hardware_class(gpu: Gpu) -> str | None:
    """The gpu's class in `HARDWARE`, None when kvplan has no opinion (an unknown vendor)."""
    if gpu.is_amd:
        return "amd-fp8" if gpu.supports_fp8_kv else "amd-no-fp8"
    sm = sm_version(gpu)
    if sm is None:
        return None
    if sm < 80:
        return "sm70-sm75"
    if sm < 89:
        return "sm80-sm86"
    if sm < 90:
        return "sm89"
    if sm < 100:
        return "sm90"
    if sm < 110:
        return "sm100-family"
    if 120 <= sm < 130:
        return "sm120-family"
    return None


def kv_format(kv_cache_dtype: str) -> str | None:
    """The table's format for a --kv-cache-dtype, None for the dtypes it does not gate."""
    d = normalize_kv_cache_dtype(kv_cache_dtype)
    if d in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        return "fp8"
    if d == "nvfp4":
        return "nvfp4"
    if d.startswith("nvfp4") and d != "nvfp4_ds_mla":
        return "nvfp4_variant"
    return None


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".")[:3] if x.isdigit())


def kv_dtype_support(gpu: Gpu, kv_cache_dtype: str, vllm_version: str, *,
                     use_mla: bool = False) -> KvDtypeSupport | None:
    """The table's answer for `kv_cache_dtype` on `gpu` in `vllm_version` (a profile release),
    or None when the table does not gate it (auto, bfloat16, per-token-head, *_ds_mla, an
    unknown GPU)."""
    fmt = kv_format(kv_cache_dtype)
    hw = hardware_class(gpu)
    if fmt is None or hw is None:
        return None
    attention = "mla" if use_mla else "mha"
    rows = [r for r in SUPPORT if (r.kv_format, r.attention, r.hardware) == (fmt, attention, hw)
            and _version(r.since) <= _version(vllm_version)]
    if not rows:
        return None
    row = max(rows, key=lambda r: _version(r.since))
    return KvDtypeSupport(kv_cache_dtype=normalize_kv_cache_dtype(kv_cache_dtype),
                          gpu=f"{gpu.name} ({gpu.arch})", vllm_version=vllm_version,
                          support=row.support, path=row.path, mirrors=row.mirrors)


def release(vllm_version: str | None) -> str:
    """A release as the table names it ("0.33" → "0.33.0"; None → the newest modelled)."""
    if vllm_version is None:
        return MODELLED_RELEASES[-1]
    m = re.match(r"\s*v?(\d+)\.(\d+)", str(vllm_version))
    if not m:
        raise InputError(f"cannot read vLLM version {vllm_version!r}", hint="e.g. 0.34.0")
    return f"{int(m.group(1))}.{int(m.group(2))}.0"


def modelled_release(vllm_version: str | None) -> str:
    """`release`, and one the table answers for (else InputError naming those)."""
    r = release(vllm_version)
    if r not in MODELLED_RELEASES:
        raise InputError(f"unknown vLLM release {vllm_version!r}",
                         hint=f"supported: {', '.join(MODELLED_RELEASES)}")
    return r


def check_kv_dtype_supported(
    gpu: Gpu,
    kv_cache_dtype: str,
    *,
    vllm_version: str | None = None,
    use_mla: bool = False,
    head_size: int | None = None,
    has_sinks: bool = False,
    native_only: bool = False,
) -> str | None:
    """Why vLLM cannot run `kv_cache_dtype` on this GPU, or None if some attention backend can.

    fp8 / nvfp4 are the table's answer (`kv_dtype_support`); `native_only=True` also reports a
    dequantised answer. Beyond the table: FlashInfer's FA2 path misreads NVFP4 at head_size 64
    and has no sink prefill (`FlashInferBackend.supports_combination`, sm80/sm90/sm120 families,
    0.32+); no MLA backend takes fp8_e5m2; bfloat16 needs SM80 (`TritonAttentionImpl`,
    FlashAttention and FlashInfer alike); fp8_per_token_head runs on Triton only (SM89 for fp8);
    fp8_inc is Intel Neural Compressor's format (Gaudi/XPU).
    """
    d = normalize_kv_cache_dtype(kv_cache_dtype)
    ver = release(vllm_version)
    tag = f"{gpu.name} ({gpu.arch})"
    if d in ("auto", "float16", "float32"):
        return None
    if d == "fp8_inc":
        return f"{tag}: fp8_inc is Intel Neural Compressor's KV format (Gaudi/XPU) only"
    sm = sm_version(gpu)
    if d == "fp8_e5m2" and use_mla and gpu.is_nvidia:
        return f"{tag}: no MLA backend accepts fp8_e5m2 (use fp8 / fp8_e4m3)"
    answer = kv_dtype_support(gpu, d, ver, use_mla=use_mla)
    if answer is not None:
        if answer.support is KvSupport.REFUSED:
            return answer.text
        fa2 = (answer.kv_cache_dtype == "nvfp4" and sm is not None and sm // 10 in (8, 9, 12)
               and not use_mla)
        if fa2 and head_size == 64:
            return f"{tag}: FlashInfer's FA2 prefill misreads an NVFP4 KV cache at head_size 64"
        if fa2 and has_sinks:
            return f"{tag}: FlashInfer's sink prefill wrapper cannot read an NVFP4 KV cache"
        if native_only and answer.support is KvSupport.DEQUANTISED:
            return answer.text
        return None
    if sm is None:  # AMD or an unknown vendor: the rest is CUDA's
        return None
    cc = f"sm{sm}"
    if d == "bfloat16" and sm < 80:
        return (f"{tag}: a bfloat16 KV cache needs SM80+ (TritonAttentionImpl; FlashAttention "
                f"and FlashInfer need SM80 too); use --kv-cache-dtype float16")
    if d == "fp8_per_token_head" and sm < 89:
        return (f"{tag}: fp8_per_token_head runs only on the Triton backend, which needs "
                f"SM89+ for fp8 ({cc})")
    return None  # per-token-head int8/int4 (Triton, any CC), *_ds_mla: not gated here


def support_summary(gpu: Gpu, vllm_version: str) -> dict[str, dict[str, str]]:
    """`kvplan gpus`: the table's fp8 and nvfp4 answers (MHA attention) for one GPU."""
    out = {}
    for dt in ("fp8", "nvfp4"):
        a = kv_dtype_support(gpu, dt, vllm_version)
        out[dt] = ({"support": KvSupport.REFUSED.value, "path": "not in the table"} if a is None
                   else {"support": a.support.value, "path": a.path, "vllm": a.mirrors})
    return {"vllm_version": vllm_version, **out}  # type: ignore[dict-item]
