"""The dtypes vLLM resolves at start-up: model dtype, KV cache dtype (with the architectures' config
hooks), sparse-MLA and DeepSeek-V4 KV layouts, the Mamba SSM cache dtype."""

from __future__ import annotations

from kvplan.engines.vllm.backends import Backend
from kvplan.engines.vllm.build.deployment import Deployment
from kvplan.engines.vllm.profiles import VllmProfile, get_profile
from kvplan.errors import InputError, UnsupportedError
from kvplan.models.description import ModelDescription
from kvplan.units import (
    KVQuantMode,
    kv_quant_mode,
    normalize_kv_cache_dtype,
    normalize_torch_dtype,
)

GLM5_NEXT_ARCHS = frozenset({"Glm5NextForCausalLM", "Glm5NextForConditionalGeneration"})


# ---- resolution rules -----------------------------------------------------------------------

def resolve_model_dtype(requested: str, config_dtype: str, warnings: list[str]) -> str:
    """vLLM: config.model._get_and_verify_dtype — 'auto' keeps bf16/fp16, float32 → bfloat16."""
    if requested and requested != "auto":
        return normalize_torch_dtype(requested)
    d = normalize_torch_dtype(config_dtype or "bfloat16")
    if d == "float32":
        warnings.append("the config's float32 dtype runs as bfloat16 (vLLM's 'auto' downcasts)")
        return "bfloat16"
    return d


def resolve_kv_cache_dtype(requested: str, model: ModelDescription, sm: int | None = None,
                           profile: VllmProfile | None = None) -> str:
    """vLLM: torch_utils.resolve_kv_cache_dtype_string — 'auto' takes the checkpoint's KV quant;
    then the architecture's config hook (models/config.py)."""
    d = normalize_kv_cache_dtype(requested)
    if d == "auto" and model.quantization.kv_cache_dtype:
        d = normalize_kv_cache_dtype(model.quantization.kv_cache_dtype)
    archs = model.architectures[:1]
    if "DeepseekV32ForCausalLM" in archs and d == "bfloat16":
        d = "auto"  # DeepseekV32ForCausalLM.verify_and_update_config
    if "GlmMoeDsaForCausalLM" in archs and d == "auto" and sm is not None and 100 <= sm < 110:
        d = "fp8_e4m3"  # GlmMoeDsaForCausalLM.verify_and_update_config (SM10x only)
    if (archs and archs[0] in GLM5_NEXT_ARCHS and d == "auto" and model.sparse_mla
            and sm is not None and 100 <= sm < 110 and profile is not None
            and profile.glm5_next_sm100_fp8_kv):
        d = "fp8"  # Glm5NextModelConfig.verify_and_update_config (0.33+, SM10x, index_topk set)
    return d


def sparse_mla_kv_cache_dtype(kv_dtype: str, backend: Backend) -> str:
    """vLLM: mla_attention._canonicalize_sparse_mla_kv_cache_dtype — FlashMLA sparse serves any
    quantized KV but nvfp4_ds_mla as fp8_ds_mla (written back to cache_config.cache_dtype)."""
    if (backend is Backend.FLASHMLA_SPARSE and kv_quant_mode(kv_dtype) is not KVQuantMode.NONE
            and kv_dtype != "nvfp4_ds_mla"):
        return "fp8_ds_mla"
    return kv_dtype


def resolve_mamba_ssm_cache_dtype(requested: str, model: ModelDescription,
                                  profile: VllmProfile | None = None) -> str:
    """vLLM config hooks: Qwen3.5 copies mamba_ssm_dtype; NemotronH defaults to float32."""
    if requested and requested != "auto":
        return requested
    archs = model.architectures
    if any(a.startswith("Qwen3_5") for a in archs) and model.mamba_ssm_dtype:
        return model.mamba_ssm_dtype  # Qwen3_5ForConditionalGenerationConfig
    hooked = (profile or get_profile(None)).nemotron_ssm_hook_archs
    if any(a in hooked for a in archs):
        return model.mamba_ssm_dtype or "float32"  # NemotronHForCausalLMConfig
    return "auto"


def dsv4_kv_cache_dtype(kv_dtype: str, dep: Deployment) -> str:
    """vLLM: models/deepseek_v4/attention.py _resolve_dsv4_kv_cache_dtype on the FlashMLA path
    (nvidia/model.py _select_dsv4_attn_cls: every CUDA GPU but SM12x by default) — its
    fp8_ds_mla layout takes fp8 only: auto and any fp8 dtype become fp8_ds_mla."""
    flashinfer = (dep.attention_backend or "").upper() == "FLASHINFER_MLA_SPARSE_DSV4"
    if flashinfer or (dep.sm is not None and 120 <= dep.sm < 130):
        raise UnsupportedError("DeepSeek-V4 on the FlashInfer sparse path (SM12x or "
                               "FLASHINFER_MLA_SPARSE_DSV4) is not modelled by kvplan",
                               hint="plan the default FlashMLA path (SM90 / SM10x)")
    if kv_dtype == "auto":
        kv_dtype = "fp8"
    if not kv_dtype.startswith("fp8"):
        raise InputError(f"DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got "
                         f"{kv_dtype}.", hint="use --kv-cache-dtype fp8 (or auto)")
    return "fp8_ds_mla"
