"""What a vLLM release refuses before it builds anything: architectures its model registry does
not have yet, GLM-5.3-Flash under 0.31, deprecated quantization methods without the flag."""

from __future__ import annotations

from kvplan.engines.vllm.build.deployment import Deployment
from kvplan.engines.vllm.profiles import VllmProfile
from kvplan.errors import UnsupportedError
from kvplan.models.description import LayerKind, ModelDescription

# vLLM: model_executor/models/registry.py — architectures a release does not register yet
ARCH_FIRST_RELEASE = {"KimiK31ForConditionalGeneration": "0.34.0",
                      "MiniCPMV4_7ForConditionalGeneration": "0.32.0",
                      "MiniCPMOcrForConditionalGeneration": "0.33.0",
                      "Nemotron3_5TranscribeForConditionalGeneration": "0.34.0",
                      "AliceAIForCausalLM": "0.33.0",
                      "Lfm3ForCausalLM": "0.34.0", "Lfm3VlForConditionalGeneration": "0.34.0",
                      "Lfm3AudioForConditionalGeneration": "0.34.0", "ZayaForCausalLM": "0.34.0",
                      "FlintForCausalLM": "0.33.0", "DoryForCausalLM": "0.33.0",
                      "CanaryForConditionalGeneration": "0.34.0",
                      "Qwen3XPressModel": "0.33.0", "DFlashQwen3XPressModel": "0.33.0"}


def check_release_serves(model: ModelDescription, profile: VllmProfile) -> None:
    """What this release refuses for the model before it builds anything."""
    version = profile.version

    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split("."))

    for arch in model.architectures[:1]:
        first = ARCH_FIRST_RELEASE.get(arch)
        if first is not None and key(version) < key(first):
            raise UnsupportedError(
                f"vLLM {version} does not serve {arch}: its model registry has it from "
                f"{first} on", hint=f"plan it with --vllm {first} or later")
    if profile.glm5_next_grouping and any(layer.kind is LayerKind.KPOOL_TAIL
                                          for layer in model.layers):
        # vLLM 0.31: KpoolTailSpec tails, storage_block_size, its own Glm5NextConfig defaults
        raise UnsupportedError("GLM-5.3-Flash (Glm5Next) under vLLM 0.31 (KpoolTailSpec tails, "
                               "storage_block_size) is not modelled by kvplan",
                               hint="plan it with --vllm 0.32.0 or later")


def deprecated_quantization(model: ModelDescription, dep: Deployment,
                            profile: VllmProfile) -> list[str]:
    """vLLM: ModelConfig._verify_quantization, right after the max-length check — a deprecated
    quantization method refuses to start without --allow-deprecated-quantization."""
    from kvplan.models.resolution.remote_code import check_deprecated_quantization
    note = check_deprecated_quantization(model.quantization.method,
                                         allow=dep.allow_deprecated_quantization,
                                         version=profile.version)
    return [note] if note else []
