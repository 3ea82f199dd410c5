"""The running set of the workload simulation, with lazily advanced decoding requests: a
request decoding steadily is stepped only at its next block event, and stretches where every
request decodes are skipped whole (`horizon`, `fast_forward`); tests/engines/vllm/test_workload.py
compares it with the plain every-step run."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from heapq import heappush

from kvplan.engines.vllm.workload.kv_manager import BlockCounts
from kvplan.engines.vllm.workload.requests import Request
from kvplan.engines.vllm.workload.rules import GroupRule, ManagerKind, SchedulerRules, Workload
from kvplan.units import cdiv


class LazyRunning(BlockCounts):
    """The running and waiting requests; lazy ones advance implicitly until their next event."""

    def __init__(self, rules: SchedulerRules, groups: list[GroupRule], w: Workload) -> None:
        super().__init__(rules, groups, w)
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        # the running requests in scheduling order (= request order: FCFS admission)
        self.running_idx: list[int] = []
        self.by_idx: list[Request] = []
        self.exact: set[Request] = set()  # running requests stepped one by one
        self.bucket: dict[int, list[Request]] = {}  # step → lazy requests due
        self.due_steps: list[int] = []  # heap of the bucket's steps
        self.blocked_at: tuple[int, int] | None = None  # (free, running) of a failed admission
        self.queue: deque[list[tuple[Request, int, int, bool]]] = deque()  # EngineCore.batch_queue
        self.lazy_ok = True
        self.bound_total = 0  # Σ hold_bound over the running requests
        # bounds that depend on the position (Mamba 'align' boundaries ahead) shrink as it goes
        self.tighten = any(g.mamba_align for g in groups)
        self.lazy_n = 0  # the steady decode step of every lazy request (0: none went lazy yet)
        self.lazy_spec = 0

    def quiet_until(self, t: int, finished_pending: bool) -> int:
        """The next step that is not a quiet steady-decode step of every running request (the
        next step if there is no such stretch)."""
        if (self.exact or finished_pending or not self.due_steps
                or (self.waiting and self.blocked_at != (self.free, len(self.running)))):
            return t + 1
        return self.due_steps[0]

    def _after_step(self, t: int, scheduled: list[tuple[Request, int, int]]) -> None:
        """End of step t (its schedule, and the update that followed it): a request that took
        the same steady decode step twice now decodes (its smaller hold bound applies) and, if
        allowed, goes lazy."""
        done = set()
        for q, n, spec in scheduled:
            done.add(q)
            if q.finished:
                continue
            now = (t, q.computed, q.outputs, q.in_flight, q.placeholders, q.spec, n, spec)
            prev, q.snap = q.snap, now
            if (prev is None or q.chunk or prev[0] != t - 1 or now[1] - prev[1] != 1
                    or now[2] - prev[2] != 1 or now[3:] != prev[3:]):
                continue
            if not q.decoding or self.tighten:
                q.decoding = True
                bound = self.hold_bound(q, True)
                self.bound_total += bound - q.bound
                q.bound = bound
            if self.lazy_ok:
                self._make_lazy(q, t, n, spec)
        for q in self.exact:
            if q not in done:
                q.snap = None
    def _start_running(self, q: Request) -> None:
        self.running.append(q)
        insort(self.running_idx, q.idx)
        self.exact.add(q)
        q.bound = self.hold_bound(q, False)
        self.bound_total += q.bound

    def _stop_running(self, q: Request) -> None:
        self.running.remove(q)
        del self.running_idx[bisect_left(self.running_idx, q.idx)]
        self.exact.discard(q)
        self.bound_total -= q.bound

    def _materialize(self, q: Request, t: int) -> None:
        """A lazy request at the start of step t: its steady decode steps since it went lazy
        (each: one more computed token and one more output), and the update of step t-1 still
        in the batch queue (async)."""
        d = t - 1 - q.lazy_from
        q.computed += d
        q.outputs += d
        q.lazy = False
        self.exact.add(q)
        q.snap = (t - 1, q.computed, q.outputs, q.in_flight, q.placeholders, q.spec,
                  self.lazy_n, self.lazy_spec)
        if self.queue:  # the newest pending batch is step t-1's: add this request's entry
            self.queue[0].append((q, self.lazy_n, self.lazy_spec, False))

    def _next_event(self, q: Request, t: int) -> int:
        """The first step after t at which q, decoding steadily, allocates or frees a block,
        nears its end, or could checkpoint: conservative (earlier is always safe)."""
        r = self.r
        n, la, L = self.lazy_n, r.num_lookahead_tokens, r.max_model_len
        c, f = q.computed, q.in_flight
        thresholds = [L - 4 - n - la,  # the max_model_len cap is near
                      q.prompt + q.max_tokens + q.placeholders - 4,
                      q.computed + q.max_tokens - 4 - q.outputs]  # last outputs
        for gi, g in enumerate(self.g):
            bs, length, nulls = g.block_size, q.length[gi], q.nulls[gi]
            if g.kind is ManagerKind.RING or (g.kind is ManagerKind.FULL and length * bs >= L):
                continue
            if g.kind is ManagerKind.MAMBA and g.mamba_align:
                m = q.mamba[gi]
                if m is None or m.checkpoint is not None or n > r.hash_block_size:
                    return t + 1
                k = g.num_speculative_blocks
                thresholds.append((length - k) * bs - n + 1)
                thresholds.append((m.retired + 1) * bs + 1 + f)
                if m.last_state is not None and m.last_state in m.real:
                    thresholds.append((m.last_state + 1) * bs + 1 + f)
                continue
            extra = bs * g.num_speculative_blocks if g.kind is ManagerKind.MAMBA else 0
            if L > length * bs - extra:
                thresholds.append(length * bs - extra - n - la + 1)
            if g.kind is ManagerKind.SLIDING_WINDOW:
                thresholds.append((nulls + 1) * bs + g.window - 1 + g.extra_retained_tokens + f)
            elif g.kind is ManagerKind.CHUNKED_LOCAL:
                thresholds.append(cdiv((nulls + 1) * bs, g.window) * g.window + f)
            elif g.kind is ManagerKind.MAMBA:
                thresholds.append((nulls + 1) * bs + 1 + f)
        # step t+d starts with computed c + d - 1: the first d with that ≥ threshold
        return t + max(1, min(thresholds) - c + 1)

    def _end_step(self, q: Request, t: int) -> int:
        """The first step after t near q's end (its last outputs, the max_model_len cap)."""
        n, la, L = self.lazy_n, self.r.num_lookahead_tokens, self.r.max_model_len
        x = min(L - 4 - n - la, q.prompt + q.max_tokens + q.placeholders - 4,
                q.computed + q.max_tokens - 4 - q.outputs)
        return t + max(1, x - q.computed + 1)

    def horizon(self, t: int) -> int:
        """K such that in steps t+1 … t+K no allocation can fail, nobody finishes or nears the
        end, and no waiting request gets in: every request only decodes (0 if none such)."""
        if not self.lazy_ok or self.exact or not self.running:
            return 0
        if self.waiting and self.blocked_at != (self.free, len(self.running)):
            return 0
        n = len(self.running)
        grows = [(g.count, g.block_size) for g in self.g if g.kind is not ManagerKind.RING]
        frees = [(g.count, g.block_size) for g in self.g if g.kind in (
            ManagerKind.SLIDING_WINDOW, ManagerKind.CHUNKED_LOCAL, ManagerKind.MAMBA)]
        need = 0
        if self.waiting and len(self.running) < self.r.max_num_seqs:
            q = self.waiting[0]
            full = min(q.prompt + q.outputs, self.r.max_model_len)
            need = sum(self._num_to_allocate(gi, q, full, 0, full, True, q.prompt) * g.count
                       for gi, g in enumerate(self.g)) if self.r.reserve_full_isl else 1

        def safe(k: int) -> bool:  # at most one block per block boundary crossed, per group
            allocs = n * sum(c * ((k + bs - 1) // bs + 1) for c, bs in grows)
            if allocs > self.free:
                return False
            if need:  # the most the pool can free in k steps stays short of the admission
                freed = n * sum(c * ((k + bs - 1) // bs + 1) for c, bs in frees)
                return self.free + freed < need
            return True

        if not safe(16):
            return 0
        limit = min(self._end_step(q, q.lazy_from) for q in self.running) - t - 1
        lo, hi = 0, limit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if safe(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo if lo >= 16 else 0

    def fast_forward(self, t_end: int) -> None:
        """Every (lazy) running request to the end of step t_end, its block events applied in
        its own order: nothing can fail in between (`horizon`), so the order across requests
        does not matter."""
        self.bucket.clear()
        self.due_steps.clear()
        for q in self.running:
            while (u := self._next_event(q, q.lazy_from)) <= t_end:
                self._quiet_step(q, u)
            d = t_end - q.lazy_from
            q.computed += d
            q.outputs += d
            q.lazy_from = t_end
            self._wake_at(q, self._next_event(q, t_end))

    def _quiet_step(self, q: Request, u: int) -> None:
        """Step u of a lazy request, alone: KVCacheManager.allocate_slots of its steady decode
        step (it cannot fail here), then the step's net effect (one token, one output)."""
        r = self.r
        d = u - 1 - q.lazy_from
        c = q.computed + d  # at the start of step u
        outputs = q.outputs + d
        main = c + self.lazy_n
        need = min(main + r.num_lookahead_tokens, r.max_model_len)
        processed = max(0, c - q.in_flight)
        prefill_end = max(q.prompt, q.prompt + outputs - 1)
        for gi in range(len(self.g)):
            self._remove_skipped(gi, q, processed)
        for gi in range(len(self.g)):
            self._num_to_allocate(gi, q, need, c, main, False, prefill_end)
        for gi in range(len(self.g)):
            self._allocate(gi, q, need, main)
        q.computed = c + 1
        q.outputs = outputs + 1
        q.lazy_from = u

    def _make_lazy(self, q: Request, t: int, n: int, spec: int) -> None:
        """After step t: q, decoding steadily, advances implicitly until its next event."""
        if not self.lazy_n:
            self.lazy_n, self.lazy_spec = n, spec
        elif (n, spec) != (self.lazy_n, self.lazy_spec):
            return
        wake = self._next_event(q, t)
        if wake <= t + 1:
            return
        q.lazy = True
        q.lazy_from = t
        self.exact.discard(q)
        self._wake_at(q, wake)

    def _wake_at(self, q: Request, wake: int) -> None:
        """Put lazy q in the bucket of step `wake` (its next event)."""
        due = self.bucket.get(wake)
        if due is None:
            self.bucket[wake] = [q]
            heappush(self.due_steps, wake)
        else:
            due.append(q)
