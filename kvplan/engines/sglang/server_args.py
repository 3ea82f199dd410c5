"""SGLang's server-argument resolution, the part that sizes memory (ServerArgs.resolve_once,
arg_groups/pipeline.py order): CUDA-graph defaults and the default mem_fraction_static
(memory_hook.handle_gpu_memory_settings), the model overrides and the attention backend, the page
size, the KV cache dtype, the speculative defaults, the Mamba cache strategy and the context
length. Pure: returns the resolved values, or the SGLang error a launch would stop with."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.engines.sglang.deployment import Platform, SglangDeployment, SglangGpu
from kvplan.engines.sglang.model import AttentionArch, SglangModel
from kvplan.engines.sglang.profiles import SglangProfile
from kvplan.engines.sglang.result import SglangError
from kvplan.errors import UnsupportedError

# mem_cache.kv_cache_dtype.configure_kv_cache_dtype: --kv-cache-dtype → pool storage dtype
KV_STORAGE = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2", "mxfp8": "float8_e4m3fn",
               "bf16": "bfloat16", "bfloat16": "bfloat16", "nvfp4": "float4_e2m1fn_x2",
               "fp4_mx_block16": "float4_e2m1fn_x2"}
# torch._utils._element_size of those dtypes (float4_e2m1fn_x2 packs two values in one byte)
ELEMENT_SIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1,
                "float4_e2m1fn_x2": 1}
_EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
_ALIASES = {"NEXTN": "EAGLE"}


class StartupError(Exception):
    """SGLang stops while resolving its arguments (the text is SGLang's own)."""

    def __init__(self, error: SglangError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True)
class ResolvedArgs:
    platform: Platform
    gpu_total_memory_mib: float
    tp_size: int
    pp_size: int
    dp_size: int
    attn_dp_size: int
    attn_tp_size: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    cuda_graph_max_bs_decode: int | None
    prefill_cuda_graph: str
    prefill_cuda_graph_bs_count: int
    reserved_mem_mib: float | None
    mem_fraction_static: float
    mem_fraction_static_is_default: bool
    vlm_adjusted: bool
    attention_backend: str
    page_size: int
    kv_cache_dtype: str  # after model defaults: auto, bfloat16, fp8_e4m3, nvfp4, mxfp8, ...
    kv_cache_dtype_str: str  # the runner's string (configure_kv_cache_dtype's resolved value)
    kv_cache_torch_dtype: str
    context_len: int
    max_running_requests: int | None
    max_total_tokens: int | None
    swa_full_tokens_ratio: float
    swa_full_tokens_ratio_explicit: bool
    mamba_full_memory_ratio: float
    max_mamba_cache_size: int | None
    mamba_extra_buffer: bool
    disable_radix_cache: bool
    disable_overlap_schedule: bool
    speculative_algorithm: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_draft_kv_cache_dtype: str | None
    warnings: tuple[str, ...] = field(default=())

    @property
    def kv_element_size(self) -> int:
        return ELEMENT_SIZE[self.kv_cache_torch_dtype]


def _tier(profile: SglangProfile, gpu_mib: float):  # type: ignore[no-untyped-def]
    for tier in profile.gpu_tiers:
        if gpu_mib < tier.below_mib:
            return tier
    return profile.gpu_tiers[-1]


def prefill_graph_batch_sizes(max_bs: int) -> list[int]:
    """cuda_graph_hook.generate_prefill_cuda_graph_batch_sizes."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256))
             + list(range(4608, max_bs + 1, 512)))
    return [s for s in sizes if s <= max_bs]


def _prefill_graph_enabled(model: SglangModel, dep: SglangDeployment) -> bool:
    """model_executor.cuda_graph_config.default_prefill_backend (breakable on CUDA), then
    cuda_graph_hook.apply_cuda_graph_compatibility / disable_breakable_cudagraph_if_incompatible:
    off for PP > 1, KDA hybrids (GLM-5.3 Flash aside), DeepSeek-V4 and multimodal models off
    the breakable-graph allowlist."""
    if dep.disable_cuda_graph or dep.pp_size > 1:
        return False
    if model.linear is not None and model.linear.kind == "kda":
        return False
    if model.attention_arch is AttentionArch.DSV4:
        return False
    return not (model.is_multimodal and not model.multimodal_breakable_graph)


def vlm_factor(profile: SglangProfile, model: SglangModel) -> float:
    """memory_hook.adjust_mem_fraction_for_vlm (pre-capture sizing): 0.95 × a factor that drops
    10 % per 100 % more ViT weights than a ViT-L/14 (24 layers × 1024), clamped to [0.8, 1.05]."""
    layers = model.vision_num_hidden_layers or profile.vlm_default_layers
    hidden = model.vision_hidden_size or profile.vlm_default_hidden_size
    ratio = (layers * hidden ** 2) / (profile.vlm_baseline_layers
                                      * profile.vlm_baseline_hidden_size ** 2)
    factor = 1.0 - profile.vlm_sensitivity * (ratio - 1.0)
    factor = max(profile.vlm_factor_min, min(profile.vlm_factor_max, factor))
    return profile.vlm_base_factor * factor


def _declared_backend(model: SglangModel, dep: SglangDeployment, platform: Platform,
                      profile: SglangProfile) -> str | None:
    """--attention-backend, else the model overrides' (model_overrides/*.py), declared before
    the backend default is filled in."""
    if dep.attention_backend is not None:
        return dep.attention_backend
    arch = model.architecture
    sm100, sm90 = platform is Platform.SM100, platform is Platform.SM90
    if model.attention_arch is AttentionArch.DSV4:
        return "dsv4"  # model_overrides/deepseek_v4.py
    if model.is_dsa:
        return "dsa"  # model_overrides/deepseek_v2.py
    if arch in profile.deepseek_family_archs and sm100:
        return "trtllm_mla"
    if arch == "GptOssForCausalLM":  # model_overrides/gpt_oss.py
        return "trtllm_mha" if sm100 else "fa3" if sm90 else "triton"
    if arch in ("Gemma4ForConditionalGeneration", "Gemma4ForCausalLM"):
        return "trtllm_mha" if sm100 else "triton"  # model_overrides/gemma4.py
    if arch in ("MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM") and sm100:
        return "fa4"  # model_overrides/mimo_v2.py
    return None


def _attention_backend(model: SglangModel, dep: SglangDeployment, platform: Platform,
                       profile: SglangProfile, topk: int | None, page_size: int | None) -> str:
    """The declared backend, else model_override_base.get_default_attn_backend for the GPU."""
    declared = _declared_backend(model, dep, platform, profile)
    if declared is not None:
        return declared
    arch = model.architecture
    sm100 = platform is Platform.SM100
    default = _default_backend(model, dep, platform, topk, page_size)
    if sm100 and arch in ("Qwen3NextForCausalLM", "Qwen3_5MoeForConditionalGeneration",
                          "Qwen3_5ForConditionalGeneration"):
        # model_overrides/qwen3_5.py: triton unless trtllm_mha serves the extra-buffer /
        # no-radix / speculative cases. The override runs before the Mamba cache strategy is
        # resolved (auto → extra_buffer later), so only an explicit strategy would count here.
        keeps = not dep.disable_radix_cache and dep.speculative_algorithm is None
        return "trtllm_mha" if default == "trtllm_mha" and not keeps else "triton"
    return default


def _default_backend(model: SglangModel, dep: SglangDeployment, platform: Platform,
                     topk: int | None, page_size: int | None) -> str:
    """model_override_base.get_default_attn_backend."""
    no_spec_or_topk_one = topk is None or (topk == 1 and page_size in (1, None))
    if model.attention_arch is AttentionArch.MLA:
        if platform is Platform.SM90:
            return "fa3"
        if platform is Platform.SM100:
            return "flashinfer"
        return "triton"
    if platform is Platform.SM90 and no_spec_or_topk_one:
        return "fa3"
    if platform is Platform.SM100 and no_spec_or_topk_one and (
            dep.speculative_algorithm is None or topk is not None
            or dep.speculative_algorithm.upper() == "DFLASH"):
        return "fa4" if model.has_asymmetric_kv else "trtllm_mha"
    # flashinfer (a dependency of the sglang wheel on CUDA) unless the model has attention
    # sinks (gpt-oss takes its own override above)
    return "flashinfer"


def _page_size(model: SglangModel, dep: SglangDeployment, backend: str, platform: Platform,
               topk: int | None) -> int:
    """overrides._page_size_default and the backend constraints
    (_mla_backend_page_constraints, _fa4_page_constraint), the DSA / DSV4 / Qwen3.5 overrides."""
    if model.attention_arch is AttentionArch.DSV4:
        return 256  # model_overrides/deepseek_v4.py
    if model.is_dsa:
        return 64  # model_overrides/deepseek_v2.py: 64 × index_kpool
    page = dep.page_size or 1
    if (dep.attention_backend is None and platform is Platform.SM100
            and model.architecture in ("Qwen3NextForCausalLM",
                                       "Qwen3_5MoeForConditionalGeneration",
                                       "Qwen3_5ForConditionalGeneration")):
        page = 64 if backend == "trtllm_mha" else 1  # model_overrides/qwen3_5.py
    if backend == "flashmla":
        page = 64
    if backend == "trtllm_mla" and page not in (32, 64):
        page = 64
    if backend == "trtllm_mha" and page not in (16, 32, 64, 128):
        page = 64
    if (backend == "fa4" and model.attention_arch is not AttentionArch.MLA
            and platform is Platform.SM100 and (topk or 0) <= 1):
        page = 128
    return page


def _kv_cache_dtype(model: SglangModel, dep: SglangDeployment, platform: Platform
                    ) -> tuple[str, str, str]:
    """(resolved --kv-cache-dtype, the runner's dtype string, the pool's torch dtype):
    overrides._dsa_kv_cache_dtype_default / _deepseek_v4_kv_cache_dtype, then
    kv_cache_dtype.configure_kv_cache_dtype (auto → the checkpoint's FP8 KV or the model dtype)."""
    kv = dep.kv_cache_dtype
    if model.attention_arch is AttentionArch.DSV4:
        if kv == "auto":
            kv = "fp8_e4m3"
        if kv not in ("fp8_e4m3", "bfloat16"):
            raise StartupError(SglangError(
                type="AssertionError", stage="resolve_server_args",
                message=f"{kv} is not supported for DeepseekV4ForCausalLM"))
    elif model.is_dsa:
        if kv == "auto":
            kv = "fp8_e4m3" if platform.major >= 10 else "bfloat16"
        if kv == "bf16":
            kv = "bfloat16"
        if kv not in ("bfloat16", "fp8_e4m3"):
            raise StartupError(SglangError(
                type="AssertionError", stage="resolve_server_args",
                message="DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype"))
    if kv == "auto":
        if (model.kv_cache_quant_algo or "").upper() == "FP8":
            return kv, "fp8_e4m3", "float8_e4m3fn"
        return kv, "auto", model.dtype
    if kv not in KV_STORAGE:
        raise StartupError(SglangError(type="ValueError", stage="resolve_server_args",
                                       message=f"Unsupported kv_cache_dtype: {kv}."))
    return kv, kv, KV_STORAGE[kv]


def resolve(model: SglangModel, dep: SglangDeployment, gpu: SglangGpu,
            profile: SglangProfile, draft: SglangModel | None = None) -> ResolvedArgs:
    """ServerArgs.resolve_once, the memory-relevant part, in SGLang's order."""
    warnings: list[str] = []
    msgs = profile.messages
    platform = gpu.platform
    gpu_mib = gpu.total_memory_mib
    attn_dp = dep.dp_size if dep.enable_dp_attention else 1
    attn_tp = dep.tp_size // attn_dp
    spec = dep.speculative_algorithm.upper() if dep.speculative_algorithm else None
    spec = _ALIASES.get(spec, spec) if spec else None
    if spec is not None and spec not in (*_EAGLE_FAMILY, "DFLASH"):
        raise UnsupportedError(f"speculative algorithm {dep.speculative_algorithm} is not "
                               "modelled for SGLang (EAGLE, EAGLE3, NEXTN, STANDALONE, DFLASH)")
    if spec is not None and model.attention_arch is AttentionArch.DSV4:
        raise UnsupportedError("speculative decoding on DeepSeek-V4 is not modelled for SGLang")
    # model_config.ModelConfig._derive_context_length
    derived = model.derived_context_len
    if dep.context_length is not None and dep.context_length > derived:
        raise StartupError(SglangError(type="ValueError", stage="resolve_server_args",
                                       message=msgs["context_too_long"].format(
                                           context_length=dep.context_length,
                                           derived=derived)))
    context_len = dep.context_length or derived
    is_mla = model.attention_arch is AttentionArch.MLA

    # ---- memory_hook.handle_gpu_memory_settings --------------------------------------------
    tier = _tier(profile, gpu_mib)
    chunked = dep.chunked_prefill_size if dep.chunked_prefill_size is not None else (
        tier.chunked_prefill_size)
    if dep.cuda_graph_max_bs_decode is not None:
        decode_max_bs: int | None = dep.cuda_graph_max_bs_decode
    else:
        decode_max_bs = tier.cuda_graph_max_bs if dep.tp_size < 4 else tier.cuda_graph_max_bs_tp4
        if dep.max_running_requests is not None and decode_max_bs > dep.max_running_requests:
            decode_max_bs = dep.max_running_requests
    decode_graph = not dep.disable_cuda_graph
    prefill_graph = _prefill_graph_enabled(model, dep)
    prefill_max_bs = min(8192, chunked) if is_mla else chunked
    if dep.max_total_tokens is not None:
        prefill_max_bs = min(prefill_max_bs, dep.max_total_tokens)
    if "llama-2" in model.source.lower():
        prefill_max_bs = min(prefill_max_bs, 4096)
    prefill_bs_count = len(prefill_graph_batch_sizes(prefill_max_bs))

    reserved: float | None = None
    vlm_adjusted = False
    if dep.mem_fraction_static is None:
        if chunked > 0:
            activation_tokens = max(chunked, profile.reserve_min_activation_tokens)
        else:
            activation_tokens = max(dep.max_prefill_tokens, profile.reserve_min_activation_tokens)
        reserved = profile.reserve_base_mib
        reserved += activation_tokens * profile.reserve_per_activation_token_mib
        reserved += dep.tp_size * dep.pp_size * profile.reserve_per_parallel_rank_mib
        reserved += _reserve_for_graph(profile, decode_graph, decode_max_bs, attn_dp,
                                       dep.enable_dp_attention, prefill_graph, is_mla,
                                       prefill_bs_count)
        if gpu_mib > profile.reserve_floor_above_mib:
            reserved = max(reserved, profile.reserve_floor_mib)
        mfs = round((gpu_mib - reserved) / gpu_mib, 3)
        if model.is_multimodal and model.has_vision_config:
            mfs = mfs * vlm_factor(profile, model)
            vlm_adjusted = True
    else:
        mfs = dep.mem_fraction_static

    # ---- model overrides, kv dtype, attention backend, mamba, page size ---------------------
    kv, kv_str, kv_torch = _kv_cache_dtype(model, dep, platform)
    if kv == "mxfp8" and platform not in (Platform.SM100, Platform.SM120):
        # kv_cache_hook.handle_mxfp8_kv_cache_compatibility
        raise StartupError(SglangError(
            type="ValueError", stage="resolve_server_args",
            message="--kv-cache-dtype mxfp8 requires an SM100+ (Blackwell) GPU for the "
                    "block-scaled operands used by the FA4 MXFP8 attention path."))
    if kv == "nvfp4" and platform not in (Platform.SM100, Platform.SM120):
        # kv_cache_hook.handle_kv4_compatibility
        raise StartupError(SglangError(
            type="RuntimeError", stage="resolve_server_args",
            message="--kv-cache-dtype=nvfp4 requires Blackwell SM100 or SM120. Use "
                    "--kv-cache-dtype=fp4_mx_block16 for the block-size-16 FP4 recipe."))
    extra_buffer = _mamba_extra_buffer(model, dep, profile)
    topk = dep.speculative_eagle_topk
    if kv == "nvfp4":
        # kv_cache_hook.handle_nvfp4_prefill_kv_dequant_dtype: native NVFP4 prefill and
        # trtllm_mha decode unless a backend was declared
        declared = _declared_backend(model, dep, platform, profile)
        if declared not in (None, "trtllm_mha", "flashinfer"):
            raise StartupError(SglangError(
                type="ValueError", stage="resolve_server_args",
                message="NVFP4 prefill supports an FP8 E4M3 workspace or native NVFP4, but "
                        f"backend {declared!r} provides neither."))
        if declared == "flashinfer":
            raise UnsupportedError("nvfp4 KV with the flashinfer prefill backend (an FP8 "
                                   "dequant workspace) is not modelled for SGLang")
    backend = _attention_backend(model, dep, platform, profile, topk, dep.page_size)
    if kv == "nvfp4":
        backend = "trtllm_mha"
    if backend == "fa3" and kv == "fp8_e5m2":
        backend = "triton"  # overrides._attention_backend_fa3_fp8_fallback
    page = _page_size(model, dep, backend, platform, topk)
    if prefill_graph and backend == "trtllm_mla" and "DeepseekV3ForCausalLM" in (
            model.architectures):
        # cuda_graph_hook.disable_prefill_cuda_graph_for_deepseek_trtllm_mla: after the memory
        # settings, so the reserve above still counted the prefill graph
        prefill_graph = False
    if dep.enable_dp_attention:
        # parallel_hook.handle_data_parallelism, after the memory settings: one chunk per
        # attention-DP rank
        chunked = chunked // attn_dp
    disable_overlap = dep.disable_overlap_schedule or dep.pp_size > 1
    # overrides._pipeline_parallel_overlap_disable: PP turns the overlap scheduler off
    if model.linear is not None and not dep.disable_radix_cache and not extra_buffer and (
            model.architecture in profile.mamba_radix_cache_archs):
        disable_overlap = True  # overrides._mamba_radix_cache_resolution: no_buffer

    # ---- speculative_hook.handle_speculative_decoding ----------------------------------------
    mrr = dep.max_running_requests
    steps, draft_tokens = dep.speculative_num_steps, dep.speculative_num_draft_tokens
    if spec is not None:
        if mrr is None:
            mrr = profile.speculative_default_max_running_requests
            warnings.append(msgs["spec_mrr_48"])
        if spec == "DFLASH":
            raise_if_dflash_unsupported(dep)
            steps = 1 if steps is None else steps
            topk = 1
            # _handle_dflash: the draft config's block size, else 16
            draft_tokens = draft_tokens or (draft.dflash_block_size if draft else None) or 16
        elif steps is None:
            # _auto_choose_speculative_params
            if spec == "STANDALONE":
                steps, topk, draft_tokens = 3, 1, 4
            elif model.architecture in ("LlamaForCausalLM", "Grok1ForCausalLM",
                                        "Grok1VForCausalLM"):
                steps, topk, draft_tokens = 5, 4, 8
            else:
                steps, topk, draft_tokens = 3, 1, 4
        if spec != "DFLASH" and topk == 1 and draft_tokens != (steps or 0) + 1:
            draft_tokens = (steps or 0) + 1
    if model.attention_arch is AttentionArch.DSV4 and mrr is None:
        mrr = profile.dsv4_default_max_running_requests  # deepseek_v4_hook
    swa_ratio_explicit = dep.swa_full_tokens_ratio is not None
    swa_ratio: float = (dep.swa_full_tokens_ratio if dep.swa_full_tokens_ratio is not None
                        else profile.default_swa_full_tokens_ratio)
    if model.attention_arch is AttentionArch.DSV4 and not swa_ratio_explicit:
        swa_ratio, swa_ratio_explicit = profile.dsv4_default_swa_full_tokens_ratio, True
    return ResolvedArgs(
        platform=platform, gpu_total_memory_mib=gpu_mib, tp_size=dep.tp_size,
        pp_size=dep.pp_size, dp_size=dep.dp_size, attn_dp_size=attn_dp, attn_tp_size=attn_tp,
        chunked_prefill_size=chunked, max_prefill_tokens=dep.max_prefill_tokens,
        cuda_graph_max_bs_decode=decode_max_bs if decode_graph else None,
        prefill_cuda_graph="breakable" if prefill_graph else "disabled",
        prefill_cuda_graph_bs_count=prefill_bs_count, reserved_mem_mib=reserved,
        mem_fraction_static=mfs, mem_fraction_static_is_default=dep.mem_fraction_static is None,
        vlm_adjusted=vlm_adjusted, attention_backend=backend, page_size=page,
        kv_cache_dtype=kv, kv_cache_dtype_str=kv_str, kv_cache_torch_dtype=kv_torch,
        context_len=context_len, max_running_requests=mrr, max_total_tokens=dep.max_total_tokens,
        swa_full_tokens_ratio=swa_ratio, swa_full_tokens_ratio_explicit=swa_ratio_explicit,
        mamba_full_memory_ratio=(dep.mamba_full_memory_ratio
                                 if dep.mamba_full_memory_ratio is not None
                                 else profile.default_mamba_full_memory_ratio),
        max_mamba_cache_size=dep.max_mamba_cache_size, mamba_extra_buffer=extra_buffer,
        disable_radix_cache=dep.disable_radix_cache, disable_overlap_schedule=disable_overlap,
        speculative_algorithm=spec, speculative_num_steps=steps if spec else None,
        speculative_eagle_topk=topk if spec else None,
        speculative_num_draft_tokens=draft_tokens if spec else None,
        speculative_draft_kv_cache_dtype=dep.speculative_draft_kv_cache_dtype,
        warnings=tuple(warnings))


def _reserve_for_graph(profile: SglangProfile, decode_graph: bool, decode_max_bs: int | None,
                       attn_dp: int, dp_attention: bool, prefill_graph: bool, is_mla: bool,
                       prefill_bs_count: int) -> float:
    """memory_hook.reserve_for_graph_mb (no PD disaggregation, no DeepEP)."""
    reserved = 0.0
    bs = decode_max_bs or 0
    if decode_graph:
        reserved += bs * profile.graph_decode_mib_per_bs
    if dp_attention:
        reserved += bs * attn_dp * profile.graph_dp_attention_mib_per_bs
        if bs > profile.graph_dp_attention_large_bs:
            reserved += bs * attn_dp * profile.graph_dp_attention_large_mib_per_bs
    if prefill_graph:
        if not is_mla:
            reserved += prefill_bs_count * profile.graph_prefill_mib_per_bs
        else:
            reserved += profile.graph_prefill_mla_mib
    return reserved


def _mamba_extra_buffer(model: SglangModel, dep: SglangDeployment,
                        profile: SglangProfile) -> bool:
    """overrides._mamba_radix_cache_resolution (strategy auto): extra_buffer when the overlap
    scheduler or paging wants it and the architecture supports it (triton linear-attention
    backend, SGLang's default)."""
    if model.linear is None or dep.disable_radix_cache:
        return False
    if model.architecture not in profile.mamba_radix_cache_archs:
        return False
    # resolved before _pipeline_parallel_overlap_disable turns overlap off for PP > 1
    wants = not dep.disable_overlap_schedule or (dep.page_size or 1) > 1
    return wants and model.architecture in profile.mamba_extra_buffer_archs


# Triton's CUDA backend (language.core.dtype.to_ir): FP8 E4M3 ("fp8e4nv") needs sm89+; sm80 /
# sm86 offer fp8e4b15 and fp8e5 only
TRITON_FP8E4NV_ERROR = ("type fp8e4nv not supported in this architecture. The supported fp8 "
                        "dtypes are ('fp8e4b15', 'fp8e5')")


def triton_fp8_kernel_error(args: ResolvedArgs) -> SglangError | None:
    """An FP8 E4M3 KV cache read by SGLang's Triton attention kernels on Ampere (sm80 / sm86).

    On those GPUs SGLang 0.5.23 accepts the dtype and sizes the pool (no server-argument check
    gates it); FlashInfer, the default backend there for MHA/GQA models, dequantises the FP8
    cache inside its kernels and serves it. The Triton backend (MLA models, gpt-oss and Gemma 4
    off Hopper / Blackwell, or --attention-backend triton) hands the cache to Triton kernels as
    float8_e4m3fn (layers/attention/triton_backend.py → kernels/ops/attention/
    decode_attention.py loads K_Buffer and casts q to its element type), and Triton refuses that
    type on sm80 / sm86 when the kernel compiles: at the decode CUDA-graph capture, the end of
    start-up (the first request with --disable-cuda-graph). fp8_e5m2 ("fp8e5") compiles."""
    if (args.platform in (Platform.SM80, Platform.SM86) and args.attention_backend == "triton"
            and args.kv_cache_torch_dtype == "float8_e4m3fn"):
        return SglangError(type="ValueError", stage="attention_kernel",
                           message=TRITON_FP8E4NV_ERROR)
    return None


def raise_if_dflash_unsupported(dep: SglangDeployment) -> None:
    if dep.speculative_eagle_topk not in (None, 1):
        raise UnsupportedError("DFLASH with --speculative-eagle-topk > 1 is not modelled")

