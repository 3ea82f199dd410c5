"""vLLM's KV cache manager as integer counts per request and group: each single-type manager's
get_num_blocks_to_allocate / allocate_new_blocks / remove_skipped_blocks and
KVCacheManager.allocate_slots (vllm/v1/core/single_type_kv_cache_manager.py,
kv_cache_manager.py), no block objects; plus the bounds on what a request can hold that let the
simulation stop early."""

from __future__ import annotations

from kvplan.engines.vllm.profiles import VllmProfile
from kvplan.engines.vllm.workload.requests import MambaAlignState, Request
from kvplan.engines.vllm.workload.rules import GroupRule, ManagerKind, SchedulerRules, Workload
from kvplan.units import cdiv


def ckpt_position(num_tokens: int, unit: int, drop_eagle: bool, hash_lookahead: int,
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


def ckpt_valid(start: int, end: int, pos: int, hbs: int, mamba_bs: int,
                alignment: int | None) -> bool:
    """vLLM: kv_cache_interface.is_mamba_prefill_checkpoint_valid."""
    if alignment is None:
        return False
    initial_col = (start - 1) // mamba_bs
    ckpt_col = cdiv(end, mamba_bs) - 2
    return (start % hbs == 0 and ckpt_col > initial_col and start + hbs <= pos
            and start < pos < end and (pos - start) % alignment == 0)


class BlockCounts:
    """The KV cache manager's blocks, as integer counts: the free pool and each request's block
    table per group."""

    def __init__(self, rules: SchedulerRules, groups: list[GroupRule], w: Workload) -> None:
        self.r = rules
        self.g = groups
        self.w = w
        self.p = rules.profile
        self.free = rules.num_blocks - 1  # BlockPool: one null block
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

    def _needs_internal_ckpt(self, g: GroupRule, q: Request, gi: int, start: int, end: int,
                             pos: int, prefill_end: int) -> bool:
        """MambaManager._needs_internal_checkpoint."""
        if not g.has_prefill_checkpoint_blocks or end < prefill_end:
            return False
        if not ckpt_valid(start, end, pos, self.r.hash_block_size, g.block_size,
                           g.prefill_checkpoint_alignment):
            return False
        idx = cdiv(end, g.block_size) - 2
        m = q.mamba[gi]
        length = q.length[gi]
        if idx < 0:
            return False
        return (idx >= length or (m is None or idx not in m.real)
                or (m.allocated and idx >= length - g.num_speculative_blocks))

    def _num_to_allocate(self, gi: int, q: Request, num_tokens: int, total_computed: int,
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
            pos = ckpt_position(main, self.mamba_unit, self.drop_eagle_ckpt,
                                 self.r.num_hash_lookahead_tokens, self.p)
            if not self._needs_internal_ckpt(g, q, gi, total_computed, main, pos, prefill_end):
                pos = 0
            ckpt = int(pos > 0)
            m = q.mamba[gi]
            if not apply_cap:
                if m is None:
                    m = q.mamba[gi] = MambaAlignState()
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

    def _allocate(self, gi: int, q: Request, need_slot: int, main: int) -> None:
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

    def _allocate_align(self, gi: int, q: Request, main: int) -> None:
        """MambaManager.allocate_new_blocks, mamba_cache_mode 'align'."""
        g = self.g[gi]
        k = g.num_speculative_blocks
        m = q.mamba[gi]
        if m is None:
            m = q.mamba[gi] = MambaAlignState()
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

    def _remove_skipped(self, gi: int, q: Request, processed: int) -> None:
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

    def _held(self, gi: int, q: Request) -> int:
        m = q.mamba[gi]
        if m is not None and self.g[gi].mamba_align:
            return len(m.real)
        return q.length[gi] - q.nulls[gi]

    # -- KVCacheManager.allocate_slots ----------------------------------------------------

    def _allocate_slots(self, q: Request, n: int, full_sequence: bool) -> bool:
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

    def hold_bound(self, q: Request, decoding: bool) -> int:
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

    def _hold_floor(self, gi: int, q: Request) -> int:
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

    def _free_request(self, q: Request) -> None:
        for gi, g in enumerate(self.g):
            self.free += self._held(gi, q) * g.count
        q.finished = True
