"""ModelDescription(s) + deployment settings → the per-rank layer specs vLLM's workers report.

This is vLLM's start-up up to the planner: config hooks (Mamba dtypes, prefix-caching mode),
backend choice, `update_block_size_for_backend` (Phase 1 preference, Phase 2 hybrid alignment),
each layer's `get_kv_cache_spec` (per TP rank, PP stage), draft and MTP layers. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Any

from kvplan.engine.backends import Backend, customize_spec, kernel_block_sizes, min_kernel_block
from kvplan.engine.blocksize import (
    align_hybrid_block_size,
    check_aligned_block_size,
    preferred_block_size,
    select_backend,
    select_sparse_mla_backend,
    sliding_window_block_size,
    supports_block_size,
)
from kvplan.engine.planner import PlannerInput
from kvplan.engine.profiles import VllmProfile, get_profile
from kvplan.engine.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KVCacheSpec,
    MambaSpec,
    MambaType,
    MLAAttentionSpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    SparseCacheRole,
)
from kvplan.engine.state_shapes import (
    cca_state_shapes,
    gdn_state_shapes,
    linear_attention_state_shapes,
    mamba1_state_shapes,
    mamba2_state_shapes,
    mamba_state_dtypes,
    short_conv_state_shapes,
    single_state_dtype,
)
from kvplan.errors import InputError, StartupError, UnsupportedError
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.max_len import verify_max_model_len
from kvplan.models.parallel import get_pp_indices
from kvplan.models.pooling import resolve_runner
from kvplan.units import (
    KVQuantMode,
    cdiv,
    dtype_size_bytes,
    kv_cache_storage_dtype,
    kv_quant_mode,
    normalize_kv_cache_dtype,
    normalize_torch_dtype,
)

DSV4 = "deepseek_v4"
DSV4_RECORD_BYTES = 584  # vLLM: DeepSeek-V4 fp8_ds_mla record per token
DSV4_PAGE_ALIGNMENT = 576  # vLLM: packed_page_alignment (FlashMLA)
# vLLM: DeepseekV4IndexerBackend.get_supported_kv_cache_layouts — the indexer pages sit beside
# the MLA latent pages inside each block
DSV4_KV_CACHE_LAYOUTS = ("BLHNC", "BLNHC")
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64  # vLLM: v1/attention/backends/gdn_attn.py
FLASHKDA_CHECKPOINT_ALIGNMENT = 16  # vLLM: layers/mamba/kda_checkpoint.py
MLA_BLOB_BYTES = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}  # vLLM: MLAAttention.get_kv_cache_spec
MAX_MODEL_LEN_LIMIT = 2**31  # no model serves more; catches 10^12 typos
GLM5_NEXT_ARCHS = frozenset({"Glm5NextForCausalLM", "Glm5NextForConditionalGeneration"})
HIDDEN_STATE_DRAFTS = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})


@dataclass(frozen=True)
class Deployment:
    """What `vllm serve` is told (vLLM's own flag names), plus the GPU it runs on."""

    vllm_version: str | None = None
    with_fix: bool = False
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"
    block_size: int | None = None  # --block-size (None: the release default)
    max_model_len: int | None = None  # None: from the config
    auto_fit_max_model_len: bool = False
    allow_long_max_model_len: bool = False  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (read by the CLI)
    max_num_batched_tokens: int | None = None  # None: vLLM's default for the GPU
    max_num_seqs: int | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    pp_layer_partition: str | None = None  # VLLM_PP_LAYER_PARTITION
    enable_prefix_caching: bool = True
    mamba_cache_dtype: str = "auto"
    mamba_ssm_cache_dtype: str = "auto"
    attention_backend: str | None = None
    num_gpu_blocks_override: int | None = None
    async_scheduling: bool | None = None  # None: vLLM's default (off for pooling models)
    enable_chunked_prefill: bool | None = None  # None: vLLM's default for the model
    runner: str = "auto"  # --runner: auto, generate, pooling (draft plans as generate)
    convert: str = "auto"  # --convert: auto, none, embed, classify
    disable_hybrid_kv_cache_manager: bool = False
    # speculative decoding
    speculative_method: str | None = None
    num_speculative_tokens: int = 0
    draft_kv_cache_dtype: str | None = None  # None: inherit --kv-cache-dtype
    draft_tensor_parallel_size: int | None = None  # None: the target's TP
    draft_attention_backend: str | None = None
    draft_block_size: int | None = None  # kvplan override of the draft SW/full block
    # the GPU
    sm: int | None = None  # compute capability ×10 (90 = Hopper); None: unknown NVIDIA
    gpu_name: str = ""
    gpu_total_memory_bytes: int | None = None
    cuda_runtime_major: int = 12
    available_kv_bytes: int = 0  # per GPU

    def __post_init__(self) -> None:
        for name in ("tensor_parallel_size", "pipeline_parallel_size",
                     "decode_context_parallel_size"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be ≥ 1, got {getattr(self, name)}")
        for name in ("block_size", "draft_block_size", "max_num_batched_tokens", "max_num_seqs",
                     "draft_tensor_parallel_size", "num_gpu_blocks_override"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise InputError(f"--{name.replace('_', '-')} must be ≥ 1, got {v}")
        if self.num_speculative_tokens < 0:
            raise InputError(f"--num-speculative-tokens must be ≥ 0, got {self.num_speculative_tokens}")
        if self.max_model_len is not None and not 1 <= self.max_model_len <= MAX_MODEL_LEN_LIMIT:
            raise InputError(f"--max-model-len {self.max_model_len} is out of range "
                             f"(1 … {MAX_MODEL_LEN_LIMIT:,})", hint="or use --max-model-len auto")


@dataclass(frozen=True)
class LayerPlan:
    """What kvplan decided for one layer (for `kvplan layers` and the report)."""

    name: str
    kind: str
    backend: str | None
    spec: KVCacheSpec
    is_draft: bool = False
    pp_stage: int = 0


@dataclass(frozen=True)
class BuildResult:
    planner_input: PlannerInput
    layers: tuple[LayerPlan, ...]
    block_size: int
    kv_cache_dtype: str
    draft_kv_cache_dtype: str | None
    model_dtype: str
    mamba_cache_mode: str
    max_model_len: int
    max_num_batched_tokens: int
    warnings: tuple[str, ...] = field(default_factory=tuple)
    runner: str = "generate"  # vLLM's resolved runner type (generate / pooling)


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


def default_max_num_batched_tokens(total_bytes: int | None, gpu_name: str, sm: int | None) -> int:
    """vLLM: EngineArgs default for `vllm serve` (OPENAI_API_SERVER) by device memory."""
    gib = (total_bytes or 0) / 2**30
    if gib >= 160:
        return 16384
    if gib >= 70 and "a100" not in gpu_name.lower() and sm != 121:
        return 8192
    return 2048


def encoder_decoder_batched_tokens(dep: Deployment, mnbt: int, max_model_len: int) -> int:
    """Encoder-decoder models run without chunked prefill (ModelConfig.
    is_chunked_prefill_supported), which changes max_num_batched_tokens and with it the
    cross-attention demand (SchedulerConfig: max_num_encoder_input_tokens = it).

    vLLM: EngineArgs._set_default_max_num_seqs_and_batched_tokens_args — a default is raised to
    max_model_len, then capped at max_num_seqs × max_model_len; SchedulerConfig.
    verify_max_model_len refuses a given value below max_model_len; and such a model is not
    SupportsPP (ModelConfig.verify_with_parallel_config)."""
    if dep.pipeline_parallel_size > 1:
        raise StartupError("vLLM would raise NotImplementedError: Pipeline parallelism is not "
                           "supported for this model. Supported models implement the "
                           "`SupportsPP` interface.", hint="drop --pipeline-parallel-size")
    if dep.max_num_batched_tokens is not None:
        if mnbt < max_model_len:
            raise StartupError(
                f"vLLM would raise ValueError: max_num_batched_tokens ({mnbt}) is smaller than "
                f"max_model_len ({max_model_len}). This effectively limits the maximum sequence "
                "length to max_num_batched_tokens and makes vLLM reject longer sequences. Please "
                "increase max_num_batched_tokens or decrease max_model_len.",
                hint=f"use --max-num-batched-tokens {max_model_len} or more")
        return mnbt
    # vLLM: get_batch_defaults — max_num_seqs 1024 on the tiers with the larger token defaults
    seqs = dep.max_num_seqs or (1024 if default_max_num_batched_tokens(
        dep.gpu_total_memory_bytes, dep.gpu_name, dep.sm) > 2048 else 256)
    return min(seqs * max_model_len, max(max_model_len, mnbt))


def kv_heads_per_rank(total: int, tp: int, what: str) -> int:
    """vLLM: ModelConfig.get_num_kv_heads — max(1, heads // tp); replicated when tp > heads."""
    if total % tp and tp % total:
        raise InputError(f"{what}: {total} KV heads cannot be split over tensor parallel size {tp}",
                         hint="pick a TP size that divides the KV heads (or a multiple of them)")
    return max(1, total // tp)


def pp_partition(num_layers: int, pp: int, partition: str | None) -> list[tuple[int, int]]:
    """[start, end) decoder layers of every stage (vLLM: distributed.utils.get_pp_indices)."""
    return [get_pp_indices(num_layers, rank, pp, partition or None) for rank in range(pp)]


# ---- per-layer specs -----------------------------------------------------------------------

@dataclass
class _Ctx:
    profile: VllmProfile
    dep: Deployment
    model_dtype: str
    mamba_cache_mode: str
    num_spec: int
    max_model_len: int
    ssm_dtype: str
    warnings: list[str]


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


def _dsv4_backend(layer: LayerDescription) -> Backend | None:
    """The backend of a DeepSeek-V4 cache layer (FlashMLA path), None if not one."""
    if layer.kind is LayerKind.COMPRESSOR_STATE:
        return Backend.DEEPSEEK_V4_COMPRESSOR  # CompressorStateCache.get_attn_backend
    if layer.model_version != DSV4:
        return None
    return {LayerKind.SLIDING_WINDOW_MLA: Backend.DEEPSEEK_SPARSE_SWA,
            LayerKind.MLA_INDEXER: Backend.DEEPSEEK_V4_INDEXER}.get(
                layer.kind, Backend.FLASHMLA_SPARSE_DSV4)


def _dsv4_spec(layer: LayerDescription, *, block_size: int, kv_dtype: str,
               is_draft: bool) -> AttentionSpec:
    """A DeepSeek-V4 cache layer's spec with the fp8_ds_mla layout (kv_dtype fp8_ds_mla):
    584-byte records (448 B NoPE + 128 B RoPE + 8 B scales) and pages padded to 576 B.

    vLLM: sparse_swa.py DeepseekV4SWACache.get_kv_cache_spec (SlidingWindowMLASpec),
    deepseek_v4/attention.py DeepseekV4Attention.get_kv_cache_spec / DeepseekV4IndexerCache
    (MLAAttentionSpec, tokens_per_state = compress ratio), compressor.py CompressorStateCache
    (SlidingWindowMLASpec, fp32).
    """
    assert layer.head_size is not None
    common: dict[str, Any] = dict(block_size=block_size, num_kv_heads=1, max_tp_shards=1,
                                  head_size=layer.head_size, alignment=DSV4_PAGE_ALIGNMENT,
                                  is_draft=is_draft)
    if layer.kind is LayerKind.COMPRESSOR_STATE:
        assert layer.sliding_window is not None
        return SlidingWindowMLASpec(dtype="float32", sliding_window=layer.sliding_window,
                                    **common)
    if layer.kind is LayerKind.MLA_INDEXER:  # cache_role stays SPARSE, as vLLM builds it
        return MLAAttentionSpec(dtype="uint8", tokens_per_state=layer.tokens_per_state or 1,
                                **common)
    common.update(dtype="uint8", cache_dtype_str=kv_dtype, model_version=DSV4,
                  kv_quant_mode=kv_quant_mode(kv_dtype), state_content_bytes=DSV4_RECORD_BYTES)
    if layer.kind is LayerKind.SLIDING_WINDOW_MLA:
        assert layer.sliding_window is not None
        return SlidingWindowMLASpec(sliding_window=layer.sliding_window, **common)
    return MLAAttentionSpec(tokens_per_state=layer.tokens_per_state or 1, **common)


def _attention_backend(layer: LayerDescription, kv_dtype: str, dep: Deployment, *,
                       causal: bool, override: str | None, sparse: bool = False,
                       diff_kv: bool = False) -> Backend:
    if layer.backend is not None:
        return Backend(layer.backend)  # the model code picks it (vLLM bypasses the selector)
    if (dsv4 := _dsv4_backend(layer)) is not None:
        return dsv4
    if layer.kind is LayerKind.MLA_INDEXER:
        return Backend.DEEPSEEK_V32_INDEXER  # vLLM: DeepseekV32IndexerCache.get_attn_backend
    is_mla = layer.kind in (LayerKind.MLA, LayerKind.SLIDING_WINDOW_MLA)
    if is_mla and sparse:
        return select_sparse_mla_backend(kv_cache_dtype=kv_dtype, sm=dep.sm, override=override)
    if diff_kv and not override and layer.head_size_v not in (None, layer.head_size):
        # vLLM: models/mimo_v2.py MiMoV2Attention — K and V of different sizes run on
        # FLASH_ATTN_DIFFKV where FA3/FA4 exist (SM90, SM10x), else TRITON_ATTN_DIFFKV
        fa = dep.sm is not None and (dep.sm == 90 or 100 <= dep.sm < 110)
        return Backend.FLASH_ATTN if fa else Backend.TRITON_ATTN
    if layer.kind is LayerKind.CROSS_ATTENTION:
        return _cross_attention_backend(layer, kv_dtype, dep, override)
    return select_backend(kv_cache_dtype=kv_dtype, is_mla=is_mla, sm=dep.sm, causal=causal,
                          override=override, head_size=layer.head_size)


# vLLM: <Backend>.supports_attn_type(ENCODER_DECODER) — FlashInfer and Flex keep the default
# (decoder only)
ENCODER_DECODER_BACKENDS = (Backend.FLASH_ATTN, Backend.TRITON_ATTN)


def _cross_attention_backend(layer: LayerDescription, kv_dtype: str, dep: Deployment,
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


def _attention_spec(layer: LayerDescription, *, block_size: int, kv_dtype: str, tp: int,
                    model_dtype: str, backend: Backend, profile: VllmProfile,
                    sw_block: int | None = None, is_draft: bool = False) -> KVCacheSpec:
    storage = kv_cache_storage_dtype(kv_dtype, model_dtype)
    quant = kv_quant_mode(kv_dtype)
    if layer.fixed_dtype and layer.kind.is_attention and layer.kind is not LayerKind.MLA_INDEXER:
        storage, quant = layer.fixed_dtype, KVQuantMode.NONE  # e.g. Inkling's bf16 conv state
    kind = layer.kind
    if kind is LayerKind.COMPRESSOR_STATE or layer.model_version == DSV4:
        return _dsv4_spec(layer, block_size=block_size, kv_dtype=kv_dtype, is_draft=is_draft)
    if kind is LayerKind.MLA_INDEXER:
        # vLLM: DeepseekV32IndexerCache.get_kv_cache_spec (uint8 rows, max_tp_shards 1) /
        # minimax_m3 common/indexer.py MiniMaxM3IndexerCache (bf16 index keys, no max_tp_shards);
        # neither sets cache_dtype_str
        # GLM-5.3-Flash glm5next/common/attention.py Glm5NextIndexerCache: the same spec with
        # tokens_per_state = index_kpool (one stored entry per pool)
        assert layer.head_size is not None
        dtype = layer.fixed_dtype or "uint8"
        return MLAAttentionSpec(block_size=block_size, num_kv_heads=1,
                                max_tp_shards=1 if dtype == "uint8" else None,
                                head_size=layer.head_size, dtype=dtype,
                                cache_role=SparseCacheRole.INDEXER, is_draft=is_draft,
                                tokens_per_state=layer.tokens_per_state or 1)
    if kind is LayerKind.KPOOL_TAIL:
        # vLLM: glm5next/common/attention.py Glm5NextTailCache.get_kv_cache_spec — one ring
        # block of [raw K, gate score] per request (block_size = the ring, from the caller)
        assert layer.head_size is not None
        return CircularBufferSpec(block_size=block_size, num_kv_heads=2, head_size=layer.head_size,
                                  head_size_v=0, dtype=layer.fixed_dtype or "bfloat16",
                                  dcp_sharded=False, is_draft=is_draft)
    if kind in (LayerKind.MLA, LayerKind.SLIDING_WINDOW_MLA):
        if layer.kv_lora_rank is None:
            raise InputError(f"{layer.name}: an MLA layer needs kv_lora_rank")
        head = layer.kv_lora_rank + (layer.qk_rope_head_dim or 0)
        kw: dict[str, object] = dict(block_size=block_size, num_kv_heads=1, head_size=head,
                                     dtype=storage, kv_quant_mode=quant, max_tp_shards=1,
                                     cache_dtype_str=kv_dtype, is_draft=is_draft)
        if kv_dtype in MLA_BLOB_BYTES:
            kw["state_content_bytes"] = (profile.fp8_ds_mla_row_bytes if kv_dtype == "fp8_ds_mla"
                                         else MLA_BLOB_BYTES[kv_dtype])
        if kind is LayerKind.MLA:
            # vLLM: MLAAttention.get_kv_cache_spec — is_index_group_leader = has an indexer
            spec: AttentionSpec = MLAAttentionSpec(
                is_index_group_leader=layer.index_head_dim is not None, **kw)  # type: ignore[arg-type]
        else:
            spec = SlidingWindowMLASpec(sliding_window=layer.sliding_window or 0, **kw)  # type: ignore[arg-type]
        return customize_spec(backend, spec)
    if kv_dtype in MLA_BLOB_BYTES:
        raise InputError(f"KV cache dtype {kv_dtype} exists only for MLA models")
    if layer.num_kv_heads is None or layer.head_size is None:
        raise InputError(f"{layer.name}: an attention layer needs num_kv_heads and head_size")
    kv_heads = (layer.num_kv_heads if layer.tp_replicated  # e.g. zaya.py ReplicatedLinear
                else kv_heads_per_rank(layer.num_kv_heads, tp, layer.name))
    common = dict(block_size=block_size, num_kv_heads=kv_heads,
                  head_size=layer.head_size, head_size_v=layer.head_size_v, dtype=storage,
                  kv_quant_mode=quant, is_draft=is_draft)
    if kind is LayerKind.SLIDING_WINDOW:
        assert layer.sliding_window is not None
        common["block_size"] = sw_block or block_size
        spec = SlidingWindowSpec(sliding_window=layer.sliding_window, **common)  # type: ignore[arg-type]
    elif kind is LayerKind.CHUNKED_LOCAL:
        assert layer.attention_chunk_size is not None
        spec = ChunkedLocalAttentionSpec(attention_chunk_size=layer.attention_chunk_size,
                                         **common)  # type: ignore[arg-type]
    elif kind is LayerKind.CROSS_ATTENTION:
        spec = CrossAttentionSpec(**common)  # type: ignore[arg-type]
    elif kind is LayerKind.ENCODER_ONLY:
        spec = EncoderOnlyAttentionSpec(**common)  # type: ignore[arg-type]
    elif kind is LayerKind.SINK_FULL_ATTENTION:
        _check_sink_layer(layer, tp=tp, block_size=block_size)
        spec = SinkFullAttentionSpec(sink_len=layer.sink_len, **common)  # type: ignore[arg-type]
    else:
        spec = FullAttentionSpec(**common)  # type: ignore[arg-type]
    try:
        return customize_spec(backend, spec)
    except ValueError as exc:
        raise UnsupportedError(f"{layer.name}: {exc}") from None


def _check_flint(backends: list[Backend | None], model_dtype: str, kv_dtype: str) -> None:
    """vLLM: models/flint/model.py FlintAttention asserts a FlashInfer impl, a bfloat16 model and
    an auto / bfloat16 KV cache (its fused kernels write the cache themselves)."""
    if any(b is not Backend.FLASHINFER for b in backends):
        picked = next(b for b in backends if b is not Backend.FLASHINFER)
        raise UnsupportedError(f"Flint runs only on FlashInfer attention; vLLM would pick "
                               f"{picked.value if picked else 'none'} here and fail its assertion",
                               hint="pass --attention-backend FLASHINFER")
    if model_dtype != "bfloat16" or kv_dtype not in ("auto", "bfloat16"):
        raise UnsupportedError(f"Flint needs a bfloat16 model and KV cache (got dtype {model_dtype}"
                               f", KV cache {kv_dtype}); vLLM's Flint attention asserts both",
                               hint="use --dtype auto and --kv-cache-dtype auto")


def _check_sink_layer(layer: LayerDescription, *, tp: int, block_size: int) -> None:
    """What vLLM refuses at start-up for a static-sink layer: KV heads fewer than the TP size
    (models/openpangu.py OpenPanguSinkAttention: no replication) and sink tokens that are not
    whole blocks (v1/core/single_type_kv_cache_manager.py SinkFullAttentionManager)."""
    assert layer.num_kv_heads is not None
    if layer.num_kv_heads < tp:
        raise UnsupportedError(
            f"{layer.name}: {layer.num_kv_heads} KV heads is less than tensor parallel size {tp}; "
            "vLLM's sink attention does not replicate KV heads",
            hint=f"use a tensor parallel size of at most {layer.num_kv_heads}")
    if layer.sink_len and layer.sink_len % block_size:
        raise UnsupportedError(
            f"{layer.name}: {layer.sink_len} sink tokens are not a whole number of "
            f"{block_size}-token blocks (vLLM's SinkFullAttentionManager asserts it)",
            hint="pick a --block-size that divides the sink length")


def _sw_per_token(layer: LayerDescription, kv_dtype: str, tp: int, model_dtype: str,
                  backend: Backend, profile: VllmProfile) -> int:
    probe = layer.model_copy(update={"kind": LayerKind.SLIDING_WINDOW})
    spec = _attention_spec(probe, block_size=1, kv_dtype=kv_dtype, tp=tp,
                           model_dtype=model_dtype, backend=backend, profile=profile)
    assert isinstance(spec, AttentionSpec)
    return spec.unpadded_page_size_bytes


def _state(layer: LayerDescription, ctx: _Ctx, tp: int) -> tuple[tuple[tuple[int, ...], ...],
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
        return shapes, (conv, _kda_recurrent_dtype(layer, ctx.ssm_dtype)), MambaType.GDN_ATTN
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


def _kda_recurrent_dtype(layer: LayerDescription, ssm_dtype: str) -> str:
    if not (layer.model_version or "").startswith("kimi_k3") or ssm_dtype == "auto":
        return "float32"
    dtype = mamba_state_dtypes("bfloat16", "auto", ssm_dtype)[1]  # normalizes bf16 / fp32
    if dtype not in ("float32", "bfloat16"):
        raise InputError("KDA recurrent state supports only auto, float32, and bfloat16; "
                         f"got {ssm_dtype}", hint="--mamba-ssm-cache-dtype float32 or bfloat16")
    return dtype


def _flashkda_checkpoints(layer: LayerDescription, ctx: _Ctx) -> bool:
    """vLLM: kimi_k3/nvidia/kda.py resolve_kda_prefill_backend ("auto") → "flashkda" when
    is_flashkda_supported (SM 9x/10x/12x, bf16 activations, head_dim 128, a gate bound); then
    KimiK3DeltaAttention.get_kv_cache_spec adds one prefill-checkpoint block, alignment 16."""
    sm = ctx.dep.sm
    return (layer.model_version == "kimi_k3_flashkda" and sm is not None
            and sm // 10 in (9, 10, 12) and ctx.model_dtype == "bfloat16")


def _state_page(shapes: tuple[tuple[int, ...], ...], dtypes: tuple[str, ...]) -> int:
    return sum(prod(s) * dtype_size_bytes(t) for s, t in zip(shapes, dtypes, strict=True))


def _gdn_exports_checkpoints(target: ModelDescription, ctx: _Ctx) -> bool:
    """vLLM: Qwen GDN _resolve_gdn_prefill_backend == 'flashinfer' (align mode only)."""
    if ctx.mamba_cache_mode != "align" or not ctx.profile.hybrid_align_checkpoint:
        return False
    if target.family == "olmo_hybrid":
        return False  # OlmoHybridGatedDeltaNetAttention keeps MambaBase's (no checkpoints)
    state_kinds = {layer.kind for layer in target.layers if layer.kind.is_state}
    if state_kinds != {LayerKind.GDN}:
        return False  # any layer without an alignment (e.g. Mamba2) turns it off
    sm = ctx.dep.sm
    if sm == 90:
        return True
    head_k = {layer.gdn.head_k_dim for layer in target.layers if layer.gdn}
    return sm is not None and sm >= 100 and head_k == {128} and ctx.dep.cuda_runtime_major >= 13


def kpool_tail_ring(index_kpool: int, num_spec: int, block_size: int) -> int:
    """vLLM: Glm5NextTailCache.get_kv_cache_spec — index_kpool × next_power_of_2(cdiv(index_kpool
    + num_speculative_tokens, index_kpool)) slots, which must divide the attention block."""
    ring = index_kpool * (1 << (cdiv(index_kpool + num_spec, index_kpool) - 1).bit_length())
    if block_size % ring:
        raise InputError(f"Glm5NextTailCache: cache_config.block_size ({block_size}) must be a "
                         f"multiple of the tail ring ({ring})",
                         hint="pick a --block-size that is a multiple of the ring")
    return ring


def _supported_layouts(backends: set[str | None]) -> tuple[str, ...] | None:
    """vLLM: <Backend>.supported_kv_cache_layouts, merged — only these declare a set here:
    DeepseekV4IndexerBackend (BLHNC, BLNHC) and KpoolTailBackend (BLHNC, 0.32+)."""
    if Backend.DEEPSEEK_V4_INDEXER.value in backends:
        return DSV4_KV_CACHE_LAYOUTS
    if Backend.KPOOL_TAIL.value in backends:
        return ("BLHNC",)
    return None


# vLLM: model_executor/models/registry.py — architectures a release does not register yet
ARCH_FIRST_RELEASE = {"KimiK31ForConditionalGeneration": "0.34.0",
                      "MiniCPMV4_7ForConditionalGeneration": "0.32.0",
                      "MiniCPMOcrForConditionalGeneration": "0.33.0",
                      "Nemotron3_5TranscribeForConditionalGeneration": "0.34.0",
                      "AliceAIForCausalLM": "0.33.0",
                      "Lfm3ForCausalLM": "0.34.0", "Lfm3VlForConditionalGeneration": "0.34.0",
                      "Lfm3AudioForConditionalGeneration": "0.34.0", "ZayaForCausalLM": "0.34.0",
                      "FlintForCausalLM": "0.33.0",
                      "CanaryForConditionalGeneration": "0.34.0",
                      "Qwen3XPressModel": "0.33.0", "DFlashQwen3XPressModel": "0.33.0"}


def _check_release_serves(model: ModelDescription, version: str) -> None:
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    for arch in model.architectures[:1]:
        first = ARCH_FIRST_RELEASE.get(arch)
        if first is not None and key(version) < key(first):
            raise UnsupportedError(
                f"vLLM {version} does not serve {arch}: its model registry has it from "
                f"{first} on", hint=f"plan it with --vllm {first} or later")


# ---- the build ------------------------------------------------------------------------------

def build(target: ModelDescription, dep: Deployment, draft: ModelDescription | None = None
          ) -> BuildResult:
    """Target (+ draft) → PlannerInput, mirroring vLLM's worker start-up."""
    profile = get_profile(dep.vllm_version)
    _check_release_serves(target, profile.version)
    if profile.glm5_next_grouping and any(layer.kind is LayerKind.KPOOL_TAIL
                                          for layer in target.layers):
        # vLLM 0.31: KpoolTailSpec tails, storage_block_size, its own Glm5NextConfig defaults
        raise UnsupportedError("GLM-5.3-Flash (Glm5Next) under vLLM 0.31 (KpoolTailSpec tails, "
                               "storage_block_size) is not modelled by kvplan",
                               hint="plan it with --vllm 0.32.0 or later")
    if draft is not None:
        _check_release_serves(draft, profile.version)
    warnings: list[str] = list(target.warnings)
    model_dtype = resolve_model_dtype(dep.dtype, target.dtype, warnings)
    kv_dtype = resolve_kv_cache_dtype(dep.kv_cache_dtype, target, dep.sm, profile)
    if target.sparse_mla:
        kv_dtype = sparse_mla_kv_cache_dtype(kv_dtype, select_sparse_mla_backend(
            kv_cache_dtype=kv_dtype, sm=dep.sm, override=dep.attention_backend))
    if target.family == DSV4:
        kv_dtype = dsv4_kv_cache_dtype(kv_dtype, dep)
    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    if tp < 1 or pp < 1 or dep.decode_context_parallel_size < 1:
        raise InputError("parallel sizes must be ≥ 1")
    method = dep.speculative_method
    if draft is not None and method is None:
        method = draft.draft_method or "eagle"
    k = dep.num_speculative_tokens if method else 0
    if method and k < 1:
        raise InputError(f"speculative method {method} needs --num-speculative-tokens ≥ 1")
    if method and target.family == "zaya":
        raise UnsupportedError("ZAYA1 does not support speculative decoding (vLLM: zaya.py "
                               "ZayaForCausalLM raises NotImplementedError)",
                               hint="plan it without a speculative method")
    max_model_len, long_warning = verify_max_model_len(
        target, dep.max_model_len, allow_long=dep.allow_long_max_model_len)
    warnings += [long_warning] if long_warning else []
    if not max_model_len:
        raise InputError("the config gives no max_position_embeddings",
                         hint="pass --max-model-len")
    pooling = resolve_runner(target, dep.runner, dep.convert)
    # vLLM: EngineArgs._set_default_chunked_prefill_and_prefix_caching_args
    chunked = dep.enable_chunked_prefill
    if chunked is None:
        chunked = pooling.supports_chunked_prefill if pooling is not None else True
    mnbt = dep.max_num_batched_tokens or default_max_num_batched_tokens(
        dep.gpu_total_memory_bytes, dep.gpu_name, dep.sm)
    if target.is_encoder_decoder:
        mnbt = encoder_decoder_batched_tokens(dep, mnbt, max_model_len)
    if not chunked and dep.max_num_batched_tokens is None:
        # vLLM: _set_default_max_num_seqs_and_batched_tokens_args — a whole prompt per step
        mnbt = max(max_model_len, mnbt)
    # vLLM: VllmConfig._set_async_scheduling — off by default for pooling models
    async_scheduling = (dep.async_scheduling if dep.async_scheduling is not None
                        else pooling is None)
    if pooling is not None:
        warnings.append(
            f"pooling runner (--convert {pooling.convert}, {pooling.seq_pooling_type or '-'}/"
            f"{pooling.tok_pooling_type} pooling): async scheduling "
            f"{'on' if async_scheduling else 'off'}, chunked prefill {'on' if chunked else 'off'}"
            f", max_num_batched_tokens {mnbt}")
    mamba_mode = "align" if dep.enable_prefix_caching else "none"  # MambaModelConfig
    ctx = _Ctx(profile, dep, model_dtype, mamba_mode, k, max_model_len,
               resolve_mamba_ssm_cache_dtype(dep.mamba_ssm_cache_dtype, target, profile), warnings)

    # draft layers: a separate head, or the target's own MTP modules
    draft_layers: tuple[LayerDescription, ...] = ()
    draft_name = None
    if method == "mtp" and draft is not None:
        draft_layers = draft.layers
        draft_name = draft.source
    elif method == "mtp":
        draft_layers = target.mtp_layers
        if not draft_layers:
            raise UnsupportedError(f"{target.source} has no MTP module kvplan can see",
                                   hint="check num_nextn_predict_layers / mtp_num_hidden_layers")
        draft_name = f"{target.source} (MTP)"
    elif draft is not None:
        draft_layers = draft.layers
        draft_name = draft.source
    draft_kv = resolve_kv_cache_dtype(dep.draft_kv_cache_dtype or dep.kv_cache_dtype,
                                      draft or target, dep.sm, profile) if draft_layers else None
    draft_sparse = (draft or target).sparse_mla
    if draft_kv is not None and (draft or target).family == DSV4:
        draft_kv = dsv4_kv_cache_dtype(draft_kv, dep)
    if draft_kv is not None and draft_sparse:
        draft_kv = sparse_mla_kv_cache_dtype(draft_kv, select_sparse_mla_backend(
            kv_cache_dtype=draft_kv, sm=dep.sm,
            override=dep.draft_attention_backend or dep.attention_backend))
    draft_tp = dep.draft_tensor_parallel_size or tp
    draft_causal = method not in ("dflash", "dspark")  # vLLM: use_non_causal for both drafters
    diff_kv = target.family == "mimo_v2"  # the MTP layers too (mimo_v2_mtp.py: MiMoV2Attention)

    # backends per layer (vLLM: the attention layer picks at construction)
    def backend_for(layer: LayerDescription, is_draft: bool) -> Backend | None:
        if layer.kind.is_state or layer.kind in (LayerKind.NO_KV, LayerKind.ENCODER_ONLY,
                                                 LayerKind.HIDDEN_STATE):
            return None  # HIDDEN_STATE: CacheOnlyAttentionBackend, outside the block-size vote
        if is_draft:
            return _attention_backend(layer, draft_kv or kv_dtype, dep, causal=draft_causal,
                                      override=dep.draft_attention_backend or dep.attention_backend,
                                      sparse=draft_sparse, diff_kv=diff_kv)
        return _attention_backend(layer, kv_dtype, dep, causal=True, override=dep.attention_backend,
                                  sparse=target.sparse_mla, diff_kv=diff_kv)

    target_backends = [backend_for(layer, False) for layer in target.layers]
    if target.family == "flint":
        _check_flint(target_backends, model_dtype, kv_dtype)
    draft_backends = [backend_for(layer, True) for layer in draft_layers]
    distinct: list[Backend] = []
    for b in [*target_backends, *draft_backends]:
        if b is not None and b not in distinct:
            distinct.append(b)
    # vLLM: Glm5NextIndexerBackend reads index_kpool (the indexer's tokens_per_state)
    kpool = max((layer.tokens_per_state or 1 for layer in [*target.layers, *draft_layers]
                 if layer.backend == Backend.GLM5_NEXT_INDEXER.value), default=1)
    sizes = [kernel_block_sizes(b, sm=dep.sm, index_kpool=kpool) for b in distinct]

    # Phase 1: the preferred block when --block-size is not given
    block = dep.block_size or preferred_block_size(sizes, profile.default_block_size)
    if dep.block_size:
        rejecting = [b.value for b, sz in zip(distinct, sizes, strict=True)
                     if not supports_block_size(sz, dep.block_size)]
        if rejecting:  # vLLM: no backend would accept the layer (validate_configuration)
            raise UnsupportedError(
                f"--block-size {dep.block_size} is not supported by {', '.join(rejecting)}",
                hint="FlashAttention/Triton take multiples of 16; FlashInfer 16, 32 or 64")
    mamba_padded: int | None = None
    # Phase 2: hybrid attention/Mamba alignment on per-rank pages
    state_layers = [layer for layer in target.layers if layer.kind.is_state]
    attn_layers = [(layer, b) for layer, b in zip(target.layers, target_backends, strict=True)
                   if b is not None and layer.kind is not LayerKind.ENCODER_ONLY]
    if state_layers and attn_layers:
        # vLLM: _align_hybrid_block_size — one token of the model's attention (its KV heads and
        # head size), packed by the first backend; MLA: the plain latent row (no blob, no packing)
        primary = next((la for la, _ in attn_layers
                        if la.kind in (LayerKind.FULL_ATTENTION, LayerKind.MLA)), attn_layers[0][0])
        if primary.kind in (LayerKind.MLA, LayerKind.SLIDING_WINDOW_MLA):
            head = (primary.kv_lora_rank or 0) + (primary.qk_rope_head_dim or 0)
            attn_1tok = head * dtype_size_bytes(kv_cache_storage_dtype(kv_dtype, model_dtype))
        else:
            # the model's KV heads per rank (ModelConfig.get_num_kv_heads), even for a layer
            # that keeps every head (zaya.py)
            probe = primary.model_copy(update={"kind": LayerKind.FULL_ATTENTION,
                                               "tp_replicated": False})
            attn_1tok = _attention_spec(probe, block_size=1, kv_dtype=kv_dtype, tp=tp,
                                        model_dtype=model_dtype, backend=distinct[0],
                                        profile=profile).page_size_bytes
        mamba_page = max(_state_page(*_state(layer, ctx, tp)[:2]) for layer in state_layers)
        ckpt = (FLASHINFER_GDN_CHECKPOINT_ALIGNMENT if _gdn_exports_checkpoints(target, ctx)
                else None)
        aligned = align_hybrid_block_size(
            profile, block_size=block, primary_sizes=sizes[0],
            all_sizes=sizes, attn_page_per_token=attn_1tok, mamba_page=mamba_page,
            use_mla=target.use_mla, align_mode=mamba_mode == "align", checkpoint_alignment=ckpt)
        if profile.hybrid_align_backend_lcm:  # 0.32+ checks the aligned size
            check_aligned_block_size(aligned.block_size, block,
                                     [(b.value, s) for b, s in zip(distinct, sizes, strict=True)])
        block, mamba_padded = aligned.block_size, aligned.mamba_page_size_padded
    mamba_block = block if mamba_mode == "align" else max_model_len
    gdn_ckpt_blocks = 1 if _gdn_exports_checkpoints(target, ctx) else 0

    def spec_for(layer: LayerDescription, backend: Backend | None, *, is_draft: bool,
                 layer_tp: int, layer_kv: str) -> KVCacheSpec | None:
        if layer.kind in (LayerKind.NO_KV, LayerKind.ENCODER_ONLY):
            return None  # vLLM: EncoderOnlyAttention.get_kv_cache_spec returns None
        if layer.kind.is_state:
            shapes, dtypes, mtype = _state(layer, ctx, layer_tp)
            ckpt_blocks = 0
            if mtype is MambaType.MAMBA2 and profile.mamba2_checkpoint_block:
                ckpt_blocks = 1  # MambaMixer2.get_kv_cache_spec (0.32+)
            elif layer.kind is LayerKind.KDA:
                ckpt_blocks = int(_flashkda_checkpoints(layer, ctx))
            elif mtype is MambaType.GDN_ATTN:
                ckpt_blocks = gdn_ckpt_blocks
            return MambaSpec(block_size=mamba_block, shapes=shapes, dtypes=dtypes,
                             page_size_padded=mamba_padded, mamba_type=mtype,
                             mamba_cache_mode=mamba_mode, num_speculative_blocks=k,
                             num_prefill_checkpoint_blocks=ckpt_blocks,
                             prefill_checkpoint_alignment=(
                                 FLASHKDA_CHECKPOINT_ALIGNMENT if ckpt_blocks
                                 and layer.kind is LayerKind.KDA
                                 else FLASHINFER_GDN_CHECKPOINT_ALIGNMENT if ckpt_blocks
                                 and mtype is MambaType.GDN_ATTN else None),
                             tp_replicated=layer.tp_replicated, is_draft=is_draft)
        if layer.kind is LayerKind.HIDDEN_STATE:
            # vLLM: CacheOnlyAttentionLayer.get_kv_cache_spec — cache_config.block_size, heads
            # not split by TP; a quantized --kv-cache-dtype falls back to auto (model dtype)
            assert layer.num_kv_heads is not None and layer.head_size is not None
            quantized = kv_quant_mode(layer_kv) is not KVQuantMode.NONE
            return HiddenStateCacheSpec(
                block_size=block, num_kv_heads=layer.num_kv_heads, head_size=layer.head_size,
                dtype=model_dtype if quantized else kv_cache_storage_dtype(layer_kv, model_dtype),
                is_draft=is_draft)
        assert backend is not None
        layer_block = dep.draft_block_size if (is_draft and dep.draft_block_size) else block
        layer_block = layer.block_size or layer_block  # a block the layer fixes itself
        if layer.kind is LayerKind.KPOOL_TAIL:
            layer_block = kpool_tail_ring(layer.tokens_per_state or 1, k, block)
        sw_block = None
        if layer.kind is LayerKind.SLIDING_WINDOW and not layer.block_size:
            if is_draft and dep.draft_block_size:
                sw_block = dep.draft_block_size
            else:
                per_tok = _sw_per_token(layer, layer_kv, layer_tp, model_dtype, backend, profile)
                sw_block = sliding_window_block_size(
                    profile, sizes=kernel_block_sizes(backend, sm=dep.sm), sw_per_token=per_tok,
                    block_size=block)
        return _attention_spec(layer, block_size=layer_block, kv_dtype=layer_kv, tp=layer_tp,
                               model_dtype=model_dtype, backend=backend, profile=profile,
                               sw_block=sw_block, is_draft=is_draft)

    # PP stages over the decoder layers; drafters run on the last stage
    num_decoder = max((layer.index for layer in target.layers), default=-1) + 1
    stages = pp_partition(num_decoder, pp, dep.pp_layer_partition)
    plans: list[LayerPlan] = []
    for layer, backend in zip(target.layers, target_backends, strict=True):
        spec = spec_for(layer, backend, is_draft=False, layer_tp=tp, layer_kv=kv_dtype)
        if spec is None:
            continue
        stage = next(i for i, (a, b) in enumerate(stages) if a <= layer.index < b)
        plans.append(LayerPlan(layer.name, layer.kind.value, backend.value if backend else None,
                               spec, False, stage))
    for layer, backend in zip(draft_layers, draft_backends, strict=True):
        spec = spec_for(layer, backend, is_draft=True, layer_tp=draft_tp,
                        layer_kv=draft_kv or kv_dtype)
        if spec is not None:
            plans.append(LayerPlan(layer.name, layer.kind.value,
                                   backend.value if backend else None, spec, True, pp - 1))
    names = [p.name for p in plans]
    if len(set(names)) != len(names):
        raise InputError("two layers share a name (target and draft?)")
    if not plans and any(layer.kind is LayerKind.ENCODER_ONLY for layer in target.layers):
        warnings.append("no KV cache: encoder-only attention (vLLM allocates none and skips the "
                        "memory check)")
    elif not plans:
        warnings.append("the model has no KV cache at all (attention-free)")
    workers = tuple({p.name: p.spec for p in plans if p.pp_stage == s} for s in range(pp))
    disable_hybrid = dep.disable_hybrid_kv_cache_manager
    if any(layer.kind is LayerKind.CHUNKED_LOCAL for layer in target.layers) and not disable_hybrid:
        # vLLM: VllmConfig turns the hybrid manager off for chunked local attention
        # unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1
        disable_hybrid = True
        warnings.append("chunked local attention: vLLM disables the hybrid KV cache manager "
                        "(set VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 to keep it)")
    n_mtp = target.num_nextn_predict_layers if method == "mtp" else 1
    inp = PlannerInput(
        worker_specs=workers, available_kv_bytes=(dep.available_kv_bytes,) * pp,
        max_model_len=max_model_len, max_num_batched_tokens=mnbt,
        auto_fit_max_model_len=dep.auto_fit_max_model_len,
        async_scheduling=async_scheduling, pipeline_parallel_size=pp,
        decode_context_parallel_size=dep.decode_context_parallel_size,
        mamba_cache_mode=mamba_mode if state_layers else "none",
        num_speculative_tokens=k, speculative_method=method,
        num_nextn_predict_layers=max(1, n_mtp),
        disable_hybrid_kv_cache_manager=disable_hybrid,
        num_gpu_blocks_override=dep.num_gpu_blocks_override,
        enable_extensible_kv_cache=False, vllm_version=profile.version, with_fix=dep.with_fix,
        supported_kv_cache_layouts=_supported_layouts({p.backend for p in plans}))
    del draft_name
    return BuildResult(planner_input=inp, layers=tuple(plans), block_size=block,
                       kv_cache_dtype=kv_dtype, draft_kv_cache_dtype=draft_kv,
                       model_dtype=model_dtype, mamba_cache_mode=inp.mamba_cache_mode,
                       max_model_len=max_model_len, max_num_batched_tokens=mnbt,
                       warnings=tuple(warnings),
                       runner="generate" if pooling is None else "pooling")


__all__ = ["BuildResult", "Deployment", "LayerPlan", "build", "min_kernel_block"]
