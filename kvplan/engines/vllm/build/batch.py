"""vLLM's scheduler batch limits at start-up (max_num_batched_tokens, max_num_seqs)."""

from __future__ import annotations

from kvplan.engines.vllm.build.deployment import Deployment
from kvplan.errors import StartupError


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
    verify_max_model_len refuses a given value below max_model_len. (Such a model is not SupportsPP:
    `ModelDescription.supports_pipeline_parallel` is False, checked by the build.)"""
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
