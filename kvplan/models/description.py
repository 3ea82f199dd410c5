"""Engine-agnostic architecture facts, per layer, as a config states them.

A `ModelDescription` holds what the checkpoint says (kinds, total heads, head dims, windows,
MLA ranks, state-space dims, dtypes, quantization). It knows nothing of vLLM's rules: per-rank
division, block sizes and page sizes are applied later (`kvplan.engines.vllm.build`).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, NonNegativeInt, PositiveInt

from kvplan.frozen import FrozenStrict


class LayerKind(StrEnum):
    FULL_ATTENTION = "full_attention"
    SLIDING_WINDOW = "sliding_window"
    CHUNKED_LOCAL = "chunked_local"
    MLA = "mla"
    SLIDING_WINDOW_MLA = "sliding_window_mla"
    CROSS_ATTENTION = "cross_attention"
    ENCODER_ONLY = "encoder_only"
    SINK_FULL_ATTENTION = "sink_full_attention"
    MAMBA1 = "mamba1"
    MAMBA2 = "mamba2"
    GDN = "gdn"
    SHORT_CONV = "short_conv"
    LINEAR_ATTENTION = "linear_attention"
    NO_KV = "no_kv"  # e.g. a KV-sharing layer or an MLP-only block: no cache of its own
    # a sparse-attention indexer's own K cache (DeepSeek-V3.2 / GLM-5 lightning indexer): one
    # uint8 row of head_size bytes per token, whatever --kv-cache-dtype says
    MLA_INDEXER = "mla_indexer"
    # Kimi delta attention (Kimi-Linear / Kimi-K3): GDN-shaped state (gdn dims with k = v heads
    # and head dims), recurrent state in fp32 unless the layer reads mamba_ssm_cache_dtype
    KDA = "kda"
    # DeepSeek-V4 compressor state: an fp32 ring of the token group being compressed (a sliding
    # window of its own block size)
    COMPRESSOR_STATE = "compressor_state"
    # GLM-5.3-Flash kpool indexer tail: a one-block bf16 ring per request of the raw keys and gate
    # scores of the pool still being filled (2 head slots × index_head_dim)
    KPOOL_TAIL = "kpool_tail"
    # ZAYA1 compressed convolutional attention: the q/k conv history and the delayed half of v
    # (a Mamba-style state next to the layer's own KV cache)
    CCA = "cca"
    # extract_hidden_states: the target's aux hidden states cached per token (one row per aux
    # layer, hidden_size wide), the model dtype whatever --kv-cache-dtype says
    HIDDEN_STATE = "hidden_state"

    @property
    def is_state(self) -> bool:
        return self in (LayerKind.MAMBA1, LayerKind.MAMBA2, LayerKind.GDN,
                        LayerKind.SHORT_CONV, LayerKind.LINEAR_ATTENTION, LayerKind.KDA,
                        LayerKind.CCA)

    @property
    def is_attention(self) -> bool:
        return not self.is_state and self is not LayerKind.NO_KV


class Mamba1Dims(FrozenStrict):
    """transformers MambaConfig/JambaConfig fields: conv (K-1, I), ssm (I, N)."""
    intermediate_size: PositiveInt
    state_size: PositiveInt
    conv_kernel: PositiveInt


class Mamba2Dims(FrozenStrict):
    """Mamba2Config / NemotronH / FalconH1 / GraniteMoeHybrid fields."""
    intermediate_size: int  # = num_heads * head_dim
    state_size: PositiveInt
    conv_kernel: PositiveInt
    n_groups: PositiveInt
    num_heads: PositiveInt
    head_dim: PositiveInt


class GdnDims(FrozenStrict):
    """Qwen3-Next / Qwen3.5 gated delta net: linear_* fields."""
    num_k_heads: PositiveInt
    num_v_heads: PositiveInt
    head_k_dim: PositiveInt
    head_v_dim: PositiveInt
    conv_kernel: PositiveInt


class ShortConvDims(FrozenStrict):
    """LFM2 short conv: conv (L_cache - 1, hidden_size)."""
    conv_dim: PositiveInt
    l_cache: PositiveInt


class CcaDims(FrozenStrict):
    """ZAYA1 CCA: q/k conv history ((q + kv heads) * head_dim, cca_time0 + cca_time1 - 2) and the
    delayed value (kv heads * head_dim // 2)."""
    num_heads: PositiveInt
    num_kv_heads: PositiveInt
    head_dim: PositiveInt
    history: NonNegativeInt


class LinearAttentionDims(FrozenStrict):
    """Lightning / linear attention (Bailing V2.5): state (heads, head_dim, head_dim)."""
    num_heads: PositiveInt
    head_dim: PositiveInt


class LayerDescription(FrozenStrict):
    """One layer that may own KV cache (or state), with totals before any parallelism."""
    index: int
    name: str  # the attention/mixer module name vLLM registers, e.g. model.layers.3.self_attn.attn
    kind: LayerKind
    num_kv_heads: PositiveInt | None = None  # total, before TP
    head_size: PositiveInt | None = None
    head_size_v: NonNegativeInt | None = None  # None → head_size
    sliding_window: PositiveInt | None = None
    attention_chunk_size: PositiveInt | None = None
    sink_len: NonNegativeInt | None = None
    kv_lora_rank: PositiveInt | None = None
    qk_rope_head_dim: NonNegativeInt | None = None
    index_head_dim: int | None = None  # DeepSeek V3.2 sparse indexer: its own K cache per layer
    # a block size the layer fixes itself (vLLM hard-codes it; --block-size does not apply)
    block_size: PositiveInt | None = None
    tokens_per_state: PositiveInt | None = None  # compressed KV: one state per N tokens
    model_version: str | None = None  # vLLM MLAAttentionSpec.model_version (e.g. deepseek_v4)
    # a storage dtype the layer fixes itself (indexer caches), whatever --kv-cache-dtype says
    fixed_dtype: str | None = None
    backend: str | None = None  # an attention backend the model code picks itself (vLLM's name)
    mamba1: Mamba1Dims | None = None
    mamba2: Mamba2Dims | None = None
    gdn: GdnDims | None = None
    short_conv: ShortConvDims | None = None
    linear_attention: LinearAttentionDims | None = None
    cca: CcaDims | None = None
    # projections replicated on every TP rank (ReplicatedLinear): heads / state are not split
    tp_replicated: bool = False
    # learned per-head attention sinks (no KV of their own); they pick the FlashAttention version
    # a layer with K and V of different sizes runs on (vLLM: fa_utils.get_flash_attn_version)
    has_sinks: bool = False


class QuantizationInfo(FrozenStrict):
    """What the checkpoint declares about quantization (config.json / hf_quant_config.json)."""
    method: str | None = None  # fp8, modelopt, modelopt_fp4, compressed-tensors, awq, gptq, mxfp4...
    weight_format: str | None = None  # e.g. FP8, NVFP4, MXFP4, int4
    kv_cache_dtype: str | None = None  # KV dtype the checkpoint declares (e.g. fp8, nvfp4)
    source: str | None = None  # which file/field said so
    # the KV quantization the checkpoint declares, as written (ModelOpt kv_cache_quant_algo,
    # "FP8" for an 8-bit float kv_cache_scheme), upper case, whether or not vLLM honours it
    # (SGLang's quant configs read it whatever the file's producer: kvplan.engines.sglang)
    kv_cache_quant_algo: str | None = None


class RopeScaling(FrozenStrict):
    """One RoPE parameter set of the text config (`rope_parameters`, or legacy `rope_scaling`;
    one per layer type when nested). Only what vLLM's max-length rule reads."""
    rope_type: str = "default"  # legacy `type` read as rope_type; su → longrope, mrope → default
    factor: int | float | None = None  # as written (int stays int: it changes vLLM's message)
    # the set's own original_max_position_embeddings (SGLang's get_context_length ignores the
    # factor when the rope scaling carries one)
    original_max_position_embeddings: int | None = None


class VisionTowerDims(FrozenStrict):
    """The config's `vision_config`, as SGLang's VLM memory heuristic reads it
    (memory_hook.adjust_mem_fraction_for_vlm); None: the key is absent."""
    num_hidden_layers: int | None = None
    hidden_size: int | None = None


class AttentionConstraint(FrozenStrict):
    """What a model's attention code asserts at start-up (e.g. Flint: FlashInfer, bfloat16 only);
    `name` is the model as vLLM's assertion names it."""
    name: str
    backend: str  # the only attention backend it runs on (vLLM's name)
    model_dtypes: tuple[str, ...]  # the model dtypes it accepts
    kv_cache_dtypes: tuple[str, ...]  # the --kv-cache-dtype values it accepts


class SentenceTransformersPooling(FrozenStrict):
    """The model folder's sentence-transformers files, as vLLM reads them (transformers_utils/
    config.py get_pooling_config): a modules.json naming a Pooling module, and the pooling types
    that module's config.json sets (None: it sets none, the class default applies)."""
    seq_pooling_type: str | None = None  # CLS / LAST / MEAN
    tok_pooling_type: str | None = None  # ALL / STEP


FP8_DS_MLA = "fp8_ds_mla"  # ModelDescription.mla_kv_layout: DeepSeek-V4's packed MLA records

# vLLM's words when a model's code refuses pipeline parallelism (ModelConfig.
# verify_with_parallel_config: the architecture does not implement SupportsPP)
NO_PIPELINE_PARALLEL = ("Pipeline parallelism is not supported for this model. Supported models "
                        "implement the `SupportsPP` interface.")


class ModelDescription(FrozenStrict):
    """Architecture facts for one model (the target, or a draft head)."""
    source: str  # hub id / path as given
    model_type: str
    architectures: tuple[str, ...] = ()
    family: str  # the adapter that read it (llama, qwen3_next, deepseek_v3, ...)
    dtype: str = "bfloat16"  # model dtype (torch name)
    max_position_embeddings: int | None = None
    layers: tuple[LayerDescription, ...]
    quantization: QuantizationInfo = Field(default_factory=QuantizationInfo)
    mamba_ssm_dtype: str | None = None  # the HF field vLLM copies into mamba_ssm_cache_dtype
    num_nextn_predict_layers: int = 0  # MTP modules the checkpoint carries
    # The KV-owning layers of the checkpoint's MTP module(s) as vLLM's MTP drafter builds them
    # (num_nextn_predict_layers modules, vLLM's names), filled by the config adapter; empty when
    # the checkpoint has none or vLLM has no MTP drafter for the architecture. Read by
    # `kvplan.models.mtp_draft`.
    mtp_layers: tuple[LayerDescription, ...] = ()
    # vLLM's CacheConfig.sliding_window for this model: the config's sliding_window when its
    # layer_types is absent or all sliding (engine/arg_utils.py), else None. Every Attention
    # layer without a per-layer window falls back to it, draft layers included.
    model_sliding_window: int | None = None
    # vLLM's max-model-len inputs (config/model.py _get_and_verify_max_len): the length keys the
    # text config sets (max_position_embeddings, n_positions, ..., original_max_position_embeddings)
    # and its RoPE parameter sets (empty: no RoPE)
    max_length_fields: tuple[tuple[str, int], ...] = ()
    rope_scaling: tuple[RopeScaling, ...] = ()
    use_mla: bool = False
    # vLLM: use_sparse — DeepSeek sparse attention (DSA): MLA layers take the sparse MLA backends
    sparse_mla: bool = False
    is_encoder_decoder: bool = False
    # vLLM registers the architecture as a pooling model: its classes' default (seq, tok)
    # pooling types (kvplan.models.pooling); None: a generation architecture
    pooling_defaults: tuple[str | None, str] | None = None
    # The model folder's sentence-transformers pooling module (vLLM's `--runner auto` picks the
    # pooling runner when there is one); None: none, or kvplan did not see the folder
    st_pooling: SentenceTransformersPooling | None = None
    # whether kvplan saw the files next to config.json (a local model folder, or modules.json
    # known present / absent in the hub cache); False: config.json alone
    model_folder_read: bool = False
    # the config has a `vision_config` (None: it has none)
    vision_tower: VisionTowerDims | None = None
    # the text config's `num_nextn_predict_layers` key as written (None: absent); SGLang's
    # ModelConfig reads only this key, where num_nextn_predict_layers above also counts
    # mtp_num_hidden_layers and class defaults
    nextn_predict_layers_key: int | None = None
    # a block draft head's block size as its config states it (DFlash: dflash_config.block_size
    # or the top-level block_size): the verify window SGLang's DFLASH worker drafts
    draft_block_size: int | None = None
    warnings: tuple[str, ...] = ()  # assumptions made while reading the config
    # Family rules: what the architecture's model code decides, set by its adapter (the engines
    # read these, never the family name). An MTP draft inherits them from its target.
    # vLLM's model class implements SupportsPP (False: PP > 1 is refused)
    supports_pipeline_parallel: bool = True
    # why the model's code refuses a speculative config (None: it takes one), in vLLM's words
    speculative_decoding_refusal: str | None = None
    # why the model's code refuses a tensor-parallel size above 1 (None: it shards), in vLLM's
    # words
    tensor_parallel_refusal: str | None = None
    # why vLLM's model constructor refuses this config whatever the deployment (None: it builds
    # it), in vLLM's words; raised after the config checks (the max-length rule first)
    model_init_refusal: str | None = None
    # vLLM builds the model with its Transformers modeling backend (a Transformers* class:
    # named so, or an architecture its registry lacks whose transformers class the backend takes)
    transformers_backend: bool = False
    # what the model class's constructor raises on this config.json (Hugging Face format), in
    # vLLM's words: (exception type, message); None: it builds. vLLM reads a Mistral-format
    # folder (params.json + consolidated*.safetensors) instead, on which it builds: the pipeline
    # clears it for such a folder (kvplan.pipeline.request.with_model_folder)
    hf_format_constructor_error: tuple[str, str] | None = None
    # Qwen-style GDN layers export FlashInfer prefill checkpoints in align mode (False: the
    # layers keep MambaBase's spec, e.g. OLMo-Hybrid's OlmoHybridGatedDeltaNetAttention)
    gdn_prefill_checkpoints: bool = True
    # K and V of different head sizes run on the *_DIFFKV attention backends (MiMo-V2)
    diff_kv_attention: bool = False
    # the MLA cache layout the model's attention fixes: "fp8_ds_mla" (DeepSeek-V4: auto / fp8 KV
    # become its packed 584-byte records); None: the layout follows --kv-cache-dtype
    mla_kv_layout: str | None = None
    attention_constraint: AttentionConstraint | None = None  # e.g. Flint's FlashInfer / bf16
    # vLLM's model class implements IsAttentionFree (mamba.py, mamba2.py): ModelConfig.attn_type
    # is "attention_free", so the generate runner turns prefix caching off by default
    # (is_prefix_caching_supported). A class marker, not the layer kinds: a hybrid class whose
    # config has no attention layer is still "hybrid". Not copied to an MTP draft.
    attention_free: bool = False
    # Draft heads only:
    draft_method: str | None = None  # dflash, eagle, eagle3, mtp
    num_target_layers: int | None = None

    @property
    def supports_speculative_decoding(self) -> bool:
        return self.speculative_decoding_refusal is None

    @property
    def is_hybrid(self) -> bool:
        """vLLM: ModelConfig.is_hybrid — attention and state layers in one model."""
        kinds = {layer.kind for layer in self.layers}
        return any(k.is_state for k in kinds) and any(k.is_attention for k in kinds)

    def kind_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for layer in self.layers:
            counts[layer.kind.value] = counts.get(layer.kind.value, 0) + 1
        return counts


# the family-rule fields of ModelDescription (copied from a target to its MTP draft)
FAMILY_RULES = ("supports_pipeline_parallel", "speculative_decoding_refusal",
                "gdn_prefill_checkpoints", "diff_kv_attention", "mla_kv_layout",
                "attention_constraint")
