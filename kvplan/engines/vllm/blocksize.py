"""Backend choice and block sizes, as vLLM's platform picks them before the planner runs.

Mirrors `Platform.update_block_size_for_backend` (Phase 1 preference, Phase 2
`_align_hybrid_block_size`), `CudaPlatform._get_backend_priorities` (simplified to the dtype and
SM rules that decide sizing), and the sliding-window block rule of `Attention.get_kv_cache_spec`
(`_largest_kernel_block_within`). Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.engines.vllm.backends import Backend, kernel_block_sizes, min_kernel_block
from kvplan.engines.vllm.profiles import SwBlockRule, VllmProfile
from kvplan.engines.vllm.specs import MultipleOf
from kvplan.errors import InputError, UnsupportedError
from kvplan.units import KVQuantMode, cdiv, kv_quant_mode, lcm

KernelSizes = tuple[int | MultipleOf, ...]


def supports_block_size(sizes: KernelSizes, block_size: int) -> bool:
    """vLLM: AttentionBackend.supports_block_size — a multiple of some supported size."""
    return any(block_size % (s.base if isinstance(s, MultipleOf) else s) == 0 for s in sizes)


def select_backend(*, kv_cache_dtype: str, is_mla: bool, sm: int | None, causal: bool = True,
                   override: str | None = None, head_size: int | None = None) -> Backend:
    """vLLM: platforms/cuda.py _get_backend_priorities — the first backend that can run the layer.

    Attention: SM10x causal layers start with FlashInfer, everything else (DFlash's non-causal
    layers included) with FlashAttention. nvfp4 KV exists only in FlashInfer, per-token-head KV
    only in Triton; FlashAttention-2 (before sm89) has no fp8 KV, so FlashInfer takes it; head
    sizes above 256 fall to Triton. MLA: FlashInfer MLA on SM10x, FlashAttention MLA on SM90,
    Triton MLA elsewhere; fp8_ds_mla / nvfp4_ds_mla use the sparse FlashMLA kernels.
    """
    if override:
        try:
            return Backend(override.upper())
        except ValueError:
            raise InputError(f"unknown attention backend {override!r}",
                             hint=f"known: {', '.join(b.value for b in Backend)}") from None
    mode = kv_quant_mode(kv_cache_dtype)
    if is_mla:
        if kv_cache_dtype in ("fp8_ds_mla", "nvfp4_ds_mla"):
            return Backend.FLASHMLA_SPARSE
        if mode.is_per_token_head:
            return Backend.TRITON_MLA
        if sm is not None and 100 <= sm < 110:
            return Backend.FLASHINFER_MLA
        if sm == 90:
            return Backend.FLASH_ATTN_MLA
        return Backend.TRITON_MLA
    if mode.is_nvfp4:
        return Backend.FLASHINFER  # the only backend with nvfp4 KV (hardware gate: deploy.py)
    if mode.is_per_token_head:
        return Backend.TRITON_ATTN
    if head_size is not None and head_size > 256:
        return Backend.TRITON_ATTN
    if sm is not None and 100 <= sm < 110 and causal:
        return Backend.FLASHINFER
    if mode is KVQuantMode.FP8_PER_TENSOR and sm is not None and sm < 89:
        return Backend.FLASHINFER
    return Backend.FLASH_ATTN


# vLLM: <Backend>.supported_kv_cache_dtypes of the SM8x/SM9x sparse MLA tail (0.31–0.34 alike)
_SPARSE_KV_DTYPES = {
    Backend.FLASH_ATTN_MLA_SPARSE: ("auto", "float16", "bfloat16"),
    Backend.FLASHMLA_SPARSE: ("auto", "bfloat16", "fp8_ds_mla", "fp8", "nvfp4_ds_mla"),
    Backend.FLASHINFER_MLA_SPARSE_SM90: ("auto", "bfloat16", "fp8", "fp8_e4m3"),
}


def _sparse_tail_accepts(backend: Backend, kv_cache_dtype: str, sm: int,
                         head_size: int | None, nope: bool) -> bool:
    """vLLM: the backend's validate_configuration on SM8x/SM9x (KV dtype, compute capability,
    FlashMLA sparse's 512-wide NoPE rule; FlashInfer SM90 needs flashinfer >= 0.6.18, which
    vLLM's wheels pin, and kv_lora_rank 512 with qk_rope_head_dim 0 or 64, as every DSA model)."""
    if kv_cache_dtype not in _SPARSE_KV_DTYPES[backend]:
        return False
    if backend is Backend.FLASHMLA_SPARSE:
        if kv_cache_dtype == "nvfp4_ds_mla":
            return False  # SM100 only
        if head_size == 512:  # NoPE only, bf16 or the ds_mla layout, SM90
            return nope and sm // 10 == 9 and kv_cache_dtype in ("auto", "bfloat16",
                                                                 "fp8_ds_mla")
        return sm // 10 in (9, 10)
    return sm // 10 == 9  # FlashAttention sparse and FlashInfer SM90: SM9x only


def select_sparse_mla_backend(*, kv_cache_dtype: str, sm: int | None,
                              override: str | None = None, head_size: int | None = None,
                              nope: bool = False) -> Backend:
    """vLLM: platforms/cuda.py _get_backend_priorities, the sparse MLA tail (DSA models): the
    first sparse backend that takes the KV dtype (0.31–0.34 alike).

    SM10x: quantized KV → FlashInfer sparse (plain fp8 rows), bf16 / the ds_mla blobs → FlashMLA
    sparse. Elsewhere: FlashAttention sparse, FlashMLA sparse, FlashInfer's SM90 sparse backend
    (first for a 512-wide latent), the first that takes the KV dtype: bf16 → FlashAttention;
    `fp8` (FlashMLA's alias) → FlashMLA sparse, which serves it as fp8_ds_mla
    (mla_attention._canonicalize_sparse_mla_kv_cache_dtype); `fp8_e4m3` (e.g. a ModelOpt
    checkpoint's FP8 KV) → FlashInfer SM90, plain fp8 latent rows.
    """
    if override:
        return select_backend(kv_cache_dtype=kv_cache_dtype, is_mla=True, sm=sm,
                              override=override)
    mode = kv_quant_mode(kv_cache_dtype)
    if mode.is_per_token_head:
        raise UnsupportedError(f"no sparse MLA backend takes KV cache dtype {kv_cache_dtype}",
                               hint="use auto, bfloat16 or fp8")
    quantized = mode is not KVQuantMode.NONE
    if sm is not None and 100 <= sm < 110:
        if quantized and kv_cache_dtype not in ("fp8_ds_mla", "nvfp4_ds_mla"):
            return Backend.FLASHINFER_MLA_SPARSE
        return Backend.FLASHMLA_SPARSE
    tail = [Backend.FLASH_ATTN_MLA_SPARSE, Backend.FLASHMLA_SPARSE]
    if head_size == 512:
        tail.insert(0, Backend.FLASHINFER_MLA_SPARSE_SM90)
    else:
        tail.append(Backend.FLASHINFER_MLA_SPARSE_SM90)
    for backend in tail:
        if _sparse_tail_accepts(backend, kv_cache_dtype, 90 if sm is None else sm, head_size,
                                nope):
            return backend
    raise UnsupportedError(
        f"no sparse MLA attention backend runs KV cache dtype {kv_cache_dtype} on "
        f"SM {sm if sm is not None else '?'} (vLLM: FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE and "
        "FLASHINFER_MLA_SPARSE_SM90 need SM9x; the last two take fp8)",
        hint="plan it on an SM90 or SM100 GPU, with auto, bfloat16, fp8 or fp8_e4m3")


def preferred_block_size(backend_sizes: Sequence[KernelSizes], default: int) -> int:
    """vLLM: Platform._preferred_block_size_for_backends (Phase 1, no --block-size given)."""
    if not backend_sizes:
        return default
    if len(backend_sizes) == 1:
        sizes = backend_sizes[0]
        return default if supports_block_size(sizes, default) else min_kernel_block(sizes)
    if all(supports_block_size(s, default) for s in backend_sizes):
        return default
    # smallest lcm of one supported base per backend that every backend supports
    best: int | None = None

    def walk(i: int, acc: int) -> None:
        nonlocal best
        if i == len(backend_sizes):
            if all(supports_block_size(s, acc) for s in backend_sizes):
                best = acc if best is None else min(best, acc)
            return
        for s in backend_sizes[i]:
            walk(i + 1, lcm(acc, s.base if isinstance(s, MultipleOf) else s))

    walk(0, 1)
    if best is None:
        raise UnsupportedError("The attention backends share no supported KV cache block size ("
                               + "; ".join(str([getattr(x, "base", x) for x in sz])
                                           for sz in backend_sizes) + ").")
    return best


def check_aligned_block_size(block_size: int, pre_block_size: int,
                             backends: Sequence[tuple[str, KernelSizes]]) -> None:
    """vLLM: Platform._check_aligned_block_size (0.32+) — alignment must not leave a size a
    sibling backend rejects."""
    if block_size == pre_block_size:
        return
    rejecting = [name for name, sizes in backends if not supports_block_size(sizes, block_size)]
    if rejecting:
        raise UnsupportedError(f"Aligned KV cache block size {block_size} is not supported by "
                               f"attention backend(s): {', '.join(rejecting)}.",
                               hint="vLLM would refuse to start; try another --attention-backend "
                                    "or --block-size")


@dataclass(frozen=True)
class HybridAlignment:
    block_size: int
    mamba_page_size_padded: int | None  # None when the pages already match
    kernel_block_alignment: int


def align_hybrid_block_size(profile: VllmProfile, *, block_size: int,
                            primary_sizes: KernelSizes, all_sizes: Sequence[KernelSizes],
                            attn_page_per_token: int, mamba_page: int, use_mla: bool = False,
                            align_mode: bool = False,
                            checkpoint_alignment: int | None = None) -> HybridAlignment:
    """vLLM: Platform._align_hybrid_block_size (Phase 2) for the given release.

    A = max(min kernel block of the first backend, block_size) [MLA: ≥ 128], lcm'd with the
    Mamba prefill-checkpoint alignment in align mode (0.33+); block = A·cdiv(mamba_page,
    A·attn_page_per_token), rounded up to the lcm of every backend's smallest block (0.32+).
    """
    if mamba_page == 0:
        return HybridAlignment(block_size, None, block_size)
    a = max(min_kernel_block(primary_sizes), block_size)
    if use_mla:
        a = max(a, 128)
    if align_mode and profile.hybrid_align_checkpoint:
        a = lcm(a, checkpoint_alignment or 1)
    blk = a * cdiv(mamba_page, a * attn_page_per_token)
    if profile.hybrid_align_backend_lcm and all_sizes:
        backend_lcm = lcm(*(min_kernel_block(s) for s in all_sizes))
        blk = backend_lcm * cdiv(blk, backend_lcm)
    new_block = max(block_size, blk)
    attn_page = new_block * attn_page_per_token
    if attn_page < mamba_page:  # vLLM asserts attn_page_size >= mamba_page_size
        raise AssertionError("attention page smaller than the Mamba page after alignment")
    return HybridAlignment(new_block, None if attn_page == mamba_page else attn_page, a)


def sliding_window_block_size(profile: VllmProfile, *, sizes: KernelSizes, sw_per_token: int,
                              block_size: int, shared_page: int | None = None) -> int:
    """vLLM: Attention.get_kv_cache_spec → _largest_kernel_block_within for a SW layer.

    0.30–0.33: the largest kernel block whose page fits the primary page budget (for a
    MultipleOf backend: the primary block itself); 0.34 prefers a block dividing the primary one.
    """
    page_budget = shared_page or sw_per_token * block_size
    max_block = page_budget // sw_per_token
    candidates = [s for s in sizes if isinstance(s, int)]
    candidates += [max(s.base, max_block // s.base * s.base) for s in sizes
                   if isinstance(s, MultipleOf)]
    if not candidates:
        return block_size
    fitting = [b for b in candidates if b * sw_per_token <= page_budget]
    if profile.sw_block_rule is SwBlockRule.PREFER_DIVISOR and not shared_page:
        dividing = [b for b in fitting if block_size % b == 0]
        dividing += [b for s in sizes if isinstance(s, MultipleOf)
                     for b in range(s.base, max_block + 1, s.base) if block_size % b == 0]
        if dividing:
            return max(dividing)
    return max(fitting) if fitting else min(candidates)


def backend_kernel_sizes(backend: Backend, *, sm: int | None, num_q_heads: int | None = None,
                         num_kv_heads: int | None = None) -> KernelSizes:
    ratio = (num_q_heads // num_kv_heads) if num_q_heads and num_kv_heads else 1
    return kernel_block_sizes(backend, sm=sm, gqa_ratio=ratio)


__all__ = ["HybridAlignment", "KVQuantMode", "align_hybrid_block_size", "backend_kernel_sizes",
           "preferred_block_size", "select_backend", "select_sparse_mla_backend",
           "sliding_window_block_size", "supports_block_size"]
