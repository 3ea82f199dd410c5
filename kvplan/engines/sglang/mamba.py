"""SGLang's Mamba / linear-attention state pool: the per-request state bytes
(configs/mamba_utils.py shapes), the slots each running request holds
(KVCacheConfigurator._calculate_mamba_ratio) and the carve-out of the pool budget
(KVCacheConfigurator._handle_max_mamba_cache)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.engines.sglang.model import LinearKind, LinearState
from kvplan.engines.sglang.profiles import SglangProfile
from kvplan.engines.sglang.result import SglangError
from kvplan.engines.sglang.server_args import ELEMENT_SIZE, ResolvedArgs, StartupError

GIB = 1 << 30


@dataclass(frozen=True)
class StateShape:
    conv: tuple[tuple[int, int], ...]
    temporal: tuple[int, int, int]


def _divide(a: int, b: int) -> int:
    """distributed.utils.divide (asserts divisibility)."""
    if a % b:
        raise StartupError(SglangError(type="AssertionError", stage="pool_sizing",
                                       message=f"{a} is not divisible by {b}"))
    return a // b


def state_shape(lin: LinearState, tp: int) -> StateShape:
    """Mamba2StateShape.create (GDN, Mamba2) / KimiLinearStateShape.create (KDA)."""
    if lin.kind is LinearKind.KDA:
        proj, proj_k = lin.num_v_heads * lin.head_v_dim, lin.num_k_heads * lin.head_k_dim
        conv = (lin.conv_kernel - 1, _divide(proj, tp) + _divide(proj_k, tp) * 2)
        return StateShape(conv=(conv,), temporal=(_divide(lin.num_v_heads, tp), lin.head_v_dim,
                                                  lin.head_v_dim))
    if lin.kind is LinearKind.GDN:
        # configs/qwen3_next.py mamba2_cache_params
        intermediate, n_groups = lin.head_v_dim * lin.num_v_heads, lin.num_k_heads
        num_heads, head_dim, state = lin.num_v_heads, lin.head_v_dim, lin.head_k_dim
    else:
        # configs/nemotron_h.py mamba2_cache_params
        intermediate, n_groups = lin.intermediate_size, lin.n_groups
        num_heads, head_dim, state = lin.num_heads, lin.head_dim, lin.state_size
    if n_groups % tp:
        n_groups += tp - n_groups  # mamba_utils.extra_groups_for_head_shards
    conv_dim = intermediate + 2 * n_groups * state
    return StateShape(conv=((_divide(conv_dim, tp), lin.conv_kernel - 1),),
                      temporal=(_divide(num_heads, tp), head_dim, state))


def mamba_cache_per_req(lin: LinearState, tp: int) -> int:
    """BaseLinearStateParams.mamba_cache_per_req: conv (bf16) + temporal (ssm dtype) per layer,
    × every state layer. KimiLinearCacheParams keeps the default dtypes (ssm float32)."""
    shape = state_shape(lin, tp)
    ssm = "float32" if lin.kind is LinearKind.KDA else lin.ssm_dtype
    conv_numel = sum(a * b for a, b in shape.conv)
    t = shape.temporal
    return ((conv_numel * ELEMENT_SIZE[lin.conv_dtype] + t[0] * t[1] * t[2] * ELEMENT_SIZE[ssm])
            * len(lin.layer_ids))


def mamba_ratio(args: ResolvedArgs, profile: SglangProfile) -> int:
    """KVCacheConfigurator._calculate_mamba_ratio: state slots per running request — 1 without
    the radix cache, else 3 (+2 extra-buffer tracking slots with the overlap scheduler, +1
    without it)."""
    if args.disable_radix_cache:
        return 1
    extra = (2 if not args.disable_overlap_schedule else 1) if args.mamba_extra_buffer else 0
    return profile.mamba_ratio_base + extra


def pp_indices(num_layers: int, rank: int, pp_size: int) -> tuple[int, int]:
    """distributed.utils.get_pp_indices (no SGLANG_PP_LAYER_PARTITION): the last
    num_layers % pp_size stages take one extra layer."""
    base, rem = divmod(num_layers, pp_size)
    if rank >= pp_size - rem:
        start = rank * (base + 1) - (pp_size - rem)
        return start, start + base + 1
    return rank * base, rank * base + base


@dataclass(frozen=True)
class MambaCarveOut:
    rest_gb: float  # what is left for the KV pools (GB)
    max_mamba_cache_size: int
    per_req: int  # mamba2_cache_params.mamba_cache_per_req: every state layer
    stage_per_req: int  # this PP stage's share (the largest stage's)
    intermediate_gb: float


def handle_max_mamba_cache(total_rest_gb: float, lin: LinearState, args: ResolvedArgs,
                           profile: SglangProfile, num_hidden_layers: int) -> MambaCarveOut:
    """KVCacheConfigurator._handle_max_mamba_cache (no ReplaySSM, no fused draft state, no PD).

    The state pool gets mamba_full_memory_ratio / (1 + ratio) of the rest memory (solved with
    its padding slot), or the explicit --max-mamba-cache-size, or --max-running-requests when
    the radix cache is off; speculative decoding also reserves the per-draft-token
    intermediate states. Returns the memory left for the KV pools."""
    per_req = mamba_cache_per_req(lin, args.attn_tp_size)
    layers = lin.layer_ids
    if args.pp_size > 1 and layers:
        stage_max = max(sum(1 for i in layers if s <= i < e) for s, e in
                        (pp_indices(num_hidden_layers, r, args.pp_size)
                         for r in range(args.pp_size)))
    else:
        stage_max = len(layers)
    scale = stage_max / max(len(layers), 1)
    stage_per_req = int(per_req * scale)
    extra_per_slot = 0
    spec = args.speculative_algorithm is not None
    draft_tokens = args.speculative_num_draft_tokens or 0
    rest = total_rest_gb
    intermediate_gb = 0.0
    attn_dp = args.attn_dp_size
    mrr = args.max_running_requests
    if args.max_mamba_cache_size is not None:
        max_mamba = args.max_mamba_cache_size // attn_dp
        if spec:
            assert mrr is not None
            ratio = mamba_ratio(args, profile)
            capped = min(max(1, mrr // attn_dp), max_mamba // ratio)
            intermediate_gb = stage_per_req * (capped + 1) * draft_tokens / GIB
            rest = rest - intermediate_gb
    elif args.disable_radix_cache and mrr is not None:
        max_mamba = max(1, mrr // attn_dp)
        if spec:
            intermediate_gb = stage_per_req * (max_mamba + 1) * draft_tokens / GIB
            rest = rest - intermediate_gb
    else:
        budget = rest * args.mamba_full_memory_ratio / (1 + args.mamba_full_memory_ratio)
        budget_bytes = budget * GIB
        if spec:
            assert mrr is not None
            ratio = mamba_ratio(args, profile)
            d = draft_tokens
            max_mamba = int((budget_bytes - stage_per_req * (1 + d) - extra_per_slot)
                            // (stage_per_req * (1 + d / ratio) + extra_per_slot))
            capped = min(max(1, mrr // attn_dp), max_mamba // ratio)
            intermediate_gb = stage_per_req * (capped + 1) * d / GIB
            rest = rest - intermediate_gb
        else:
            per_slot = stage_per_req + extra_per_slot
            max_mamba = int((budget_bytes - per_slot) // per_slot)
    if max_mamba <= 0:
        raise StartupError(SglangError(
            type="RuntimeError", stage="profile",
            message=profile.messages["mamba_no_memory"].format(
                max_mamba_cache_size=max_mamba, rest_gb=rest, per_req_mb=stage_per_req / (1 << 20))))
    state_gb = (max_mamba + 1) * (stage_per_req + extra_per_slot) / GIB
    return MambaCarveOut(rest_gb=rest - state_gb, max_mamba_cache_size=max_mamba,
                         per_req=per_req, stage_per_req=stage_per_req,
                         intermediate_gb=intermediate_gb)
