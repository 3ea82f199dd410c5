"""The answers for one workload: the largest N that runs clean (all admitted at once, none
preempted), what the N+1st does, the admission peak, and what caps each — searched with
`simulate` from the pool over one request's end-of-life blocks, galloping then bisecting."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvplan.engines.vllm.workload.rules import GroupRule, SchedulerRules, Workload
from kvplan.engines.vllm.workload.simulation import RunResult, simulate
from kvplan.errors import InputError


@dataclass(frozen=True)
class WorkloadEstimate:
    """The answers for one workload on one planned KV cache."""

    workload: Workload
    max_concurrent_without_preemption: int
    concurrency_capped_by: str  # "max_num_seqs" or "kv_cache"
    next_request_preempts: bool | None  # N+1: preempts, or waits for blocks (None: max_num_seqs)
    admission_peak: int
    admission_capped_by: str  # "max_num_seqs" or "kv_cache"
    admission_preempts: bool
    blocks_per_request_at_end: tuple[int, ...]  # per group, one request at its last step
    pool_blocks_at_preemption: tuple[int, ...] | None  # per group, N+1 requests' first preemption
    admission_pool_at_preemption: tuple[int, ...] | None  # per group, the admission run's
    group_labels: tuple[str, ...]
    num_usable_blocks: int


def estimate(rules: SchedulerRules, groups: list[GroupRule], w: Workload) -> WorkloadEstimate:
    """The largest N that runs clean, the admission peak, and what caps each."""
    for p, d in w.pairs:
        if not rules.enable_chunked_prefill and p > rules.max_num_batched_tokens:
            raise InputError(f"workload {w.label}: without chunked prefill a {p:,}-token prompt "
                             f"never fits one step of max_num_batched_tokens "
                             f"{rules.max_num_batched_tokens:,} (vLLM rejects it)",
                             hint="raise --max-num-batched-tokens or turn chunked prefill on")
        if p + d > rules.max_model_len:
            raise InputError(f"workload {w.label}: a request of {p:,}+{d:,} tokens needs more "
                             f"than max_model_len {rules.max_model_len:,} (vLLM rejects it)",
                             hint="shorten the workload or raise --max-model-len")
    runs: dict[int, RunResult] = {}

    def run(n: int) -> RunResult:
        if n not in runs:
            runs[n] = simulate(rules, groups, w, n, until_clean=n > 1)
        return runs[n]

    def clean(n: int) -> bool:
        """All n run at once (admitted before the first completion) and none is preempted."""
        r = run(n)
        return not r.preempted and r.peak_running == n

    lo = largest_clean(clean, rules.max_num_seqs, first_guess(rules, groups, run))
    if len(w.pairs) == 1 or lo <= 1:
        at_end = run(1).blocks_at_end or tuple(0 for _ in groups)
    else:  # a mix: the largest request's blocks, in the clean run of all of them
        at_end = simulate(rules, groups, w, lo).blocks_at_end or tuple(0 for _ in groups)
    failing = run(lo + 1) if lo < rules.max_num_seqs else None
    peak_run = simulate(rules, groups, w, rules.max_num_seqs + 1, stop_at_first_finish=True,
                        until_peak=True)
    admission_cap = "max_num_seqs" if peak_run.peak_running >= rules.max_num_seqs else "kv_cache"
    pool = failing.blocks_by_group_at_preemption if failing else None
    return WorkloadEstimate(
        workload=w, max_concurrent_without_preemption=lo,
        concurrency_capped_by="max_num_seqs" if lo == rules.max_num_seqs else "kv_cache",
        next_request_preempts=failing.preempted if failing is not None else None,
        admission_peak=peak_run.peak_running, admission_capped_by=admission_cap,
        admission_preempts=peak_run.preempted,
        blocks_per_request_at_end=_per_group(groups, at_end),
        pool_blocks_at_preemption=_per_group(groups, pool) if pool is not None else None,
        admission_pool_at_preemption=_per_group(groups, peak_run.blocks_by_group_at_preemption)
        if peak_run.blocks_by_group_at_preemption is not None else None,
        group_labels=_per_group(groups, tuple(g.label for g in groups)),
        num_usable_blocks=rules.num_blocks - 1)


def _per_group(classes: list[GroupRule], values: tuple) -> tuple:  # type: ignore[type-arg]
    """Per-class values → one per KV cache group (a merged class repeats for each member)."""
    out: dict[int, object] = {}
    for g, v in zip(classes, values, strict=True):
        for gid in g.members or (g.group_id,):
            out[gid] = v
    return tuple(out[i] for i in sorted(out))


def first_guess(rules: SchedulerRules, groups: list[GroupRule],
                run: Callable[[int], RunResult]) -> int:
    """Where the search starts: the requests whose end-of-request blocks fill the pool (one
    request simulated alone); vLLM's full-attention answer is usually this or next to it."""
    one = run(1)
    if one.preempted:
        return 0
    per_request = sum(b * g.count for b, g in zip(one.blocks_at_end or (), groups,
                                                   strict=False)) or 1
    return max(1, min(rules.max_num_seqs, (rules.num_blocks - 1) // per_request))


def largest_clean(clean: Callable[[int], bool], upper: int, guess: int) -> int:
    """The largest n in [0, upper] with clean(n) (clean(0) holds), galloping from `guess`
    then bisecting; assumes clean is monotone (the golden scans check it)."""
    if guess <= 0:
        return 0
    if clean(guess):
        lo, step = guess, 1
        while lo < upper:  # gallop up (+1, +1, +1, +2, +4, ...) until a failing n
            hi = min(upper, lo + step)
            if not clean(hi):
                break
            lo, step = hi, 1 if hi < guess + 3 else step * 2
        else:
            return upper
    else:
        hi, step = guess, 1
        while True:  # gallop down until a clean n
            lo = max(0, hi - step)
            if lo == 0 or clean(lo):
                break
            hi, step = lo, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if clean(mid):
            lo = mid
        else:
            hi = mid
    return lo
