"""One request of the workload simulation, as integer counts (vLLM: v1/request.py Request and
the per-request block tables of the KV cache manager)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class MambaAlignState:
    """MambaManager 'align' bookkeeping for one request (real block indices, not blocks)."""

    real: list[int] = field(default_factory=list)  # indices of non-null entries
    retired: int = 0  # _num_retired_blocks
    last_state: int | None = None  # last_state_block_idx
    allocated: bool = False  # in _allocated_block_reqs
    checkpoint: tuple[int, int] | None = None  # _checkpoints entry


class Request:
    __slots__ = ("idx", "prompt", "max_tokens", "computed", "in_flight", "placeholders", "outputs", "spec", "chunk",
                 "length", "nulls", "mamba", "finished", "lazy", "lazy_from", "snap", "bound",
                 "decoding")

    def __init__(self, idx: int, pair: tuple[int, int], num_groups: int) -> None:
        self.idx = idx
        self.prompt, self.max_tokens = pair  # P prompt tokens, D output tokens
        self.computed = 0  # num_computed_tokens
        self.in_flight = 0  # num_in_flight_tokens
        self.placeholders = 0  # num_output_placeholders (async scheduling)
        self.outputs = 0  # num_output_tokens
        self.spec = 0  # len(spec_token_ids)
        self.chunk = False  # is_prefill_chunk
        self.length = [0] * num_groups  # len(req_to_blocks[...]) including null blocks
        self.nulls = [0] * num_groups  # leading null blocks (blocks freed behind a window)
        self.mamba: list[MambaAlignState | None] = [None] * num_groups
        self.finished = False
        self.lazy = False  # decoding steadily; its state is advanced only when an event is due
        self.lazy_from = 0  # the step at whose end its state was last exact
        self.snap: tuple[int, ...] | None = None  # (step, state) at the end of its last exact step
        self.bound = 0  # the most blocks it can hold from now on (all groups)
        self.decoding = False
