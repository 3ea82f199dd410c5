"""The Mamba-family state spec (vLLM: kv_cache_interface.MambaSpec): a fixed-size state per
request, its page the sum of the state tensors."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from math import prod

from kvplan.engines.vllm.specs.base import (
    DemandSettings,
    KVCacheSpec,
)
from kvplan.units import cdiv, dtype_size_bytes, round_up


class MambaType(StrEnum):
    """vLLM: v1.attention.backends.registry.MambaAttentionBackendEnum (names)."""

    MAMBA1 = "MAMBA1"
    MAMBA2 = "MAMBA2"
    SHORT_CONV = "SHORT_CONV"
    LINEAR = "LINEAR"
    GDN_ATTN = "GDN_ATTN"
    KDA = "KDA"


@dataclass(frozen=True, kw_only=True, slots=True)
class MambaSpec(KVCacheSpec):
    """vLLM: MambaSpec — a fixed-size state per request, page = Σ state bytes."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    state_alignment: int = 1
    page_size_padded: int | None = None
    mamba_type: MambaType = MambaType.MAMBA2
    mamba_cache_mode: str = "none"
    num_speculative_blocks: int = 0
    num_prefill_checkpoint_blocks: int = 0
    prefill_checkpoint_alignment: int | None = None
    tp_replicated: bool = False
    _state_bytes: int = field(default=0, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.dtypes):
            raise ValueError("MambaSpec needs one dtype per state shape")
        # vLLM: MambaSpec.state_content_size_bytes (each state rounded to state_alignment)
        object.__setattr__(self, "_state_bytes", sum(
            round_up(prod(shape) * dtype_size_bytes(dt), self.state_alignment)
            for shape, dt in zip(self.shapes, self.dtypes, strict=True)))

    @property
    def state_content_size_bytes(self) -> int:
        return self._state_bytes

    @property
    def unpadded_page_size_bytes(self) -> int:
        return self.state_content_size_bytes

    @property
    def page_size_bytes(self) -> int:
        page = self.state_content_size_bytes
        if self.page_size_padded is not None:
            if self.page_size_padded < page:
                raise AssertionError()  # vLLM: bare assert
            return self.page_size_padded
        return page

    def state_blocks_per_request(self, mamba_cache_mode: str) -> int:
        # vLLM: MambaSpec.max_memory_usage_bytes
        if mamba_cache_mode == "align":
            return 2 + self.num_speculative_blocks + self.num_prefill_checkpoint_blocks
        return 1 + self.num_speculative_blocks

    def blocks_per_request(self, s: DemandSettings) -> int:
        if s.mamba_cache_mode == "all":  # vLLM 0.31 only: a state per block of the context
            return cdiv(s.max_model_len, self.block_size) + self.num_speculative_blocks
        return self.state_blocks_per_request(s.mamba_cache_mode)

    def max_num_blocks_per_req(self, s: DemandSettings, max_len: int) -> int:
        if s.mamba_cache_mode == "align":
            return cdiv(max_len, self.block_size) + self.num_speculative_blocks
        return self.blocks_per_request(s)
