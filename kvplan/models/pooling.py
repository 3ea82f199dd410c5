"""Pooling models (embedding, reward, classification): what vLLM's pooling runner changes.

* Decoder-based pooling architectures (LlamaModel, Qwen2ForRewardModel, ...) run their
  generation counterpart's layers with causal attention: same KV cache specs, same start-up
  check. They reach the counterpart's adapter; `mark_pooling` records the pooling defaults.
* Encoder-only / bidirectional ones (BERT, RoBERTa, ModernBERT, LlamaBidirectional, a decoder
  config with `is_causal: false`, ...) use `EncoderOnlyAttention`, whose get_kv_cache_spec
  returns None: no KV cache, no memory profiling, no check (vLLM: v1/engine/core.py
  _initialize_kv_caches, `has_kv_cache` False → available memory 0, no groups). Their attention
  layers become `LayerKind.ENCODER_ONLY`, which the build gives no spec.
* `resolve_runner` mirrors ModelConfig._get_runner_type / _get_convert_type (with the model
  folder's sentence-transformers pooling module, `get_pooling_config`) and the pooling defaults of
  `is_chunked_prefill_supported` / `is_prefix_caching_supported`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvplan.errors import InputError
from kvplan.models._common import Cfg, text_cfg
from kvplan.models.description import LayerKind, ModelDescription, SentenceTransformersPooling

RUNNERS = ("auto", "generate", "pooling", "draft")
CONVERTS = ("auto", "none", "embed", "classify")

# vLLM registry pooling architectures → (default seq, tok pooling type), from the classes'
# `default_pooling_type` decorators (model_executor/models/*.py; VllmModelForPooling: LAST / ALL)
_LAST_ALL = ("LAST", "ALL")
_CLS_ALL = ("CLS", "ALL")
DECODER_POOLING: dict[str, tuple[str, str]] = {
    "LlamaModel": _LAST_ALL, "MistralModel": _LAST_ALL, "Qwen2Model": _LAST_ALL,
    "Gemma2Model": _LAST_ALL, "Gemma3TextModel": _LAST_ALL,
    "Qwen2ForRewardModel": _LAST_ALL,  # qwen2_rm.py
    "Qwen2ForProcessRewardModel": ("LAST", "STEP"),  # qwen2_rm.py
    "InternLM2ForRewardModel": _LAST_ALL,  # internlm2.py
    "JambaForSequenceClassification": _LAST_ALL, "GPT2ForSequenceClassification": _LAST_ALL,
    # the Transformers modeling backend's pooling classes (transformers/pooling.py EmbeddingMixin
    # / SequenceClassificationMixin: default_seq_pooling_type CLS, so ModelConfig.attn_type is
    # encoder_only and chunked prefill off; their attention layers keep their KV cache)
    **{a: _CLS_ALL for a in (
        "TransformersEmbeddingModel", "TransformersMoEEmbeddingModel",
        "TransformersMultiModalEmbeddingModel", "TransformersForSequenceClassification",
        "TransformersMoEForSequenceClassification",
        "TransformersMultiModalForSequenceClassification")},
}
# bidirectional variants of decoders (vLLM sets is_causal False: models/config.py)
BIDIRECTIONAL_DECODERS: dict[str, tuple[str, str]] = {
    "LlamaBidirectionalModel": _LAST_ALL, "LlamaBidirectionalForSequenceClassification": _LAST_ALL,
    "VoyageQwen3BidirectionalEmbedModel": _LAST_ALL,
}
# bidirectional only when the config says so: vLLM has no config hook forcing is_causal for
# them; the layers read `getattr(config, "is_causal", True)` (deepseek_v2.py
# DeepseekV2Attention / DeepseekV2MLAAttention: Attention, MLA included, unless it is False)
CONFIG_CAUSAL_DECODERS: dict[str, tuple[str, str]] = {
    "DeepseekV3BidirectionalModel": _LAST_ALL,
}
# encoder-only models: every attention layer is EncoderOnlyAttention (bert.py, roberta.py,
# bert_with_rope.py, modernbert.py, colbert.py)
ENCODER_ONLY: dict[str, tuple[str, str]] = {
    **{a: _CLS_ALL for a in (
        "BertModel", "BertForSequenceClassification", "BertForMaskedLM", "BgeM3EmbeddingModel",
        "RobertaModel", "RobertaForMaskedLM", "RobertaForSequenceClassification",
        "XLMRobertaModel", "XLMRobertaForSequenceClassification", "GteModel", "GteNewModel",
        "GteNewForSequenceClassification", "NomicBertModel", "ModernBertModel",
        "ModernBertForSequenceClassification", "HF_ColBERT", "ColBERTJinaRobertaModel",
        "ColBERTModernBertModel")},
    **{a: (None, "ALL") for a in (  # type: ignore[misc]
        "BertForTokenClassification", "BertSpladeSparseEmbeddingModel",
        "RobertaForTokenClassification", "XLMRobertaForTokenClassification",
        "ModernBertForTokenClassification")},
}


# pooling architectures whose registry class is a text-generation class (registry.py
# "LlamaModel": ("llama", "LlamaForCausalLM"), "MistralModel": the same, "Qwen2Model":
# Qwen2ForCausalLM, "Gemma2Model": Gemma2ForCausalLM, "DeepseekV3BidirectionalModel":
# DeepseekV3ForCausalLM; 0.31–0.34): ModelConfig._get_default_runner_type resolves
# `--runner auto` to generate for them unless the model folder has a sentence-transformers
# pooling module; the pooling runner converts them (_get_default_convert_type: "Model" → embed)
GENERATIVE_REGISTRY_CLASS = frozenset({"LlamaModel", "MistralModel", "Qwen2Model",
                                       "Gemma2Model", "DeepseekV3BidirectionalModel"})

# vLLM: config/pooler.py SEQ_POOLING_TYPES / TOK_POOLING_TYPES
SEQ_POOLING_TYPES = ("CLS", "LAST", "MEAN")
TOK_POOLING_TYPES = ("ALL", "STEP")

# registry entries whose class is the bare decoder (no *ForCausalLM holding it as `.model`):
# vLLM builds it with prefix "" as the pooling model, so its layers are ".layers.{i}..."
# (registry.py "Gemma3TextModel": ("gemma3", "Gemma3Model"); gemma3.py Gemma3Model:
# make_layers(prefix=f"{prefix}.layers"))
BARE_DECODERS = frozenset({"Gemma3TextModel"})


def pooling_arch(archs: tuple[str, ...]) -> str | None:
    """The first architecture vLLM registers as a pooling model that kvplan plans."""
    return next((a for a in archs if a in DECODER_POOLING or a in BIDIRECTIONAL_DECODERS
                 or a in CONFIG_CAUSAL_DECODERS or a in ENCODER_ONLY), None)


def parse_pooling_type(name: str) -> str:
    """vLLM: transformers_utils/config.py parse_pooling_type — a sentence-transformers pooling
    key or mode ("pooling_mode_mean_tokens", "lasttoken", "cls") → CLS / LAST / MEAN / ..."""
    name = name.replace("pooling_mode_", "") if "pooling_mode_" in name else name
    name = name.split("_", 1)[0] if "_" in name else name
    return ("last" if "lasttoken" in name else name).upper()


def st_pooling_types(pooling_config: Mapping[str, Any]) -> SentenceTransformersPooling:
    """vLLM: get_pooling_config — the pooling module's config.json → (seq, tok) pooling types:
    `pooling_mode` as a string, else each key set to true; the last one of a kind wins."""
    found: dict[str, str] = {}
    for key, value in pooling_config.items():
        if key == "pooling_mode" and isinstance(value, str):
            name = value
        elif value is True:
            name = key
        else:
            continue
        kind = parse_pooling_type(name)
        if kind in SEQ_POOLING_TYPES:
            found["seq_pooling_type"] = kind
        elif kind in TOK_POOLING_TYPES:
            found["tok_pooling_type"] = kind
    return SentenceTransformersPooling(**found)


def _is_causal(cfg: Cfg, arch: str) -> bool:
    """vLLM: hf_config.is_causal (models/config.py: Gemma3TextModelConfig reads
    use_bidirectional_attention; LlamaBidirectionalConfig / Voyage set False)."""
    if arch in BIDIRECTIONAL_DECODERS:
        return False
    text = text_cfg(cfg)
    if arch == "Gemma3TextModel" and text.get("use_bidirectional_attention"):
        return False
    return bool(text.get("is_causal", True))


def as_encoder_only(desc: ModelDescription) -> ModelDescription:
    """Every attention layer runs EncoderOnlyAttention (no KV cache); state layers stay."""
    layers = tuple(layer.model_copy(update={"kind": LayerKind.ENCODER_ONLY})
                   if layer.kind.is_attention else layer for layer in desc.layers)
    return desc.model_copy(update={"layers": layers, "mtp_layers": ()})


def mark_pooling(desc: ModelDescription, top: Cfg) -> ModelDescription:
    """Record the pooling defaults of a pooling architecture (and make a bidirectional one
    encoder-only); other descriptions come back unchanged."""
    arch = pooling_arch(desc.architectures)
    if arch is None:
        return desc
    types = (DECODER_POOLING.get(arch) or BIDIRECTIONAL_DECODERS.get(arch)
             or CONFIG_CAUSAL_DECODERS.get(arch) or ENCODER_ONLY[arch])
    desc = desc.model_copy(update={"pooling_defaults": types})
    if arch in BARE_DECODERS:
        desc = desc.model_copy(update={"layers": tuple(
            layer.model_copy(update={"name": layer.name.removeprefix("model")})
            if layer.name.startswith("model.layers.") else layer for layer in desc.layers)})
    if arch in ENCODER_ONLY or not _is_causal(top, arch):
        desc = as_encoder_only(desc)
    return desc


@dataclass(frozen=True)
class PoolingRunner:
    """vLLM's resolved `--runner pooling` and what it changes at start-up."""

    convert: str  # none (a native pooling class), embed, classify
    seq_pooling_type: str | None
    tok_pooling_type: str
    attn_type: str  # decoder / encoder_only (ModelConfig.attn_type)

    @property
    def supports_chunked_prefill(self) -> bool:
        """vLLM: ModelConfig.is_chunked_prefill_supported (pooler_config set)."""
        if self.attn_type == "encoder_only":
            return False
        return not (self.seq_pooling_type in ("MEAN", "CLS") or self.tok_pooling_type == "STEP")

    # vLLM: is_prefix_caching_supported has the same rule for decoder / encoder-only pooling
    supports_prefix_caching = supports_chunked_prefill


def resolve_runner(desc: ModelDescription, runner: str = "auto", convert: str = "auto"
                   ) -> PoolingRunner | None:
    """vLLM: ModelConfig._get_runner_type / _get_convert_type — None for the generate runner."""
    if runner not in RUNNERS:
        raise InputError(f"--runner {runner!r} is not one of {', '.join(RUNNERS)}")
    if convert not in CONVERTS:
        raise InputError(f"--convert {convert!r} is not one of {', '.join(CONVERTS)}")
    native = desc.pooling_defaults
    generative = _generative_registry_class(desc)
    if runner == "auto":
        # vLLM: _get_runner_type / _get_default_runner_type — a sentence-transformers pooling
        # module first, then the registry class, then the architecture's suffix
        pooled = desc.st_pooling is not None or (native is not None and not generative)
        runner = "pooling" if pooled or convert not in ("auto", "none") else "generate"
    if runner != "pooling":
        # a generation class with is_causal false runs its EncoderOnlyAttention layers under the
        # generate runner too: no KV cache (measured with vLLM 0.34's own code)
        if native is not None and _encoder_only(desc) and not generative:
            raise InputError(f"{desc.source}: vLLM serves {desc.architectures[0]} only with "
                             "--runner pooling (an encoder has no generation runner)")
        return None
    if convert == "auto":
        convert = "none" if native is not None and not generative else "embed"
    seq, tok = native or _LAST_ALL  # as_embedding_model / as_seq_cls_model: LAST, ALL
    encoder = seq == "CLS" or _encoder_only(desc)  # ModelConfig.attn_type (the class default)
    if desc.st_pooling is not None:  # vLLM: the pooler config takes the module's types first
        seq = desc.st_pooling.seq_pooling_type or seq
        tok = desc.st_pooling.tok_pooling_type or tok
    return PoolingRunner(convert=convert, seq_pooling_type=seq, tok_pooling_type=tok,
                         attn_type="encoder_only" if encoder else "decoder")


def _generative_registry_class(desc: ModelDescription) -> bool:
    arch = pooling_arch(desc.architectures)
    return arch is not None and arch in GENERATIVE_REGISTRY_CLASS


def runner_note(desc: ModelDescription, runner: str = "auto", convert: str = "auto"
                ) -> str | None:
    """What the plan says about `--runner auto` when the model folder decides it."""
    if runner != "auto" or convert not in ("auto", "none"):
        return None  # explicit flags are authoritative
    arch = pooling_arch(desc.architectures)
    if desc.st_pooling is not None:
        types = "/".join(t for t in (desc.st_pooling.seq_pooling_type,
                                     desc.st_pooling.tok_pooling_type) if t) or "the class's"
        return ("--runner auto → pooling: the model folder has a sentence-transformers pooling "
                f"module (modules.json; {types} pooling), as vLLM's "
                "ModelConfig._get_default_runner_type reads it")
    if arch is None or arch not in GENERATIVE_REGISTRY_CLASS:
        return None
    if desc.model_folder_read:
        return (f"--runner auto → generate: vLLM registers {arch} with a text-generation class "
                "and the model folder has no sentence-transformers pooling module (modules.json)"
                "; pass --runner pooling to serve it as an embedding model")
    return (f"--runner auto → generate assumed: vLLM registers {arch} with a text-generation "
            "class and picks the pooling runner only when the model folder has a "
            "sentence-transformers modules.json, which kvplan did not see (config.json only); "
            "pass --runner pooling if it has one")


def _encoder_only(desc: ModelDescription) -> bool:
    attn = [layer for layer in desc.layers if layer.kind.is_attention]
    return bool(attn) and all(layer.kind is LayerKind.ENCODER_ONLY for layer in attn)
