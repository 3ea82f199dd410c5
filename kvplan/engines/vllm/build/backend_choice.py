"""Which attention backend each layer runs on (vLLM: the attention layer picks at construction),
the backend constraints a model's code asserts, and the KV cache layouts the backends declare."""

from __future__ import annotations

from typing import Any

from kvplan.engines.vllm.backends import Backend
from kvplan.engines.vllm.blocksize import (
    select_backend,
    select_sparse_mla_backend,
)
from kvplan.engines.vllm.build.deployment import Deployment
from kvplan.engines.vllm.build.layer_specs import (
    DSV4,
)
from kvplan.errors import StartupError, UnsupportedError
from kvplan.models.description import (
    AttentionConstraint,
    LayerDescription,
    LayerKind,
    ModelDescription,
)
from kvplan.units import (
    KVQuantMode,
    kv_quant_mode,
)

# vLLM: DeepseekV4IndexerBackend.get_supported_kv_cache_layouts — the indexer pages sit beside
# the MLA latent pages inside each block
DSV4_KV_CACHE_LAYOUTS = ("BLHNC", "BLNHC")


def dsv4_backend(layer: LayerDescription) -> Backend | None:
    """The backend of a DeepSeek-V4 cache layer (FlashMLA path), None if not one."""
    if layer.kind is LayerKind.COMPRESSOR_STATE:
        return Backend.DEEPSEEK_V4_COMPRESSOR  # CompressorStateCache.get_attn_backend
    if layer.model_version != DSV4:
        return None
    return {LayerKind.SLIDING_WINDOW_MLA: Backend.DEEPSEEK_SPARSE_SWA,
            LayerKind.MLA_INDEXER: Backend.DEEPSEEK_V4_INDEXER}.get(
                layer.kind, Backend.FLASHMLA_SPARSE_DSV4)


def attention_backend(layer: LayerDescription, kv_dtype: str, dep: Deployment, *,
                       causal: bool, override: str | None, sparse: bool = False,
                       diff_kv: bool = False) -> Backend:
    if layer.backend is not None:
        return Backend(layer.backend)  # the model code picks it (vLLM bypasses the selector)
    if (dsv4 := dsv4_backend(layer)) is not None:
        return dsv4
    if layer.kind is LayerKind.MLA_INDEXER:
        return Backend.DEEPSEEK_V32_INDEXER  # vLLM: DeepseekV32IndexerCache.get_attn_backend
    is_mla = layer.kind in (LayerKind.MLA, LayerKind.SLIDING_WINDOW_MLA)
    if is_mla and sparse:
        return select_sparse_mla_backend(kv_cache_dtype=kv_dtype, sm=dep.sm, override=override,
                                         head_size=layer.head_size,
                                         nope=layer.qk_rope_head_dim == 0)
    if diff_kv and not override and layer.head_size_v not in (None, layer.head_size):
        # vLLM: models/mimo_v2.py MiMoV2Attention — K and V of different sizes run on
        # FLASH_ATTN_DIFFKV where FA3/FA4 exist (SM90, SM10x), else TRITON_ATTN_DIFFKV
        fa = dep.sm is not None and (dep.sm == 90 or 100 <= dep.sm < 110)
        if fa:
            assert dep.sm is not None
            check_diffkv_kv_dtype(layer, kv_dtype, dep.sm)
        return Backend.FLASH_ATTN if fa else Backend.TRITON_ATTN
    if layer.kind is LayerKind.CROSS_ATTENTION:
        return cross_attention_backend(layer, kv_dtype, dep, override)
    return select_backend(kv_cache_dtype=kv_dtype, is_mla=is_mla, sm=dep.sm, causal=causal,
                          override=override, head_size=layer.head_size)


def diffkv_flash_attn_version(layer: LayerDescription, sm: int) -> int:
    """The FlashAttention version a layer with K and V of different sizes runs (vLLM:
    fa_utils.get_flash_attn_version, no ALiBi, FA3/FA4 built): FA3 on SM90, upgraded to FA4 for
    a head over 256 or sinks with K and V of different sizes; FA4 on SM10x, FA2 there for a head
    over 128 other than 256/256 and 192/128 (TMEM) or for the hd256 kernel (not asked for);
    FA2 elsewhere."""
    head, head_v = layer.head_size, layer.head_size_v
    version = 3 if sm // 10 == 9 else 4 if sm // 10 == 10 else 2
    if version == 3 and head is not None and (head > 256 or (
            layer.has_sinks and head_v is not None and head != head_v)):
        version = 4
    if version == 4 and head == 256 and head_v in (None, 256):
        version = 2  # fa_utils.uses_fa4_hd256_kernel without supports_fa4_hd256
    if version == 4 and sm >= 100 and head is not None and head > 128 and not (
            (head == 256 and head_v in (None, 256)) or (head == 192 and head_v == 128)):
        version = 2
    return version


def check_diffkv_kv_dtype(layer: LayerDescription, kv_dtype: str, sm: int) -> None:
    """vLLM: flash_attn_diffkv.py FlashAttentionDiffKVImpl.__init__ — a quantized KV cache
    needs fa_utils.flash_attn_supports_kv_cache_dtype: FA3 on SM90 (FA4 there only for 512-wide
    K and V), FA4 on SM10x; fp8_e5m2 never."""
    if kv_quant_mode(kv_dtype) is KVQuantMode.NONE:
        return
    version = diffkv_flash_attn_version(layer, sm)
    sm90_ok = version == 3 or (version == 4 and layer.head_size in (None, 512)
                               and layer.head_size_v in (None, 512))
    supported = kv_dtype != "fp8_e5m2" and (
        (sm90_ok and sm // 10 == 9) or (version == 4 and sm // 10 == 10))
    if not supported:
        raise StartupError("vLLM would raise NotImplementedError: Unsupported FP8 Diff-KV "
                           "configuration; use an unquantized KV cache.",
                           hint="use --kv-cache-dtype auto (or a GPU whose FlashAttention "
                                "takes this head size's quantized K/V)")


def sparse_latent(model: ModelDescription) -> dict[str, Any]:
    """The MLA latent width the sparse backend choice reads (vLLM: the layer's head_size)."""
    layer = next((la for la in model.layers if la.kind is LayerKind.MLA), None)
    if layer is None:
        return {}
    return {"head_size": layer.head_size, "nope": layer.qk_rope_head_dim == 0}


def flashinfer_sm90_note(backends: list[Backend | None], kv_dtype: str) -> list[str]:
    if Backend.FLASHINFER_MLA_SPARSE_SM90 not in backends:
        return []
    return [f"sparse MLA with KV cache dtype {kv_dtype} on SM90: FlashMLA sparse takes only its "
            "fp8_ds_mla layout, so vLLM runs FlashInfer's SM90 sparse backend "
            "(FLASHINFER_MLA_SPARSE_SM90: plain fp8 latent rows, one byte per latent element, "
            "576 B per token and layer for a 512 + 64 latent); "
            "it needs the flashinfer package vLLM's wheels install (>= 0.6.18)"]


# vLLM: <Backend>.supports_attn_type(ENCODER_DECODER) — FlashInfer and Flex keep the default
# (decoder only)
ENCODER_DECODER_BACKENDS = (Backend.FLASH_ATTN, Backend.TRITON_ATTN)


def cross_attention_backend(layer: LayerDescription, kv_dtype: str, dep: Deployment,
                             override: str | None) -> Backend:
    """vLLM: CrossAttention.__init__ → get_attn_backend(attn_type=ENCODER_DECODER): the CUDA
    priority of a non-causal layer, skipping backends without encoder-decoder support."""
    backend = select_backend(kv_cache_dtype=kv_dtype, is_mla=False, sm=dep.sm, causal=False,
                             override=override, head_size=layer.head_size)
    if backend in ENCODER_DECODER_BACKENDS:
        return backend
    if override is None and not kv_quant_mode(kv_dtype).is_nvfp4:
        return Backend.TRITON_ATTN  # the next one that takes this KV dtype
    raise UnsupportedError(f"{layer.name}: no attention backend runs cross-attention "
                           f"(ENCODER_DECODER) with {override or kv_dtype}",
                           hint="use FLASH_ATTN or TRITON_ATTN and a bf16/fp16/fp8 KV dtype")


# how the refusal names a backend / dtype the model's attention asserts
_BACKEND_WORDS = {Backend.FLASHINFER: "FlashInfer"}


def check_attention_constraint(rule: AttentionConstraint, backends: list[Backend | None],
                               model_dtype: str, kv_dtype: str) -> None:
    """What the model's attention code asserts at start-up (e.g. vLLM: models/flint/model.py
    FlintAttention: a FlashInfer impl, a bfloat16 model and an auto / bfloat16 KV cache)."""
    want = Backend(rule.backend)
    if any(b is not want for b in backends):
        picked = next(b for b in backends if b is not want)
        raise UnsupportedError(f"{rule.name} runs only on {_BACKEND_WORDS.get(want, want.value)} "
                               f"attention; vLLM would pick "
                               f"{picked.value if picked else 'none'} here and fail its assertion",
                               hint=f"pass --attention-backend {want.value}")
    if model_dtype not in rule.model_dtypes or kv_dtype not in rule.kv_cache_dtypes:
        raise UnsupportedError(f"{rule.name} needs a {' or '.join(rule.model_dtypes)} model and KV "
                               f"cache (got dtype {model_dtype}, KV cache {kv_dtype}); vLLM's "
                               f"{rule.name} attention asserts both",
                               hint="use --dtype auto and --kv-cache-dtype auto")


def supported_layouts(backends: set[str | None]) -> tuple[str, ...] | None:
    """vLLM: <Backend>.supported_kv_cache_layouts, merged — only these declare a set here:
    DeepseekV4IndexerBackend (BLHNC, BLNHC) and KpoolTailBackend (BLHNC, 0.32+)."""
    if Backend.DEEPSEEK_V4_INDEXER.value in backends:
        return DSV4_KV_CACHE_LAYOUTS
    if Backend.KPOOL_TAIL.value in backends:
        return ("BLHNC",)
    return None
