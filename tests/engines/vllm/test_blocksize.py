"""Block-size selection: numbers worked out by hand from vLLM's formulas (shared docs §3, §13)."""

from __future__ import annotations

from math import prod

import pytest

from kvplan.engines.state_shapes import gdn_state_shapes
from kvplan.engines.vllm.backends import Backend, kernel_block_sizes
from kvplan.engines.vllm.blocksize import (
    align_hybrid_block_size,
    preferred_block_size,
    select_backend,
    sliding_window_block_size,
)
from kvplan.engines.vllm.profiles import get_profile

FA = kernel_block_sizes(Backend.FLASH_ATTN)
FI = kernel_block_sizes(Backend.FLASHINFER)
NVFP4_4x256 = 2 * 4 * (256 // 2 + 256 // 16)  # 1152 B/token/layer (FlashInfer packing)


def gdn_page(num_spec: int) -> int:
    # Qwen3.5-27B GDN: 16 k-heads, 48 v-heads, 128 x 128, conv kernel 4; conv bf16, ssm fp32
    conv, ssm = gdn_state_shapes(tp=1, num_k_heads=16, num_v_heads=48, head_k_dim=128,
                                 head_v_dim=128, conv_kernel_size=4, num_spec=num_spec)
    return prod(conv) * 2 + prod(ssm) * 4


def test_gdn_pages() -> None:
    assert gdn_page(7) == 204_800 + 3_145_728 == 3_350_528  # (10, 10240) bf16 + (48,128,128) fp32
    assert gdn_page(0) == 3_207_168


@pytest.mark.parametrize(("version", "num_spec", "expected_block"), [
    ("0.33.0", 7, 2912),  # 16 · cdiv(3,350,528, 16 · 1152) = 16 · 182
    ("0.34.0", 7, 2944),  # 64 · cdiv(3,350,528, 64 · 1152) = 64 · 46
    ("0.33.0", 0, 2784),  # 16 · cdiv(3,207,168, 18,432) = 16 · 174
    ("0.34.0", 0, 2816),  # 64 · cdiv(3,207,168, 73,728) = 64 · 44
    ("0.31.0", 7, 2912),
])
def test_hybrid_alignment_of_the_seed_model(version, num_spec, expected_block) -> None:
    profile = get_profile(version)
    default = preferred_block_size([FI, FA], profile.default_block_size)
    assert default == profile.default_block_size  # FlashInfer and FlashAttention both take it
    a = align_hybrid_block_size(profile, block_size=default, primary_sizes=FI,
                                all_sizes=[FI, FA], attn_page_per_token=NVFP4_4x256,
                                mamba_page=gdn_page(num_spec), align_mode=True)
    assert a.block_size == expected_block
    attn_page = expected_block * NVFP4_4x256
    # the Mamba page is padded to the attention page unless they already match (2784 · 1152)
    assert a.mamba_page_size_padded == (None if attn_page == gdn_page(num_spec) else attn_page)


def test_gdn_checkpoint_alignment_applies_from_0_33_in_align_mode() -> None:
    # FlashInfer GDN prefill (sm90) exports checkpoints on 64-token boundaries: A = lcm(16, 64)
    kw = dict(block_size=16, primary_sizes=FI, all_sizes=[FI, FA],
              attn_page_per_token=NVFP4_4x256, mamba_page=gdn_page(7), align_mode=True,
              checkpoint_alignment=64)
    assert align_hybrid_block_size(get_profile("0.33.0"), **kw).block_size == 2944
    assert align_hybrid_block_size(get_profile("0.32.0"), **kw).block_size == 2912


@pytest.mark.parametrize(("version", "block", "sizes", "expected"), [
    ("0.33.0", 2912, FA, 2912),  # MultipleOf(16): the primary block itself
    ("0.34.0", 2944, FA, 2944),
    ("0.33.0", 2912, FI, 64),  # int list: the largest ≤ the primary block
    ("0.34.0", 2944, FI, 64),
    ("0.34.0", 2912, kernel_block_sizes(Backend.FLASHINFER), 32),  # 2912 = 32 · 91: 64 ∤ 2912
])
def test_sliding_window_block_rule(version, block, sizes, expected) -> None:
    bf16_8x128 = 8 * (128 + 128) * 2  # 4096 B/token
    got = sliding_window_block_size(get_profile(version), sizes=sizes, sw_per_token=bf16_8x128,
                                    block_size=block)
    assert got == expected


def test_backend_choice() -> None:
    assert select_backend(kv_cache_dtype="nvfp4", is_mla=False, sm=100) is Backend.FLASHINFER
    assert select_backend(kv_cache_dtype="auto", is_mla=False, sm=90) is Backend.FLASH_ATTN
    assert select_backend(kv_cache_dtype="auto", is_mla=False, sm=100) is Backend.FLASHINFER
    assert select_backend(kv_cache_dtype="auto", is_mla=False, sm=100,
                          causal=False) is Backend.FLASH_ATTN  # DFlash drafts
    assert select_backend(kv_cache_dtype="fp8_per_token_head", is_mla=False,
                          sm=90) is Backend.TRITON_ATTN
    assert select_backend(kv_cache_dtype="fp8_ds_mla", is_mla=True, sm=90) is Backend.FLASHMLA_SPARSE
    assert select_backend(kv_cache_dtype="auto", is_mla=True, sm=100) is Backend.FLASHINFER_MLA
    assert select_backend(kv_cache_dtype="auto", is_mla=True, sm=90) is Backend.FLASH_ATTN_MLA
    assert select_backend(kv_cache_dtype="fp8", is_mla=False, sm=80) is Backend.FLASHINFER
    assert select_backend(kv_cache_dtype="fp8", is_mla=False, sm=90) is Backend.FLASH_ATTN
    assert select_backend(kv_cache_dtype="auto", is_mla=False, sm=90,
                          head_size=512) is Backend.TRITON_ATTN
    assert select_backend(kv_cache_dtype="auto", is_mla=False, sm=90,
                          override="flashinfer") is Backend.FLASHINFER
    # nvfp4 KV lives only in FlashInfer, whatever the GPU (the hardware gate is a build warning)
    assert select_backend(kv_cache_dtype="nvfp4", is_mla=False, sm=80) is Backend.FLASHINFER


def test_preferred_block_size_falls_back_to_a_common_multiple() -> None:
    # CUTLASS MLA only runs 128-token blocks: a 16 default becomes 128
    assert preferred_block_size([kernel_block_sizes(Backend.CUTLASS_MLA)], 16) == 128
    # FlashMLA (64) with FlashInfer MLA (32, 64) and default 16 → 64
    assert preferred_block_size([kernel_block_sizes(Backend.FLASHMLA),
                                 kernel_block_sizes(Backend.FLASHINFER_MLA)], 16) == 64


def test_backends_without_a_common_block_and_a_rejected_aligned_block() -> None:
    from kvplan.engines.vllm.blocksize import check_aligned_block_size
    from kvplan.errors import UnsupportedError

    assert preferred_block_size([(64,), (48,)], 16) == 192  # the smallest lcm both accept
    # FlashMLA takes only 64-token blocks: an aligned 2912 (not a multiple of 64) is refused
    with pytest.raises(UnsupportedError, match="Aligned KV cache block size 2912"):
        check_aligned_block_size(2912, 64, [("FLASH_ATTN", FA), ("FLASHMLA", (64,))])
    check_aligned_block_size(2944, 64, [("FLASH_ATTN", FA), ("FLASHMLA", (64,))])  # 46 × 64
