"""State shapes and dtypes of Mamba-family layers, per TP rank.

Mirrors vLLM's `MambaStateShapeCalculator` / `MambaStateDtypeCalculator`
(vllm/model_executor/layers/mamba/mamba_utils.py). Conv states use the default "SD" layout
(state_len, dim); the byte count is the same either way.
"""

from __future__ import annotations

from kvplan.errors import InputError
from kvplan.units import kv_cache_storage_dtype, normalize_torch_dtype

Shape = tuple[int, ...]

MAMBA_DTYPES = ("auto", "float32", "float16", "bfloat16")  # vLLM: config.cache.MambaDType


def divide(numerator: int, denominator: int, what: str) -> int:
    """vLLM: distributed.divide — asserts exact division."""
    if denominator <= 0 or numerator % denominator:
        raise InputError(f"{what} ({numerator}) is not divisible by tensor parallel size "
                         f"{denominator}", hint="pick a tensor-parallel size that divides it")
    return numerator // denominator


def extra_groups_for_head_shards(n_groups: int, tp: int) -> int:
    """vLLM: MambaStateShapeCalculator.extra_groups_for_head_shards."""
    return 0 if n_groups % tp == 0 else tp - n_groups


def mamba1_state_shapes(*, tp: int, intermediate_size: int, state_size: int, conv_kernel: int
                        ) -> tuple[Shape, Shape]:
    """vLLM: mamba1_state_shape — conv (K-1, I/tp), ssm (I/tp, N)."""
    dim = divide(intermediate_size, tp, "Mamba intermediate_size")
    return (conv_kernel - 1, dim), (dim, state_size)


def mamba2_state_shapes(*, tp: int, intermediate_size: int, n_groups: int, num_heads: int,
                        head_dim: int, state_size: int, conv_kernel: int, num_spec: int = 0
                        ) -> tuple[Shape, Shape]:
    """vLLM: mamba2_state_shape — groups extended to a TP-divisible count."""
    groups = n_groups + extra_groups_for_head_shards(n_groups, tp)
    conv_dim = intermediate_size + 2 * groups * state_size
    conv = (conv_kernel - 1 + num_spec, divide(conv_dim, tp, "Mamba2 conv dim"))
    ssm = (divide(num_heads, tp, "Mamba2 num_heads"), head_dim, state_size)
    return conv, ssm


def gdn_state_shapes(*, tp: int, num_k_heads: int, num_v_heads: int, head_k_dim: int,
                     head_v_dim: int, conv_kernel_size: int, num_spec: int = 0
                     ) -> tuple[Shape, Shape]:
    """vLLM: gated_delta_net_state_shape — conv_dim = 2·hk·Nk + hv·Nv; ssm (Nv/tp, hv, hk)."""
    conv_dim = head_k_dim * num_k_heads * 2 + head_v_dim * num_v_heads
    conv = (conv_kernel_size - 1 + num_spec, divide(conv_dim, tp, "GDN conv dim"))
    ssm = (divide(num_v_heads, tp, "GDN linear_num_value_heads"), head_v_dim, head_k_dim)
    return conv, ssm


def short_conv_state_shapes(*, tp: int, intermediate_size: int, conv_kernel: int,
                            num_spec: int = 0) -> tuple[Shape]:
    """vLLM: short_conv_state_shape — conv (L_cache-1+num_spec, dim/tp)."""
    return ((conv_kernel - 1 + num_spec, divide(intermediate_size, tp, "short conv dim")),)


def cca_state_shapes(*, num_heads: int, num_kv_heads: int, head_dim: int, history: int
                     ) -> tuple[Shape, Shape]:
    """vLLM 0.34: models/zaya.py _cca_state_shapes — q/k history ((q + kv heads) * head_dim,
    history) and the delayed value (kv heads * head_dim // 2); replicated, never split by TP."""
    return ((num_heads + num_kv_heads) * head_dim, history), (num_kv_heads * head_dim // 2,)


def linear_attention_state_shapes(*, tp: int, num_heads: int, head_dim: int) -> tuple[Shape]:
    """vLLM: linear_attention_state_shape — (heads // tp, d, d) (floor division, as vLLM)."""
    return ((num_heads // tp, head_dim, head_dim),)


def _mamba_dtype(value: str | None) -> str:
    v = (value or "auto").strip()
    v = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(v, v)
    if v not in MAMBA_DTYPES:
        raise InputError(f"unknown Mamba cache dtype {value!r}", hint=f"valid: {', '.join(MAMBA_DTYPES)}")
    return v


def mamba_state_dtypes(model_dtype: str, mamba_cache_dtype: str | None,
                       mamba_ssm_cache_dtype: str | None) -> tuple[str, str]:
    """vLLM: MambaStateDtypeCalculator._mamba_state_dtype (Mamba1, Mamba2, GDN)."""
    conv = kv_cache_storage_dtype(_mamba_dtype(mamba_cache_dtype), model_dtype)
    ssm_name = _mamba_dtype(mamba_ssm_cache_dtype)
    ssm = conv if ssm_name == "auto" else normalize_torch_dtype(ssm_name)
    return conv, ssm


gdn_state_dtypes = mamba_state_dtypes


def single_state_dtype(model_dtype: str, mamba_cache_dtype: str | None) -> tuple[str]:
    """vLLM: short_conv_state_dtype / linear_attention_state_dtype."""
    return (kv_cache_storage_dtype(_mamba_dtype(mamba_cache_dtype), model_dtype),)
