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
from typing import Any

from kvplan.errors import ConfigError, KvplanError, UnsupportedError
from kvplan.models import coverage as _coverage
from kvplan.models import deepseek, gemma, generic, gpt_oss, lfm2, llama, mamba, mimo, minimax, qwen
from kvplan.models import deepseek_v4 as deepseek_v4
from kvplan.models import drafts as _drafts
from kvplan.models import kimi as kimi
from kvplan.models._common import SPECS_HINT, Cfg, architectures, text_cfg
from kvplan.models.chatglm import describe_chatglm
from kvplan.models.description import ModelDescription
from kvplan.models.drafts import is_draft_architecture, mtp_draft
from kvplan.models.exaone import describe_exaone
from kvplan.models.flint import describe_flint
from kvplan.models.internlm2 import describe_internlm2
from kvplan.models.minicpm3 import describe_minicpm3
from kvplan.models.nemotron_nas import describe_nemotron_nas
from kvplan.models.openpangu import describe_openpangu
from kvplan.models.retired import refuse_retired

__all__ = ["describe_draft", "describe_model", "mtp_draft", "supported_architectures"]

_Adapter = Callable[[Cfg, "dict[str, Any] | None"], ModelDescription]

_LLAMA = partial(llama.describe_llama, family="llama")
_MISTRAL = partial(llama.describe_llama, family="mistral")
_MIXTRAL = partial(llama.describe_llama, family="mixtral")
_QWEN2 = partial(qwen.describe_qwen_dense, family="qwen2")
_QWEN3 = partial(qwen.describe_qwen_dense, family="qwen3")
_QWEN3_MOE = partial(qwen.describe_qwen_dense, family="qwen3_moe")
_QWEN3_NEXT = partial(qwen.describe_qwen_gdn, family="qwen3_next")
_QWEN3_5 = partial(qwen.describe_qwen_gdn, family="qwen3_5")
_GEMMA2 = partial(gemma.describe_gemma2_3, family="gemma2")
_GEMMA3 = partial(gemma.describe_gemma2_3, family="gemma3")

# vLLM: model_executor/models/registry.py — architecture → model file
_BY_ARCH: dict[str, _Adapter] = {
    "LlamaForCausalLM": _LLAMA,
    "MistralForCausalLM": _MISTRAL,
    "MixtralForCausalLM": _MIXTRAL,
    "Llama4ForCausalLM": llama.describe_llama4,
    "Llama4ForConditionalGeneration": llama.describe_llama4,
    "Qwen2ForCausalLM": _QWEN2,
    "Qwen3ForCausalLM": _QWEN3,
    "Qwen3MoeForCausalLM": _QWEN3_MOE,
    "Qwen3NextForCausalLM": _QWEN3_NEXT,
    "Qwen3_5ForCausalLM": _QWEN3_5,
    "Qwen3_5MoeForCausalLM": _QWEN3_5,
    "Qwen3_5ForConditionalGeneration": _QWEN3_5,
    "Qwen3_5MoeForConditionalGeneration": _QWEN3_5,
    "DeepseekForCausalLM": deepseek.describe_deepseek,
    "DeepseekV2ForCausalLM": deepseek.describe_deepseek,
    "DeepseekV3ForCausalLM": deepseek.describe_deepseek,
    "DeepseekV32ForCausalLM": deepseek.describe_deepseek,
    "GlmMoeDsaForCausalLM": deepseek.describe_deepseek,
    "Gemma2ForCausalLM": _GEMMA2,
    "Gemma3ForCausalLM": _GEMMA3,
    "Gemma3ForConditionalGeneration": _GEMMA3,
    "Gemma3nForCausalLM": gemma.describe_gemma3n,
    "Gemma3nForConditionalGeneration": gemma.describe_gemma3n,
    "Gemma4ForCausalLM": gemma.describe_gemma4,
    "Gemma4ForConditionalGeneration": gemma.describe_gemma4,
    "GptOssForCausalLM": gpt_oss.describe_gpt_oss,
    "MambaForCausalLM": mamba.describe_mamba1,
    "FalconMambaForCausalLM": mamba.describe_mamba1,
    "Mamba2ForCausalLM": mamba.describe_mamba2,
    "JambaForCausalLM": mamba.describe_jamba,
    "NemotronHForCausalLM": mamba.describe_nemotron_h,
    "FalconH1ForCausalLM": mamba.describe_falcon_h1,
    "GraniteMoeHybridForCausalLM": mamba.describe_granite_hybrid,
    "Lfm2ForCausalLM": lfm2.describe_lfm2,
    "MiniMaxM2ForCausalLM": minimax.describe_minimax_m2,
    "MiniMaxText01ForCausalLM": minimax.describe_minimax_linear,
    "MiniMaxM1ForCausalLM": minimax.describe_minimax_linear,
    "MiniMaxForCausalLM": minimax.describe_minimax_linear,
    "MiMoV2FlashForCausalLM": mimo.describe_mimo_v2,
    "MiMoV2ForCausalLM": mimo.describe_mimo_v2,
    # config classes transformers lacks (vLLM's own or the checkpoint's remote code)
    "ChatGLMModel": describe_chatglm,
    "ChatGLMForConditionalGeneration": describe_chatglm,
    "ExaoneForCausalLM": describe_exaone,
    "InternLM2ForCausalLM": describe_internlm2,
    "MiniCPM3ForCausalLM": describe_minicpm3,
    "DeciLMForCausalLM": describe_nemotron_nas,
    "FlintForCausalLM": describe_flint,  # vLLM 0.33+
    "PanguEmbeddedForCausalLM": describe_openpangu,
    "PanguProMoEV2ForCausalLM": describe_openpangu,
    "PanguUltraMoEForCausalLM": describe_openpangu,
    "DeepseekVLV2ForCausalLM": deepseek.describe_deepseek,
    "KimiLinearForCausalLM": kimi.describe_kimi_linear,
    "KimiK3ForConditionalGeneration": kimi.describe_kimi_linear,
    "KimiK31ForConditionalGeneration": kimi.describe_kimi_linear,  # vLLM 0.34 only
    "DeepseekV4ForCausalLM": deepseek_v4.describe_deepseek_v4,
    "DeepseekV4ForConditionalGeneration": deepseek_v4.describe_deepseek_v4,
    "DeepseekV41ForCausalLM": deepseek_v4.describe_deepseek_v41,
    "MiniMaxM3SparseForCausalLM": minimax.describe_minimax_m3_sparse,
    "MiniMaxM3SparseForConditionalGeneration": minimax.describe_minimax_m3_sparse,
    # vLLM: gemma4_unified.py — encoder-free towers, the same Gemma4ForCausalLM language model
    "Gemma4UnifiedForConditionalGeneration": gemma.describe_gemma4,
}

# model_type → adapter, for configs without a known architecture
_BY_MODEL_TYPE: dict[str, _Adapter] = {
    "llama": _LLAMA, "mistral": _MISTRAL, "mixtral": _MIXTRAL,
    "llama4": llama.describe_llama4, "llama4_text": llama.describe_llama4,
    "qwen2": _QWEN2, "qwen3": _QWEN3, "qwen3_moe": _QWEN3_MOE, "qwen3_next": _QWEN3_NEXT,
    "qwen3_5": _QWEN3_5, "qwen3_5_moe": _QWEN3_5, "qwen3_5_text": _QWEN3_5,
    "qwen3_5_moe_text": _QWEN3_5,
    "deepseek": deepseek.describe_deepseek, "deepseek_v2": deepseek.describe_deepseek,
    "deepseek_v3": deepseek.describe_deepseek, "deepseek_v32": deepseek.describe_deepseek,
    "kimi_k2": deepseek.describe_deepseek,
    "glm_moe_dsa": deepseek.describe_deepseek,
    "gemma2": _GEMMA2, "gemma3": _GEMMA3, "gemma3_text": _GEMMA3,
    "gemma3n": gemma.describe_gemma3n, "gemma3n_text": gemma.describe_gemma3n,
    "gemma4": gemma.describe_gemma4, "gemma4_text": gemma.describe_gemma4,
    "gpt_oss": gpt_oss.describe_gpt_oss,
    "mamba": mamba.describe_mamba1, "falcon_mamba": mamba.describe_mamba1,
    "mamba2": mamba.describe_mamba2, "jamba": mamba.describe_jamba,
    "nemotron_h": mamba.describe_nemotron_h, "falcon_h1": mamba.describe_falcon_h1,
    "granitemoehybrid": mamba.describe_granite_hybrid,
    "lfm2": lfm2.describe_lfm2,
    "minimax_m2": minimax.describe_minimax_m2,
    "minimax": minimax.describe_minimax_linear, "minimax_text_01": minimax.describe_minimax_linear,
    "minimax_m1": minimax.describe_minimax_linear,
    "mimo_v2_flash": mimo.describe_mimo_v2, "mimo_v2": mimo.describe_mimo_v2,
    "chatglm": describe_chatglm, "exaone": describe_exaone,
    "internlm2": describe_internlm2, "minicpm3": describe_minicpm3,
    "nemotron-nas": describe_nemotron_nas,
    "flint": describe_flint,
    "PanguEmbedded": describe_openpangu, "pangu_ultra_moe": describe_openpangu,
    "deepseek_vl_v2": deepseek.describe_deepseek,
    "kimi_linear": kimi.describe_kimi_linear,
    "deepseek_v4": deepseek_v4.describe_deepseek_v4,
}


def supported_architectures() -> tuple[str, ...]:
    """Architectures with a dedicated adapter (for `kvplan --help` / docs)."""
    return tuple(sorted(_BY_ARCH))


def adapter_name(adapter: _Adapter) -> str:
    """The name the coverage table uses for a fast adapter (`adapter:<name>`)."""
    if isinstance(adapter, partial):
        return str(adapter.keywords.get("family") or adapter.func.__name__.removeprefix("describe_"))
    return adapter.__name__.removeprefix("describe_")


def fast_adapter_names() -> dict[str, str]:
    """Architecture → fast adapter name, for the coverage table's consistency test."""
    return {arch: adapter_name(adapter) for arch, adapter in _BY_ARCH.items()}


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


def _describe_through_transformers(top: Cfg, quant: dict[str, Any] | None) -> ModelDescription:
    """Every config the fast adapters do not cover: transformers resolves it (lazily imported).
    A type transformers has no class for still reaches a fast adapter by its text model_type."""
    from kvplan.models.resolve import has_config_class
    from kvplan.models.resolved import describe_resolved, encoder_cache_note
    model_type = top.get("model_type")
    text_type = text_cfg(top).get("model_type")
    if not isinstance(model_type, str) or not has_config_class(model_type):
        if isinstance(text_type, str) and text_type in _BY_MODEL_TYPE:
            desc = _BY_MODEL_TYPE[text_type](top, quant)
            note = encoder_cache_note(architectures(top))
            return desc if note is None else desc.model_copy(
                update={"warnings": desc.warnings + (note,)})
        return generic.describe_generic(top, quant)  # plans from layer_types, or refuses
    return describe_resolved(top, quant, _BY_MODEL_TYPE)


def coverage_refusal(source: str, archs: tuple[str, ...]) -> UnsupportedError | None:
    """The coverage table's refusal for these architectures, in words (None: not refused)."""
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
        refuse_retired(source, archs)
    adapter = _pick(top)
    quant = dict(hf_quant_config) if hf_quant_config is not None else None
    with malformed_config_guard(source):
        return adapter(top, quant)


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
    with malformed_config_guard(source):
        return _drafts.describe_draft(config, source=source, method=method, target=target,
                                      hf_quant_config=hf_quant_config)
