"""Architectures vLLM no longer serves, refused with vLLM's own reason.

Data: vLLM's model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS (identical in 0.31.0
and 0.34.0 for these), keeping the entries whose last release is older than every vLLM kvplan
models (0.31-0.34), so the refusal holds for all of them.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvplan.errors import UnsupportedError

# architecture → the last vLLM release that served it
_LAST_SERVED: dict[str, str] = {
    "AquilaForCausalLM": "0.24.0", "AquilaModel": "0.24.0", "ArcticForCausalLM": "0.28.0",
    "AyaVisionForConditionalGeneration": "0.24.0", "BaiChuanForCausalLM": "0.23.0",
    "BaichuanForCausalLM": "0.23.0", "BambaForCausalLM": "0.23.0",
    "ChameleonForConditionalGeneration": "0.28.0", "Cheers": "0.28.0",
    "CheersForConditionalGeneration": "0.28.0", "DonutForConditionalGeneration": "0.10.2",
    "Dots1ForCausalLM": "0.23.0", "ErnieForSequenceClassification": "0.23.0",
    "ErnieForTokenClassification": "0.23.0", "ErnieModel": "0.23.0",
    "Fairseq2LlamaForCausalLM": "0.28.0", "FireRedLIDForConditionalGeneration": "0.28.0",
    "FuyuForCausalLM": "0.25.0", "GritLM": "0.28.0", "Grok1ForCausalLM": "0.24.0",
    "Grok1ModelForCausalLM": "0.24.0", "HCXVisionForCausalLM": "0.28.0",
    "InternLM2VEForCausalLM": "0.23.0", "InternLMForCausalLM": "0.23.0",
    "JAISLMHeadModel": "0.22.0", "MPTForCausalLM": "0.28.0",
    "MantisForConditionalGeneration": "0.24.0", "MiniMaxForCausalLM": "0.23.0",
    "MiniMaxM1ForCausalLM": "0.23.0", "MiniMaxText01ForCausalLM": "0.23.0",
    "MiniMaxVL01ForConditionalGeneration": "0.23.0", "MllamaForConditionalGeneration": "0.10.2",
    "MotifForCausalLM": "0.10.2", "MptForCausalLM": "0.28.0",
    "MusicFlamingoForConditionalGeneration": "0.24.0", "OuroForCausalLM": "0.26.0",
    "PersimmonForCausalLM": "0.25.0", "Phi3SmallForCausalLM": "0.9.2",
    "Phi4FlashForCausalLM": "0.10.2", "Phi4MultimodalForCausalLM": "0.12.0",
    "Plamo2ForCausalLM": "0.26.0", "PrithviGeoSpatialMAE": "0.28.0", "QWenLMHeadModel": "0.23.0",
    "QwenVLForConditionalGeneration": "0.23.0", "RWForCausalLM": "0.28.0",
    "StableLMEpochForCausalLM": "0.28.0", "Tarsier2ForConditionalGeneration": "0.23.0",
    "TarsierForConditionalGeneration": "0.24.0", "TeleChatForCausalLM": "0.25.0",
    "XverseForCausalLM": "0.23.0",
}

# Why, where the registry alone does not say it.
_WHY = {
    "Phi3SmallForCausalLM": "its blocksparse attention had no V1-engine backend",
}


def refuse_retired(source: str, architectures: Iterable[str]) -> None:
    """Raise when an architecture was served by vLLM only before 0.31 (vLLM:
    ModelRegistry._raise_for_unsupported, whose message this repeats)."""
    for arch in architectures:
        last = _LAST_SERVED.get(arch)
        if last is None:
            continue
        why = f" ({_WHY[arch]})" if arch in _WHY else ""
        raise UnsupportedError(
            f"{source}: model architecture {arch} was supported in vLLM until v{last}, and is "
            f"not supported anymore{why}; vLLM 0.31-0.34 refuse to start it",
            hint=f"an older vLLM (<= {last}) serves it; kvplan models vLLM 0.31-0.34 only")
