"""A model vLLM reads in Mistral format (params.json, adapted by
`kvplan.models.resolution.mistral_format`) → `ModelDescription`.

vLLM builds its model from that adapted config, a plain `PreTrainedConfig` (no transformers
class resolves it): the architecture adapt_config_dict names picks the model class
(MistralForCausalLM, MixtralForCausalLM, MistralLarge3ForCausalLM = DeepseekV3ForCausalLM's
layers, Mamba2ForCausalLM), and a Pixtral / Voxtral wrapper builds that class on its text_config
under `language_model` (pixtral.py / voxtral.py `init_vllm_registered_model(hf_config=
config.text_config, prefix=maybe_prefix(prefix, "language_model"))`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import StartupError, UnsupportedError
from kvplan.models.description import ModelDescription

__all__ = ["describe_mistral_format"]

# vLLM: configs/mistral.py _remap_mistral_vision_args / _remap_mistral_audio_args
WRAPPERS = frozenset({"PixtralForConditionalGeneration", "VoxtralForConditionalGeneration",
                      "VoxtralRealtimeGeneration"})
# vLLM: mistral_large_3.py MistralLarge3ForCausalLM(DeepseekV3ForCausalLM) — same layers
_SAME_LAYERS_AS = {"MistralLarge3ForCausalLM": "DeepseekV3ForCausalLM"}


def describe_mistral_format(config: Mapping[str, Any], *, source: str,
                            hf_quant_config: Mapping[str, Any] | None = None
                            ) -> ModelDescription:
    """Describe the config vLLM builds from a Mistral-format params.json."""
    from kvplan.models import describe_model, wrapper_layer_names

    archs = tuple(config.get("architectures") or ())
    arch = archs[0] if archs else ""
    if arch == "VoxtralRealtimeGeneration":
        raise UnsupportedError(
            f"{source}: Voxtral Realtime (VoxtralRealtimeGeneration) read from its Mistral-format "
            "params.json is not planned by kvplan: its causal audio encoder keeps a KV cache of "
            "its own (whisper_causal.py, sliding windows pooled by audio_config.block_pool_size)",
            hint="kvplan plans Voxtral's language model only for the non-causal encoder "
                 "(VoxtralForConditionalGeneration)")
    if arch in WRAPPERS:
        text = dict(config.get("text_config") or {})
        quant = config.get("quantization_config")
        if quant is not None:
            text["quantization_config"] = quant  # vLLM reads hf_config.quantization_config
        desc = describe_mistral_format(text, source=source, hf_quant_config=hf_quant_config)
        desc = desc.model_copy(update={"architectures": archs,
                                       "model_type": str(config.get("model_type") or "")})
        return wrapper_layer_names(desc)
    if arch == "MistralLarge4ForCausalLM":
        raise UnsupportedError(
            f"{source}: Mistral Large 4 (DSA sparse MLA, MistralLarge4ForCausalLM) read from its "
            "Mistral-format params.json is not planned by kvplan",
            hint="vLLM reads its params.json (adapt_config_dict: mistral_large_4); kvplan does "
                 "not mirror that model's per-layer KV sharing and indexer cache")
    if arch == "MixtralForCausalLM" and config.get("num_local_experts") is None:
        # vLLM: adapt_config_dict leaves params.json's `moe` block as is for Mixtral; the class
        # (mixtral.py MixtralModel: `num_experts=config.num_local_experts`) then fails on a
        # params.json without a config.json to fill num_local_experts
        raise StartupError.vllm(
            "AttributeError", "'PreTrainedConfig' object has no attribute 'num_local_experts'",
            hint="vLLM builds Mixtral from params.json only with a config.json "
                                "beside it that names num_local_experts")
    same = _SAME_LAYERS_AS.get(arch)
    if same is None:
        return describe_model(config, source=source, hf_quant_config=hf_quant_config)
    desc = describe_model({**config, "architectures": [same]}, source=source,
                          hf_quant_config=hf_quant_config)
    return desc.model_copy(update={"architectures": archs})
