"""The build: ModelDescription(s) + deployment → the per-rank layer specs vLLM's workers report.

This is vLLM's start-up up to the planner: config hooks (Mamba dtypes, prefix-caching mode),
backend choice, `update_block_size_for_backend` (Phase 1 preference, Phase 2 hybrid alignment),
each layer's `get_kv_cache_spec` (per TP rank, PP stage), draft and MTP layers. Pure.
"""

from __future__ import annotations

from kvplan.engines.vllm.backends import Backend, kernel_block_sizes
from kvplan.engines.vllm.blocksize import (
    align_hybrid_block_size,
    check_aligned_block_size,
    preferred_block_size,
    select_sparse_mla_backend,
    sliding_window_block_size,
    supports_block_size,
)
from kvplan.engines.vllm.build.backend_choice import (
    attention_backend,
    check_attention_constraint,
    flashinfer_sm90_note,
    sparse_latent,
    supported_layouts,
)
from kvplan.engines.vllm.build.batch import (
    scheduler_batch_limits,
)
from kvplan.engines.vllm.build.deployment import BuildResult, Deployment, LayerPlan
from kvplan.engines.vllm.build.dtypes import (
    dsv4_kv_cache_dtype,
    resolve_kv_cache_dtype,
    resolve_mamba_ssm_cache_dtype,
    resolve_model_dtype,
    sparse_mla_kv_cache_dtype,
)
from kvplan.engines.vllm.build.layer_specs import (
    attention_spec,
    kpool_tail_ring,
    sw_per_token,
)
from kvplan.engines.vllm.build.prefix_caching import resolve_prefix_caching
from kvplan.engines.vllm.build.releases import check_release_serves, deprecated_quantization
from kvplan.engines.vllm.build.state import (
    FLASHINFER_GDN_CHECKPOINT_ALIGNMENT,
    FLASHKDA_CHECKPOINT_ALIGNMENT,
    BuildContext,
    flashkda_checkpoints,
    gdn_exports_checkpoints,
    layer_state,
    state_page_bytes,
)
from kvplan.engines.vllm.parallel import check_decode_context_parallel, get_pp_indices
from kvplan.engines.vllm.planner import PlannerInput
from kvplan.engines.vllm.profiles import get_profile
from kvplan.engines.vllm.specs import (
    HiddenStateCacheSpec,
    KVCacheSpec,
    MambaSpec,
    MambaType,
)
from kvplan.errors import InputError, StartupError, UnsupportedError
from kvplan.models.description import (
    FP8_DS_MLA,
    NO_PIPELINE_PARALLEL,
    LayerDescription,
    LayerKind,
    ModelDescription,
)
from kvplan.models.pooling import resolve_runner, runner_note
from kvplan.models.resolution.max_len import verify_max_model_len
from kvplan.units import (
    KVQuantMode,
    dtype_size_bytes,
    kv_cache_storage_dtype,
    kv_quant_mode,
)

# drafters that read the target's hidden states (vLLM: SpeculativeConfig.use_eagle /
# uses_target_hidden_states)
HIDDEN_STATE_DRAFTS = frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})


def pp_partition(num_layers: int, pp: int, partition: str | None) -> list[tuple[int, int]]:
    """[start, end) decoder layers of every stage (vLLM: distributed.utils.get_pp_indices)."""
    return [get_pp_indices(num_layers, rank, pp, partition or None) for rank in range(pp)]


# ---- the build ------------------------------------------------------------------------------

def build(target: ModelDescription, dep: Deployment, draft: ModelDescription | None = None
          ) -> BuildResult:
    """Target (+ draft) → PlannerInput, mirroring vLLM's worker start-up."""
    profile = get_profile(dep.vllm_version)
    check_release_serves(target, profile)
    if draft is not None:
        check_release_serves(draft, profile)
    warnings: list[str] = list(target.warnings)
    model_dtype = resolve_model_dtype(dep.dtype, target.dtype, warnings)
    kv_dtype = resolve_kv_cache_dtype(dep.kv_cache_dtype, target, dep.sm, profile)
    if target.sparse_mla:
        kv_dtype = sparse_mla_kv_cache_dtype(kv_dtype, select_sparse_mla_backend(
            kv_cache_dtype=kv_dtype, sm=dep.sm, override=dep.attention_backend,
            **sparse_latent(target)))
    if target.mla_kv_layout == FP8_DS_MLA:
        kv_dtype = dsv4_kv_cache_dtype(kv_dtype, dep)
    tp, pp = dep.tensor_parallel_size, dep.pipeline_parallel_size
    if tp < 1 or pp < 1 or dep.decode_context_parallel_size < 1:
        raise InputError("parallel sizes must be ≥ 1")
    check_decode_context_parallel(tp, dep.decode_context_parallel_size)
    method = dep.speculative_method
    if draft is not None and method is None:
        method = draft.draft_method or "eagle"
    if dep.num_speculative_tokens and method is None:
        raise InputError(f"--num-speculative-tokens {dep.num_speculative_tokens} without a "
                         "speculative method or a draft: nothing would use them",
                         hint="add --speculative-method (eagle, eagle3, dflash, mtp, ngram), "
                              "--draft MODEL or --speculative-config '{\"method\": ...}'")
    k = dep.num_speculative_tokens if method else 0
    if method and k < 1:
        raise InputError(f"speculative method {method} needs --num-speculative-tokens ≥ 1")
    if method and target.speculative_decoding_refusal is not None:
        raise UnsupportedError(target.speculative_decoding_refusal,
                               hint="plan it without a speculative method")
    max_model_len, long_warning = verify_max_model_len(
        target, dep.max_model_len, allow_long=dep.allow_long_max_model_len)
    warnings += [long_warning] if long_warning else []
    warnings += deprecated_quantization(target, dep, profile)
    if not max_model_len:
        raise InputError("the config gives no max_position_embeddings",
                         hint="pass --max-model-len")
    pooling = resolve_runner(target, dep.runner, dep.convert)
    runner_said = runner_note(target, dep.runner, dep.convert)
    warnings += [runner_said] if runner_said else []
    # vLLM: EngineArgs._set_default_chunked_prefill_and_prefix_caching_args
    chunked = dep.enable_chunked_prefill
    if chunked is None:
        chunked = pooling.supports_chunked_prefill if pooling is not None else True
    # vLLM: _set_default_max_num_seqs_and_batched_tokens_args, SchedulerConfig.verify_max_model_len
    mnbt, max_num_seqs = scheduler_batch_limits(
        dep, max_model_len, whole_prompts=target.is_encoder_decoder or not chunked)
    if dep.performance_mode == "interactivity":
        # vLLM: VllmConfig._set_cudagraph_sizes — one graph per batch size 1–32
        warnings.append("--performance-mode interactivity: vLLM captures a CUDA graph for every "
                        "batch size from 1 to 32; kvplan's CUDA-graph memory term does not model "
                        "those extra graphs (the KV budget may be a little lower)")
    if pp > 1 and not target.supports_pipeline_parallel:
        # vLLM: ModelConfig.verify_with_parallel_config — the model class is not SupportsPP
        # (VllmConfig, after SchedulerConfig's checks above)
        raise StartupError.vllm("NotImplementedError", NO_PIPELINE_PARALLEL,
                                hint="drop --pipeline-parallel-size")
    if tp > 1 and target.tensor_parallel_refusal is not None:
        # vLLM: the model class's constructor (e.g. dory.py DoryForCausalLM)
        raise StartupError.vllm("ValueError", target.tensor_parallel_refusal,
                                hint="use --tensor-parallel-size 1")
    if target.model_init_refusal is not None:
        # vLLM: the model class's constructor (e.g. the Transformers backend's
        # Base._create_attention_instances), after every config check above
        raise StartupError.vllm("ValueError", target.model_init_refusal,
                                hint="vLLM cannot build this model; kvplan has nothing to plan")
    if target.hf_format_constructor_error is not None:
        # vLLM: the model class's constructor on an HF-format config (e.g. voxtral.py
        # VoxtralForConditionalGeneration reads audio_config.downsample_factor), after the
        # config checks above (kvplan.models.resolution.constructor)
        error_type, message = target.hf_format_constructor_error
        raise StartupError.vllm(
            error_type, message,
            hint="vLLM builds this model from its Mistral-format checkpoint (params.json + "
                 "consolidated*.safetensors beside config.json, or --config-format mistral "
                 "--load-format mistral --tokenizer-mode mistral), not from config.json alone")
    # vLLM: VllmConfig._set_async_scheduling — off by default for pooling models
    async_scheduling = (dep.async_scheduling if dep.async_scheduling is not None
                        else pooling is None)
    if pooling is not None:
        warnings.append(
            f"pooling runner (--convert {pooling.convert}, {pooling.seq_pooling_type or '-'}/"
            f"{pooling.tok_pooling_type} pooling): async scheduling "
            f"{'on' if async_scheduling else 'off'}, chunked prefill {'on' if chunked else 'off'}"
            f", max_num_batched_tokens {mnbt}")
    prefix_caching = resolve_prefix_caching(target, pooling, dep.enable_prefix_caching)
    warnings += [prefix_caching.note] if prefix_caching.note else []
    mamba_mode = "align" if prefix_caching.enabled else "none"  # MambaModelConfig
    ctx = BuildContext(profile, dep, model_dtype, mamba_mode, k, max_model_len,
               resolve_mamba_ssm_cache_dtype(dep.mamba_ssm_cache_dtype, target, profile), warnings)

    # draft layers: a separate head, or the target's own MTP modules
    draft_layers: tuple[LayerDescription, ...] = ()
    draft_name = None
    if method == "mtp" and draft is not None:
        draft_layers = draft.layers
        draft_name = draft.source
    elif method == "mtp":
        draft_layers = target.mtp_layers
        if not draft_layers:
            raise UnsupportedError(f"{target.source} has no MTP module kvplan can see",
                                   hint="check num_nextn_predict_layers / mtp_num_hidden_layers")
        draft_name = f"{target.source} (MTP)"
    elif draft is not None:
        draft_layers = draft.layers
        draft_name = draft.source
    draft_kv = resolve_kv_cache_dtype(dep.draft_kv_cache_dtype or dep.kv_cache_dtype,
                                      draft or target, dep.sm, profile) if draft_layers else None
    draft_sparse = (draft or target).sparse_mla
    if draft_kv is not None and (draft or target).mla_kv_layout == FP8_DS_MLA:
        draft_kv = dsv4_kv_cache_dtype(draft_kv, dep)
    if draft_kv is not None and draft_sparse:
        draft_kv = sparse_mla_kv_cache_dtype(draft_kv, select_sparse_mla_backend(
            kv_cache_dtype=draft_kv, sm=dep.sm,
            override=dep.draft_attention_backend or dep.attention_backend,
            **sparse_latent(draft or target)))
    draft_tp = dep.draft_tensor_parallel_size or tp
    draft_causal = method not in ("dflash", "dspark")  # vLLM: use_non_causal for both drafters
    diff_kv = target.diff_kv_attention  # the MTP layers too (mimo_v2_mtp.py: MiMoV2Attention)

    # backends per layer (vLLM: the attention layer picks at construction)
    def backend_for(layer: LayerDescription, is_draft: bool) -> Backend | None:
        if layer.kind.is_state or layer.kind in (LayerKind.NO_KV, LayerKind.ENCODER_ONLY,
                                                 LayerKind.HIDDEN_STATE):
            return None  # HIDDEN_STATE: CacheOnlyAttentionBackend, outside the block-size vote
        if is_draft:
            return attention_backend(layer, draft_kv or kv_dtype, dep, causal=draft_causal,
                                      override=dep.draft_attention_backend or dep.attention_backend,
                                      sparse=draft_sparse, diff_kv=diff_kv)
        return attention_backend(layer, kv_dtype, dep, causal=True, override=dep.attention_backend,
                                  sparse=target.sparse_mla, diff_kv=diff_kv)

    target_backends = [backend_for(layer, False) for layer in target.layers]
    warnings += flashinfer_sm90_note(target_backends, kv_dtype)
    if target.attention_constraint is not None:
        check_attention_constraint(target.attention_constraint, target_backends, model_dtype,
                                   kv_dtype)
    draft_backends = [backend_for(layer, True) for layer in draft_layers]
    distinct: list[Backend] = []
    for b in [*target_backends, *draft_backends]:
        if b is not None and b not in distinct:
            distinct.append(b)
    # vLLM: Glm5NextIndexerBackend reads index_kpool (the indexer's tokens_per_state)
    kpool = max((layer.tokens_per_state or 1 for layer in [*target.layers, *draft_layers]
                 if layer.backend == Backend.GLM5_NEXT_INDEXER.value), default=1)
    sizes = [kernel_block_sizes(b, sm=dep.sm, index_kpool=kpool) for b in distinct]

    # Phase 1: the preferred block when --block-size is not given
    block = dep.block_size or preferred_block_size(sizes, profile.default_block_size)
    if dep.block_size:
        rejecting = [b.value for b, sz in zip(distinct, sizes, strict=True)
                     if not supports_block_size(sz, dep.block_size)]
        if rejecting:  # vLLM: no backend would accept the layer (validate_configuration)
            raise UnsupportedError(
                f"--block-size {dep.block_size} is not supported by {', '.join(rejecting)}",
                hint="FlashAttention/Triton take multiples of 16; FlashInfer 16, 32 or 64")
    mamba_padded: int | None = None
    # Phase 2: hybrid attention/Mamba alignment on per-rank pages
    state_layers = [layer for layer in target.layers if layer.kind.is_state]
    attn_layers = [(layer, b) for layer, b in zip(target.layers, target_backends, strict=True)
                   if b is not None and layer.kind is not LayerKind.ENCODER_ONLY]
    if state_layers and attn_layers:
        # vLLM: _align_hybrid_block_size — one token of the model's attention (its KV heads and
        # head size), packed by the first backend; MLA: the plain latent row (no blob, no packing)
        primary = next((la for la, _ in attn_layers
                        if la.kind in (LayerKind.FULL_ATTENTION, LayerKind.MLA)), attn_layers[0][0])
        if primary.kind in (LayerKind.MLA, LayerKind.SLIDING_WINDOW_MLA):
            head = (primary.kv_lora_rank or 0) + (primary.qk_rope_head_dim or 0)
            attn_1tok = head * dtype_size_bytes(kv_cache_storage_dtype(kv_dtype, model_dtype))
        else:
            # the model's KV heads per rank (ModelConfig.get_num_kv_heads), even for a layer
            # that keeps every head (zaya.py)
            probe = primary.model_copy(update={"kind": LayerKind.FULL_ATTENTION,
                                               "tp_replicated": False})
            attn_1tok = attention_spec(probe, block_size=1, kv_dtype=kv_dtype, tp=tp,
                                        model_dtype=model_dtype, backend=distinct[0],
                                        profile=profile).page_size_bytes
        mamba_page = max(state_page_bytes(*layer_state(layer, ctx, tp)[:2]) for layer in state_layers)
        ckpt = (FLASHINFER_GDN_CHECKPOINT_ALIGNMENT if gdn_exports_checkpoints(target, ctx)
                else None)
        aligned = align_hybrid_block_size(
            profile, block_size=block, primary_sizes=sizes[0],
            all_sizes=sizes, attn_page_per_token=attn_1tok, mamba_page=mamba_page,
            use_mla=target.use_mla, align_mode=mamba_mode == "align", checkpoint_alignment=ckpt)
        if profile.hybrid_align_backend_lcm:  # 0.32+ checks the aligned size
            check_aligned_block_size(aligned.block_size, block,
                                     [(b.value, s) for b, s in zip(distinct, sizes, strict=True)])
        block, mamba_padded = aligned.block_size, aligned.mamba_page_size_padded
    mamba_block = block if mamba_mode == "align" else max_model_len
    gdn_ckpt_blocks = 1 if gdn_exports_checkpoints(target, ctx) else 0

    def spec_for(layer: LayerDescription, backend: Backend | None, *, is_draft: bool,
                 layer_tp: int, layer_kv: str) -> KVCacheSpec | None:
        if layer.kind in (LayerKind.NO_KV, LayerKind.ENCODER_ONLY):
            return None  # vLLM: EncoderOnlyAttention.get_kv_cache_spec returns None
        if layer.kind.is_state:
            shapes, dtypes, mtype = layer_state(layer, ctx, layer_tp)
            ckpt_blocks = 0
            if mtype is MambaType.MAMBA2 and profile.mamba2_checkpoint_block:
                ckpt_blocks = 1  # MambaMixer2.get_kv_cache_spec (0.32+)
            elif layer.kind is LayerKind.KDA:
                ckpt_blocks = int(flashkda_checkpoints(layer, ctx))
            elif mtype is MambaType.GDN_ATTN:
                ckpt_blocks = gdn_ckpt_blocks
            return MambaSpec(block_size=mamba_block, shapes=shapes, dtypes=dtypes,
                             page_size_padded=mamba_padded, mamba_type=mtype,
                             mamba_cache_mode=mamba_mode, num_speculative_blocks=k,
                             num_prefill_checkpoint_blocks=ckpt_blocks,
                             prefill_checkpoint_alignment=(
                                 FLASHKDA_CHECKPOINT_ALIGNMENT if ckpt_blocks
                                 and layer.kind is LayerKind.KDA
                                 else FLASHINFER_GDN_CHECKPOINT_ALIGNMENT if ckpt_blocks
                                 and mtype is MambaType.GDN_ATTN else None),
                             tp_replicated=layer.tp_replicated, is_draft=is_draft)
        if layer.kind is LayerKind.HIDDEN_STATE:
            # vLLM: CacheOnlyAttentionLayer.get_kv_cache_spec — cache_config.block_size, heads
            # not split by TP; a quantized --kv-cache-dtype falls back to auto (model dtype)
            assert layer.num_kv_heads is not None and layer.head_size is not None
            quantized = kv_quant_mode(layer_kv) is not KVQuantMode.NONE
            return HiddenStateCacheSpec(
                block_size=block, num_kv_heads=layer.num_kv_heads, head_size=layer.head_size,
                dtype=model_dtype if quantized else kv_cache_storage_dtype(layer_kv, model_dtype),
                is_draft=is_draft)
        assert backend is not None
        layer_block = dep.draft_block_size if (is_draft and dep.draft_block_size) else block
        layer_block = layer.block_size or layer_block  # a block the layer fixes itself
        if layer.kind is LayerKind.KPOOL_TAIL:
            layer_block = kpool_tail_ring(layer.tokens_per_state or 1, k, block)
        sw_block = None
        if layer.kind is LayerKind.SLIDING_WINDOW and not layer.block_size:
            if is_draft and dep.draft_block_size:
                sw_block = dep.draft_block_size
            else:
                per_tok = sw_per_token(layer, layer_kv, layer_tp, model_dtype, backend, profile)
                sw_block = sliding_window_block_size(
                    profile, sizes=kernel_block_sizes(backend, sm=dep.sm), sw_per_token=per_tok,
                    block_size=block)
        return attention_spec(layer, block_size=layer_block, kv_dtype=layer_kv, tp=layer_tp,
                               model_dtype=model_dtype, backend=backend, profile=profile,
                               sw_block=sw_block, is_draft=is_draft)

    # PP stages over the decoder layers; drafters run on the last stage
    num_decoder = max((layer.index for layer in target.layers), default=-1) + 1
    stages = pp_partition(num_decoder, pp, dep.pp_layer_partition)
    plans: list[LayerPlan] = []
    for layer, backend in zip(target.layers, target_backends, strict=True):
        spec = spec_for(layer, backend, is_draft=False, layer_tp=tp, layer_kv=kv_dtype)
        if spec is None:
            continue
        stage = next(i for i, (a, b) in enumerate(stages) if a <= layer.index < b)
        name = (f"{layer.index}.attn"
                if target.transformers_backend and profile.transformers_backend_index_names
                else layer.name)
        plans.append(LayerPlan(name, layer.kind.value, backend.value if backend else None,
                               spec, False, stage))
    for layer, backend in zip(draft_layers, draft_backends, strict=True):
        spec = spec_for(layer, backend, is_draft=True, layer_tp=draft_tp,
                        layer_kv=draft_kv or kv_dtype)
        if spec is not None:
            plans.append(LayerPlan(layer.name, layer.kind.value,
                                   backend.value if backend else None, spec, True, pp - 1))
    names = [p.name for p in plans]
    if len(set(names)) != len(names):
        raise InputError("two layers share a name (target and draft?)")
    if not plans and any(layer.kind is LayerKind.ENCODER_ONLY for layer in target.layers):
        warnings.append("no KV cache: encoder-only attention (vLLM allocates none and skips the "
                        "memory check)")
    elif not plans:
        warnings.append("the model has no KV cache at all (attention-free)")
    workers = tuple({p.name: p.spec for p in plans if p.pp_stage == s} for s in range(pp))
    disable_hybrid = dep.disable_hybrid_kv_cache_manager
    if (any(layer.kind is LayerKind.CHUNKED_LOCAL for layer in target.layers)
            and not disable_hybrid and method in HIDDEN_STATE_DRAFTS):
        # vLLM: VllmConfig.__post_init__ — chunked local attention keeps the hybrid manager
        # (VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 in 0.31-0.34) except
        # with a drafter that reads the target's hidden states (use_eagle /
        # uses_target_hidden_states: EAGLE, EAGLE3, MTP, DFlash, DSpark)
        disable_hybrid = True
        warnings.append(f"chunked local attention with a {method} drafter: vLLM disables the "
                        "hybrid KV cache manager (one group; chunked layers sized as full "
                        "attention)")
    n_mtp = target.num_nextn_predict_layers if method == "mtp" else 1
    inp = PlannerInput(
        worker_specs=workers, available_kv_bytes=(dep.available_kv_bytes,) * pp,
        max_model_len=max_model_len, max_num_batched_tokens=mnbt,
        auto_fit_max_model_len=dep.auto_fit_max_model_len,
        async_scheduling=async_scheduling, pipeline_parallel_size=pp,
        decode_context_parallel_size=dep.decode_context_parallel_size,
        mamba_cache_mode=mamba_mode if state_layers else "none",
        num_speculative_tokens=k, speculative_method=method,
        num_nextn_predict_layers=max(1, n_mtp),
        disable_hybrid_kv_cache_manager=disable_hybrid,
        num_gpu_blocks_override=dep.num_gpu_blocks_override,
        enable_extensible_kv_cache=False, vllm_version=profile.version, with_fix=dep.with_fix,
        supported_kv_cache_layouts=supported_layouts({p.backend for p in plans}))
    del draft_name
    return BuildResult(planner_input=inp, layers=tuple(plans), block_size=block,
                       kv_cache_dtype=kv_dtype, draft_kv_cache_dtype=draft_kv,
                       model_dtype=model_dtype, mamba_cache_mode=inp.mamba_cache_mode,
                       max_model_len=max_model_len, max_num_batched_tokens=mnbt,
                       warnings=tuple(warnings),
                       runner="generate" if pooling is None else "pooling",
                       max_num_seqs=max_num_seqs,
                       enable_prefix_caching=prefix_caching.enabled)

