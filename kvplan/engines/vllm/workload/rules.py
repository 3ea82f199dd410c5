"""The settings the workload simulation reads, as vLLM resolves them from a planned KV cache:
each group as its single-type manager sees it, the block sizes EngineCore settles on, what the
scheduler reads of the speculative config (vLLM: kv_cache_utils, VllmConfig, SpeculativeConfig)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
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


def base_spec(spec: KVCacheSpec) -> KVCacheSpec:
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
    base = base_spec(spec)
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
            _prefill_ckpt_blocks(s) > 0 for s in groups if isinstance(base_spec(s), MambaSpec)),
        mamba_prefill_checkpoint_alignment=mamba[0].prefill_checkpoint_alignment if mamba else None,
        profile=profile)
    merged = [replace(r, group_id=ids[0], count=len(ids), members=tuple(ids))
              for r, ids in classes.items()]
    return sched, merged


def _prefill_ckpt_blocks(spec: KVCacheSpec) -> int:
    base = base_spec(spec)
    return base.num_prefill_checkpoint_blocks if isinstance(base, MambaSpec) else 0


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
