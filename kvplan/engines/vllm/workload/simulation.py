"""One run of the workload simulation: N requests submitted together, stepped as EngineCore.step /
step_with_batch_queue does (the batch queue of async scheduling), until all finish, the first
preemption, or the answer asked for is known."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.vllm.workload.requests import Request
from kvplan.engines.vllm.workload.rules import GroupRule, SchedulerRules, Workload
from kvplan.engines.vllm.workload.scheduler import Scheduler
from kvplan.errors import UnsupportedError


@dataclass(frozen=True)
class RunResult:
    """What one engine run did."""

    num_requests: int
    preempted: bool
    first_preemption_step: int | None
    peak_running: int
    steps: int
    finished: int
    blocks_at_end: tuple[int, ...] | None  # per group, the most a request held when it finished
    blocks_by_group_at_preemption: tuple[int, ...] | None  # the whole pool, per group
    early_stop: str | None = None  # until_clean: "queued" or "within_bounds"


def simulate(rules: SchedulerRules, groups: list[GroupRule], w: Workload, num_requests: int,
             *, stop_at_first_finish: bool = False, lazy: bool = True, until_clean: bool = False,
             until_peak: bool = False, check_bounds: bool = False,
             max_steps: int = 50_000_000) -> RunResult:
    """N requests submitted together, run until all finish, the first preemption, or (with
    `stop_at_first_finish`) the first completion. `lazy=False` steps every request every step
    (the same result, slower; the tests compare the two). `until_clean` stops as soon as the
    answer to "do all N run at once without a preemption" is known: a completion while some
    still wait (no), or all admitted with the running requests' hold bounds within the pool
    (yes: no allocation can fail any more). `until_peak` (with `stop_at_first_finish`) stops
    as soon as the peak cannot change before the first completion."""
    e = Scheduler(rules, groups, w)
    e.lazy_ok = lazy and rules.batch_queue_size <= 2
    num_groups = len(groups)
    e.by_idx = [Request(i, w.pair(i), num_groups) for i in range(num_requests)]
    e.waiting.extend(e.by_idx)
    queue = e.queue
    steps = peak = finished = 0
    finished_pending = False  # Scheduler.finished_req_ids, until the next schedule
    blocks_at_end: tuple[int, ...] | None = None
    q_size = rules.batch_queue_size

    def done(batch: list[tuple[Request, int, int, bool]]) -> None:
        nonlocal finished, blocks_at_end, finished_pending
        for q in e.update(batch):
            held = tuple(e._held(gi, q) for gi in range(num_groups))
            blocks_at_end = held if blocks_at_end is None else tuple(map(max, blocks_at_end, held))
            e._free_request(q)
            e._stop_running(q)
            finished += 1
            finished_pending = True
        if not rules.async_scheduling and rules.num_speculative_tokens and batch:
            e.sync_drafts(batch)

    usable = rules.num_blocks - 1
    next_check = idle = 0
    floors: dict[tuple[int, int], int] = {}
    while (e.running or e.waiting or finished_pending or queue) and steps < max_steps:
        if stop_at_first_finish and finished:
            break
        if until_clean and steps and (e.waiting and finished or
                                      not e.waiting and e.bound_total <= usable):
            return RunResult(num_requests, False, None, peak, steps, finished,
                             blocks_at_end, None, early_stop="queued" if e.waiting else
                             "within_bounds")
        if ((until_clean or until_peak) and not finished and e.waiting
                and e.blocked_at is not None and not e.exact and steps >= next_check
                and e.bound_total <= usable):
            # no allocation can fail and nobody more gets in before the first completion
            next_check = steps + 16
            if e.admission_blocked_until_a_finish():
                return RunResult(num_requests, False, None, peak, steps, finished,
                                 blocks_at_end, None, early_stop="queued")
        if e.running or e.waiting or finished_pending:
            k = 0 if finished_pending else e.horizon(steps)
            if k:  # nothing can fail or change in steps+1 … steps+k: apply them at once
                e.fast_forward(steps + k)
                steps += k
                for batch in queue:
                    batch.clear()  # only lazy requests' entries (counted in their lazy steps)
            nxt = e.quiet_until(steps, finished_pending)
            if nxt > steps + 1:  # nothing happens before step nxt: every request decodes
                steps = nxt - 1
                for batch in queue:
                    batch.clear()  # only lazy requests' entries (counted in their lazy steps)
            steps += 1
            batch, preempted = e.schedule(steps)
            finished_pending = False
            if preempted:
                pool = [0] * num_groups
                for q in e.running:
                    for gi in range(num_groups):
                        pool[gi] += e._held(gi, q)
                return RunResult(num_requests, True, steps, peak, steps, finished,
                                 blocks_at_end, tuple(pool))
            peak = max(peak, len(e.running))
            if not batch and not any(queue) and len(e.exact) == len(e.running):
                idle += 1  # nothing scheduled, nothing in flight, nobody decoding lazily
                if idle > 2:
                    raise UnsupportedError(
                        f"vLLM's scheduler makes no progress with workload {w.label}: a "
                        f"request of {e.waiting[0].prompt if e.waiting else '?'} prompt tokens "
                        "never fits one step (chunked prefill off, prompt over "
                        "max_num_batched_tokens)", hint="shorten the prompts, raise "
                        "--max-num-batched-tokens or turn chunked prefill on")
            else:
                idle = 0
            if check_bounds:  # tests: hold_bound and _hold_floor really bound every request
                for q in e.running:
                    held = sum(e._held(gi, q) * g.count for gi, g in enumerate(groups))
                    assert held <= q.bound, (q.idx, steps, held, q.bound, q.decoding)
                    for gi in range(len(groups)):
                        floor = floors.get((q.idx, gi))
                        assert floor is None or e._held(gi, q) >= floor, (q.idx, gi, steps)
                        floors[q.idx, gi] = e._hold_floor(gi, q)
            exact = [(q, n, spec) for q, n, spec, _ in batch]
            if q_size <= 1:
                done(batch)
                e._after_step(steps, exact)
                continue
            queue.appendleft(batch)
            if len(queue) < q_size and (batch or e.running or e.waiting):
                e._after_step(steps, exact)
                continue
            if queue:
                done(queue.pop())
            e._after_step(steps, exact)
            continue
        if not queue:
            break
        done(queue.pop())
    return RunResult(num_requests, False, None, peak, steps, finished, blocks_at_end, None)
