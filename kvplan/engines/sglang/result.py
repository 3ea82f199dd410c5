"""What SGLang's start-up decides about its KV pools, under SGLang's own names."""

from __future__ import annotations

from pydantic import Field

from kvplan.frozen import FrozenStrict


class SglangError(FrozenStrict):
    """An error SGLang raises at start-up, word for word (it exits; kvplan: does not fit)."""

    type: str  # the Python exception class SGLang raises (ValueError, RuntimeError)
    message: str
    stage: str  # resolve_server_args | profile | pool_sizing | max_running_requests |
    # attention_kernel (after the pools are sized: the kernels cannot compile for the KV dtype)


class PoolRow(FrozenStrict):
    """One pool of the KV cache (per GPU): what one token or one request costs, how many."""

    pool: str  # kv | full | swa | mamba | indexer | draft | c4 | c128 | c4_state | c128_state
    layers: int
    bytes_per_token: float | None = None
    bytes_per_request: int | None = None
    tokens: int | None = None
    slots: int | None = None
    note: str = ""


class SglangResolved(FrozenStrict):
    """The server arguments SGLang resolves before it sizes the pools (ServerArgs.resolve_once)."""

    gpu_total_memory_mib: float
    chunked_prefill_size: int
    cuda_graph_max_bs_decode: int | None  # None: decode CUDA graph disabled
    prefill_cuda_graph: str  # breakable | disabled
    prefill_cuda_graph_bs_count: int  # the prefill graph buckets the memory reserve counts
    reserved_mem_mib: float | None  # handle_gpu_memory_settings' reserve (default mfs only)
    mem_fraction_static: float
    mem_fraction_static_is_default: bool
    vlm_adjusted: bool
    attention_backend: str
    page_size: int
    kv_cache_dtype: str  # the --kv-cache-dtype string after model defaults (auto, fp8_e4m3, ...)
    kv_cache_torch_dtype: str  # the pool's storage dtype (torch name)
    context_len: int
    max_running_requests: int | None  # after the speculative / model defaults
    attn_tp_size: int
    attn_dp_size: int
    swa_full_tokens_ratio: float | None
    mamba_full_memory_ratio: float | None
    mamba_extra_buffer: bool | None
    speculative_algorithm: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None


class SglangStage(FrozenStrict):
    """One pipeline stage's pools (PP > 1 gives one per stage; all stages agree on the tokens)."""

    pp_rank: int
    start_layer: int
    end_layer: int
    available_bytes: int | None = None
    cell_size_bytes_per_token: float | None = None
    max_total_num_tokens: int | None = None


class SglangResult(FrozenStrict):
    """SGLang's KV pool sizing for one deployment (per GPU; SGLang's names)."""

    sglang_version: str
    fits: bool
    error: SglangError | None = None
    resolved: SglangResolved | None = None
    pool_configurator: str | None = None  # DefaultPoolConfigurator, HybridSWAPoolConfigurator...
    cell_size_bytes_per_token: float | None = Field(
        default=None, description="bytes one token of max_total_num_tokens costs (all pools)")
    available_bytes: int | None = Field(
        default=None, description="the KV budget: profiled (rest memory) or given")
    mem_fraction_static: float | None = None
    page_size: int | None = None
    max_total_num_tokens: int | None = None
    full_max_total_num_tokens: int | None = None
    swa_max_total_num_tokens: int | None = None
    max_running_requests: int | None = None
    max_mamba_cache_size: int | None = None
    mamba_cache_per_req_bytes: int | None = None
    c4_max_total_num_tokens: int | None = None
    c128_max_total_num_tokens: int | None = None
    c4_state_pool_size: int | None = None
    c128_state_pool_size: int | None = None
    pools: tuple[PoolRow, ...] = ()
    stages: tuple[SglangStage, ...] = ()
    warnings: tuple[str, ...] = ()
