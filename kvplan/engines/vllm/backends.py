"""Attention backends: kernel block sizes and the page packing each applies (customize_spec)."""

from __future__ import annotations

from dataclasses import replace
from enum import StrEnum

from kvplan.engines.vllm.specs import AttentionSpec, MLAAttentionSpec, MultipleOf, SlidingWindowMLASpec
from kvplan.units import KVQuantMode, dtype_size_bytes, nvfp4_kv_cache_full_dim

FP32_BYTES = 4


class Backend(StrEnum):
    FLASH_ATTN = "FLASH_ATTN"
    FLASHINFER = "FLASHINFER"
    TRITON_ATTN = "TRITON_ATTN"
    FLEX_ATTENTION = "FLEX_ATTENTION"
    FLASHMLA = "FLASHMLA"
    CUTLASS_MLA = "CUTLASS_MLA"
    FLASHINFER_MLA = "FLASHINFER_MLA"
    TRITON_MLA = "TRITON_MLA"
    FLASH_ATTN_MLA = "FLASH_ATTN_MLA"
    FLASHMLA_SPARSE = "FLASHMLA_SPARSE"
    FLASH_ATTN_MLA_SPARSE = "FLASH_ATTN_MLA_SPARSE"
    FLASHINFER_MLA_SPARSE = "FLASHINFER_MLA_SPARSE"
    # FlashInfer's SM90 sparse MLA (plain latent rows, any KV dtype but the ds_mla blobs)
    FLASHINFER_MLA_SPARSE_SM90 = "FLASHINFER_MLA_SPARSE_SM90"
    DEEPSEEK_V32_INDEXER = "DEEPSEEK_V32_INDEXER"  # the DSA indexer's K cache
    # GLM-5.3-Flash (0.32+): the kpool-compressed indexer K cache and its tail ring
    GLM5_NEXT_INDEXER = "GLM5_NEXT_INDEXER"
    KPOOL_TAIL = "KPOOL_TAIL"
    INKLING_SCONV_SWA = "INKLING_SCONV_SWA"  # Inkling's short-conv state cache (no kernel)
    # DeepSeek-V4 (FlashMLA path): compressed MLA, SWA cache, indexer, compressor state rings
    FLASHMLA_SPARSE_DSV4 = "FLASHMLA_SPARSE_DSV4"
    DEEPSEEK_SPARSE_SWA = "DEEPSEEK_SPARSE_SWA"
    DEEPSEEK_V4_INDEXER = "DEEPSEEK_V4_INDEXER"
    DEEPSEEK_V4_COMPRESSOR = "DEEPSEEK_V4_COMPRESSOR"
    # MiniMax-M3 block-sparse GQA layers and their indexer side cache
    MINIMAX_M3_SPARSE = "MINIMAX_M3_SPARSE"
    MINIMAX_M3_INDEXER = "MINIMAX_M3_INDEXER"

    @property
    def is_mla(self) -> bool:
        return "MLA" in self.value


def kernel_block_sizes(backend: Backend, *, sm: int | None = None, gqa_ratio: int = 1,
                       index_kpool: int = 1) -> tuple[int | MultipleOf, ...]:
    """vLLM: <Backend>.get_supported_kernel_block_sizes (0.31–0.34, CUDA)."""
    if backend is Backend.GLM5_NEXT_INDEXER:
        # vLLM: Glm5NextIndexerBackend — index_kpool × the paged-MQA page sizes
        # (utils/deep_gemm.py get_paged_mqa_page_sizes: 32 or 64 entries, only 64 on SM12x)
        pages = (64,) if sm is not None and 120 <= sm < 130 else (32, 64)
        return tuple(index_kpool * p for p in pages)
    if backend in (Backend.KPOOL_TAIL, Backend.INKLING_SCONV_SWA):
        return (MultipleOf(1),)  # vLLM: KpoolTailBackend, InklingSconvBackend (the base class)
    if backend is Backend.FLASHINFER:
        if sm is not None and 100 <= sm < 110 and gqa_ratio > 1:
            return (16, 32, 64, 128, 256, 512, 1024)  # TRT-LLM attention on SM100
        return (16, 32, 64)
    if backend is Backend.FLASHMLA or backend is Backend.FLASHMLA_SPARSE:
        return (64,)
    if backend is Backend.CUTLASS_MLA:
        return (128,)
    if backend is Backend.FLASHINFER_MLA:
        return (32, 64)
    if backend is Backend.FLASH_ATTN_MLA_SPARSE:
        return (MultipleOf(64),)  # 0.31: [64] — the same blocks next to the indexer's [64]
    if backend is Backend.FLASHINFER_MLA_SPARSE:
        return (MultipleOf(32),)
    if backend is Backend.FLASHINFER_MLA_SPARSE_SM90:
        return (MultipleOf(64),)  # vLLM: FlashInferMLASparseSM90Backend
    if backend is Backend.DEEPSEEK_V32_INDEXER:
        return (64,)  # vLLM: DeepseekV32IndexerBackend (CUDA)
    if backend in (Backend.FLASHMLA_SPARSE_DSV4, Backend.DEEPSEEK_V4_INDEXER):
        return (256,)  # vLLM: DeepseekV4FlashMLABackend, DeepseekV4IndexerBackend
    if backend in (Backend.MINIMAX_M3_SPARSE, Backend.MINIMAX_M3_INDEXER):
        return (128,)  # vLLM: minimax_m3 common/sparse_attention.py, common/indexer.py
    if backend is Backend.DEEPSEEK_SPARSE_SWA:
        return (MultipleOf(32),)  # vLLM: DeepseekSparseSWABackend
    if backend is Backend.DEEPSEEK_V4_COMPRESSOR:
        return (MultipleOf(1),)  # vLLM: deepseek_v4/compressor.py CompressorBackend
    return (MultipleOf(16),)


def min_kernel_block(sizes: tuple[int | MultipleOf, ...]) -> int:
    return min(s.base if isinstance(s, MultipleOf) else s for s in sizes)


def flashinfer_customize(spec: AttentionSpec) -> AttentionSpec:
    """vLLM: FlashInferBackend.customize_spec — nvfp4: 2·H slots of (d/2 + d/16) bytes."""
    if spec.state_content_bytes is not None or not spec.kv_quant_mode.is_nvfp4:
        return spec
    assert spec.head_size_v is not None
    hs_k = nvfp4_kv_cache_full_dim(spec.head_size)
    if hs_k != nvfp4_kv_cache_full_dim(spec.head_size_v):
        raise ValueError("nvfp4 with asymmetric K/V head sizes not yet supported")
    return replace(spec, num_head_slots=2 * spec.num_kv_heads,
                   state_content_bytes=hs_k * dtype_size_bytes(spec.dtype))


def triton_customize(spec: AttentionSpec) -> AttentionSpec:
    """vLLM: TritonAttentionBackend.customize_spec — per-token-head: inline fp32 scale per K/V."""
    mode = spec.kv_quant_mode
    if spec.state_content_bytes is not None or not mode.is_per_token_head:
        return spec
    assert spec.head_size_v is not None
    hs_k, hs_v = spec.head_size, spec.head_size_v
    if mode is KVQuantMode.INT4_PER_TOKEN_HEAD:
        hs_k, hs_v = hs_k // 2, hs_v // 2
    content = (hs_k + hs_v) * dtype_size_bytes(spec.dtype) + 2 * FP32_BYTES
    return replace(spec, state_content_bytes=content)


def mla_customize(spec: AttentionSpec) -> AttentionSpec:
    """vLLM: MLACommonBackend.customize_spec — per-token-head latent + an fp32 scale pair."""
    mode = spec.kv_quant_mode
    if spec.state_content_bytes is not None or not mode.is_per_token_head:
        return spec
    head = spec.head_size // 2 if mode is KVQuantMode.INT4_PER_TOKEN_HEAD else spec.head_size
    return replace(spec, state_content_bytes=head * dtype_size_bytes(spec.dtype) + 2 * FP32_BYTES)


def customize_spec(backend: Backend | None, spec: AttentionSpec) -> AttentionSpec:
    """vLLM: worker utils.customize_attention_spec → backend.customize_spec."""
    if backend is None:
        return spec
    if backend is Backend.FLASHINFER:
        return flashinfer_customize(spec)
    if backend is Backend.TRITON_ATTN:
        return triton_customize(spec)
    if backend.is_mla and isinstance(spec, MLAAttentionSpec | SlidingWindowMLASpec):
        return mla_customize(spec)
    return spec
