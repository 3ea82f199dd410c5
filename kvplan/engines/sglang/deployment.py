"""What an SGLang deployment states: SGLang's own flag names and defaults (server_args), the GPU
it runs on and the memory its start-up profile sees. Pure data; nothing here computes."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, PositiveInt, field_validator

from kvplan.frozen import FrozenStrict


class SglangDeployment(FrozenStrict):
    """`python -m sglang.launch_server` flags (SGLang 0.5.23 names; None = SGLang's default)."""

    sglang_version: str | None = None  # the release profile; None = the newest modelled
    tp_size: PositiveInt = 1
    pp_size: PositiveInt = 1
    dp_size: PositiveInt = 1
    enable_dp_attention: bool = False
    mem_fraction_static: float | None = Field(default=None, gt=0, le=1)
    max_total_tokens: PositiveInt | None = None
    context_length: PositiveInt | None = None
    page_size: PositiveInt | None = None
    kv_cache_dtype: str = "auto"  # auto, bf16/bfloat16, fp8_e4m3, fp8_e5m2, nvfp4, mxfp8, ...
    max_running_requests: PositiveInt | None = None
    chunked_prefill_size: int | None = None  # -1 disables chunked prefill
    max_prefill_tokens: PositiveInt = 16384
    cuda_graph_max_bs_decode: PositiveInt | None = None
    disable_cuda_graph: bool = False
    attention_backend: str | None = None
    swa_full_tokens_ratio: float | None = Field(default=None, gt=0, le=1)
    disable_radix_cache: bool = False
    disable_overlap_schedule: bool = False
    mamba_full_memory_ratio: float | None = Field(default=None, gt=0)
    max_mamba_cache_size: PositiveInt | None = None
    speculative_algorithm: str | None = None  # EAGLE, EAGLE3, NEXTN, STANDALONE, DFLASH
    speculative_num_steps: PositiveInt | None = None
    speculative_eagle_topk: PositiveInt | None = None
    speculative_num_draft_tokens: PositiveInt | None = None
    speculative_draft_kv_cache_dtype: str | None = None

    @field_validator("kv_cache_dtype")
    @classmethod
    def _lower(cls, v: str) -> str:
        return v.strip().lower()


class Platform(StrEnum):
    """The GPU architecture facts SGLang's defaults read (runtime_context.PlatformContext)."""

    SM80 = "sm80"  # A100
    SM86 = "sm86"  # A10 / RTX 3090
    SM89 = "sm89"  # L4 / L40S / RTX 4090
    SM90 = "sm90"  # H100 / H200 / H20 (is_hopper_with_cuda_12_3)
    SM100 = "sm100"  # B200 / GB200 / B300
    SM120 = "sm120"  # RTX 5090 / RTX PRO 6000

    @property
    def major(self) -> int:
        return int(self.value[2:]) // 10


class SglangGpu(FrozenStrict):
    """The GPU as SGLang sees it: nvidia-smi's memory.total (utils.get_device_memory_capacity)."""

    total_memory_mib: float = Field(gt=0)
    platform: Platform = Platform.SM90


class ProfiledMemory(FrozenStrict):
    """The free-memory profile (kv_cache_configurator._profile_available_bytes), in GiB as SGLang
    reports them (get_available_gpu_memory): before the weights load and after, per PP stage."""

    pre_model_load_gib: float = Field(gt=0)
    # free memory after the weights (target + draft) load; one value, or one per PP stage
    available_gib: tuple[float, ...]


class KvBudget(FrozenStrict):
    """A KV budget in bytes handed straight to config_from_budget (no profile, no slack); for a
    Mamba / linear-attention hybrid it is the state pool's and the KV pool's share together.
    One value, or one per PP stage."""

    budget_bytes: tuple[int, ...]
