"""Workload concurrency: how many identical requests vLLM's scheduler runs at once.

For the planned KV cache (num_blocks, groups, block sizes), `simulate` runs vLLM's scheduler
(`vllm/v1/core/sched/scheduler.py` `Scheduler.schedule` / `update_from_output`, the async
subclass, and `EngineCore.step` / `step_with_batch_queue`) on N requests of P prompt and D output
tokens submitted together, step by step, with the KV cache manager's block arithmetic per group
(`KVCacheManager.allocate_slots`, each single-type manager's `get_num_blocks_to_allocate`,
`allocate_new_blocks` and `remove_skipped_blocks`) — integer counts per request and group, no
block objects. The model outputs one token per step (every draft token rejected), as vLLM's
own scheduler tests fake them; prompts are distinct, so no prefix-cache hit ever happens.

Why a step simulation and not a closed form: vLLM admits a request on its prompt (with
`scheduler_reserve_full_isl`, on the whole prompt, capped per sliding-window group), allocates
decode blocks one step at a time, frees sliding-window blocks behind the window on the
processed-token basis (one async step behind), moves Mamba "align" states block by block, and
preempts as soon as one allocation in a step fails; staggered prefills make the requests reach
each block boundary at different steps, so the first preemption depends on the order of the
allocations inside a step. For full attention with long answers the answer is vLLM's
concurrency formula at P+D; with short answers, windows or Mamba states it is not.

What keeps it fast (a check stays well under 100 ms extra; tests/engine/test_workload.py
compares each shortcut with the plain every-step run):
- identical groups are one class, simulated once and counted `count` times;
- a request decoding steadily goes *lazy*: it advances implicitly and is stepped only at its
  next block event (an allocation, a window free, a Mamba state move, its last steps), and
  stretches where every request is lazy are skipped whole;
- a run asked only "do all N run at once without preempting?" stops as soon as the answer is
  known: all admitted and the running requests' hold bounds fit the pool, or a completion
  while one still waits (or no waiting one can get in before a completion);
- the search for N starts at the pool over one request's end-of-life blocks and gallops.

Release differences are fields of `VllmProfile` (profiles.py), read here.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from heapq import heappop, heappush
from math import gcd, lcm

from kvplan.engines.vllm.planner import EngineResult, PlannerInput
from kvplan.engines.vllm.profiles import VllmProfile
from kvplan.engines.vllm.specs import (
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    DemandSettings,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    KpoolTailSpec,
    KVCacheSpec,
    MambaSpec,
    RSWASpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from kvplan.errors import InputError, UnsupportedError
from kvplan.units import cdiv

NUM_SAMPLED_TOKENS_PER_STEP = 1  # vLLM: Scheduler.num_sampled_tokens_per_step (generate runner)


class ManagerKind(StrEnum):
    """Which vLLM single-type manager serves a group (single_type_kv_cache_manager.py)."""

    FULL = "full_attention"  # FullAttentionManager (full, MLA, sink, hidden-state caches)
    SLIDING_WINDOW = "sliding_window"  # SlidingWindowManager
    CHUNKED_LOCAL = "chunked_local_attention"  # ChunkedLocalAttentionManager
    MAMBA = "mamba"  # MambaManager
    RING = "ring"  # CircularBufferManager (KpoolTailManager in 0.31): one block per request


@dataclass(frozen=True)
class Workload:
    """Requests of P prompt and D output tokens. One pair: identical requests; several (a
    measured distribution): request i is pair i modulo their number, in order."""

    pairs: tuple[tuple[int, int], ...]
    label: str = ""

    def __post_init__(self) -> None:
        if not self.pairs:
            raise InputError("a workload needs at least one (prompt, output) pair")
        for p, d in self.pairs:
            if p < 1 or d < 1:
                raise InputError(f"a workload needs ≥ 1 prompt and ≥ 1 output token, got {p}:{d}")
        if not self.label:
            object.__setattr__(self, "label", f"{self.pairs[0][0]}:{self.pairs[0][1]}"
                               if len(self.pairs) == 1 else f"{len(self.pairs)} requests")

    @classmethod
    def of(cls, prompt_tokens: int, output_tokens: int) -> Workload:
        return cls(((prompt_tokens, output_tokens),))

    def pair(self, i: int) -> tuple[int, int]:
        return self.pairs[i % len(self.pairs)]


@dataclass(frozen=True)
class GroupRule:
    """One KV cache group as its manager sees it."""

    group_id: int
    kind: ManagerKind
    block_size: int
    label: str
    window: int = 0  # sliding_window, or attention_chunk_size for chunked local attention
    extra_retained_tokens: int = 0
    admission_cap: int | None = None  # max_admission_blocks_per_request (SWA, chunked local)
    mamba_align: bool = False
    num_speculative_blocks: int = 0
    has_prefill_checkpoint_blocks: bool = False
    prefill_checkpoint_alignment: int | None = None
    prefix_cacheable: bool = True
    fine_grained: bool = False  # supports_fine_grained_hash_lookup
    is_mamba: bool = False
    # identical groups behave identically: simulated once, their blocks counted `count` times
    count: int = 1
    members: tuple[int, ...] = ()  # the group ids of a merged class


@dataclass(frozen=True)
class SchedulerRules:
    """The scheduler and KV-cache-manager settings the simulation reads."""

    num_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    batch_queue_size: int  # vLLM: VllmConfig.max_concurrent_batches (EngineCore batch queue)
    async_scheduling: bool
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    reserve_full_isl: bool  # SchedulerConfig.scheduler_reserve_full_isl (default True)
    num_speculative_tokens: int
    num_lookahead_tokens: int
    num_prefill_lookahead_tokens: int
    draft_slots: int  # SpeculativeConfig.max_num_new_slots_for_drafting
    cache_block_size: int  # cache_config.block_size after EngineCore._initialize_kv_caches
    scheduler_block_size: int
    hash_block_size: int
    cache_hit_alignment_tokens: int
    use_eagle_block_drop: bool
    num_hash_lookahead_tokens: int
    mamba_partial_cache_hit: bool
    mamba_has_prefill_checkpoint_blocks: bool
    mamba_prefill_checkpoint_alignment: int | None
    profile: VllmProfile


# ---- the settings vLLM resolves -----------------------------------------------------------

def manager_kind(spec: KVCacheSpec) -> ManagerKind:
    """vLLM: register_all_kvcache_specs / KVCacheSpecRegistry.get_manager_class."""
    base = spec
    if isinstance(spec, UniformTypeKVCacheSpecs):
        base = spec.kv_cache_specs[0][1]
    if isinstance(base, HiSparseHotSpec | HiSparseResidentSpec):
        raise UnsupportedError("the workload estimate does not model HiSparse caches")
    if isinstance(base, CrossAttentionSpec | EncoderOnlyAttentionSpec):
        raise UnsupportedError("the workload estimate models decoder-only generation; this "
                               "model has an encoder (cross-attention)")
    if isinstance(base, RSWASpec):
        raise UnsupportedError("the workload estimate does not model reference sliding-window "
                               "attention (RSWASpec)")
    if isinstance(base, CircularBufferSpec | KpoolTailSpec):
        return ManagerKind.RING
    if isinstance(base, SlidingWindowSpec):
        return ManagerKind.SLIDING_WINDOW
    if isinstance(base, ChunkedLocalAttentionSpec):
        return ManagerKind.CHUNKED_LOCAL
    if isinstance(base, MambaSpec):
        return ManagerKind.MAMBA
    if isinstance(base, FullAttentionSpec):
        return ManagerKind.FULL
    raise UnsupportedError(f"the workload estimate does not model {type(base).__name__}")


def _base(spec: KVCacheSpec) -> KVCacheSpec:
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return spec.kv_cache_specs[0][1]
    return spec


def group_rule(group_id: int, spec: KVCacheSpec, demand: DemandSettings) -> GroupRule:
    rule = _group_rule(group_id, spec, demand)
    if spec.is_draft:
        return replace(rule, label=f"{rule.label} (draft)")
    return rule


def _group_rule(group_id: int, spec: KVCacheSpec, demand: DemandSettings) -> GroupRule:
    kind = manager_kind(spec)
    base = _base(spec)
    bs = spec.block_size
    if kind is ManagerKind.SLIDING_WINDOW:
        assert isinstance(base, SlidingWindowSpec)
        # vLLM: get_manager_for_kv_cache_spec passes max_admission_blocks_per_request
        return GroupRule(group_id, kind, bs, f"sliding window {base.sliding_window}",
                         window=base.sliding_window,
                         extra_retained_tokens=base.extra_retained_tokens,
                         admission_cap=spec.blocks_per_request(demand),
                         prefix_cacheable=spec.prefix_cacheable)
    if kind is ManagerKind.CHUNKED_LOCAL:
        assert isinstance(base, ChunkedLocalAttentionSpec)
        return GroupRule(group_id, kind, bs, f"chunked local {base.attention_chunk_size}",
                         window=base.attention_chunk_size,
                         admission_cap=spec.blocks_per_request(demand),
                         prefix_cacheable=spec.prefix_cacheable)
    if kind is ManagerKind.MAMBA:
        assert isinstance(base, MambaSpec)
        align = base.mamba_cache_mode == "align"
        return GroupRule(group_id, kind, bs, f"mamba ({base.mamba_cache_mode})",
                         mamba_align=align, num_speculative_blocks=base.num_speculative_blocks,
                         has_prefill_checkpoint_blocks=align
                         and base.num_prefill_checkpoint_blocks > 0,
                         prefill_checkpoint_alignment=base.prefill_checkpoint_alignment,
                         prefix_cacheable=spec.prefix_cacheable, fine_grained=True,
                         is_mamba=True)
    if kind is ManagerKind.RING:
        return GroupRule(group_id, kind, bs, "one block per request", prefix_cacheable=False)
    return GroupRule(group_id, kind, bs, "full", prefix_cacheable=spec.prefix_cacheable,
                     fine_grained=True)


def resolve_block_sizes(rules: list[GroupRule], enable_prefix_caching: bool,
                        dcp: int = 1) -> tuple[int, int, int, int]:
    """(cache_config.block_size, scheduler_block_size, hash_block_size,
    cache_hit_alignment_tokens) as EngineCore._initialize_kv_caches resolves them.

    vLLM: EngineCore._initialize_kv_caches (block_size = min prefix-cacheable group block),
    kv_cache_utils.resolve_kv_cache_block_sizes and resolve_cache_hit_alignment_tokens
    (prefix_match_unit unset, no KV connector, decode context parallel size 1)."""
    if dcp != 1:
        raise UnsupportedError("the workload estimate models decode context parallel size 1")
    participating = [r.block_size for r in rules if r.prefix_cacheable]
    cache_bs = min(participating or [r.block_size for r in rules])
    if len(rules) <= 1:
        return cache_bs, cache_bs, cache_bs, cache_bs
    sbs = lcm(*(r.block_size for r in rules))
    if not enable_prefix_caching:
        return cache_bs, sbs, sbs, sbs
    if any(r.is_mamba and not r.mamba_align for r in rules):
        return cache_bs, sbs, sbs, sbs
    hashing = [r.block_size for r in rules if r.prefix_cacheable] or [r.block_size for r in rules]
    hbs = gcd(*hashing)
    # partial_hash_hits_enabled, with the managers' supports_fine_grained_hash_lookup
    partial = any(r.mamba_align and r.block_size > hbs for r in rules) and not any(
        r.prefix_cacheable and not r.fine_grained and r.block_size != hbs for r in rules)
    return cache_bs, sbs, hbs, hbs if partial else sbs


# ---- the simulation ----------------------------------------------------------------------

@dataclass
class _Mamba:
    """MambaManager 'align' bookkeeping for one request (real block indices, not blocks)."""

    real: list[int] = field(default_factory=list)  # indices of non-null entries
    retired: int = 0  # _num_retired_blocks
    last_state: int | None = None  # last_state_block_idx
    allocated: bool = False  # in _allocated_block_reqs
    checkpoint: tuple[int, int] | None = None  # _checkpoints entry


class _Req:
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
        self.mamba: list[_Mamba | None] = [None] * num_groups
        self.finished = False
        self.lazy = False  # decoding steadily; its state is advanced only when an event is due
        self.lazy_from = 0  # the step at whose end its state was last exact
        self.snap: tuple[int, ...] | None = None  # (step, state) at the end of its last exact step
        self.bound = 0  # the most blocks it can hold from now on (all groups)
        self.decoding = False


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


def _ckpt_position(num_tokens: int, unit: int, drop_eagle: bool, hash_lookahead: int,
                   profile: VllmProfile) -> int:
    """vLLM: kv_cache_interface.get_mamba_prefill_checkpoint_position."""
    if profile.mamba_checkpoint_proof_limit:  # 0.32+: room for logits and the lookahead hash
        limit = num_tokens if drop_eagle else num_tokens - max(1, hash_lookahead)
        pos = limit // unit * unit
    else:
        pos = (num_tokens - 1) // unit * unit
    if drop_eagle:
        pos -= unit
    return max(pos, 0)


def _ckpt_valid(start: int, end: int, pos: int, hbs: int, mamba_bs: int,
                alignment: int | None) -> bool:
    """vLLM: kv_cache_interface.is_mamba_prefill_checkpoint_valid."""
    if alignment is None:
        return False
    initial_col = (start - 1) // mamba_bs
    ckpt_col = cdiv(end, mamba_bs) - 2
    return (start % hbs == 0 and ckpt_col > initial_col and start + hbs <= pos
            and start < pos < end and (pos - start) % alignment == 0)


class _Engine:
    """vLLM's scheduler + KV cache manager, as integer counts."""

    def __init__(self, rules: SchedulerRules, groups: list[GroupRule], w: Workload) -> None:
        self.r = rules
        self.g = groups
        self.w = w
        self.p = rules.profile
        self.free = rules.num_blocks - 1  # BlockPool: one null block
        self.running: list[_Req] = []
        self.waiting: deque[_Req] = deque()
        # the running requests in scheduling order (= request order: FCFS admission)
        self.running_idx: list[int] = []
        self.by_idx: list[_Req] = []
        self.exact: set[_Req] = set()  # running requests stepped one by one
        self.bucket: dict[int, list[_Req]] = {}  # step → lazy requests due
        self.due_steps: list[int] = []  # heap of the bucket's steps
        self.blocked_at: tuple[int, int] | None = None  # (free, running) of a failed admission
        self.queue: deque[list[tuple[_Req, int, int, bool]]] = deque()  # EngineCore.batch_queue
        self.lazy_ok = True
        self.bound_total = 0  # Σ hold_bound over the running requests
        # bounds that depend on the position (Mamba 'align' boundaries ahead) shrink as it goes
        self.tighten = any(g.mamba_align for g in groups)
        self.lazy_n = 0  # the steady decode step of every lazy request (0: none went lazy yet)
        self.lazy_spec = 0
        self.need_split = any(g.mamba_align for g in groups)
        # MambaManager.drop_eagle_checkpoint_block (the coordinator's use_eagle)
        self.drop_eagle_ckpt = rules.use_eagle_block_drop
        self.mamba_unit = (rules.cache_hit_alignment_tokens if self.p.mamba_checkpoint_unit_alignment
                           else rules.hash_block_size)

    # -- single-type managers --------------------------------------------------------------

    def _skipped_tokens(self, g: GroupRule, computed: int) -> int:
        """<Manager>.get_num_skipped_tokens."""
        if g.kind is ManagerKind.SLIDING_WINDOW:
            return max(0, computed - g.window + 1 - g.extra_retained_tokens)
        if g.kind is ManagerKind.CHUNKED_LOCAL:
            return computed // g.window * g.window
        if g.kind is ManagerKind.MAMBA:
            return computed - 1
        return 0

    def _needs_internal_ckpt(self, g: GroupRule, q: _Req, gi: int, start: int, end: int,
                             pos: int, prefill_end: int) -> bool:
        """MambaManager._needs_internal_checkpoint."""
        if not g.has_prefill_checkpoint_blocks or end < prefill_end:
            return False
        if not _ckpt_valid(start, end, pos, self.r.hash_block_size, g.block_size,
                           g.prefill_checkpoint_alignment):
            return False
        idx = cdiv(end, g.block_size) - 2
        m = q.mamba[gi]
        length = q.length[gi]
        if idx < 0:
            return False
        return (idx >= length or (m is None or idx not in m.real)
                or (m.allocated and idx >= length - g.num_speculative_blocks))

    def _num_to_allocate(self, gi: int, q: _Req, num_tokens: int, total_computed: int,
                         main: int, apply_cap: bool, prefill_end: int) -> int:
        """<Manager>.get_num_blocks_to_allocate (no prefix-cache hit)."""
        g = self.g[gi]
        bs = g.block_size
        length = q.length[gi]
        if g.kind is ManagerKind.RING:
            return 0 if length else 1  # CircularBufferManager
        if g.kind is ManagerKind.MAMBA and g.mamba_align:
            required = cdiv(main, bs) + g.num_speculative_blocks
            new = required - length
            pos = _ckpt_position(main, self.mamba_unit, self.drop_eagle_ckpt,
                                 self.r.num_hash_lookahead_tokens, self.p)
            if not self._needs_internal_ckpt(g, q, gi, total_computed, main, pos, prefill_end):
                pos = 0
            ckpt = int(pos > 0)
            m = q.mamba[gi]
            if not apply_cap:
                if m is None:
                    m = q.mamba[gi] = _Mamba()
                m.checkpoint = (pos, cdiv(main, bs) - 2) if pos > 0 else None
            if new > 0:
                allocated = m is not None and m.allocated
                cap = 1 + ckpt
                if not allocated or (ckpt and self.p.mamba_checkpoint_keeps_spec_blocks):
                    cap += g.num_speculative_blocks
                new = min(new, cap)
            return new
        if g.kind is ManagerKind.MAMBA:  # 'none': room for the speculative states
            num_tokens += bs * g.num_speculative_blocks
        required = cdiv(num_tokens, bs)
        if apply_cap and g.admission_cap is not None:
            required = min(required, g.admission_cap)
        skipped_blocks = self._skipped_tokens(g, total_computed) // bs
        return max(required - max(skipped_blocks, length), 0)

    def _allocate(self, gi: int, q: _Req, need_slot: int, main: int) -> None:
        """<Manager>.allocate_new_blocks."""
        g = self.g[gi]
        bs = g.block_size
        if g.kind is ManagerKind.RING:
            if not q.length[gi]:
                q.length[gi] = 1
                self.free -= g.count
            return
        if g.kind is ManagerKind.MAMBA and g.mamba_align:
            self._allocate_align(gi, q, main)
            return
        if g.kind is ManagerKind.MAMBA:
            need_slot += bs * g.num_speculative_blocks
        new = cdiv(need_slot, bs) - q.length[gi]
        if new > 0:
            q.length[gi] += new
            self.free -= new * g.count

    def _allocate_align(self, gi: int, q: _Req, main: int) -> None:
        """MambaManager.allocate_new_blocks, mamba_cache_mode 'align'."""
        g = self.g[gi]
        k = g.num_speculative_blocks
        m = q.mamba[gi]
        if m is None:
            m = q.mamba[gi] = _Mamba()
        required = cdiv(main, g.block_size) + k
        ckpt = int(m.checkpoint is not None)
        length = q.length[gi]
        if required <= length and not ckpt:
            m.allocated = True
            return
        prev = length
        allocated = m.allocated
        if allocated:
            m.last_state = prev - 1 - k
        elif prev > 0:
            m.last_state = prev - 1
        skipped = required - k - 1
        if prev < skipped:
            length = max(length, skipped - ckpt)
        keep_spec = ckpt and self.p.mamba_checkpoint_keeps_spec_blocks
        if allocated and not keep_spec:
            limit = skipped if self.p.mamba_checkpoint_keeps_spec_blocks else skipped - ckpt
            for idx in range(prev - k, prev):
                if idx >= limit:
                    break
                m.real.remove(idx)  # _relocate_speculative_block
                m.real.append(length)
                length += 1
        new = max(required - length, 0)
        m.real.extend(range(length, length + new))
        length += new
        self.free -= new * g.count
        q.length[gi] = length
        m.allocated = True

    def _remove_skipped(self, gi: int, q: _Req, processed: int) -> None:
        """<Manager>.remove_skipped_blocks."""
        g = self.g[gi]
        if g.kind in (ManagerKind.FULL, ManagerKind.RING):
            return
        skipped = self._skipped_tokens(g, processed)
        if g.kind is ManagerKind.MAMBA and g.mamba_align:
            m = q.mamba[gi]
            if m is None:
                return
            if skipped > 0:
                last = min(skipped // g.block_size, q.length[gi])
                first = m.retired
                if first < last:
                    # MambaManager._remove_blocks_in_range: every non-null entry in the range
                    freed = [i for i in m.real if first <= i < last]
                    for i in freed:
                        m.real.remove(i)
                    self.free += len(freed) * g.count
                    m.retired = last
            lsi = m.last_state
            if lsi is not None and lsi < cdiv(processed, g.block_size) - 1 and lsi in m.real:
                m.real.remove(lsi)
                self.free += g.count
            return
        if skipped <= 0:
            return
        n = min(skipped // g.block_size, q.length[gi])
        if n > q.nulls[gi]:  # _remove_blocks_in_range frees the blocks after the null prefix
            self.free += (n - q.nulls[gi]) * g.count
            q.nulls[gi] = n

    def _held(self, gi: int, q: _Req) -> int:
        m = q.mamba[gi]
        if m is not None and self.g[gi].mamba_align:
            return len(m.real)
        return q.length[gi] - q.nulls[gi]

    # -- KVCacheManager.allocate_slots ----------------------------------------------------

    def _allocate_slots(self, q: _Req, n: int, full_sequence: bool) -> bool:
        r = self.r
        P = q.prompt
        total_computed = min(q.computed, r.max_model_len)
        prefill_end = max(P, P + q.outputs - 1)
        num_groups = len(self.g)
        if full_sequence:
            full = min(P + q.outputs, r.max_model_len)
            need = sum(self._num_to_allocate(gi, q, full, total_computed, full, True, prefill_end)
                       * self.g[gi].count for gi in range(num_groups))
            if need > self.free:
                return False
        main = total_computed + n
        need_slot = min(main + r.num_lookahead_tokens, r.max_model_len)
        processed = max(0, total_computed - q.in_flight)
        for gi in range(num_groups):
            self._remove_skipped(gi, q, processed)
        need = sum(self._num_to_allocate(gi, q, need_slot, total_computed, main, False,
                                         prefill_end) * self.g[gi].count
                   for gi in range(num_groups))
        if need > self.free:
            return False
        for gi in range(num_groups):
            self._allocate(gi, q, need_slot, main)
        return True

    def hold_bound(self, q: _Req, decoding: bool) -> int:
        """An upper bound on the blocks q holds after any allocation from now on, all groups:
        its largest block table less what its window must have freed (the engine's tests
        check it against every step of the every-step simulation)."""
        r = self.r
        k = r.num_speculative_tokens
        la = r.num_lookahead_tokens
        # tokens scheduled in one step, and scheduled but not yet processed (in flight)
        n = 2 + k if decoding else r.max_num_batched_tokens
        f = n * (r.batch_queue_size - 1) if decoding else r.max_num_batched_tokens * \
            max(1, r.batch_queue_size - 1)
        total = 0
        for gi, g in enumerate(self.g):
            bs = g.block_size
            if g.kind is ManagerKind.RING:
                b = 1
            elif g.kind is ManagerKind.FULL:
                b = cdiv(min(q.prompt + q.max_tokens + 2 * k + la + 2, r.max_model_len), bs)
            elif g.kind is ManagerKind.MAMBA and g.mamba_align and decoding:
                # the state and the speculative ones, + the last state while a block boundary
                # is still ahead (it lingers a step or two after the crossing)
                ahead = ((q.computed // bs + 1) * bs
                         <= q.prompt + q.max_tokens + 2 * k + la + 2)
                b = max(self._held(gi, q), 1 + g.num_speculative_blocks + int(ahead))
            elif g.kind is ManagerKind.MAMBA and g.mamba_align:  # + a prefill checkpoint and
                b = 4 + g.num_speculative_blocks + int(g.has_prefill_checkpoint_blocks)  # lag
            else:
                w = {ManagerKind.SLIDING_WINDOW: g.window + g.extra_retained_tokens,
                     ManagerKind.CHUNKED_LOCAL: g.window + 1, ManagerKind.MAMBA: 2}[g.kind]
                extra = g.num_speculative_blocks if g.kind is ManagerKind.MAMBA else 0
                b = (n + la + f + w - 1 + 2 * bs - 2) // bs + extra
                b = min(b, cdiv(min(q.prompt + q.max_tokens + 2 * k + la + 2, r.max_model_len),
                                bs) + extra)
            total += b * g.count
        return total

    def _hold_floor(self, gi: int, q: _Req) -> int:
        """A lower bound on the blocks q holds in class gi until it finishes."""
        g = self.g[gi]
        held = self._held(gi, q)
        if g.kind is ManagerKind.SLIDING_WINDOW:
            # after any allocation it holds cdiv(c + n + la) − floor((c − f − w + 1 − e) / bs)
            # ≥ cdiv(n + la + f + w − 1 + e, bs) blocks, with n ≥ 1 and f ≥ 0 (f ≥ 1 with
            # async scheduling: the step before is in flight)
            window = (self.r.num_lookahead_tokens + g.window + g.extra_retained_tokens
                      + int(self.r.async_scheduling))
            return min(held, cdiv(window, g.block_size))
        if g.kind is ManagerKind.CHUNKED_LOCAL:
            return 0
        if g.kind is ManagerKind.MAMBA and g.mamba_align:  # the state and the speculative ones
            return min(held, 1 + g.num_speculative_blocks)
        return held  # full attention only grows; 'none' states and rings stay

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

    def quiet_until(self, t: int, finished_pending: bool) -> int:
        """The next step that is not a quiet steady-decode step of every running request (the
        next step if there is no such stretch)."""
        if (self.exact or finished_pending or not self.due_steps
                or (self.waiting and self.blocked_at != (self.free, len(self.running)))):
            return t + 1
        return self.due_steps[0]

    def _after_step(self, t: int, scheduled: list[tuple[_Req, int, int]]) -> None:
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

    def _free_request(self, q: _Req) -> None:
        for gi, g in enumerate(self.g):
            self.free += self._held(gi, q) * g.count
        q.finished = True

    # -- Scheduler ------------------------------------------------------------------------

    def _mamba_split(self, q: _Req, n: int) -> int:
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
            last_cache = _ckpt_position(num_tokens, bs, drop, nhl, p)
            ckpt_bs = hbs if r.mamba_partial_cache_hit else r.scheduler_block_size
        else:
            last_cache = num_tokens - num_tokens % bs
            if drop:
                last_cache = max(last_cache - bs, 0)
            ckpt_bs = hbs
        end = start + n
        ckpt_pos = _ckpt_position(prefill_end, ckpt_bs, drop, nhl, p)
        internal = (r.mamba_has_prefill_checkpoint_blocks and end >= prefill_end
                    and _ckpt_valid(start, end, ckpt_pos, hbs, bs,
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
                tail = _ckpt_position(P, hbs, drop, nhl, p)
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

    def _reserve_prefill_lookahead(self, q: _Req, computed: int, n: int) -> int:
        """Scheduler._reserve_prefill_lookahead (multi-module MTP)."""
        npl = self.r.num_prefill_lookahead_tokens
        remaining = q.prompt + q.outputs - computed - n
        if 0 < remaining < npl:
            n -= npl - remaining
        return max(n, 0)

    # -- Scheduler.schedule, one running request --------------------------------------------

    def _schedule_running(self, q: _Req, budget: int, inputs: int) -> tuple[int, int] | None:
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
               ) -> tuple[list[tuple[_Req, int, int]], int, int]:
        """The waiting loop of Scheduler.schedule."""
        r = self.r
        slots = r.draft_slots
        admitted: list[tuple[_Req, int, int]] = []
        skipped: list[_Req] = []
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

    # -- the running set, with lazily advanced decoding requests -----------------------------

    def _start_running(self, q: _Req) -> None:
        self.running.append(q)
        insort(self.running_idx, q.idx)
        self.exact.add(q)
        q.bound = self.hold_bound(q, False)
        self.bound_total += q.bound

    def _stop_running(self, q: _Req) -> None:
        self.running.remove(q)
        del self.running_idx[bisect_left(self.running_idx, q.idx)]
        self.exact.discard(q)
        self.bound_total -= q.bound

    def _materialize(self, q: _Req, t: int) -> None:
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

    def _next_event(self, q: _Req, t: int) -> int:
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

    def _end_step(self, q: _Req, t: int) -> int:
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
            wake = self._next_event(q, t_end)
            due = self.bucket.get(wake)
            if due is None:
                self.bucket[wake] = [q]
                heappush(self.due_steps, wake)
            else:
                due.append(q)

    def _quiet_step(self, q: _Req, u: int) -> None:
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

    def _make_lazy(self, q: _Req, t: int, n: int, spec: int) -> None:
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
        due = self.bucket.get(wake)
        if due is None:
            self.bucket[wake] = [q]
            heappush(self.due_steps, wake)
        else:
            due.append(q)

    def schedule(self, t: int) -> tuple[list[tuple[_Req, int, int, bool]], bool]:
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
        scheduled: list[tuple[_Req, int, int]] = []
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

        def run_one(q: _Req) -> bool:
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

    def update(self, batch: list[tuple[_Req, int, int, bool]]) -> list[_Req]:
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

    def sync_drafts(self, batch: list[tuple[_Req, int, int, bool]]) -> None:
        """EngineCore.post_step → Scheduler.update_draft_token_ids (sync scheduling, all drafts
        of the step; 0.34 proposes none when no scheduled request can use them)."""
        if self.p.sync_spec_skips_unused_drafts and self.r.num_lookahead_tokens > 0 and all(
                partial or q.finished or q.outputs >= q.max_tokens
                for q, _, _, partial in batch):
            return
        for q, _, _, partial in batch:
            if not (q.finished or partial or q.lazy):
                q.spec = self.r.num_speculative_tokens


def _idx(q: _Req) -> int:
    return q.idx


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
    e = _Engine(rules, groups, w)
    e.lazy_ok = lazy and rules.batch_queue_size <= 2
    num_groups = len(groups)
    e.by_idx = [_Req(i, w.pair(i), num_groups) for i in range(num_requests)]
    e.waiting.extend(e.by_idx)
    queue = e.queue
    steps = peak = finished = 0
    finished_pending = False  # Scheduler.finished_req_ids, until the next schedule
    blocks_at_end: tuple[int, ...] | None = None
    q_size = rules.batch_queue_size

    def done(batch: list[tuple[_Req, int, int, bool]]) -> None:
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


# ---- from a plan to the answers --------------------------------------------------------------

DRAFT_METHODS = frozenset({"eagle", "eagle3", "mtp", "dflash", "ngram", "draft_model"})


@dataclass(frozen=True)
class SpecDecodeSettings:
    """What the scheduler reads of the speculative config (vLLM: VllmConfig /
    SpeculativeConfig properties, per release)."""

    num_lookahead_tokens: int
    draft_slots: int
    use_eagle_block_drop: bool
    num_hash_lookahead_tokens: int


def spec_decode_settings(method: str | None, k: int, num_prefill_lookahead: int,
                         enable_prefix_caching: bool, profile: VllmProfile) -> SpecDecodeSettings:
    """vLLM: VllmConfig.num_lookahead_tokens, SpeculativeConfig.max_num_new_slots_for_drafting,
    use_eagle_block_drop and VllmConfig._resolve_num_hash_lookahead_tokens (0.34), then
    Scheduler.__init__ (lookahead block hashes turn the block drop off)."""
    if method is None or k == 0:
        return SpecDecodeSettings(0, 0, False, 0)
    if method not in DRAFT_METHODS:
        raise UnsupportedError(f"the workload estimate does not model speculative method "
                               f"{method!r}", hint=f"modelled: {', '.join(sorted(DRAFT_METHODS))}")
    if method == "dflash":
        lookahead = k + 1  # a query for the last sampled token plus one per draft token
        slots = k if profile.dflash_adds_draft_slots else 0
    elif method == "draft_model":
        lookahead, slots = k, 1
    elif method == "ngram":
        lookahead, slots = 0, 0
    else:
        lookahead, slots = k, 0
    # SpeculativeConfig.use_eagle_block_drop (needs_eagle_block_drop from 0.33)
    drop = method in ("eagle", "eagle3", "mtp") or (method == "dflash"
                                                    and profile.dflash_eagle_block_drop)
    hash_lookahead = 0
    if drop and profile.lookahead_block_hashes and enable_prefix_caching:
        hash_lookahead = num_prefill_lookahead
    if hash_lookahead:
        drop = False
    return SpecDecodeSettings(lookahead, slots, drop, hash_lookahead)


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


def build_rules(*, groups: list[KVCacheSpec], num_blocks: int, max_model_len: int,
                max_num_batched_tokens: int, max_num_seqs: int, batch_queue_size: int,
                async_scheduling: bool, enable_chunked_prefill: bool, enable_prefix_caching: bool,
                num_speculative_tokens: int, speculative_method: str | None,
                num_prefill_lookahead_tokens: int, max_in_flight_tokens: int,
                profile: VllmProfile, reserve_full_isl: bool = True,
                decode_context_parallel_size: int = 1
                ) -> tuple[SchedulerRules, list[GroupRule]]:
    """SchedulerRules + GroupRules for a planned KV cache (`groups`: each group's spec)."""
    demand = DemandSettings(max_model_len=max_model_len, max_in_flight_tokens=max_in_flight_tokens,
                            max_num_encoder_input_tokens=max_num_batched_tokens)
    rules = [group_rule(i, spec, demand) for i, spec in enumerate(groups)]
    cache_bs, sbs, hbs, align = resolve_block_sizes(rules, enable_prefix_caching,
                                                    decode_context_parallel_size)
    classes: dict[GroupRule, list[int]] = {}
    for r in rules:
        classes.setdefault(replace(r, group_id=0), []).append(r.group_id)
    sd = spec_decode_settings(speculative_method, num_speculative_tokens,
                              num_prefill_lookahead_tokens, enable_prefix_caching, profile)
    mamba = [r for r in rules if r.is_mamba]
    partial = (any(r.mamba_align for r in rules) and enable_prefix_caching and len(rules) > 1
               and hbs < sbs and align == hbs)
    sched = SchedulerRules(
        num_blocks=num_blocks, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, max_model_len=max_model_len,
        batch_queue_size=batch_queue_size, async_scheduling=async_scheduling,
        enable_chunked_prefill=enable_chunked_prefill,
        enable_prefix_caching=enable_prefix_caching, reserve_full_isl=reserve_full_isl,
        num_speculative_tokens=num_speculative_tokens if speculative_method else 0,
        num_lookahead_tokens=sd.num_lookahead_tokens,
        num_prefill_lookahead_tokens=num_prefill_lookahead_tokens if speculative_method else 0,
        draft_slots=sd.draft_slots, cache_block_size=cache_bs, scheduler_block_size=sbs,
        hash_block_size=hbs, cache_hit_alignment_tokens=align,
        use_eagle_block_drop=sd.use_eagle_block_drop,
        num_hash_lookahead_tokens=sd.num_hash_lookahead_tokens, mamba_partial_cache_hit=partial,
        # Scheduler.mamba_has_prefill_checkpoint_blocks
        mamba_has_prefill_checkpoint_blocks=bool(mamba) and all(
            _prefill_ckpt_blocks(s) > 0 for s in groups if isinstance(_base(s), MambaSpec)),
        mamba_prefill_checkpoint_alignment=mamba[0].prefill_checkpoint_alignment if mamba else None,
        profile=profile)
    merged = [replace(r, group_id=ids[0], count=len(ids), members=tuple(ids))
              for r, ids in classes.items()]
    return sched, merged


def _prefill_ckpt_blocks(spec: KVCacheSpec) -> int:
    base = _base(spec)
    return base.num_prefill_checkpoint_blocks if isinstance(base, MambaSpec) else 0


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


def rules_for_plan(result: EngineResult, inp: PlannerInput, *, max_num_seqs: int,
                   enable_chunked_prefill: bool, enable_prefix_caching: bool,
                   reserve_full_isl: bool = True) -> tuple[SchedulerRules, list[GroupRule]]:
    """The rules for a plan the engine made (its groups, num_blocks and settings)."""
    if result.num_blocks is None or not result.groups:
        raise UnsupportedError("no KV cache was planned, so there is no workload to run")
    if len(inp.worker_specs) != 1:
        raise UnsupportedError("the workload estimate models one pipeline stage "
                               "(pipeline parallel size 1)")
    return build_rules(
        groups=[d.group.spec for d in result.groups], num_blocks=result.num_blocks,
        max_model_len=result.max_model_len_after_planning,
        max_num_batched_tokens=inp.max_num_batched_tokens, max_num_seqs=max_num_seqs,
        batch_queue_size=result.max_concurrent_batches, async_scheduling=inp.async_scheduling,
        enable_chunked_prefill=enable_chunked_prefill,
        enable_prefix_caching=enable_prefix_caching,
        num_speculative_tokens=inp.num_speculative_tokens,
        speculative_method=_method(inp),
        num_prefill_lookahead_tokens=result.num_prefill_lookahead_tokens,
        max_in_flight_tokens=result.max_in_flight_tokens, profile=result.profile,
        reserve_full_isl=reserve_full_isl,
        decode_context_parallel_size=inp.decode_context_parallel_size)


def _method(inp: PlannerInput) -> str | None:
    if inp.speculative_method is None and inp.num_speculative_tokens > 0:
        return "eagle"  # vLLM's default for a draft model with tokens
    return inp.speculative_method
