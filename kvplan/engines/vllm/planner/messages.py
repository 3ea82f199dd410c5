"""vLLM's texts the planner reproduces word for word, per release: the capacity error and its
hints (`_check_enough_kv_cache_memory`, `_more_kv_cache_memory_hint`), the no-memory and auto-fit
errors, and the capacity log line."""

from __future__ import annotations

from kvplan.engines.vllm.planner.result import PlannerInput
from kvplan.engines.vllm.profiles import ErrorText, VllmProfile
from kvplan.units import format_gib

DOCS_URL = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"


def more_memory_hint(inp: PlannerInput, profile: VllmProfile) -> str:
    """vLLM 0.34: _more_kv_cache_memory_hint."""
    if profile.error_text is ErrorText.B and inp.enable_extensible_kv_cache:
        util = inp.gpu_memory_utilization if inp.gpu_memory_utilization is not None else 1.0
        used_by = "the model and its activations"
        if util < 1.0:
            return (f"The KV cache gets what is left after {used_by} within "
                    f"`gpu_memory_utilization`={util}; increase it (with the extensible KV "
                    "cache it defaults to 1.0) or decrease `max_model_len` or `max_num_seqs`.")
        return ("The extensible KV cache already takes all device memory left after "
                f"{used_by}; decrease `max_model_len` or `max_num_seqs`, or the model needs "
                "a device with more memory.")
    return ("Try increasing `gpu_memory_utilization` when initializing the engine (this flag "
            "also controls CPU memory reservation on the CPU backend, despite its name).")


def capacity_error_text(profile: VllmProfile, inp: PlannerInput, max_model_len: int,
                        needed: int, available: int, estimated: int) -> str:
    """vLLM: _check_enough_kv_cache_memory's message, per release."""
    est = (f"Based on the available memory, the estimated maximum model length is "
           f"{estimated}. " if estimated > 0 else "")
    head = (f"To serve at least one request with the model's max seq len ({max_model_len}), "
            f"({format_gib(needed)} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({format_gib(available)} GiB). {est}")
    if profile.error_text is ErrorText.A:
        tail = ("Try increasing `gpu_memory_utilization` (which also controls CPU memory on the "
                "CPU backend) or decreasing `max_model_len` when initializing the engine. ")
    else:
        tail = (f"{more_memory_hint(inp, profile)} Decreasing `max_model_len` also reduces "
                "what is needed. ")
    return f"{head}{tail}See {DOCS_URL} for more details."


def no_memory_error_text(profile: VllmProfile, inp: PlannerInput) -> str:
    return f"No available memory for the cache blocks. {more_memory_hint(inp, profile)} " \
           f"See {DOCS_URL} for more details."


def auto_fit_error_text(profile: VllmProfile, inp: PlannerInput) -> str:
    hint = ("Try increasing `gpu_memory_utilization`." if profile.error_text is ErrorText.A
            else more_memory_hint(inp, profile))
    return ("Cannot auto-fit max_model_len: not enough GPU memory available to serve even a "
            f"single token. {hint}")


def capacity_line(tokens: int, max_model_len: int, concurrency: float) -> str:
    """vLLM: update_kv_cache_capacity's log line on a CUDA device."""
    return (f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for "
            f"{max_model_len:,} tokens per request: {concurrency:.2f}x")
