"""What vLLM's model class raises while it is built on a Hugging Face-format config.json that
lacks a field only vLLM's Mistral-format reading gives (vLLM 0.34; data, one entry per class).

vLLM picks the config format before anything else (transformers_utils/config.py get_config,
config_format "auto"): a folder or hub repo with consolidated*.safetensors
(repo_utils.is_mistral_model_repo) and params.json is read in Mistral format (params.json →
adapt_config_dict); any other is read from config.json through transformers. The classes below
read a field on the constructor path that transformers' configuration class never sets, so on an
HF-format config vLLM fails while building the model, after its config checks.
"""

from __future__ import annotations

from kvplan.models._common import Cfg, architectures
from kvplan.models.description import ModelDescription

# vLLM: model_executor/models/voxtral.py VoxtralForConditionalGeneration.__init__
# (`self.downsample_factor = self.config.audio_config.downsample_factor`); voxtral_realtime.py
# VoxtralRealtimeGeneration subclasses it. architecture → (sub-config key, field read)
_READS = {
    "VoxtralForConditionalGeneration": ("audio_config", "downsample_factor"),
    "VoxtralRealtimeGeneration": ("audio_config", "downsample_factor"),
}

# transformers' class of the sub-config, by the top-level model type (VoxtralConfig /
# VoxtralRealtimeConfig build their audio_config with these)
_SUB_CONFIG_CLASS = {
    ("voxtral", "audio_config"): "VoxtralEncoderConfig",
    ("voxtral_realtime", "audio_config"): "VoxtralRealtimeEncoderConfig",
}


def with_constructor_error(desc: ModelDescription, top: Cfg) -> ModelDescription:
    """`desc` with `hf_format_constructor_error` set when vLLM's class for the config's
    architecture reads a field its HF-format config.json does not have."""
    archs = architectures(top)
    arch = next((a for a in archs if a in _READS), None)
    if arch is None:
        return desc
    key, name = _READS[arch]
    sub = top.data.get(key)
    if isinstance(sub, dict) and name in sub:
        return desc
    cls = _SUB_CONFIG_CLASS.get((str(top.get("model_type")), key))
    if cls is None:
        return desc  # a model type whose sub-config class kvplan does not know: not claimed
    return desc.model_copy(update={"hf_format_constructor_error": (
        "AttributeError", f"'{cls}' object has no attribute '{name}'")})
