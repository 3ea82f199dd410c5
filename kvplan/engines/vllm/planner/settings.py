"""The VllmConfig settings the planner's demand reads: the batch queue, the prefill lookahead,
and the slice of the config `max_memory_usage_bytes` takes (`DemandSettings`)."""

from __future__ import annotations

from kvplan.engines.vllm.planner.result import PlannerInput
from kvplan.engines.vllm.profiles import VllmProfile
from kvplan.engines.vllm.specs import DemandSettings

EAGLE_FAMILY = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})


def max_concurrent_batches(inp: PlannerInput, profile: VllmProfile) -> int:
    """vLLM: VllmConfig.max_concurrent_batches."""
    pp = inp.pipeline_parallel_size
    if inp.async_scheduling:
        if inp.use_v2_model_runner or profile.v1_runner_async_pp_plus_one:
            return pp + 1
        if pp <= 1:
            return 2
    return pp


def num_prefill_lookahead_tokens(inp: PlannerInput) -> int:
    """vLLM: VllmConfig.num_prefill_lookahead_tokens (speculator_config in 0.34)."""
    method = inp.speculative_method
    if method is None and inp.num_speculative_tokens > 0:
        method = "eagle"
    if method is None or method not in EAGLE_FAMILY:
        return 0
    if method == "mtp" and min(inp.num_nextn_predict_layers, inp.num_speculative_tokens) > 1:
        return inp.num_speculative_tokens  # multi-module MTP
    return 1



def demand_settings(inp: PlannerInput, max_in_flight: int, max_model_len: int) -> DemandSettings:
    return DemandSettings(
        max_model_len=max_model_len,
        max_in_flight_tokens=max_in_flight,
        max_num_encoder_input_tokens=(inp.max_num_encoder_input_tokens
                                      if inp.max_num_encoder_input_tokens is not None
                                      else inp.max_num_batched_tokens),
        mamba_cache_mode=inp.mamba_cache_mode,
        decode_context_parallel_size=inp.decode_context_parallel_size,
    )
