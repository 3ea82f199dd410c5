"""vLLM's scheduler batch limits at start-up (max_num_batched_tokens, max_num_seqs)."""

from __future__ import annotations

from kvplan.engines.vllm.build.deployment import Deployment
from kvplan.engines.vllm.profiles import VllmProfile, get_profile
from kvplan.errors import StartupError
from kvplan.units import GiB

_LLM_CLASS = ("llm", "llm_class", "offline")  # UsageContext.LLM_CLASS; anything else: `vllm serve`


def get_batch_defaults(total_memory_bytes: int | None, gpu_name: str | None = None, *,
                       sm: int | None = None, usage: str = "serve",
                       profile: VllmProfile | None = None) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM picks when neither is given, on a CUDA/ROCm
    GPU of `total_memory_bytes` (0 / None: unknown device, the small tier), in the release of
    `profile` (None: the default release).

    vLLM: engine/arg_utils.py EngineArgs.get_batch_defaults (0.31–0.34): ≥ 160 GiB → 16384 / 1024;
    ≥ 70 GiB and not an A100 (by device name) nor, from 0.33, a GB10 (is_device_capability((12,
    1)): `VllmProfile.batch_defaults_small_tier_sms`) → `vllm serve` 8192 (LLM class 16384) / 1024;
    else `vllm serve` 2048 (LLM class 8192) / 256.
    """
    small_tier_sms = (profile or get_profile(None)).batch_defaults_small_tier_sms
    llm = usage.lower() in _LLM_CLASS
    total = total_memory_bytes or 0
    if total >= 160 * GiB:
        return 16384, 1024
    if total >= 70 * GiB and "a100" not in (gpu_name or "").lower() and sm not in small_tier_sms:
        return (16384 if llm else 8192), 1024
    return (8192 if llm else 2048), 256


def refuse_short_batch_without_chunking(mnbt: int, max_model_len: int) -> None:
    """Without chunked prefill a prompt is scheduled whole, so a max_num_batched_tokens the user
    gave below max_model_len is refused at start-up (pooling models with bidirectional attention
    or MEAN/CLS/STEP pooling, encoder-decoders, --no-enable-chunked-prefill).
    vLLM: SchedulerConfig.verify_max_model_len (config/scheduler.py), at SchedulerConfig's
    construction in EngineArgs.create_engine_config (before VllmConfig's parallel checks)."""
    if mnbt < max_model_len:
        raise StartupError.vllm(
            "ValueError", f"max_num_batched_tokens ({mnbt}) is smaller than "
            f"max_model_len ({max_model_len}). This effectively limits the maximum sequence "
            "length to max_num_batched_tokens and makes vLLM reject longer sequences. Please "
            "increase max_num_batched_tokens or decrease max_model_len.",
            hint=f"use --max-num-batched-tokens {max_model_len} or more")


PERFORMANCE_MODES = ("balanced", "interactivity", "throughput")  # vLLM: config/vllm.py PerformanceMode


def scheduler_batch_limits(dep: Deployment, max_model_len: int, *,
                           whole_prompts: bool) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) the scheduler runs with. `whole_prompts`: no
    chunked prefill (encoder-decoders, some pooling models, --no-enable-chunked-prefill), so a
    prompt is scheduled whole (it also sizes the cross-attention demand: SchedulerConfig's
    max_num_encoder_input_tokens is max_num_batched_tokens).

    vLLM: EngineArgs._set_default_max_num_seqs_and_batched_tokens_args (0.31–0.34): the GPU's
    defaults (get_batch_defaults), doubled by `--performance-mode throughput`; a default
    max_num_batched_tokens is raised to max_model_len without chunked prefill, then capped at
    max_num_seqs × max_model_len; a default max_num_seqs is capped at max_num_batched_tokens.
    SchedulerConfig.verify_max_model_len refuses a given value below max_model_len without
    chunked prefill. (Not modelled: the multimodal prefix-LM floor, batched-DP MoE.)"""
    d_mnbt, d_seqs = get_batch_defaults(dep.gpu_total_memory_bytes, dep.gpu_name, sm=dep.sm,
                                        profile=get_profile(dep.vllm_version))
    throughput = 2 if dep.performance_mode == "throughput" else 1
    mnbt = dep.max_num_batched_tokens or d_mnbt * throughput
    seqs = dep.max_num_seqs or d_seqs * throughput
    if dep.max_num_batched_tokens is None:
        if whole_prompts:
            mnbt = max(max_model_len, mnbt)
        mnbt = min(seqs * max_model_len, mnbt)
    elif whole_prompts:
        refuse_short_batch_without_chunking(mnbt, max_model_len)
    if dep.max_num_seqs is None:
        seqs = min(seqs, mnbt)
    return mnbt, seqs
