"""What `vllm serve` is told (Deployment) and what the build returns (LayerPlan, BuildResult)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvplan.engines.vllm.planner import PlannerInput
from kvplan.engines.vllm.specs import (
    KVCacheSpec,
)
from kvplan.errors import InputError

MAX_MODEL_LEN_LIMIT = 2**31  # no model serves more; catches 10^12 typos


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
    allow_deprecated_quantization: bool = False  # --allow-deprecated-quantization
    max_num_batched_tokens: int | None = None  # None: vLLM's default for the GPU
    max_num_seqs: int | None = None
    performance_mode: str = "balanced"  # --performance-mode (throughput doubles the batch defaults)
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    decode_context_parallel_size: int = 1
    pp_layer_partition: str | None = None  # VLLM_PP_LAYER_PARTITION
    enable_prefix_caching: bool | None = None  # None: vLLM's default for the model
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
    # torch.version.cuda of the serving install (vLLM: CudaPlatform.get_cuda_runtime_major): the
    # stock 0.31-0.34 wheels are CUDA 13 builds (they require the cu13 kernel packages)
    cuda_runtime_major: int = 13
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
        if self.performance_mode not in ("balanced", "interactivity", "throughput"):
            raise InputError(f"--performance-mode must be balanced, interactivity or throughput, "
                             f"got {self.performance_mode!r}")
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
    enable_prefix_caching: bool = True  # vLLM's resolved value (the flag, else its default)
    max_num_seqs: int = 256  # vLLM's resolved value (the flag, else its default for the GPU)
