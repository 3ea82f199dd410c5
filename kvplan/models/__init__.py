"""Raw Hugging Face config dicts → `kvplan.models.description.ModelDescription`.

Public entry points:

* `describe_model(config, source=..., hf_quant_config=None)` — a target model;
* `describe_draft(config, source=..., method=None, target=None, hf_quant_config=None)` — a separate
  draft head (DFlash / DFlash2, EAGLE, EAGLE3);
* `mtp_draft(target, num_layers=None)` — the target's own MTP module(s).

Dispatch follows vLLM: the first `architectures` entry kvplan has a fast adapter for; else the
refusal the coverage table (kvplan/data/coverage.csv) gives that architecture; else the fast
adapter of `model_type`; else transformers' configuration class resolves the config and the
generic decoder (`resolved.py`) plans it from vLLM's generic accessors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from importlib import import_module
from typing import Any, NamedTuple

from kvplan.errors import ConfigError, KvplanError, UnsupportedError
from kvplan.models._common import SPECS_HINT, Cfg, architectures, text_cfg, without_pipeline_parallel
from kvplan.models.description import ModelDescription

__all__ = ["describe_draft", "describe_model", "mtp_draft", "supported_architectures"]

_Adapter = Callable[[Cfg, "dict[str, Any] | None"], ModelDescription]


class _Ref(NamedTuple):
    """A fast adapter by name: `kvplan.models.families.<module>.<function>`,
    with its `family` if shared."""

    module: str
    function: str
    family: str | None = None
    options: tuple[tuple[str, Any], ...] = ()  # further keyword arguments of the adapter

    @property
    def name(self) -> str:
        """The name the coverage table uses (`adapter:<name>`)."""
        return self.family or self.function.removeprefix("describe_")

    def load(self) -> _Adapter:
        fn = getattr(import_module(f"kvplan.models.families.{self.module}"), self.function)
        kwargs = {**({"family": self.family} if self.family else {}), **dict(self.options)}
        return partial(fn, **kwargs) if kwargs else fn


class _Adapters(Mapping[str, _Adapter]):
    """Key → fast adapter; an adapter's module is imported on first use, so a check imports
    only the adapter its config needs (cold start)."""

    def __init__(self, refs: dict[str, _Ref]) -> None:
        self.refs = refs
        self._loaded: dict[str, _Adapter] = {}

    def __getitem__(self, key: str) -> _Adapter:
        if key not in self._loaded:
            self._loaded[key] = self.refs[key].load()
        return self._loaded[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.refs)

    def __len__(self) -> int:
        return len(self.refs)

    def __contains__(self, key: object) -> bool:
        return key in self.refs


_LLAMA = _Ref("llama", "describe_llama", "llama")
_MISTRAL = _Ref("llama", "describe_llama", "mistral")
_MIXTRAL = _Ref("llama", "describe_llama", "mixtral")
_LLAMA4 = _Ref("llama", "describe_llama4")
_QWEN2 = _Ref("qwen", "describe_qwen_dense", "qwen2")
_QWEN3 = _Ref("qwen", "describe_qwen_dense", "qwen3")
_QWEN3_MOE = _Ref("qwen", "describe_qwen_dense", "qwen3_moe")
_QWEN3_NEXT = _Ref("qwen", "describe_qwen_gdn", "qwen3_next")
_QWEN3_5 = _Ref("qwen", "describe_qwen_gdn", "qwen3_5")
# multimodal wrappers around vLLM's Qwen3.5 language model (Qwen3_5ForCausalLM, or the same
# GDN + gated-attention layers: interns2_mobius.py), planned with the encoder-cache note
_QWEN3_5_LM = _Ref("qwen", "describe_qwen_gdn", "qwen3_5", (("encoder_note", True),))
_DEEPSEEK = _Ref("deepseek", "describe_deepseek")
_GEMMA2 = _Ref("gemma", "describe_gemma2_3", "gemma2")
_GEMMA3 = _Ref("gemma", "describe_gemma2_3", "gemma3")
_GEMMA4 = _Ref("gemma", "describe_gemma4")
_GPT_OSS = _Ref("gpt_oss", "describe_gpt_oss")
_MAMBA1 = _Ref("mamba", "describe_mamba1")
_MAMBA2 = _Ref("mamba", "describe_mamba2")
_JAMBA = _Ref("mamba", "describe_jamba")
_NEMOTRON_H = _Ref("mamba", "describe_nemotron_h")
_FALCON_H1 = _Ref("mamba", "describe_falcon_h1")
_GRANITE_HYBRID = _Ref("mamba", "describe_granite_hybrid")
_LFM2 = _Ref("lfm2", "describe_lfm2")
_MINIMAX_M2 = _Ref("minimax", "describe_minimax_m2")
_MINIMAX_M3_SPARSE = _Ref("minimax", "describe_minimax_m3_sparse")
_MIMO_V2 = _Ref("mimo", "describe_mimo_v2")
_CHATGLM = _Ref("chatglm", "describe_chatglm")
_EXAONE = _Ref("exaone", "describe_exaone")
_INTERNLM2 = _Ref("internlm2", "describe_internlm2")
_MINICPM3 = _Ref("minicpm3", "describe_minicpm3")
_NEMOTRON_NAS = _Ref("nemotron_nas", "describe_nemotron_nas")
_KIMI_LINEAR = _Ref("kimi", "describe_kimi_linear")
_DEEPSEEK_V4 = _Ref("deepseek_v4", "describe_deepseek_v4")
_DEEPSEEK_V41 = _Ref("deepseek_v4", "describe_deepseek_v41")
_GLM5_NEXT = _Ref("glm5next", "describe_glm5_next")
_LFM2_MOE = _Ref("lfm2", "describe_lfm2_moe")
_LFM2_VL = _Ref("lfm2", "describe_lfm2_vl")
_LFM3 = _Ref("lfm2", "describe_lfm3")
_OLMO_HYBRID = _Ref("olmo", "describe_olmo_hybrid")
_ZAMBA2 = _Ref("zyphra", "describe_zamba2")
_ZAYA = _Ref("zyphra", "describe_zaya")
_GEMMA3N = _Ref("gemma", "describe_gemma3n")
_FLINT = _Ref("flint", "describe_flint")
_OPENPANGU = _Ref("openpangu", "describe_openpangu")
_WHISPER = _Ref("encdec", "describe_whisper")
_CANARY = _Ref("encdec", "describe_canary")
_COHERE_ASR = _Ref("encdec", "describe_cohere_asr")
_BAILING_V2_5 = _Ref("bailing", "describe_bailing_v2_5")
_BAILING_V3 = _Ref("bailing", "describe_bailing_v3")
_ALICE_AI = _Ref("kimi", "describe_alice_ai")
_INKLING = _Ref("inkling", "describe_inkling")
_ENCODER_ONLY = _Ref("encoder_only", "describe_encoder_only")
_DORY = _Ref("dory", "describe_dory")
_COSMOS3_EDGE = _Ref("cosmos3_edge", "describe_cosmos3_edge")
_HRM_TEXT = _Ref("hrm_text", "describe_hrm_text")

# vLLM: model_executor/models/registry.py — architecture → model file
_BY_ARCH = _Adapters({
    "LlamaForCausalLM": _LLAMA,
    "MistralForCausalLM": _MISTRAL,
    "MixtralForCausalLM": _MIXTRAL,
    "Llama4ForCausalLM": _LLAMA4,
    "Llama4ForConditionalGeneration": _LLAMA4,
    "Qwen2ForCausalLM": _QWEN2,
    "Qwen3ForCausalLM": _QWEN3,
    "Qwen3MoeForCausalLM": _QWEN3_MOE,
    "Qwen3NextForCausalLM": _QWEN3_NEXT,
    "Qwen3_5ForCausalLM": _QWEN3_5,
    "Qwen3_5MoeForCausalLM": _QWEN3_5,
    "Qwen3_5ForConditionalGeneration": _QWEN3_5,
    "Qwen3_5MoeForConditionalGeneration": _QWEN3_5,
    "DeepseekForCausalLM": _DEEPSEEK,
    "DeepseekV2ForCausalLM": _DEEPSEEK,
    "DeepseekV3ForCausalLM": _DEEPSEEK,
    "DeepseekV32ForCausalLM": _DEEPSEEK,
    "GlmMoeDsaForCausalLM": _DEEPSEEK,
    "Gemma2ForCausalLM": _GEMMA2,
    "Gemma3ForCausalLM": _GEMMA3,
    "Gemma3ForConditionalGeneration": _GEMMA3,
    "Gemma4ForCausalLM": _GEMMA4,
    "Gemma4ForConditionalGeneration": _GEMMA4,
    "GptOssForCausalLM": _GPT_OSS,
    "MambaForCausalLM": _MAMBA1,
    "FalconMambaForCausalLM": _MAMBA1,
    "Mamba2ForCausalLM": _MAMBA2,
    "JambaForCausalLM": _JAMBA,
    "NemotronHForCausalLM": _NEMOTRON_H,
    "NemotronHPuzzleForCausalLM": _NEMOTRON_H,
    "NemotronH_Nano_VL_V2": _NEMOTRON_H,
    "NemotronH_Nano_Omni_Reasoning_V3": _NEMOTRON_H,
    "NemotronH_Omni_Reasoning_V3": _NEMOTRON_H,
    "NemotronH_Super_Omni_Reasoning_V3": _NEMOTRON_H,
    "Nemotron3_5TranscribeForConditionalGeneration": _NEMOTRON_H,  # vLLM 0.34 only
    "FalconH1ForCausalLM": _FALCON_H1,
    "GraniteMoeHybridForCausalLM": _GRANITE_HYBRID,
    "Lfm2ForCausalLM": _LFM2,
    "MiniMaxM2ForCausalLM": _MINIMAX_M2,
    "MiMoV2FlashForCausalLM": _MIMO_V2,
    "MiMoV2ForCausalLM": _MIMO_V2,
    "MiMoV2OmniForCausalLM": _MIMO_V2,
    # config classes transformers lacks (vLLM's own or the checkpoint's remote code)
    "ChatGLMModel": _CHATGLM,
    "ChatGLMForConditionalGeneration": _CHATGLM,
    "ExaoneForCausalLM": _EXAONE,
    "InternLM2ForCausalLM": _INTERNLM2,
    "MiniCPM3ForCausalLM": _MINICPM3,
    "DeciLMForCausalLM": _NEMOTRON_NAS,
    "DeepseekVLV2ForCausalLM": _DEEPSEEK,
    "KimiLinearForCausalLM": _KIMI_LINEAR,
    "KimiK3ForConditionalGeneration": _KIMI_LINEAR,
    "KimiK31ForConditionalGeneration": _KIMI_LINEAR,  # vLLM 0.34 only
    "DeepseekV4ForCausalLM": _DEEPSEEK_V4,
    "DeepseekV4ForConditionalGeneration": _DEEPSEEK_V4,
    "DeepseekV41ForCausalLM": _DEEPSEEK_V41,
    "MiniMaxM3SparseForCausalLM": _MINIMAX_M3_SPARSE,
    "MiniMaxM3SparseForConditionalGeneration": _MINIMAX_M3_SPARSE,
    # vLLM: gemma4_unified.py — encoder-free towers, the same Gemma4ForCausalLM language model
    "Gemma4UnifiedForConditionalGeneration": _GEMMA4,
    "Glm5NextForCausalLM": _GLM5_NEXT,
    "Glm5NextForConditionalGeneration": _GLM5_NEXT,
    "MiniCPMV4_6ForConditionalGeneration": _QWEN3_5_LM,  # minicpmv4_6.py: Qwen3_5ForCausalLM
    "MiniCPMV4_7ForConditionalGeneration": _QWEN3_5_LM,  # minicpmv4_7.py: MiniCPM-V 4.6's
    "MiniCPMOcrForConditionalGeneration": _QWEN3_5_LM,  # minicpm_ocr.py: MiniCPM-V 4.6's
    "InternS2PreviewForConditionalGeneration": _QWEN3_5_LM,  # Qwen3_5MoeForConditionalGeneration
    "InternS2MobiusForConditionalGeneration": _QWEN3_5_LM,  # Qwen3.5 GDN / attention layers
    "InklingForCausalLM": _INKLING,
    "InklingForConditionalGeneration": _INKLING,
    "BailingMoeV2_5ForCausalLM": _BAILING_V2_5,
    "BailingMoeV3ForCausalLM": _BAILING_V3,
    "BailingMoeV3VLForConditionalGeneration": _BAILING_V3,
    "AliceAIForCausalLM": _ALICE_AI,  # vLLM 0.33+
    "Lfm2MoeForCausalLM": _LFM2_MOE,
    "Lfm2VlForConditionalGeneration": _LFM2_VL,
    "Lfm3ForCausalLM": _LFM3,  # vLLM 0.34 only (and its VL / audio wrappers)
    "Lfm3VlForConditionalGeneration": _LFM3,
    "Lfm3AudioForConditionalGeneration": _LFM3,
    "OlmoHybridForCausalLM": _OLMO_HYBRID,
    "Zamba2ForCausalLM": _ZAMBA2,
    "ZayaForCausalLM": _ZAYA,  # vLLM 0.34 only
    "Gemma3nForCausalLM": _GEMMA3N,
    "Gemma3nForConditionalGeneration": _GEMMA3N,
    "FlintForCausalLM": _FLINT,  # vLLM 0.33+
    "DoryForCausalLM": _DORY,  # vLLM 0.33+
    "Cosmos3EdgeForConditionalGeneration": _COSMOS3_EDGE,
    "HrmTextForCausalLM": _HRM_TEXT,
    "PanguEmbeddedForCausalLM": _OPENPANGU,
    "PanguProMoEV2ForCausalLM": _OPENPANGU,
    "PanguUltraMoEForCausalLM": _OPENPANGU,
    # encoder-decoder speech models: decoder self- and cross-attention (models/encdec.py)
    "WhisperForConditionalGeneration": _WHISPER,
    "CanaryForConditionalGeneration": _CANARY,  # vLLM 0.34 only
    "CohereAsrForConditionalGeneration": _COHERE_ASR,
    # pooling models on their generation counterpart's layers (kvplan.models.pooling)
    "LlamaModel": _LLAMA,
    "MistralModel": _MISTRAL,
    "Qwen2Model": _QWEN2,
    "Qwen2ForRewardModel": _QWEN2,
    "Qwen2ForProcessRewardModel": _QWEN2,
    "Gemma2Model": _GEMMA2,
    "Gemma3TextModel": _GEMMA3,
    "InternLM2ForRewardModel": _INTERNLM2,
    "JambaForSequenceClassification": _JAMBA,
    "LlamaBidirectionalModel": _LLAMA,
    "LlamaBidirectionalForSequenceClassification": _LLAMA,
    "VoyageQwen3BidirectionalEmbedModel": _QWEN3,
    "DeepseekV3BidirectionalModel": _DEEPSEEK,
    # encoder-only pooling models: no KV cache
    "BertModel": _ENCODER_ONLY,
    "BertForSequenceClassification": _ENCODER_ONLY,
    "BertForTokenClassification": _ENCODER_ONLY,
    "BertForMaskedLM": _ENCODER_ONLY,
    "BertSpladeSparseEmbeddingModel": _ENCODER_ONLY,
    "BgeM3EmbeddingModel": _ENCODER_ONLY,
    "RobertaModel": _ENCODER_ONLY,
    "RobertaForMaskedLM": _ENCODER_ONLY,
    "RobertaForSequenceClassification": _ENCODER_ONLY,
    "RobertaForTokenClassification": _ENCODER_ONLY,
    "XLMRobertaModel": _ENCODER_ONLY,
    "XLMRobertaForSequenceClassification": _ENCODER_ONLY,
    "XLMRobertaForTokenClassification": _ENCODER_ONLY,
    "GteModel": _ENCODER_ONLY,
    "GteNewModel": _ENCODER_ONLY,
    "GteNewForSequenceClassification": _ENCODER_ONLY,
    "NomicBertModel": _ENCODER_ONLY,
    "ModernBertModel": _ENCODER_ONLY,
    "ModernBertForSequenceClassification": _ENCODER_ONLY,
    "ModernBertForTokenClassification": _ENCODER_ONLY,
    "HF_ColBERT": _ENCODER_ONLY,
    "ColBERTJinaRobertaModel": _ENCODER_ONLY,
    "ColBERTModernBertModel": _ENCODER_ONLY,
})

# model_type → adapter, for configs without a known architecture
_BY_MODEL_TYPE = _Adapters({
    "llama": _LLAMA, "mistral": _MISTRAL, "mixtral": _MIXTRAL,
    "llama4": _LLAMA4, "llama4_text": _LLAMA4,
    "qwen2": _QWEN2, "qwen3": _QWEN3, "qwen3_moe": _QWEN3_MOE, "qwen3_next": _QWEN3_NEXT,
    "qwen3_5": _QWEN3_5, "qwen3_5_moe": _QWEN3_5, "qwen3_5_text": _QWEN3_5,
    "qwen3_5_moe_text": _QWEN3_5,
    "deepseek": _DEEPSEEK, "deepseek_v2": _DEEPSEEK, "deepseek_v3": _DEEPSEEK,
    "deepseek_v32": _DEEPSEEK, "kimi_k2": _DEEPSEEK, "glm_moe_dsa": _DEEPSEEK,
    "gemma2": _GEMMA2, "gemma3": _GEMMA3, "gemma3_text": _GEMMA3,
    "gemma4": _GEMMA4, "gemma4_text": _GEMMA4,
    "gpt_oss": _GPT_OSS,
    "mamba": _MAMBA1, "falcon_mamba": _MAMBA1, "mamba2": _MAMBA2, "jamba": _JAMBA,
    "nemotron_h": _NEMOTRON_H, "falcon_h1": _FALCON_H1, "granitemoehybrid": _GRANITE_HYBRID,
    "lfm2": _LFM2,
    "minimax_m2": _MINIMAX_M2,
    "mimo_v2_flash": _MIMO_V2, "mimo_v2": _MIMO_V2,
    "chatglm": _CHATGLM, "exaone": _EXAONE, "internlm2": _INTERNLM2, "minicpm3": _MINICPM3,
    "nemotron-nas": _NEMOTRON_NAS,
    "deepseek_vl_v2": _DEEPSEEK,
    "kimi_linear": _KIMI_LINEAR,
    "deepseek_v4": _DEEPSEEK_V4,
    "glm5_next": _GLM5_NEXT, "glm5_next_text": _GLM5_NEXT,
    "inkling_model": _INKLING, "inkling_mm_model": _INKLING,
    "lfm2_moe": _LFM2_MOE, "lfm2_vl": _LFM2_VL,
    "lfm3": _LFM3, "lfm3_vl": _LFM3, "lfm3_audio": _LFM3,
    "olmo_hybrid": _OLMO_HYBRID, "zamba2": _ZAMBA2, "zaya": _ZAYA,
    "gemma3n": _GEMMA3N, "gemma3n_text": _GEMMA3N, "flint": _FLINT,
    "PanguEmbedded": _OPENPANGU, "pangu_ultra_moe": _OPENPANGU,
    "whisper": _WHISPER, "canary": _CANARY, "cohere_asr": _COHERE_ASR,
    "dory": _DORY, "cosmos3_edge": _COSMOS3_EDGE, "hrm_text": _HRM_TEXT,
})


def supported_architectures() -> tuple[str, ...]:
    """Architectures with a dedicated adapter (for `kvplan --help` / docs)."""
    return tuple(sorted(_BY_ARCH))


def fast_adapter_names() -> dict[str, str]:
    """Architecture → fast adapter name, for the coverage table's consistency test."""
    return {arch: ref.name for arch, ref in _BY_ARCH.refs.items()}


def _pick(top: Cfg) -> _Adapter:
    archs = architectures(top)
    for arch in archs:
        if arch in _BY_ARCH:
            return _BY_ARCH[arch]
    refusal = coverage_refusal(top.source, archs)
    if refusal is not None:
        raise refusal
    model_type = top.get("model_type")
    if isinstance(model_type, str) and model_type in _BY_MODEL_TYPE:
        return _BY_MODEL_TYPE[model_type]
    return _describe_through_transformers


# vLLM 0.34: the classes of these architectures, which no fast adapter covers, are not SupportsPP
# (tools/vllm_non_pp.py; FunASR's by its class statement, its module needs torchaudio)
_GENERIC_NOT_SUPPORTS_PP = frozenset({
    "DiffusionGemmaForBlockDiffusion", "DomynEdgeForCausalLM", "DoryForCausalLM",
    "FireRedASR2ForConditionalGeneration", "FunASRForConditionalGeneration",
    "GPT2ForSequenceClassification", "HrmTextForCausalLM", "IQuestLoopCoderForCausalLM",
    "Idefics3ForConditionalGeneration", "MistralLarge4ForCausalLM",
    "PaddleOCRVLForConditionalGeneration", "Phi4MMForCausalLM", "RadioMBartPrefixForCausalLM",
    "SmolVLMForConditionalGeneration"})


def _describe_through_transformers(top: Cfg, quant: dict[str, Any] | None) -> ModelDescription:
    """Every config the fast adapters do not cover: transformers resolves it (lazily imported).
    A type transformers has no class for still reaches a fast adapter by its text model_type."""
    return without_pipeline_parallel(_through_transformers(top, quant), top,
                                     _GENERIC_NOT_SUPPORTS_PP)


def _through_transformers(top: Cfg, quant: dict[str, Any] | None) -> ModelDescription:
    from kvplan.models.resolution.resolve import has_config_class
    from kvplan.models.resolution.resolved import describe_resolved, encoder_cache_note
    model_type = top.get("model_type")
    text_type = text_cfg(top).get("model_type")
    if not isinstance(model_type, str) or not has_config_class(model_type):
        if isinstance(text_type, str) and text_type in _BY_MODEL_TYPE:
            desc = _BY_MODEL_TYPE[text_type](top, quant)
            note = encoder_cache_note(architectures(top))
            return desc if note is None else desc.model_copy(
                update={"warnings": desc.warnings + (note,)})
        from kvplan.models.resolution.resolve import has_remote_config
        if has_remote_config(top.data) and not text_cfg(top).has("layer_types"):
            # remote code (vLLM needs --trust-remote-code; the pipeline checks it): the raw
            # fields through vLLM's generic accessors
            return describe_resolved(top, quant, _BY_MODEL_TYPE, raw_fields=True)
        from kvplan.models.resolution.generic import describe_generic
        return describe_generic(top, quant)  # plans from layer_types, or refuses
    return describe_resolved(top, quant, _BY_MODEL_TYPE)


def coverage_refusal(source: str, archs: tuple[str, ...]) -> UnsupportedError | None:
    """The coverage table's refusal for these architectures, in words (None: not refused)."""
    from kvplan.models import coverage as _coverage
    row = _coverage.row_for(archs)
    if row is not None:
        if row.refused and not row.pending:
            return UnsupportedError(f"{source}: {row.reason}", hint=SPECS_HINT)
    return None


def describe_model(config: Mapping[str, Any], *, source: str,
                   hf_quant_config: Mapping[str, Any] | None = None) -> ModelDescription:
    """Describe a target model from its parsed config.json (and optional hf_quant_config.json).

    Raises ConfigError for missing or malformed fields (the message names the field) and
    UnsupportedError for architectures kvplan cannot describe.
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"{source}: config.json must be a JSON object, got "
                          f"{type(config).__name__}")
    from kvplan.models.drafts import is_draft_architecture
    top = Cfg(config, source)
    archs = architectures(top)
    if is_draft_architecture(archs) or top.has("dflash_config"):
        raise UnsupportedError(
            f"{source}: {', '.join(archs) or 'this config'} is a speculative-decoding draft head, "
            "not a target model",
            hint="Give it as the draft model (kvplan.models.describe_draft / the draft option).")
    if not top.has("model_type") and not archs:
        raise ConfigError(f"{source}: config.json has neither 'model_type' nor 'architectures'",
                          hint=SPECS_HINT)
    if not any(arch in _BY_ARCH for arch in archs):
        from kvplan.models.retired import refuse_retired, retired_by_model_type
        refuse_retired(source, archs or retired_by_model_type(top.get("model_type")))
    adapter = _pick(top)
    quant = dict(hf_quant_config) if hf_quant_config is not None else None
    with malformed_config_guard(source):
        desc = adapter(top, quant)
        if desc.pooling_defaults is None and not desc.draft_method:
            from kvplan.models.pooling import mark_pooling
            desc = mark_pooling(desc, top)
        from kvplan.models.resolution.constructor import with_constructor_error
        return wrapper_layer_names(_with_raw_facts(with_constructor_error(desc, top), top))


def length_only_description(config: Mapping[str, Any], source: str) -> ModelDescription:
    """A description with only what vLLM's max-length rule reads (no layers), for configs no
    adapter describes: the length keys and RoPE sets of the transformers-resolved text config,
    else of config.json as written."""
    from kvplan.models._common import max_length_fields, rope_scaling
    top = Cfg(config, source)
    text = text_cfg(top)
    fields, rope = max_length_fields(text), rope_scaling(text)
    model_type = str(text.get("model_type") or top.get("model_type") or "")
    try:
        from kvplan.models.resolution import accessors as acc
        from kvplan.models.resolution.resolve import resolve
        r = resolve(config, source)
        fields, rope, model_type = (acc.max_length_fields(r), acc.rope_parameter_sets(r),
                                    r.text_model_type or model_type)
    except KvplanError:
        pass
    return ModelDescription(source=source, model_type=model_type, family="length-only",
                            layers=(), max_length_fields=fields, rope_scaling=rope)


def wrapper_layer_names(desc: ModelDescription) -> ModelDescription:
    """The decoder layers of a multimodal wrapper under the module vLLM builds its language model
    in (`language_model.model.layers.N...`): adapters name the language model's own layers
    (`model.layers.N...`); the wrapper's prefix is vLLM's (kvplan.models.coverage). A wrapper that
    builds a bare decoder stack puts it at its own module (`model.text_model.layers.N...`). Names an
    adapter already placed under it are kept; the MTP drafter is a model of its own.
    vLLM: the wrapper's __init__ (e.g. qwen2_5_vl.py `init_vllm_registered_model(...,
    prefix=maybe_prefix(prefix, "language_model"))`), data from tools/vllm_lm_prefix.py."""
    from kvplan.models.resolution.layer_names import decoder_module, language_model_prefix
    prefix = language_model_prefix(desc.architectures)
    module = None if prefix else decoder_module(desc.architectures)
    # an adapter that already names the wrapper's layers (any wrapper-level prefix) is kept
    if not (prefix or module) or any(not layer.name.startswith("model.") for layer in desc.layers):
        return desc
    # a bare decoder stack (Idefics3's LlamaModel at model.text_model) takes the place of the
    # language model's own `model.`: model.layers.N... → model.text_model.layers.N...
    layers = tuple(layer.model_copy(update={"name": f"{prefix}.{layer.name}" if prefix else
                                            f"{module}.{layer.name.removeprefix('model.')}"})
                   for layer in desc.layers)
    return desc.model_copy(update={"layers": layers})


def _with_raw_facts(desc: ModelDescription, top: Cfg) -> ModelDescription:
    """Record the raw keys SGLang reads and the adapters do not keep: the vision_config dims
    (its VLM memory reserve) and the literal num_nextn_predict_layers (its MTP draft pool)."""
    update: dict[str, Any] = {}
    vision = top.data.get("vision_config")
    if isinstance(vision, Mapping):
        from kvplan.models.description import VisionTowerDims

        update["vision_tower"] = VisionTowerDims(
            num_hidden_layers=_positive_int(vision, "num_hidden_layers"),
            hidden_size=_positive_int(vision, "hidden_size"))
    nextn = text_cfg(top).data.get("num_nextn_predict_layers")
    if isinstance(nextn, int) and not isinstance(nextn, bool) and nextn >= 0:
        update["nextn_predict_layers_key"] = nextn
    if desc.draft_method is not None:
        dflash = top.data.get("dflash_config")
        block = _positive_int(dflash, "block_size") if isinstance(dflash, Mapping) else None
        block = block or _positive_int(top.data, "block_size")
        if block is not None:
            update["draft_block_size"] = block
    return desc.model_copy(update=update) if update else desc


def _positive_int(d: Mapping[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


@contextmanager
def malformed_config_guard(source: str) -> Iterator[None]:
    """Last line of defence: a field of a type no adapter expects is a ConfigError, never a
    traceback (the adapters name the field whenever they can)."""
    try:
        yield
    except (TypeError, ValueError, AttributeError, KeyError, IndexError, ZeroDivisionError,
            OverflowError) as exc:
        if isinstance(exc, KvplanError):
            raise
        detail = " ".join(str(exc).split())[:160]
        raise ConfigError(f"{source}: config.json has a value kvplan cannot use "
                          f"({type(exc).__name__}: {detail})") from None


def describe_draft(config: Mapping[str, Any], *, source: str, method: str | None = None,
                   target: ModelDescription | None = None,
                   hf_quant_config: Mapping[str, Any] | None = None) -> ModelDescription:
    """Describe a separate draft head (DFlash/DFlash2, EAGLE, EAGLE3); see `drafts`."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"{source}: config.json must be a JSON object, got "
                          f"{type(config).__name__}")
    from kvplan.models import drafts as _drafts
    with malformed_config_guard(source):
        desc = _drafts.describe_draft(config, source=source, method=method, target=target,
                                      hf_quant_config=hf_quant_config)
        return _with_raw_facts(desc, Cfg(config, source))


def mtp_draft(target: ModelDescription, num_layers: int | None = None) -> ModelDescription:
    """The target's own MTP module(s) as a draft (see `drafts.mtp_draft`)."""
    from kvplan.models.drafts import mtp_draft as _mtp_draft
    return _mtp_draft(target, num_layers)
