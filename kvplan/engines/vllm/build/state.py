"""Mamba-family layers (Mamba1/2, GDN, KDA, short conv, CCA, linear attention): per-rank state
shapes and dtypes (vLLM's get_state_shape / get_state_dtype) and prefill checkpoints."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from kvplan.engines.state_shapes import (
    cca_state_shapes,
    gdn_state_shapes,
    linear_attention_state_shapes,
    mamba1_state_shapes,
    mamba2_state_shapes,
    mamba_state_dtypes,
    short_conv_state_shapes,
    single_state_dtype,
)
from kvplan.engines.vllm.build.deployment import Deployment
from kvplan.engines.vllm.profiles import VllmProfile
from kvplan.engines.vllm.specs import (
    MambaType,
)
from kvplan.errors import InputError
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.units import (
    dtype_size_bytes,
)

FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64  # vLLM: v1/attention/backends/gdn_attn.py
FLASHKDA_CHECKPOINT_ALIGNMENT = 16  # vLLM: layers/mamba/kda_checkpoint.py


@dataclass
class BuildContext:
    profile: VllmProfile
    dep: Deployment
    model_dtype: str
    mamba_cache_mode: str
    num_spec: int
    max_model_len: int
    ssm_dtype: str
    warnings: list[str]


def layer_state(layer: LayerDescription, ctx: BuildContext, tp: int) -> tuple[tuple[tuple[int, ...], ...],
                                                                 tuple[str, ...], MambaType]:
    """Per-rank state shapes/dtypes of a Mamba-family layer (vLLM's get_state_shape/dtype)."""
    d, k = ctx.dep, ctx.num_spec
    if layer.kind in (LayerKind.GDN, LayerKind.KDA) and layer.gdn:
        g = layer.gdn  # KDA keeps GDN-shaped state (conv + recurrent)
        shapes = gdn_state_shapes(tp=tp, num_k_heads=g.num_k_heads, num_v_heads=g.num_v_heads,
                                  head_k_dim=g.head_k_dim, head_v_dim=g.head_v_dim,
                                  conv_kernel_size=g.conv_kernel, num_spec=k)
        if layer.kind is LayerKind.GDN:
            return shapes, mamba_state_dtypes(ctx.model_dtype, d.mamba_cache_dtype,
                                              ctx.ssm_dtype), MambaType.GDN_ATTN
        # vLLM: mamba_utils.py kda_state_dtype — conv in the Mamba cache dtype, recurrent fp32
        # for auto; Kimi-Linear's KimiGatedDeltaNetAttention passes no ssm dtype (always fp32),
        # Kimi-K3's KimiK3DeltaAttention passes mamba_ssm_cache_dtype (float32 / bfloat16)
        conv = single_state_dtype(ctx.model_dtype, d.mamba_cache_dtype)[0]
        return shapes, (conv, kda_recurrent_dtype(layer, ctx.ssm_dtype)), MambaType.GDN_ATTN
    if layer.kind is LayerKind.MAMBA2 and layer.mamba2:
        m = layer.mamba2
        shapes = mamba2_state_shapes(tp=tp, intermediate_size=m.intermediate_size,
                                     n_groups=m.n_groups, num_heads=m.num_heads,
                                     head_dim=m.head_dim, state_size=m.state_size,
                                     conv_kernel=m.conv_kernel, num_spec=k)
        return shapes, mamba_state_dtypes(ctx.model_dtype, d.mamba_cache_dtype, ctx.ssm_dtype), \
            MambaType.MAMBA2
    if layer.kind is LayerKind.MAMBA1 and layer.mamba1:
        m1 = layer.mamba1
        shapes = mamba1_state_shapes(tp=tp, intermediate_size=m1.intermediate_size,
                                     state_size=m1.state_size, conv_kernel=m1.conv_kernel)
        return shapes, mamba_state_dtypes(ctx.model_dtype, d.mamba_cache_dtype, ctx.ssm_dtype), \
            MambaType.MAMBA1
    if layer.kind is LayerKind.SHORT_CONV and layer.short_conv:
        sc = layer.short_conv
        return (short_conv_state_shapes(tp=tp, intermediate_size=sc.conv_dim,
                                        conv_kernel=sc.l_cache, num_spec=k),
                single_state_dtype(ctx.model_dtype, d.mamba_cache_dtype), MambaType.SHORT_CONV)
    if layer.kind is LayerKind.CCA and layer.cca:
        c = layer.cca  # vLLM: zaya.py ZayaCCA.get_state_shape / get_state_dtype (no TP, no spec)
        conv = single_state_dtype(ctx.model_dtype, d.mamba_cache_dtype)[0]
        return (cca_state_shapes(num_heads=c.num_heads, num_kv_heads=c.num_kv_heads,
                                 head_dim=c.head_dim, history=c.history),
                (conv, conv), MambaType.SHORT_CONV)
    if layer.kind is LayerKind.LINEAR_ATTENTION and layer.linear_attention:
        la = layer.linear_attention
        return (linear_attention_state_shapes(tp=tp, num_heads=la.num_heads, head_dim=la.head_dim),
                single_state_dtype(ctx.model_dtype, d.mamba_cache_dtype), MambaType.LINEAR)
    raise InputError(f"{layer.name}: a {layer.kind.value} layer without its state dimensions")


def kda_recurrent_dtype(layer: LayerDescription, ssm_dtype: str) -> str:
    if not (layer.model_version or "").startswith("kimi_k3") or ssm_dtype == "auto":
        return "float32"
    dtype = mamba_state_dtypes("bfloat16", "auto", ssm_dtype)[1]  # normalizes bf16 / fp32
    if dtype not in ("float32", "bfloat16"):
        raise InputError("KDA recurrent state supports only auto, float32, and bfloat16; "
                         f"got {ssm_dtype}", hint="--mamba-ssm-cache-dtype float32 or bfloat16")
    return dtype


def flashkda_checkpoints(layer: LayerDescription, ctx: BuildContext) -> bool:
    """vLLM: kimi_k3/nvidia/kda.py resolve_kda_prefill_backend ("auto") → "flashkda" when
    is_flashkda_supported (SM 9x/10x/12x, bf16 activations, head_dim 128, a gate bound); then
    KimiK3DeltaAttention.get_kv_cache_spec adds one prefill-checkpoint block, alignment 16."""
    sm = ctx.dep.sm
    return (layer.model_version == "kimi_k3_flashkda" and sm is not None
            and sm // 10 in (9, 10, 12) and ctx.model_dtype == "bfloat16")


def state_page_bytes(shapes: tuple[tuple[int, ...], ...], dtypes: tuple[str, ...]) -> int:
    return sum(prod(s) * dtype_size_bytes(t) for s, t in zip(shapes, dtypes, strict=True))


def gdn_exports_checkpoints(target: ModelDescription, ctx: BuildContext) -> bool:
    """vLLM: qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend == 'flashinfer' (align mode
    only)."""
    if ctx.mamba_cache_mode != "align" or not ctx.profile.hybrid_align_checkpoint:
        return False
    if not target.gdn_prefill_checkpoints:
        return False  # e.g. OlmoHybridGatedDeltaNetAttention keeps MambaBase's (no checkpoints)
    state_kinds = {layer.kind for layer in target.layers if layer.kind.is_state}
    if state_kinds != {LayerKind.GDN}:
        return False  # any layer without an alignment (e.g. Mamba2) turns it off
    sm = ctx.dep.sm
    if sm == 90:
        return True
    head_k = {layer.gdn.head_k_dim for layer in target.layers if layer.gdn}
    # SM10.x and SM12.x with head_k_dim 128 and a CUDA 13 runtime (SM11.x: CuteDSL only, opt-in)
    return (sm is not None and sm // 10 in (10, 12) and head_k == {128}
            and ctx.dep.cuda_runtime_major >= 13)
