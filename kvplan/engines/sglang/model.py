"""kvplan's `ModelDescription` → the facts SGLang's ModelConfig exposes to its pool sizing.

SGLang reads a config its own way (configs/model_config.py): every hidden layer of a plain model
holds KV whether or not it attends; hybrid sliding-window models are an allowlist of
architectures with their own SWA head geometry; MLA models size a latent row; Mamba /
linear-attention hybrids keep a state pool beside the full-attention layers. This module turns
the engine-agnostic description into those facts, and refuses what kvplan does not model yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kvplan.engines.sglang.profiles import SglangProfile
from kvplan.errors import UnsupportedError
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription


class AttentionArch(StrEnum):
    """model_config.AttentionArch, as the pool sizing distinguishes it."""

    MHA = "MHA"
    MLA = "MLA"
    DSV4 = "DSV4"  # DeepSeek-V4: MHA-shaped config, its own compressed pools


class LinearKind(StrEnum):
    GDN = "gdn"  # Qwen3-Next / Qwen3.5: configs/qwen3_next.py mamba2_cache_params
    MAMBA2 = "mamba2"  # Nemotron-H: configs/nemotron_h.py mamba2_cache_params
    KDA = "kda"  # Kimi-Linear: configs/kimi_linear.py (KimiLinearStateShape)


@dataclass(frozen=True)
class LinearState:
    """A Mamba / linear-attention state layer group (configs/mamba_utils.py shapes)."""

    kind: LinearKind
    layer_ids: tuple[int, ...]
    full_attention_layer_ids: tuple[int, ...]
    # GDN / KDA: heads and head dims; Mamba2: intermediate, groups, heads, head_dim, state
    num_k_heads: int = 0
    num_v_heads: int = 0
    head_k_dim: int = 0
    head_v_dim: int = 0
    intermediate_size: int = 0
    n_groups: int = 0
    num_heads: int = 0
    head_dim: int = 0
    state_size: int = 0
    conv_kernel: int = 4
    ssm_dtype: str = "float32"  # mamba_utils.mamba2_state_dtype: config's mamba_ssm_dtype
    conv_dtype: str = "bfloat16"  # envs.SGLANG_MAMBA_CONV_DTYPE default


@dataclass(frozen=True)
class Dsv4Facts:
    """DeepSeek-V4 config fields DSV4PoolConfigurator reads."""

    head_dim: int  # qk_nope_head_dim + qk_rope_head_dim (the V4 layout fixes 448 + 64)
    index_head_dim: int
    window_size: int
    compress_ratios: tuple[int, ...]  # per layer: 0 (SWA only), 4, 128 (1, 2: V4.1)


@dataclass(frozen=True)
class SglangModel:
    """What SGLang's ModelConfig (plus the model class's window hook) says about one model."""

    source: str
    architecture: str
    architectures: tuple[str, ...]
    model_type: str
    dtype: str  # ModelConfig.dtype (torch name)
    attention_arch: AttentionArch
    num_hidden_layers: int  # max(num_hidden_layers, num_attention_layers): the KV layer span
    derived_context_len: int  # hf_transformers.common.get_context_length
    kv_cache_quant_algo: str | None  # the checkpoint's (quant_config.kv_cache_quant_algo)
    is_multimodal: bool
    multimodal_breakable_graph: bool
    vision_num_hidden_layers: int | None
    vision_hidden_size: int | None
    has_vision_config: bool
    num_nextn_predict_layers: int | None  # the config key, as ModelConfig reads it
    dflash_block_size: int | None = None  # a DFLASH draft's block size (parse_dflash_draft_config)
    # MHA / GQA (full-attention layers)
    total_num_kv_heads: int = 0
    head_dim: int = 0
    v_head_dim: int = 0
    # hybrid SWA (model_config.is_hybrid_swa)
    is_hybrid_swa: bool = False
    swa_layer_ids: tuple[int, ...] = ()
    full_layer_ids: tuple[int, ...] = ()
    swa_total_num_kv_heads: int = 0
    swa_head_dim: int = 0
    swa_v_head_dim: int = 0
    sliding_window_size: int | None = None  # the runner's (model class hook)
    # MLA
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    is_dsa: bool = False
    index_head_dim: int = 0
    indexer_layer_ids: tuple[int, ...] = ()  # DSA layers with their own index-K cache
    # Mamba / linear attention
    linear: LinearState | None = None
    dsv4: Dsv4Facts | None = None

    @property
    def has_asymmetric_kv(self) -> bool:
        """ModelConfig.has_asymmetric_kv: K and V rows differ in width."""
        return self.head_dim != self.v_head_dim or self.swa_head_dim != self.swa_v_head_dim

    def num_kv_heads(self, tp_size: int) -> int:
        """ModelConfig.get_num_kv_heads: max(1, total // tp)."""
        return max(1, self.total_num_kv_heads // tp_size)

    def swa_num_kv_heads(self, tp_size: int) -> int:
        """ModelConfig.get_swa_num_kv_heads."""
        return max(1, self.swa_total_num_kv_heads // tp_size)


_FULL_KINDS = (LayerKind.FULL_ATTENTION, LayerKind.SINK_FULL_ATTENTION)
_SWA_KINDS = (LayerKind.SLIDING_WINDOW, LayerKind.CHUNKED_LOCAL)
_PLAIN_KINDS = (*_FULL_KINDS, *_SWA_KINDS, LayerKind.NO_KV)
_MLA_KINDS = (LayerKind.MLA, LayerKind.MLA_INDEXER, LayerKind.NO_KV)
_GDN_ARCHS = frozenset({"Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
                        "Qwen3_5ForConditionalGeneration",
                        "Qwen3_5MoeForConditionalGeneration"})
_MAMBA2_ARCHS = frozenset({"NemotronHForCausalLM"})
_KDA_ARCHS = frozenset({"KimiLinearForCausalLM"})
_DSV4_ARCHS = frozenset({"DeepseekV4ForCausalLM"})
# architectures whose layers kvplan models for SGLang with the MLA latent row
# (model_config._derive_model_shapes: the MLA branch)
_MLA_ARCHS = frozenset({"DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
                        "GlmMoeDsaForCausalLM", "KimiK25ForConditionalGeneration"})
# the MHA branch of ModelConfig for configs whose layers are all alike: kvplan knows their
# heads; architectures SGLang reads specially (loops, NAS blocks, encoders) are refused
_REFUSED_MHA = frozenset({"LongcatFlashForCausalLM", "IQuestLoopCoderForCausalLM",
                          "NanbeigeForCausalLM", "WhisperForConditionalGeneration",
                          "DeciLMForCausalLM", "Llama4ForConditionalGeneration",
                          "Llama4ForCausalLM"})


def _not_modelled(desc: ModelDescription, why: str) -> UnsupportedError:
    arch = desc.architectures[0] if desc.architectures else desc.model_type
    return UnsupportedError(
        f"{desc.source}: kvplan does not model SGLang's KV pools for {arch} yet ({why})",
        hint="use --engine vllm for this model, or ask for it in an issue")


def _uniform(desc: ModelDescription, layers: list[LayerDescription], what: str
             ) -> LayerDescription:
    shapes = {(lay.num_kv_heads, lay.head_size, lay.head_size_v) for lay in layers}
    if len(shapes) != 1:
        raise _not_modelled(desc, f"its {what} layers differ in KV heads or head size")
    return layers[0]


def _sglang_dtype(desc: ModelDescription) -> str:
    """model_config._get_and_verify_dtype with --dtype auto: the config's dtype, float32 (or
    absent) → float16 (bfloat16 for Gemma)."""
    stated = desc.dtype
    if any("no 'torch_dtype'/'dtype'" in w for w in desc.warnings):
        stated = "float32"
    if stated == "float32":
        return "bfloat16" if desc.model_type.startswith("gemma") else "float16"
    return stated


def context_length(desc: ModelDescription) -> int:
    """hf_transformers.common.get_context_length on the text config: the first of SGLang's keys
    the config sets, × the rope factor unless the rope scaling states its original length or is
    llama3 (2048 without any key)."""
    factor: float = 1
    if len(desc.rope_scaling) == 1:
        rs = desc.rope_scaling[0]
        if (rs.factor is not None and rs.original_max_position_embeddings is None
                and rs.rope_type != "llama3"):
            factor = rs.factor
    fields = dict(desc.max_length_fields)
    if not fields and desc.max_position_embeddings is not None:
        fields["max_position_embeddings"] = desc.max_position_embeddings
    for key in ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
                "max_position_embeddings"):
        if key in fields:
            return int(factor * fields[key])
    return 2048


def sglang_model(desc: ModelDescription, profile: SglangProfile) -> SglangModel:
    """The SGLang view of a target model (raises UnsupportedError for what is not modelled)."""
    archs = desc.architectures or (desc.model_type,)
    arch = archs[0]
    layers = desc.layers
    num_layers = len({lay.index for lay in layers})
    kinds = {lay.kind for lay in layers}
    vt = desc.vision_tower
    base: dict[str, Any] = dict(
        source=desc.source, architecture=arch, architectures=tuple(archs),
        model_type=desc.model_type, dtype=_sglang_dtype(desc), num_hidden_layers=num_layers,
        derived_context_len=context_length(desc),
        kv_cache_quant_algo=desc.quantization.kv_cache_quant_algo,
        is_multimodal=any(a in profile.multimodal_archs for a in archs),
        multimodal_breakable_graph=any(a in profile.multimodal_breakable_graph_archs
                                       for a in archs),
        vision_num_hidden_layers=vt.num_hidden_layers if vt else None,
        vision_hidden_size=vt.hidden_size if vt else None,
        has_vision_config=vt is not None,
        num_nextn_predict_layers=desc.nextn_predict_layers_key,
        dflash_block_size=desc.draft_block_size)
    if desc.is_encoder_decoder or desc.pooling_defaults is not None:
        raise _not_modelled(desc, "encoder-decoder and pooling models")
    if arch in _DSV4_ARCHS:
        return _dsv4(desc, base)
    state_kinds = {k for k in kinds if k.is_state}
    if state_kinds:
        return _hybrid_linear(desc, base, arch, state_kinds)
    if kinds & {LayerKind.MLA, LayerKind.MLA_INDEXER}:
        return _mla(desc, base, arch, profile)
    if not kinds <= set(_PLAIN_KINDS):
        raise _not_modelled(desc, "layer kinds " + ", ".join(sorted(k.value for k in kinds)))
    if arch in _REFUSED_MHA:
        raise _not_modelled(desc, "SGLang counts its attention layers its own way")
    full = [lay for lay in layers if lay.kind in _FULL_KINDS]
    swa = [lay for lay in layers if lay.kind in _SWA_KINDS]
    if arch in profile.hybrid_swa_archs and swa:
        return _hybrid_swa(desc, base, arch, full, swa, profile)
    attn = full + swa
    if not attn:
        raise _not_modelled(desc, "no attention layer")
    one = _uniform(desc, attn, "attention")
    return SglangModel(**base, attention_arch=AttentionArch.MHA,
                       total_num_kv_heads=one.num_kv_heads or 1, head_dim=one.head_size or 0,
                       v_head_dim=_v(one))


def _v(lay: LayerDescription) -> int:
    return lay.head_size_v if lay.head_size_v else (lay.head_size or 0)


def _hybrid_swa(desc: ModelDescription, base: dict[str, Any], arch: str, full: list[LayerDescription],
                swa: list[LayerDescription], profile: SglangProfile) -> SglangModel:
    """model_config.get_hybrid_layer_ids + ModelConfig swa_* fields; the runner's window is the
    model class's get_attention_sliding_window_size (config.sliding_window - 1 for gpt-oss and
    Gemma) or ModelConfig.sliding_window_size."""
    s = _uniform(desc, swa, "sliding-window")
    window = s.sliding_window or s.attention_chunk_size
    if window is not None and arch in profile.window_minus_one_archs:
        window -= 1
    f = _uniform(desc, full, "full-attention") if full else s
    return SglangModel(
        **base, attention_arch=AttentionArch.MHA, total_num_kv_heads=f.num_kv_heads or 1,
        head_dim=f.head_size or 0, v_head_dim=_v(f), is_hybrid_swa=True,
        swa_layer_ids=tuple(sorted(lay.index for lay in swa)),
        full_layer_ids=tuple(sorted(lay.index for lay in full)),
        swa_total_num_kv_heads=s.num_kv_heads or 1, swa_head_dim=s.head_size or 0,
        swa_v_head_dim=_v(s), sliding_window_size=window)


def _mla(desc: ModelDescription, base: dict[str, Any], arch: str, profile: SglangProfile
         ) -> SglangModel:
    if arch not in _MLA_ARCHS:
        raise _not_modelled(desc, "an MLA architecture outside DeepSeek V2/V3/V3.2, Kimi-K2 "
                                  "and GLM-5")
    if not {lay.kind for lay in desc.layers} <= set(_MLA_KINDS):
        raise _not_modelled(desc, "MLA mixed with other layer kinds")
    mla = [lay for lay in desc.layers if lay.kind is LayerKind.MLA]
    shapes = {(lay.kv_lora_rank, lay.qk_rope_head_dim) for lay in mla}
    if len(shapes) != 1:
        raise _not_modelled(desc, "MLA layers of different ranks")
    one = mla[0]
    is_dsa = arch in profile.dsa_archs and desc.sparse_mla
    indexers = [lay for lay in desc.layers if lay.kind is LayerKind.MLA_INDEXER]
    return SglangModel(
        **base, attention_arch=AttentionArch.MLA, total_num_kv_heads=1, head_dim=256,
        v_head_dim=256, kv_lora_rank=one.kv_lora_rank or 0,
        qk_rope_head_dim=one.qk_rope_head_dim or 0, is_dsa=is_dsa,
        index_head_dim=(one.index_head_dim or 0) if is_dsa else 0,
        indexer_layer_ids=tuple(sorted(lay.index for lay in indexers)) if is_dsa else ())


def _hybrid_linear(desc: ModelDescription, base: dict[str, Any], arch: str, state_kinds: set[LayerKind]
                   ) -> SglangModel:
    """hybrid_arch.mambaish_config: the state layers (mamba2_cache_params) and the
    full-attention layer ids; attention layers are sized like a plain model's."""
    if state_kinds == {LayerKind.GDN} and arch in _GDN_ARCHS:
        kind = LinearKind.GDN
    elif state_kinds == {LayerKind.MAMBA2} and arch in _MAMBA2_ARCHS:
        kind = LinearKind.MAMBA2
    elif state_kinds == {LayerKind.KDA} and arch in _KDA_ARCHS:
        kind = LinearKind.KDA
    else:
        raise _not_modelled(desc, "this Mamba / linear-attention family")
    states = [lay for lay in desc.layers if lay.kind.is_state]
    attn = [lay for lay in desc.layers if lay.kind.is_attention and lay.kind is not
            LayerKind.NO_KV]
    ssm = desc.mamba_ssm_dtype if desc.mamba_ssm_dtype in ("float32", "bfloat16",
                                                          "float16") else "float32"
    first = states[0]
    if kind is LinearKind.MAMBA2:
        m = first.mamba2
        assert m is not None
        lin = LinearState(kind=kind, layer_ids=tuple(lay.index for lay in states),
                          full_attention_layer_ids=tuple(lay.index for lay in attn),
                          intermediate_size=m.intermediate_size, n_groups=m.n_groups,
                          num_heads=m.num_heads, head_dim=m.head_dim, state_size=m.state_size,
                          conv_kernel=m.conv_kernel, ssm_dtype=ssm)
    else:
        g = first.gdn
        assert g is not None
        lin = LinearState(kind=kind, layer_ids=tuple(lay.index for lay in states),
                          full_attention_layer_ids=tuple(lay.index for lay in attn),
                          num_k_heads=g.num_k_heads, num_v_heads=g.num_v_heads,
                          head_k_dim=g.head_k_dim, head_v_dim=g.head_v_dim,
                          conv_kernel=g.conv_kernel, ssm_dtype=ssm)
    if any((lay.gdn or lay.mamba2) != (first.gdn or first.mamba2) for lay in states):
        raise _not_modelled(desc, "state layers of different shapes")
    if kind is LinearKind.KDA:
        mla = [lay for lay in attn if lay.kind is LayerKind.MLA]
        if len(mla) != len(attn):
            raise _not_modelled(desc, "KDA beside non-MLA attention")
        return SglangModel(**base, attention_arch=AttentionArch.MLA, total_num_kv_heads=1,
                           head_dim=72, v_head_dim=0, kv_lora_rank=mla[0].kv_lora_rank or 0,
                           qk_rope_head_dim=mla[0].qk_rope_head_dim or 0, linear=lin)
    one = _uniform(desc, attn, "attention")
    return SglangModel(**base, attention_arch=AttentionArch.MHA,
                       total_num_kv_heads=one.num_kv_heads or 1, head_dim=one.head_size or 0,
                       v_head_dim=_v(one), linear=lin)


def _dsv4(desc: ModelDescription, base: dict[str, Any]) -> SglangModel:
    """ModelConfig's DeepseekV4 branch: qk_nope = head_dim - rope, compress_ratios per layer,
    window_size = sliding_window (kvplan's sliding_window_mla / mla / indexer layers)."""
    swa = sorted((lay for lay in desc.layers if lay.kind is LayerKind.SLIDING_WINDOW_MLA),
                 key=lambda lay: lay.index)
    if not swa or swa[0].head_size is None or swa[0].sliding_window is None:
        raise _not_modelled(desc, "a DeepSeek-V4 config without its sliding-window layers")
    ratios = []
    for i in range(len(swa)):
        compressed = [lay for lay in desc.layers if lay.index == i and lay.kind is LayerKind.MLA]
        ratios.append(compressed[0].tokens_per_state or 0 if compressed else 0)
    if any(r not in (0, 4, 128) for r in ratios):
        raise _not_modelled(desc, "DeepSeek-V4.1 compression ratios 1 / 2")
    indexer = [lay for lay in desc.layers if lay.kind is LayerKind.MLA_INDEXER]
    head = swa[0].head_size
    return SglangModel(
        **base, attention_arch=AttentionArch.DSV4, total_num_kv_heads=1, head_dim=head,
        v_head_dim=head, is_hybrid_swa=True, sliding_window_size=swa[0].sliding_window,
        dsv4=Dsv4Facts(head_dim=head,
                       index_head_dim=(indexer[0].index_head_dim or 0) if indexer else 0,
                       window_size=swa[0].sliding_window, compress_ratios=tuple(ratios)))


def sglang_draft(desc: ModelDescription, profile: SglangProfile) -> SglangModel:
    """A separate draft checkpoint (EAGLE / EAGLE3 / STANDALONE / DFLASH) as SGLang reads it in
    draft mode: its KV layer count and, for DFLASH, its heads."""
    try:
        return sglang_model(desc, profile)
    except UnsupportedError:
        attn = [lay for lay in desc.layers if lay.kind.is_attention]
        if not attn:
            raise
        one = attn[0]
        archs = desc.architectures or (desc.model_type,)
        return SglangModel(
            source=desc.source, architecture=archs[0], architectures=tuple(archs),
            model_type=desc.model_type, dtype=_sglang_dtype(desc),
            attention_arch=AttentionArch.MHA, num_hidden_layers=len({lay.index for lay in
                                                                     desc.layers}),
            derived_context_len=context_length(desc), kv_cache_quant_algo=None,
            is_multimodal=False, multimodal_breakable_graph=False,
            vision_num_hidden_layers=None, vision_hidden_size=None, has_vision_config=False,
            num_nextn_predict_layers=desc.nextn_predict_layers_key,
            dflash_block_size=desc.draft_block_size,
            total_num_kv_heads=one.num_kv_heads or 1, head_dim=one.head_size or 0,
            v_head_dim=_v(one))
