"""An SGLang start-up log's numbers beside kvplan's (`kvplan check --engine sglang --from-log`):
the models a plan carries in `plan.sglang_log`."""

from __future__ import annotations

from pydantic import Field

from kvplan.frozen import Frozen


class SglangLogRow(Frozen):
    """One number an SGLang start-up log states, beside kvplan's."""

    name: str  # SGLang's name (max_total_num_tokens, mem_fraction_static, …)
    logged: float | None
    kvplan: float | None
    agrees: bool | None = Field(
        default=None, description="within the log's print precision (None: nothing to compare)")
    note: str = ""


class SglangLogCheck(Frozen):
    """An SGLang log's numbers beside kvplan's, planned from the memory the log states."""

    rows: list[SglangLogRow]
    # kvplan's max_total_num_tokens over the rounding of the logged memory (±0.005 GB each),
    # widened by one page: the log's #tokens must fall inside
    tokens_low: int | None = None
    tokens_high: int | None = None
    disagreements: list[str] = Field(default_factory=list)
