"""State-shape calculators per TP rank, worked by hand from vLLM's mamba_utils formulas."""

from __future__ import annotations

import pytest

from kvplan.engines.state_shapes import (
    gdn_state_shapes,
    linear_attention_state_shapes,
    mamba1_state_shapes,
    mamba2_state_shapes,
    mamba_state_dtypes,
    short_conv_state_shapes,
)
from kvplan.errors import InputError


def test_mamba1() -> None:
    # Jamba-like: intermediate 8192, d_state 16, d_conv 4, TP 2 → conv (3, 4096), ssm (4096, 16)
    assert mamba1_state_shapes(tp=2, intermediate_size=8192, state_size=16, conv_kernel=4) == (
        (3, 4096), (4096, 16))


def test_mamba2_extends_groups_for_tp() -> None:
    # Nemotron-H-8B-like: I = 128 heads · 64 = 8192, n_groups 8, N 128, conv 4
    # TP 1: conv_dim = 8192 + 2·8·128 = 10240 → (3, 10240); ssm (128, 64, 128)
    assert mamba2_state_shapes(tp=1, intermediate_size=8192, n_groups=8, num_heads=128,
                               head_dim=64, state_size=128, conv_kernel=4) == (
        (3, 10240), (128, 64, 128))
    # n_groups 1 at TP 4 → 4 groups: conv_dim = 8192 + 2·4·128 = 9216 → 2304 per rank; +2 spec rows
    assert mamba2_state_shapes(tp=4, intermediate_size=8192, n_groups=1, num_heads=128,
                               head_dim=64, state_size=128, conv_kernel=4, num_spec=2) == (
        (5, 2304), (32, 64, 128))


def test_gdn_per_rank() -> None:
    # Qwen3-Next: 16 k-heads, 32 v-heads, 128 × 128, conv 4, TP 2:
    # conv_dim = 128·16·2 + 128·32 = 8192 → 4096 per rank; ssm (16, 128, 128)
    assert gdn_state_shapes(tp=2, num_k_heads=16, num_v_heads=32, head_k_dim=128, head_v_dim=128,
                            conv_kernel_size=4) == ((3, 4096), (16, 128, 128))


def test_short_conv_and_linear_attention() -> None:
    # LFM2-like: hidden 2048, L_cache 3 → (2, 2048); with 3 spec tokens (5, 2048)
    assert short_conv_state_shapes(tp=1, intermediate_size=2048, conv_kernel=3, num_spec=3) == (
        (5, 2048),)
    # MiniMax-Text-01-like lightning attention: 64 heads × 128, TP 8 → (8, 128, 128)
    assert linear_attention_state_shapes(tp=8, num_heads=64, head_dim=128) == ((8, 128, 128),)


def test_dtypes_and_divisibility() -> None:
    assert mamba_state_dtypes("bfloat16", "auto", "auto") == ("bfloat16", "bfloat16")
    assert mamba_state_dtypes("bfloat16", "auto", "float32") == ("bfloat16", "float32")
    assert mamba_state_dtypes("float16", "bfloat16", None) == ("bfloat16", "bfloat16")
    with pytest.raises(InputError, match="not divisible by tensor parallel size 3"):
        gdn_state_shapes(tp=3, num_k_heads=16, num_v_heads=32, head_k_dim=128, head_v_dim=128,
                         conv_kernel_size=4)
    with pytest.raises(InputError, match="unknown Mamba cache dtype"):
        mamba_state_dtypes("bfloat16", "fp8", None)
