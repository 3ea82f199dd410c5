"""What differs between vLLM releases, as data in one place (see shared docs/vllm-versions.md)."""

from __future__ import annotations

from enum import StrEnum

from kvplan.errors import InputError
from kvplan.frozen import Frozen


class SwBlockRule(StrEnum):
    """How a sliding-window layer picks its block (vLLM: attention.Attention.get_kv_cache_spec)."""

    PRIMARY_BLOCK = "primary_block"  # 0.30–0.33: largest kernel block within the primary page
    PREFER_DIVISOR = "prefer_divisor"  # 0.34: as above, preferring a divisor of the primary block


class PoolStrideRule(StrEnum):
    """vLLM: _get_kv_cache_bytes_per_block (layer-outermost layouts)."""

    SUM_THEN_ROUND = "sum_then_round"  # 0.31: round_up(Σ pages, lcm(alignments))
    PER_LAYER_ROUND = "per_layer_round"  # 0.32+: Σ round_up(page, alignment)


class ErrorText(StrEnum):
    A = "A"  # 0.31–0.33
    B = "B"  # 0.34


COMMON_SPEC_TYPES = (
    "FullAttentionSpec", "MLAAttentionSpec", "SlidingWindowSpec", "SlidingWindowMLASpec",
    "ChunkedLocalAttentionSpec", "SinkFullAttentionSpec", "CrossAttentionSpec",
    "EncoderOnlyAttentionSpec", "MambaSpec", "UniformTypeKVCacheSpecs", "HiddenStateCacheSpec",
    "RSWASpec", "CircularBufferSpec", "HiSparseHotSpec", "HiSparseResidentSpec",
)


class VllmProfile(Frozen):
    version: str
    default_block_size: int  # vLLM: CacheConfig.DEFAULT_BLOCK_SIZE
    sw_block_rule: SwBlockRule
    pool_stride_rule: PoolStrideRule
    error_text: ErrorText
    mamba_cache_modes: tuple[str, ...]
    # vLLM: VllmConfig.max_concurrent_batches — V1 runner keeps pp (or 2 at pp=1) with async.
    v1_runner_async_pp_plus_one: bool
    # _align_hybrid_block_size: lcm of every backend's smallest kernel block (0.32+)
    hybrid_align_backend_lcm: bool
    # _align_hybrid_block_size: lcm with the Mamba prefill-checkpoint alignment (0.33+)
    hybrid_align_checkpoint: bool
    # MambaMixer2.get_kv_cache_spec sets num_prefill_checkpoint_blocks=1 (0.32+)
    mamba2_checkpoint_block: bool
    # default gpu_memory_utilization; 0.34 uses 1.0 with the extensible KV cache
    default_gpu_memory_utilization: float
    extensible_kv_cache_default: bool
    # draft groups marked via KVCacheSpec.is_draft (0.33+)
    has_is_draft: bool
    planner_module: str
    fp8_ds_mla_row_bytes: int = 656
    # KVCacheSpec.block_stride_alignment may be MultipleOf(n) (0.32+; 0.31 takes an int only)
    multiple_of_stride_alignment: bool = True
    # vllm/v1/kv_cache_interface.py: the spec classes the release defines (beyond the core ones)
    spec_types: frozenset[str] = frozenset(COMMON_SPEC_TYPES)
    # MLAAttentionSpec fields that exist only in some releases (topk_buffer_width 0.33+,
    # storage_block_size 0.31)
    mla_fields: frozenset[str] = frozenset({"topk_buffer_width"})
    # SlidingWindowMLASpec.non_causal_multi_token_decode (0.34)
    swa_mla_fields: frozenset[str] = frozenset({"non_causal_multi_token_decode"})
    # resolve_kv_cache_layout: self-addressed rings take no part in the DCP-sharding test (0.32+)
    dcp_layout_skips_self_addressed: bool = True
    # HiSparseHotSpec.get_block_stride_alignment = lcm(page_size, alignment) (0.34)
    hisparse_hot_stride_lcm: bool = True
    # SlidingWindowMLASpec.merge also requires one kv_quant_mode and one alignment (0.34)
    swa_mla_merge_checks_quant_alignment: bool = True
    # _pool_bytes_per_block_from_builder lays one block out with per-layer views (0.33+), which
    # a spec without them (HiSparse, outside HiSparse's own layout) cannot take
    pool_probe_needs_layer_views: bool = True
    # get_kv_cache_groups' GLM-5.3 branch (_get_kv_cache_groups_glm5_next) and its tensor
    # layout (_glm5_next_tensor_layout) — 0.31 only
    glm5_next_grouping: bool = False
    # the worker's block table rows: get_block_table_width with the spec's
    # block_table_token_alignment (0.34; before, the raw max_num_blocks_per_req)
    block_table_token_alignment: bool = True
    # Glm5NextModelConfig.verify_and_update_config: KV 'auto' → fp8 on SM10x (0.33+)
    glm5_next_sm100_fp8_kv: bool = True
    # EngineArgs.get_batch_defaults: the compute capabilities kept on the small tier despite
    # ≥ 70 GiB — the GB10 (DGX Spark, is_device_capability((12, 1))) from 0.33; 0.31/0.32 tell
    # devices apart by memory and the "a100" name only
    batch_defaults_small_tier_sms: frozenset[int] = frozenset({121})
    # --- the scheduler (kvplan/engines/vllm/workload/) ---
    # Scheduler waiting loop: a request left with 0 tokens by the MTP prefill-lookahead reserve
    # is skipped (skip_request, 0.34) instead of stopping the loop (break, 0.31)
    waiting_zero_tokens_skip: bool = True
    # Scheduler._drafts_unused / SchedulerOutput.skip_drafts: no drafts proposed in a step whose
    # requests cannot use them (0.34)
    sync_spec_skips_unused_drafts: bool = True
    # SpeculativeConfig.max_num_new_slots_for_drafting: DFlash adds K input slots (0.31)
    dflash_adds_draft_slots: bool = False
    # VllmConfig.num_hash_lookahead_tokens: EAGLE lookahead block hashes replace the block drop
    lookahead_block_hashes: bool = True
    # SpeculativeConfig.use_eagle_block_drop: DFlash drops the trailing prefix-cache block as
    # EAGLE does (0.31, 0.32; from 0.33 needs_eagle_block_drop leaves DFlash/DSpark out)
    dflash_eagle_block_drop: bool = False
    # get_mamba_prefill_checkpoint_position: proof limit num_tokens − max(1, hash lookahead)
    # (without the EAGLE drop: num_tokens); before, (num_tokens − 1)
    mamba_checkpoint_proof_limit: bool = True
    # Scheduler._mamba_block_aligned_split: last cacheable position and prompt tail through
    # get_mamba_prefill_checkpoint_position, checkpoint unit hash block only with partial hits
    mamba_split_checkpoint_position: bool = True
    # MambaManager checkpoints land on cache_hit_alignment_tokens (else the hash block size)
    mamba_checkpoint_unit_alignment: bool = True
    # MambaManager 'align': a checkpoint step keeps the speculative blocks in place and may
    # allocate them again (0.31)
    mamba_checkpoint_keeps_spec_blocks: bool = False
    # models/transformers/base.py _create_attention_instances names layer i's Attention
    # f"{i}.attn" (0.31); from 0.32 after the module that dispatches it
    # (f"{attn_prefix}.attn", e.g. model.layers.0.self_attn.attn)
    transformers_backend_index_names: bool = False
    # models/config.py MODELS_CONFIG_MAP: the architectures whose hook copies the Nemotron-H text
    # config's mamba_ssm_cache_dtype (float32 by default) into the cache config; the Omni V3
    # wrappers got it in 0.34 (before, their SSM state followed --mamba-ssm-cache-dtype auto)
    nemotron_ssm_hook_archs: frozenset[str] = frozenset({
        "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM", "NemotronH_Nano_VL_V2",
        "NemotronH_Nano_Omni_Reasoning_V3", "NemotronH_Super_Omni_Reasoning_V3",
        "NemotronH_Omni_Reasoning_V3", "Nemotron3_5TranscribeForConditionalGeneration"})


_NEMOTRON_SSM_HOOK_BEFORE_034 = frozenset({"NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
                                           "NemotronH_Nano_VL_V2"})

PROFILES: dict[str, VllmProfile] = {
    p.version: p
    for p in (
        VllmProfile(version="0.31.0", default_block_size=16, sw_block_rule=SwBlockRule.PRIMARY_BLOCK,
                    pool_stride_rule=PoolStrideRule.SUM_THEN_ROUND, error_text=ErrorText.A,
                    mamba_cache_modes=("all", "align", "none"), v1_runner_async_pp_plus_one=False,
                    hybrid_align_backend_lcm=False, hybrid_align_checkpoint=False,
                    mamba2_checkpoint_block=False, default_gpu_memory_utilization=0.92,
                    extensible_kv_cache_default=False, has_is_draft=False,
                    planner_module="vllm.v1.core.kv_cache_utils",
                    multiple_of_stride_alignment=False,
                    spec_types=frozenset({*COMMON_SPEC_TYPES, "KpoolTailSpec"}),
                    mla_fields=frozenset({"storage_block_size"}), swa_mla_fields=frozenset(),
                    dcp_layout_skips_self_addressed=False, hisparse_hot_stride_lcm=False,
                    swa_mla_merge_checks_quant_alignment=False, pool_probe_needs_layer_views=False,
                    glm5_next_grouping=True, block_table_token_alignment=False,
                    glm5_next_sm100_fp8_kv=False, batch_defaults_small_tier_sms=frozenset(),
                    nemotron_ssm_hook_archs=_NEMOTRON_SSM_HOOK_BEFORE_034,
                    waiting_zero_tokens_skip=False, sync_spec_skips_unused_drafts=False,
                    dflash_adds_draft_slots=True, lookahead_block_hashes=False,
                    dflash_eagle_block_drop=True, mamba_checkpoint_proof_limit=False,
                    mamba_split_checkpoint_position=False,
                    mamba_checkpoint_unit_alignment=False,
                    mamba_checkpoint_keeps_spec_blocks=True,
                    transformers_backend_index_names=True),
        VllmProfile(version="0.32.0", default_block_size=16, sw_block_rule=SwBlockRule.PRIMARY_BLOCK,
                    pool_stride_rule=PoolStrideRule.PER_LAYER_ROUND, error_text=ErrorText.A,
                    mamba_cache_modes=("align", "none"), v1_runner_async_pp_plus_one=False,
                    hybrid_align_backend_lcm=True, hybrid_align_checkpoint=False,
                    mamba2_checkpoint_block=True, default_gpu_memory_utilization=0.92,
                    extensible_kv_cache_default=False, has_is_draft=False,
                    planner_module="vllm.v1.core.kv_cache_utils", mla_fields=frozenset(),
                    swa_mla_fields=frozenset(),
                    hisparse_hot_stride_lcm=False, swa_mla_merge_checks_quant_alignment=False,
                    pool_probe_needs_layer_views=False, block_table_token_alignment=False,
                    glm5_next_sm100_fp8_kv=False, batch_defaults_small_tier_sms=frozenset(),
                    nemotron_ssm_hook_archs=_NEMOTRON_SSM_HOOK_BEFORE_034,
                    waiting_zero_tokens_skip=False, sync_spec_skips_unused_drafts=False,
                    dflash_adds_draft_slots=True, lookahead_block_hashes=False,
                    dflash_eagle_block_drop=True),
        VllmProfile(version="0.33.0", default_block_size=16, sw_block_rule=SwBlockRule.PRIMARY_BLOCK,
                    pool_stride_rule=PoolStrideRule.PER_LAYER_ROUND, error_text=ErrorText.A,
                    mamba_cache_modes=("align", "none"), v1_runner_async_pp_plus_one=False,
                    hybrid_align_backend_lcm=True, hybrid_align_checkpoint=True,
                    mamba2_checkpoint_block=True, default_gpu_memory_utilization=0.92,
                    extensible_kv_cache_default=False, has_is_draft=True,
                    planner_module="vllm.v1.core.kv_cache_planning",
                    hisparse_hot_stride_lcm=False, swa_mla_merge_checks_quant_alignment=False,
                    block_table_token_alignment=False, swa_mla_fields=frozenset(),
                    nemotron_ssm_hook_archs=_NEMOTRON_SSM_HOOK_BEFORE_034),
        VllmProfile(version="0.34.0", default_block_size=64, sw_block_rule=SwBlockRule.PREFER_DIVISOR,
                    pool_stride_rule=PoolStrideRule.PER_LAYER_ROUND, error_text=ErrorText.B,
                    mamba_cache_modes=("align", "none"), v1_runner_async_pp_plus_one=True,
                    hybrid_align_backend_lcm=True, hybrid_align_checkpoint=True,
                    mamba2_checkpoint_block=True, default_gpu_memory_utilization=1.0,
                    extensible_kv_cache_default=True, has_is_draft=True,
                    planner_module="vllm.v1.core.kv_cache_planning"),
    )
}
DEFAULT_VERSION = "0.34.0"
SUPPORTED_VERSIONS = tuple(PROFILES)


def get_profile(version: str | None) -> VllmProfile:
    v = (version or DEFAULT_VERSION).strip().lstrip("v")
    if v.count(".") == 1:
        v += ".0"
    try:
        return PROFILES[v]
    except KeyError:
        raise InputError(f"unknown vLLM release {version!r}",
                         hint=f"supported: {', '.join(SUPPORTED_VERSIONS)}") from None
