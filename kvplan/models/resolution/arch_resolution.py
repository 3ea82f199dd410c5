"""Architectures vLLM's model registry cannot resolve: its start-up refusal, in its words.

vLLM: model_executor/models/registry.py `_ModelRegistry.inspect_model_cls` (called from
`ModelConfig.__post_init__`, before the max-length check). An architecture with no class in
vLLM's registry (also after `_normalize_arch`'s suffix swap, e.g. `...ForSequenceClassification`
→ `...ForCausalLM`) is served by the Transformers modeling backend when the first one names a
`transformers.PreTrainedModel` class compatible with it (`_try_resolve_transformers`); otherwise
`_raise_for_unsupported` refuses — "was supported until", "not supported in-tree anymore", or
"are not supported for now" with every architecture the registry knows.

Data: kvplan/data/vllm_arch_resolution.json (tools/vllm_arch_resolution.py), per release; a
release without data is not checked here. Remote code is out of scope (resolution/remote_code.py
refuses it first: without --trust-remote-code, an `auto_map` AutoModel never resolves).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from kvplan.errors import StartupError

DATA_FILE = "vllm_arch_resolution.json"

# vLLM: config/model.py _SUFFIX_TO_DEFAULTS (the suffixes _normalize_arch swaps)
_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "ChatModel", "LMHeadModel",
             "ForTextEncoding", "EmbeddingModel", "ForSequenceClassification",
             "ForTokenClassification", "ForAudioClassification", "ForImageClassification",
             "ForVideoClassification", "ClassificationModel", "ForRewardModeling", "RewardModel",
             "Model")


@cache
def _releases() -> dict[str, Any]:
    import json

    with resources.files("kvplan").joinpath("data", DATA_FILE).open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)["releases"]
    return data


def _release(version: str | None) -> dict[str, Any] | None:
    from kvplan.models.resolution.remote_code import LATEST

    return _releases().get(version or LATEST)


def _in_registry(arch: str, registry: frozenset[str]) -> bool:
    """vLLM: _ModelRegistry._normalize_arch — the architecture, or its base model under any of
    the default suffixes (counted as resolvable whichever runner vLLM settles on)."""
    if arch in registry:
        return True
    for suffix in _SUFFIXES:
        if arch.endswith(suffix):
            return any(arch.replace(suffix, repl) in registry for repl in _SUFFIXES)
    return False


def transformers_backend_serves(arch: str, version: str | None) -> bool | None:
    """vLLM: _try_resolve_transformers without remote code — whether the Transformers backend
    takes this architecture (None: no data for the release; no version: the latest)."""
    rel = _release(version)
    if rel is None:
        return None
    return arch in rel["transformers_backend_models"] or arch in rel["transformers_backend"]


def unresolved_architecture_error(config: Mapping[str, Any],
                                  version: str | None) -> StartupError | None:
    """The ValueError vLLM raises when none of `architectures` resolves to a model class (None:
    vLLM resolves one, the config names none, or the release has no data)."""
    rel = _release(version)
    archs = config.get("architectures")
    if rel is None or not isinstance(archs, list) or not archs \
            or not all(isinstance(a, str) for a in archs):
        return None
    registry = frozenset(rel["registry"])
    if any(_in_registry(a, registry) for a in archs):
        return None
    if transformers_backend_serves(archs[0], version):
        return None
    for arch in archs:
        if arch in rel["previously_supported"]:
            message = (f"Model architecture {arch} was supported in vLLM until "
                       f"v{rel['previously_supported'][arch]}, and is not supported anymore. "
                       "Please use an older version of vLLM if you want to use this model "
                       "architecture.")
            return _error(message)
        if arch in rel["out_of_tree"]:
            message = (f"Model architecture {arch} is not supported in-tree anymore. Please "
                       f"install the plugin at {rel['out_of_tree'][arch]} if you want to use this "
                       "model architecture.")
            return _error(message)
    message = (f"Model architectures {archs!r} are not supported for now. Supported "
               f"architectures: dict_keys({rel['registry']!r})")
    return _error(message)


def _error(message: str) -> StartupError:
    return StartupError.vllm(
        "ValueError", message,
        hint="vLLM has no model class for this architecture and the Transformers backend does "
             "not take it; describe the layers with `kvplan check --specs FILE.json`")
