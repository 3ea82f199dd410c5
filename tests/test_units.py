"""Dtype sizes and page sizes per KV dtype; vLLM's GiB rounding; size parsing."""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.backends import Backend, customize_spec
from kvplan.engines.vllm.specs import FullAttentionSpec, MLAAttentionSpec
from kvplan.errors import InputError
from kvplan.units import format_gib, kv_cache_storage_dtype, kv_quant_mode, parse_size_bytes


def _page(dtype: str, backend: Backend | None, heads: int = 4, d: int = 256, block: int = 1) -> int:
    spec = FullAttentionSpec(block_size=block, num_kv_heads=heads, head_size=d,
                             dtype=kv_cache_storage_dtype(dtype, "bfloat16"),
                             kv_quant_mode=kv_quant_mode(dtype))
    return customize_spec(backend, spec).page_size_bytes


@pytest.mark.parametrize(("dtype", "backend", "per_token"), [
    ("auto", None, 4 * 512 * 2),  # H·(d+dv)·2
    ("bfloat16", None, 4096), ("float16", None, 4096), ("float32", None, 8192),
    ("fp8", None, 2048), ("fp8_e4m3", None, 2048), ("fp8_e5m2", None, 2048),
    ("fp8_inc", None, 2048), ("int8", None, 2048),
    ("nvfp4", Backend.FLASHINFER, 1152),  # 2·4·(128 + 16)
    ("nvfp4_4over6", Backend.FLASHINFER, 1152),
    ("fp8_per_token_head", Backend.TRITON_ATTN, 4 * (512 + 8)),
    ("int8_per_token_head", Backend.TRITON_ATTN, 4 * (512 + 8)),
    ("int4_per_token_head", Backend.TRITON_ATTN, 4 * (256 + 8)),
])
def test_attention_page_per_token(dtype, backend, per_token) -> None:
    assert _page(dtype, backend) == per_token
    assert _page(dtype, backend, block=16) == 16 * per_token


def test_mla_pages() -> None:
    bf16 = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype="bfloat16")
    assert bf16.page_size_bytes == 64 * 1152
    ds = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype="uint8",
                          state_content_bytes=656)
    assert ds.page_size_bytes == 64 * 656
    pth = MLAAttentionSpec(block_size=1, num_kv_heads=1, head_size=576, dtype="uint8",
                           kv_quant_mode=kv_quant_mode("fp8_per_token_head"))
    assert customize_spec(Backend.TRITON_MLA, pth).page_size_bytes == 576 + 8


def test_unknown_dtypes_are_refused() -> None:
    with pytest.raises(InputError, match="unknown KV cache dtype"):
        kv_cache_storage_dtype("fp6", "bfloat16")
    with pytest.raises(InputError, match="does not model"):
        kv_cache_storage_dtype("turboquant_k8v4", "bfloat16")


def test_format_gib_matches_vllm_rounding() -> None:
    assert format_gib(44_130_078_720) == "41.1"
    assert format_gib(18_366_566_400) == "17.11"
    assert format_gib(16 * 2**30) == "16.0"


def test_parse_size() -> None:
    assert parse_size_bytes("20GiB") == 20 * 2**30
    assert parse_size_bytes("20G") == 20 * 2**30  # vLLM's --kv-cache-memory-bytes: G = GiB
    assert parse_size_bytes("20g") == 20 * 10**9  # ... and g = 10^9
    assert parse_size_bytes("20GB") == 20 * 10**9
    assert parse_size_bytes("1.5TiB") == int(1.5 * 2**40)
    assert parse_size_bytes("2e10") == 2 * 10**10
    assert parse_size_bytes("123") == 123
    with pytest.raises(InputError, match="Decimals are not allowed with binary suffixes like G"):
        parse_size_bytes("1.5G")
    for huge in ("1e30", "17TiB", 2**44 + 1):  # 16 TiB per GPU at most: beyond, a typo
        with pytest.raises(InputError, match="out of range"):
            parse_size_bytes(huge)
    assert parse_size_bytes(2**44) == 2**44
    for bad in ("", "lots", "-1GiB", "0", "20 G", "1.5.5GiB"):
        with pytest.raises(InputError):
            parse_size_bytes(bad)
