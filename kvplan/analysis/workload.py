"""The workload answers as part of a `Plan`: typed, JSON-stable (`workload` in `--json`)."""

from __future__ import annotations

from pydantic import Field

from kvplan.engines.vllm.planner import EngineResult
from kvplan.engines.vllm.specs import DemandSettings, UniformTypeKVCacheSpecs
from kvplan.engines.vllm.workload import SchedulerRules, Workload, WorkloadEstimate
from kvplan.frozen import Frozen


class WorkloadGroupBlocks(Frozen):
    group_id: int
    kind: str = Field(description="what the group's manager is: full, sliding window W, "
                                  "chunked local C, mamba (align|none), draft, one block per "
                                  "request")
    blocks: int


class WorkloadResult(Frozen):
    """How many requests of this workload vLLM's scheduler runs at once on the planned cache."""

    label: str = Field(description="the workload as given (PROMPT:OUTPUT, or the file)")
    prompt_tokens: int | None = Field(description="P (None for a file of several pairs)")
    output_tokens: int | None = Field(description="D (None for a file of several pairs)")
    num_pairs: int = Field(description="(prompt, output) pairs; request i takes pair i mod this")
    max_concurrent_without_preemption: int = Field(
        description="the largest N such that N such requests submitted together all run at "
                    "once in vLLM's scheduler (every one admitted before the first completes) "
                    "and complete with no preemption (per engine: one data-parallel replica)")
    concurrency_capped_by: str = Field(description="kv_cache or max_num_seqs")
    next_request_preempts: bool | None = Field(
        description="with N+1 requests vLLM preempts (true) or keeps one waiting for blocks "
                    "until a request completes (false); None when max_num_seqs caps")
    admission_peak: int = Field(
        description="the most requests vLLM runs at once, requests still waiting, before its "
                    "first preemption or first completion (it admits on the prompt)")
    admission_capped_by: str = Field(description="kv_cache or max_num_seqs")
    admission_preempts: bool = Field(
        description="with requests waiting, vLLM preempts before the first request completes")
    admission_capping_kind: str | None = Field(
        description="then, the kind of group holding the most of the pool")
    blocks_per_request_at_end: list[WorkloadGroupBlocks] = Field(
        description="per KV cache group, the blocks one request holds when it finishes")
    kv_pool_at_first_preemption: list[WorkloadGroupBlocks] | None = Field(
        description="per group, the blocks all running requests hold when N+1 requests first "
                    "preempt (the pool is shared: the largest share caps)")
    capping_kind: str | None = Field(
        description="the kind of group (summed over its groups) holding the most of the pool "
                    "when N+1 requests run out of blocks")
    usable_blocks: int = Field(description="num_blocks − the null block")
    max_num_seqs: int
    vllm_formula_concurrency: float | None = Field(
        description="vLLM's 'Maximum concurrency' formula with max_model_len = P + D (the "
                    "boot-log figure is the same formula at max_model_len)")


def vllm_formula_at(result: EngineResult, tokens: int) -> float | None:
    """vLLM: get_max_concurrency_for_kv_cache_config at max_model_len = tokens (num_blocks over
    the blocks one request of that length takes, first spec of a uniform-type group)."""
    if result.num_blocks is None or not result.groups:
        return None
    s = DemandSettings(max_model_len=tokens, max_in_flight_tokens=result.max_in_flight_tokens,
                       max_num_encoder_input_tokens=0)
    per_req = 0
    for d in result.groups:
        spec = d.group.spec
        spec = spec.first_spec if isinstance(spec, UniformTypeKVCacheSpecs) else spec
        per_req += spec.blocks_per_request(s)
    return round(result.num_blocks / per_req, 4) if per_req else None


def workload_result(est: WorkloadEstimate, rules: SchedulerRules, result: EngineResult,
                    w: Workload) -> WorkloadResult:
    labels = est.group_labels

    def rows(counts: tuple[int, ...]) -> list[WorkloadGroupBlocks]:
        return [WorkloadGroupBlocks(group_id=i, kind=labels[i], blocks=b)
                for i, b in enumerate(counts)]

    pool = est.pool_blocks_at_preemption
    single = len(w.pairs) == 1
    p, d = w.pairs[0]
    return WorkloadResult(
        label=w.label, prompt_tokens=p if single else None, output_tokens=d if single else None,
        num_pairs=len(w.pairs),
        max_concurrent_without_preemption=est.max_concurrent_without_preemption,
        concurrency_capped_by=est.concurrency_capped_by,
        next_request_preempts=est.next_request_preempts, admission_peak=est.admission_peak,
        admission_capped_by=est.admission_capped_by, admission_preempts=est.admission_preempts,
        admission_capping_kind=_largest_kind(labels, est.admission_pool_at_preemption)
        if est.admission_pool_at_preemption else None,
        blocks_per_request_at_end=rows(est.blocks_per_request_at_end),
        kv_pool_at_first_preemption=rows(pool) if pool is not None else None,
        capping_kind=_largest_kind(labels, pool) if pool else None,
        usable_blocks=est.num_usable_blocks, max_num_seqs=rules.max_num_seqs,
        vllm_formula_concurrency=vllm_formula_at(result, max(p + d for p, d in w.pairs)))


def _largest_kind(labels: tuple[str, ...], pool: tuple[int, ...]) -> str:
    by_kind: dict[str, int] = {}
    for label, blocks in zip(labels, pool, strict=True):
        by_kind[label] = by_kind.get(label, 0) + blocks
    return max(by_kind, key=by_kind.__getitem__)
