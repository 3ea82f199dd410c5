"""vLLM's scheduler on the workload's requests: Scheduler.schedule (its running loop and waiting
loop, with _update_after_schedule and the async subclass), update_from_output and
update_draft_token_ids (vllm/v1/core/sched/scheduler.py, async_scheduler.py), on the KV cache
counts of kv_manager.py and the lazy running set of lazy.py."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from heapq import heappop

from kvplan.engines.vllm.workload.kv_manager import ckpt_position, ckpt_valid
from kvplan.engines.vllm.workload.lazy import LazyRunning
from kvplan.engines.vllm.workload.requests import Request
from kvplan.engines.vllm.workload.rules import (
    NUM_SAMPLED_TOKENS_PER_STEP,
    GroupRule,
    SchedulerRules,
    Workload,
)


class Scheduler(LazyRunning):
    """vLLM's scheduler + KV cache manager, as integer counts."""

    def __init__(self, rules: SchedulerRules, groups: list[GroupRule], w: Workload) -> None:
        super().__init__(rules, groups, w)
        self.need_split = any(g.mamba_align for g in groups)

    def admission_blocked_until_a_finish(self) -> bool:
        """No waiting request can be admitted before a running one finishes: even the most the
        pool can free (down to every running request's hold floor) is less than the head
        waiting request's admission needs."""
        if len(self.running) >= self.r.max_num_seqs:
            return True
        q = self.waiting[0]
        if self.r.reserve_full_isl:
            full = min(q.prompt + q.outputs, self.r.max_model_len)
            need = sum(self._num_to_allocate(gi, q, full, 0, full, True, q.prompt) * g.count
                       for gi, g in enumerate(self.g))
        else:
            need = sum(g.count for g in self.g)  # at least a block in every group
        floor = sum(self._hold_floor(gi, r) * g.count for r in self.running
                    for gi, g in enumerate(self.g))
        return self.r.num_blocks - 1 - floor < need
    # -- Scheduler ------------------------------------------------------------------------

    def _mamba_split(self, q: Request, n: int) -> int:
        """Scheduler._mamba_block_aligned_split (no prefix-cache hit, no shared prefix)."""
        r, p = self.r, self.p
        P = q.prompt
        num_tokens = P + q.outputs
        start = q.computed
        prefill_end = max(P, num_tokens - 1)
        if start >= prefill_end:
            return n
        bs = r.cache_block_size
        hbs = r.hash_block_size
        drop = r.use_eagle_block_drop
        nhl = r.num_hash_lookahead_tokens
        if p.mamba_split_checkpoint_position:  # 0.32+
            last_cache = ckpt_position(num_tokens, bs, drop, nhl, p)
            ckpt_bs = hbs if r.mamba_partial_cache_hit else r.scheduler_block_size
        else:
            last_cache = num_tokens - num_tokens % bs
            if drop:
                last_cache = max(last_cache - bs, 0)
            ckpt_bs = hbs
        end = start + n
        ckpt_pos = ckpt_position(prefill_end, ckpt_bs, drop, nhl, p)
        internal = (r.mamba_has_prefill_checkpoint_blocks and end >= prefill_end
                    and ckpt_valid(start, end, ckpt_pos, hbs, bs,
                                    r.mamba_prefill_checkpoint_alignment))
        if internal:
            last_cache = 0
        if end < prefill_end:
            aligned = end // bs * bs
            if aligned > start or bs <= r.max_num_batched_tokens:
                end = aligned
        next_boundary = (start // bs + 1) * bs
        tail = 0
        if r.mamba_partial_cache_hit and not internal:
            if p.mamba_split_checkpoint_position:
                tail = ckpt_position(P, hbs, drop, nhl, p)
            else:
                tail = P // hbs * hbs
                if tail and drop:
                    tail = max(tail - hbs, 0)
        stops = (next_boundary if start % bs and not internal else 0, last_cache,
                 tail if last_cache < tail < P else 0)
        inside = [s for s in stops if start < s < end]
        if inside:
            end = min(inside)
        return max(end - start, 0)

    def _reserve_prefill_lookahead(self, q: Request, computed: int, n: int) -> int:
        """Scheduler._reserve_prefill_lookahead (multi-module MTP)."""
        npl = self.r.num_prefill_lookahead_tokens
        remaining = q.prompt + q.outputs - computed - n
        if 0 < remaining < npl:
            n -= npl - remaining
        return max(n, 0)

    # -- Scheduler.schedule, one running request --------------------------------------------

    def _schedule_running(self, q: Request, budget: int, inputs: int) -> tuple[int, int] | None:
        """The running-loop body for one request: (tokens, draft tokens) scheduled, (0, 0) when
        it is skipped this step, None when its allocation fails (vLLM preempts then)."""
        r = self.r
        P, D = q.prompt, q.max_tokens
        if q.placeholders > 0 and q.computed + 2 - q.placeholders >= P + D:
            return 0, 0  # async: the step in flight reaches max_tokens
        n = P + q.outputs + q.spec + q.placeholders - q.computed
        n = min(n, budget, inputs - r.draft_slots)
        n = min(n, r.max_model_len - q.computed - NUM_SAMPLED_TOKENS_PER_STEP)
        if self.need_split:
            n = self._mamba_split(q, n)
        n = self._reserve_prefill_lookahead(q, q.computed, n)
        if n <= 0:
            return 0, 0
        if not self._allocate_slots(q, n, False):
            return None
        spec = 0
        if q.spec:
            spec = min(q.spec, max(0, n + q.computed - (P + q.outputs) - q.placeholders))
            q.spec = 0
        return n, spec

    def _admit(self, budget: int, inputs: int, prefill_scheduled: bool, running_scheduled: bool
               ) -> tuple[list[tuple[Request, int, int]], int, int]:
        """The waiting loop of Scheduler.schedule."""
        r = self.r
        slots = r.draft_slots
        admitted: list[tuple[Request, int, int]] = []
        skipped: list[Request] = []
        while self.waiting:
            if len(self.running) >= r.max_num_seqs or budget <= 0 or inputs <= slots:
                break
            q = self.waiting[0]
            n = q.prompt + q.outputs
            tb = min(budget, inputs - slots)
            spec = 0
            k = r.num_speculative_tokens
            if (k > 0 and n == 1 and not prefill_scheduled and running_scheduled
                    and 1 + k + NUM_SAMPLED_TOKENS_PER_STEP <= r.max_model_len):
                if 1 + k > tb:
                    break
                n, spec = 1 + k, k  # uniform spec-decode padding
            if not r.enable_chunked_prefill and n > tb:
                break
            n = min(n, tb)
            if self.need_split:
                n2 = self._mamba_split(q, n)
                if n2 == 0:
                    break
                if spec and n2 != 1 + k:
                    n2, spec = 1, 0
                n = n2
            n = self._reserve_prefill_lookahead(q, 0, n)
            if n == 0:
                if not self.p.waiting_zero_tokens_skip:
                    break
                skipped.append(self.waiting.popleft())
                self.lazy_ok = False  # admission order no longer follows the request order
                continue
            if not self._allocate_slots(q, n, r.reserve_full_isl):
                break
            self.waiting.popleft()
            self._start_running(q)
            budget -= n
            inputs -= n + slots
            admitted.append((q, n, spec))
        if skipped:
            self.waiting.extendleft(reversed(skipped))
        return admitted, budget, inputs
    def schedule(self, t: int) -> tuple[list[tuple[Request, int, int, bool]], bool]:
        """Scheduler.schedule (+ _update_after_schedule) at step t; lazy requests not due are
        scheduled implicitly (their steady decode step). Returns the exact entries and whether
        an allocation failed (a preemption)."""
        r = self.r
        budget = inputs = r.max_num_batched_tokens
        slots = r.draft_slots
        due = self.bucket.pop(t, [])
        while self.due_steps and self.due_steps[0] <= t:
            heappop(self.due_steps)
        for q in due:
            if q.lazy and not q.finished:
                self._materialize(q, t)
        visit = sorted(self.exact, key=_idx)
        scheduled: list[tuple[Request, int, int]] = []
        prefill_scheduled = False
        prev = -1
        stop = failed = False
        idxs = self.running_idx

        def quiet(lo: int, hi: int) -> None:
            """Lazy requests with lo < idx < hi take their steady step (or go exact)."""
            nonlocal budget, inputs, stop, failed
            a, b = bisect_right(idxs, lo), bisect_left(idxs, hi)
            count = b - a
            if not count or stop:
                return
            need = self.lazy_n
            if budget >= count * need and inputs >= count * (need + slots):
                budget -= count * need
                inputs -= count * (need + slots)
                return
            for i in idxs[a:b]:  # the budget runs out among them: step them exactly
                q = self.by_idx[i]
                self._materialize(q, t)
                if not run_one(q):
                    failed = True
                    return

        def run_one(q: Request) -> bool:
            nonlocal budget, inputs, stop, prefill_scheduled
            if stop or budget <= 0 or inputs <= slots:
                stop = True
                return True
            res = self._schedule_running(q, budget, inputs)
            if res is None:
                return False
            n, spec = res
            if n:
                prefill_scheduled |= q.chunk
                budget -= n
                inputs -= n + slots
                scheduled.append((q, n, spec))
            return True

        for q in visit:
            if q.lazy:
                continue
            quiet(prev, q.idx)
            if failed or not run_one(q):
                return [], True
            prev = q.idx
        quiet(prev, 1 << 62)
        if failed:
            return [], True
        admitted, budget, inputs = self._admit(budget, inputs, prefill_scheduled,
                                               bool(scheduled))
        self.blocked_at = ((self.free, len(self.running)) if self.waiting and not admitted
                           else None)
        scheduled += admitted
        out = []
        for q, n, spec in scheduled:  # _update_after_schedule (+ AsyncScheduler)
            q.computed += n
            q.in_flight += n
            q.chunk = q.computed < q.prompt + q.outputs + q.placeholders
            if r.async_scheduling and not q.chunk:
                q.placeholders += NUM_SAMPLED_TOKENS_PER_STEP + spec
                q.spec = r.num_speculative_tokens
            out.append((q, n, spec, q.chunk))
        return out, False

    def update(self, batch: list[tuple[Request, int, int, bool]]) -> list[Request]:
        """Scheduler.update_from_output with one sampled token per request that completed its
        prompt in that step; returns the requests that finished."""
        finished = []
        for q, n, spec, partial in batch:
            if q.lazy:
                continue  # counted in its lazy steps
            q.in_flight -= n
            if q.finished or partial:
                continue
            if spec:  # every draft token rejected
                if q.computed > 0:
                    q.computed -= spec
                if q.placeholders > 0:
                    q.placeholders -= spec
            q.outputs += 1
            if q.placeholders > 0:
                q.placeholders -= 1
            if q.outputs >= q.max_tokens or q.prompt + q.outputs >= self.r.max_model_len:
                finished.append(q)
        return finished

    def sync_drafts(self, batch: list[tuple[Request, int, int, bool]]) -> None:
        """EngineCore.post_step → Scheduler.update_draft_token_ids (sync scheduling, all drafts
        of the step; 0.34 proposes none when no scheduled request can use them)."""
        if self.p.sync_spec_skips_unused_drafts and self.r.num_lookahead_tokens > 0 and all(
                partial or q.finished or q.outputs >= q.max_tokens
                for q, _, _, partial in batch):
            return
        for q, _, _, partial in batch:
            if not (q.finished or partial or q.lazy):
                q.spec = self.r.num_speculative_tokens


def _idx(q: Request) -> int:
    return q.idx
