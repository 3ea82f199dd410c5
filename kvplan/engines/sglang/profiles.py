"""What an SGLang release does at start-up when it sizes its KV pools, as data (one profile per
release). The next release is a new `SglangProfile` plus its goldens (tests/data/sglang-<v>/).

Every constant names the SGLang 0.5.23 function it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.errors import InputError


@dataclass(frozen=True)
class GpuMemoryTier:
    """One row of memory_hook.handle_gpu_memory_settings: GPUs below `below_mib` (nvidia-smi
    memory.total) get these chunked-prefill and decode CUDA-graph defaults."""

    below_mib: float
    chunked_prefill_size: int
    cuda_graph_max_bs: int  # tp_size < 4
    cuda_graph_max_bs_tp4: int  # tp_size >= 4


@dataclass(frozen=True)
class SglangProfile:
    version: str
    # memory_hook.handle_gpu_memory_settings
    gpu_tiers: tuple[GpuMemoryTier, ...]
    reserve_base_mib: float = 512  # constant metadata
    reserve_per_activation_token_mib: float = 1.5
    reserve_min_activation_tokens: int = 2048
    reserve_per_parallel_rank_mib: float = 1024 / 8  # × tp_size × pp_size
    reserve_floor_mib: float = 10 * 1024  # above reserve_floor_above_mib of GPU memory
    reserve_floor_above_mib: float = 60 * 1024
    # memory_hook.reserve_for_graph_mb
    graph_decode_mib_per_bs: float = 2
    graph_dp_attention_mib_per_bs: float = 3  # × attn_dp_size
    graph_dp_attention_large_bs: int = 300
    graph_dp_attention_large_mib_per_bs: float = 1.5  # × attn_dp_size, above large_bs
    graph_prefill_mib_per_bs: float = 8  # non-MLA: × len(prefill bs)
    graph_prefill_mla_mib: float = 1.5 * 1024
    # memory_hook.adjust_mem_fraction_for_vlm
    vlm_base_factor: float = 0.95
    vlm_baseline_layers: int = 24
    vlm_baseline_hidden_size: int = 1024
    vlm_default_layers: int = 24  # getattr(vision_config, "num_hidden_layers", 24)
    vlm_default_hidden_size: int = 1024
    vlm_sensitivity: float = 0.1
    vlm_factor_min: float = 0.8
    vlm_factor_max: float = 1.05
    # kv_cache_configurator.mm_runtime_reservation_gb: SGLANG_VLM_CACHE_SIZE_MB default
    vlm_cache_reservation_mb: int = 100
    # server_args defaults
    default_max_prefill_tokens: int = 16384
    default_swa_full_tokens_ratio: float = 0.8  # fields/schedule.py fallback
    default_mamba_full_memory_ratio: float = 0.9  # fields/schedule.py fallback
    # speculative_hook._handle_eagle_family / _handle_dflash: max_running_requests default
    speculative_default_max_running_requests: int = 48
    # kv_cache_configurator: MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, env default
    mamba_ratio_base: int = 3
    # envs.SGLANG_SWA_EVICTION_INTERVAL default (pool_configurator.compute_swa_request_cap)
    swa_eviction_interval: int = 128
    # model_config.multimodal_model_archs (is_multimodal) and
    # multimodal_breakable_cuda_graph_supported_model_archs
    multimodal_archs: frozenset[str] = frozenset()
    multimodal_breakable_graph_archs: frozenset[str] = frozenset()
    # model_config.is_hybrid_swa_model: the allowlist (SWA_SINK_ARCHS, MIMO_V2_MODEL_ARCHS, ...)
    hybrid_swa_archs: frozenset[str] = frozenset()
    # model classes whose get_attention_sliding_window_size is config.sliding_window - 1
    # (gpt_oss.py, gemma3_causal.py, gemma4_causal/mm.py, muse_glimmer.py, mellum.py, beam.py)
    window_minus_one_archs: frozenset[str] = frozenset()
    # overrides._MAMBA_RADIX_CACHE_ARCHS / _MAMBA_EXTRA_BUFFER_ARCHS
    mamba_radix_cache_archs: frozenset[str] = frozenset()
    mamba_extra_buffer_archs: frozenset[str] = frozenset()
    # model_overrides/deepseek_v2._deepseek_family_overrides
    deepseek_family_archs: frozenset[str] = frozenset()
    # model_config.is_deepseek_dsa
    dsa_archs: frozenset[str] = frozenset()
    # speculative_hook._handle_eagle_family: MTP heads inside the target checkpoint
    mtp_in_target_archs: frozenset[str] = frozenset()
    # DSATokenToKVPool.quant_block_size / index_k_with_scale_buffer_dtype (uint8)
    dsa_quant_block_size: int = 128
    dsa_rope_storage_bytes: int = 2  # DSATokenToKVPool.rope_storage_dtype (bfloat16)
    # fp4_kv_cache_quant_method: NVFP4KVCacheMethod / FP4MXBlock16KVCacheMethod
    fp4_scale_block_size: int = 16
    mxfp8_scale_block_size: int = 32
    # DeepSeek-V4 hook defaults (deepseek_v4_hook.apply_deepseek_v4_defaults)
    dsv4_default_max_running_requests: int = 256
    dsv4_default_swa_full_tokens_ratio: float = 0.1  # pool_configurator constant
    messages: dict[str, str] = field(default_factory=dict)


_MM = frozenset("""
BailingMM2NativeForConditionalGeneration BailingMMNativeForConditionalGeneration
BailingMoeV3VLForConditionalGeneration CLIPModel Cohere2VisionForConditionalGeneration
Cosmos3EdgeForConditionalGeneration DeepseekOCRForCausalLM DeepseekVL2ForCausalLM
DiffusionGemmaForBlockDiffusion Dots3NoteForCausalLM DotsOCRForCausalLM DotsVLMForCausalLM
EmbeddingGemma2Model Ernie4_5_VLMoeForConditionalGeneration Gemma3ForConditionalGeneration
Gemma3nForConditionalGeneration Gemma4ForConditionalGeneration
Gemma4UnifiedForConditionalGeneration Glm4vForConditionalGeneration
Glm4vMoeForConditionalGeneration Glm5NextForConditionalGeneration GlmAsrForConditionalGeneration
GlmImageForConditionalGeneration GlmOcrForConditionalGeneration Grok1AForCausalLM
Grok1VForCausalLM InternS1ForConditionalGeneration InternS1ProForConditionalGeneration
InternS2MobiusForConditionalGeneration InternS2PreviewForConditionalGeneration InternVLChatModel
JetVLMForConditionalGeneration KimiK25ForConditionalGeneration KimiVLForConditionalGeneration
Lfm2VlForConditionalGeneration LightOnOCRForConditionalGeneration
Llama4ForConditionalGeneration LlavaForConditionalGeneration LlavaLlamaForCausalLM
LlavaMistralForCausalLM LlavaQwenForCausalLM LlavaVidForCausalLM
LocateAnythingForConditionalGeneration MiDashengLMModel MiMoV2ASRForCausalLM MiMoV2ForCausalLM
MiniCPMO MiniCPMV MiniMaxM3SparseForConditionalGeneration Mistral3ForConditionalGeneration
MllamaForConditionalGeneration MossVLForConditionalGeneration MultiModalityCausalLM
MuseGlimmerForConditionalGeneration MuseSparkForConditionalGeneration
NVILAForConditionalGeneration NVILALiteForConditionalGeneration NemotronH_Nano_Omni_Reasoning_V3
NemotronH_Nano_VL_V2 NemotronH_Omni_Reasoning_V3 POINTSV15ChatModel
PaddleOCRVLForConditionalGeneration Phi4MMForCausalLM PixtralForConditionalGeneration
Qwen2AudioForConditionalGeneration Qwen2VLForConditionalGeneration
Qwen2_5_VLForConditionalGeneration Qwen3ASRForConditionalGeneration
Qwen3OmniMoeForConditionalGeneration Qwen3VLForConditionalGeneration
Qwen3VLMoeForConditionalGeneration Qwen3_5ForConditionalGeneration
Qwen3_5MoeForConditionalGeneration Qwen4ExpForConditionalGeneration Sarashina2VisionForCausalLM
Step3VLForConditionalGeneration Step3p7ForConditionalGeneration StepVLForConditionalGeneration
UnlimitedOCRForCausalLM VoxtralForConditionalGeneration WhisperForConditionalGeneration
""".split())

_MM_BCG = frozenset("""
Cohere2VisionForConditionalGeneration Glm5NextForConditionalGeneration
InternS2MobiusForConditionalGeneration KimiK25ForConditionalGeneration
KimiK3ForConditionalGeneration MiniMaxM3SparseForCausalLM MiniMaxM3SparseForConditionalGeneration
MuseGlimmerForConditionalGeneration MuseSparkForConditionalGeneration
PaddleOCRVLForConditionalGeneration Qwen3_5ForConditionalGeneration
Qwen3_5MoeForConditionalGeneration Qwen4ExpForConditionalGeneration
""".split())

_HYBRID_SWA = frozenset("""
BeamForCausalLM Llama4ForConditionalGeneration DeepseekV4ForCausalLM DeepseekV4ForCausalLMNextN
DeepseekV4ForCausalLMDSpark GptOssForCausalLM GraniteMoeSWAForCausalLM GraniteSWAForCausalLM
IQuestQ1ForCausalLM IQuestQ1MTP MiMoV2FlashForCausalLM MiMoV2ForCausalLM MiMoV2MTP
Step3p5ForCausalLM Step3p5MTP Step3p7ForConditionalGeneration Gemma4ForCausalLM
Gemma4ForConditionalGeneration EmbeddingGemma2Model Gemma4UnifiedForConditionalGeneration
DiffusionGemmaForBlockDiffusion LagunaForCausalLM MellumForCausalLM MuseGlimmerForCausalLM
MuseGlimmerForConditionalGeneration InklingForConditionalGeneration
InklingForConditionalGenerationMTP UnlimitedOCRForCausalLM
""".split())

_WINDOW_MINUS_ONE = frozenset("""
GptOssForCausalLM Gemma3ForCausalLM Gemma3ForConditionalGeneration Gemma4ForCausalLM
Gemma4ForConditionalGeneration MuseGlimmerForCausalLM MuseGlimmerForConditionalGeneration
MellumForCausalLM BeamForCausalLM
""".split())

_MAMBA_RADIX = frozenset("""
BailingMoeV2_5ForCausalLM BailingMoeV3ForCausalLM BailingMoeV3VLForConditionalGeneration
FalconH1ForCausalLM Glm5NextForConditionalGeneration InternS2MobiusForConditionalGeneration
InternS2PreviewForConditionalGeneration JetNemotronForCausalLM JetVLMForConditionalGeneration
KimiK3ForConditionalGeneration KimiLinearForCausalLM Lfm2ForCausalLM Lfm2MoeForCausalLM
MiniCPMV4_6ForConditionalGeneration MiniCPMV4_7ForConditionalGeneration NemotronHForCausalLM
NemotronHPuzzleForCausalLM NemotronH_Omni_Reasoning_V3 Qwen3NextForCausalLM Qwen3_5ForCausalLM
Qwen3_5ForConditionalGeneration Qwen3_5MoeForCausalLM Qwen3_5MoeForConditionalGeneration
Qwen4ExpForConditionalGeneration ZayaForCausalLM
""".split())

_MAMBA_EXTRA = frozenset("""
BailingMoeV2_5ForCausalLM BailingMoeV3ForCausalLM BailingMoeV3VLForConditionalGeneration
FalconH1ForCausalLM Glm5NextForConditionalGeneration GraniteMoeHybridForCausalLM
InklingForConditionalGeneration InklingForConditionalGenerationMTP
InternS2PreviewForConditionalGeneration KimiK3ForConditionalGeneration KimiLinearForCausalLM
MiniCPMV4_6ForConditionalGeneration MiniCPMV4_7ForConditionalGeneration NemotronHForCausalLM
NemotronHPuzzleForCausalLM NemotronH_Omni_Reasoning_V3 Qwen3NextForCausalLM Qwen3_5ForCausalLM
Qwen3_5ForConditionalGeneration Qwen3_5MoeForCausalLM Qwen3_5MoeForConditionalGeneration
Qwen4ExpForConditionalGeneration
""".split())

_DEEPSEEK_FAMILY = frozenset("""
DeepseekV3ForCausalLM DeepseekV32ForCausalLM KimiK25ForConditionalGeneration
MistralLarge3ForCausalLM PixtralForConditionalGeneration GlmMoeDsaForCausalLM
Glm5NextForConditionalGeneration HYV4ForCausalLM HYV4ForCausalLMNextN LongcatFlashForCausalLM
LongcatFlashForCausalLMNextN Dots3NoteForCausalLM
""".split())

_DSA = frozenset("""
DeepseekV3ForCausalLM DeepseekV32ForCausalLM DeepseekV3ForCausalLMNextN MistralLarge3ForCausalLM
PixtralForConditionalGeneration GlmMoeDsaForCausalLM GlmMoeDsaForCausalLMNextN
Glm5NextForConditionalGenerationNextN Glm5NextForConditionalGeneration LongcatFlashForCausalLM
LongcatFlashForCausalLMNextN Dots3NoteForCausalLM Dots3NoteForCausalLMNextN HYV4ForCausalLM
HYV4ForCausalLMNextN
""".split())

_MTP_IN_TARGET = frozenset("""
DeepseekV32ForCausalLM DeepseekV3ForCausalLM DeepseekV4ForCausalLM Glm4MoeForCausalLM
Glm4MoeLiteForCausalLM GlmMoeDsaForCausalLM BailingMoeForCausalLM BailingMoeV2ForCausalLM
BailingMoeV2_5ForCausalLM MistralLarge3ForCausalLM PixtralForConditionalGeneration
HYV3ForCausalLM HYV4ForCausalLM Qwen4ExpForConditionalGeneration
""".split())

# SGLang's start-up texts, word for word (each names the function that prints it).
MESSAGES_0_5_23 = {
    # pool_configurator.MemoryPoolConfig.__post_init__
    "not_enough_memory": "Not enough memory. Please try to increase --mem-fraction-static.",
    "not_enough_memory_mfs": " Current value: mem_fraction_static={mem_fraction_static}",
    # kv_cache_configurator._profile_available_bytes
    "weights_leave_no_memory": (
        "Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static={mem_fraction_static}. Raise --mem-fraction-static above "
        "{suggested:.3f} (minimum viable = 1 - available/pre = {minimum:.4f}). If using "
        "speculative decoding, draft weights are now counted."),
    # pool_configurator.MemoryPoolConfigurator.validate_swa_pool_size
    "swa_pool_too_small": (
        "SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission "
        "floor is sliding_window_size ({window}) + page_size ({page_size}). Increase "
        "--swa-full-tokens-ratio or the total KV budget."),
    # pool_configurator.SWARequestCapPoolConfigurator.calculate_pool_sizes
    "swa_cap_no_room": (
        "SWA pool cap ({swa_tokens} tokens, {swa_gib:.2f} GiB) leaves no room for the full KV "
        "pool within the available {available_gib:.2f} GiB. Reduce --max-running-requests, "
        "lower SGLANG_SWA_EVICTION_INTERVAL, or increase --mem-fraction-static."),
    # pool_configurator.DSV4PoolConfigurator.calculate_pool_sizes
    "dsv4_swa_cap_no_room": (
        "The DSV4 SWA pool cap ({swa_tokens} tokens, {swa_gib:.2f} GB) leaves no room for the "
        "full KV pool within the available {available_gib:.2f} GB. Reduce "
        "--max-running-requests, lower --swa-prefix-tails or SGLANG_SWA_EVICTION_INTERVAL, or "
        "increase --mem-fraction-static."),
    # kv_cache_configurator.resolve_max_num_reqs
    "mamba_too_small": (
        "Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
        "max_mamba_cache_size={max_mamba_cache_size}, mamba_ratio={ratio}, resulting "
        "max_num_reqs={max_num_reqs}. Try: (1) reduce --max-running-requests, (2) increase "
        "--mem-fraction-static, or (3) use GPUs with more memory."),
    # kv_cache_configurator._handle_max_mamba_cache
    "mamba_no_memory": (
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
        "max_mamba_cache_size={max_mamba_cache_size} (total_rest_memory={rest_gb:.2f} GB, "
        "mamba_cache_per_req={per_req_mb:.2f} MB). Try: (1) reduce --max-running-requests, "
        "(2) increase --mem-fraction-static, (3) reduce --speculative-num-draft-tokens, or (4) "
        "use GPUs with more memory."),
    # model_config.ModelConfig._derive_context_length
    "context_too_long": (
        "Warning: User-specified context_length ({context_length}) is greater than the derived "
        "context_length ({derived}). This may lead to incorrect model outputs or CUDA errors. "
        "Note that the derived context_length may differ from max_position_embeddings in the "
        "model's config. To allow overriding this maximum, set the env var "
        "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"),
    # warnings -------------------------------------------------------------------------------
    # kv_cache_configurator._apply_token_constraints
    "max_total_tokens_above": (
        "max_total_tokens={max_total_tokens} is larger than the profiled value {profiled}. Use "
        "the profiled value instead."),
    # kv_cache_configurator.resolve_max_num_reqs
    "mrr_capped_by_mamba": (
        "max_running_requests is capped to {cap} by the mamba state cache "
        "(max_mamba_cache_size={max_mamba_cache_size}, {ratio} state slots per request). To "
        "raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the "
        "state size with --mamba-ssm-dtype bfloat16."),
    "mrr_reduced": (
        "max_running_requests was reduced from the requested {requested} to {max_num_reqs} "
        "(per dp worker) due to the available KV cache capacity."),
    # tp_worker.TpModelWorker.get_worker_info (logged once the pools exist; SGLang still starts)
    "kv_below_context": (
        "KV pool holds {tokens} tokens, fewer than --context-length {context_len}. One "
        "full-length request cannot fit, so long requests will be refused or truncated at "
        "serving time. Lower --context-length, raise --mem-fraction-static, or free memory "
        "taken before the pool is sized."),
    # speculative_hook._handle_eagle_family
    "spec_mrr_48": (
        "Max running requests is reset to 48 for speculative decoding. You can override this "
        "by explicitly setting --max-running-requests."),
}


SGLANG_0_5_23 = SglangProfile(
    version="0.5.23",
    gpu_tiers=(
        GpuMemoryTier(20 * 1024, 2048, 8, 8),  # T4, 4080
        GpuMemoryTier(35 * 1024, 4096, 48, 160),  # A10, 4090, 5090
        GpuMemoryTier(60 * 1024, 4096, 32, 160),  # A100 40GB, L40
        GpuMemoryTier(90 * 1024, 8192, 256, 512),  # H100, A100 80GB
        GpuMemoryTier(160 * 1024, 8192, 256, 512),  # H20, H200
        GpuMemoryTier(float("inf"), 16384, 512, 512),  # B200, MI300
    ),
    multimodal_archs=_MM,
    multimodal_breakable_graph_archs=_MM_BCG,
    hybrid_swa_archs=_HYBRID_SWA,
    window_minus_one_archs=_WINDOW_MINUS_ONE,
    mamba_radix_cache_archs=_MAMBA_RADIX,
    mamba_extra_buffer_archs=_MAMBA_EXTRA,
    deepseek_family_archs=_DEEPSEEK_FAMILY,
    dsa_archs=_DSA,
    mtp_in_target_archs=_MTP_IN_TARGET,
    messages=MESSAGES_0_5_23,
)

PROFILES: dict[str, SglangProfile] = {"0.5.23": SGLANG_0_5_23}
DEFAULT_VERSION = "0.5.23"


def sglang_profile(version: str | None = None) -> SglangProfile:
    """The profile of an SGLang release (default: the newest kvplan models)."""
    v = DEFAULT_VERSION if version is None else version.strip().removeprefix("v")
    try:
        return PROFILES[v]
    except KeyError:
        raise InputError(f"SGLang {version} is not modelled",
                         hint=f"kvplan models SGLang {', '.join(PROFILES)}") from None
