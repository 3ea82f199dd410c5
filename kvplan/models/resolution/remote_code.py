"""Configs vLLM reads only with `--trust-remote-code`, and quantizations it serves only with
`--allow-deprecated-quantization`: vLLM's start-up refusals, in its words.

Data: kvplan/data/vllm_config_types.json (tools/vllm_config_types.py), per release: vLLM's own
configuration classes (`_CONFIG_REGISTRY`), `_ARCHITECTURE_TO_MODEL_TYPE`,
`_SPECULATIVE_DECODING_CONFIGS`, the model types of the transformers release it pins, and
`DEPRECATED_QUANTIZATION_METHODS`. Pure: whether the model is a local folder is the caller's.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from kvplan.errors import StartupError

DATA_FILE = "vllm_config_types.json"
LATEST = "0.34.0"
REMOTE_CODE_NOTE = (
    "--trust-remote-code: vLLM would run the checkpoint's own configuration code; kvplan planned "
    "from the raw config.json fields through vLLM's generic accessors, which that code may "
    "change (defaults, derived or renamed fields)")


@cache
def _releases() -> dict[str, Any]:
    import json

    with resources.files("kvplan").joinpath("data", DATA_FILE).open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)["releases"]
    return data


def _release(version: str | None) -> dict[str, Any]:
    table = _releases()
    return table.get(version or LATEST) or table[LATEST]


def vllm_model_type(config: Mapping[str, Any], version: str | None = None) -> str | None:
    """vLLM: HFConfigParser.parse — the model type it looks the config class up by."""
    model_type = config.get("model_type")
    if model_type is None and config.get("speculators_config") is not None:
        return "speculators"
    archs = config.get("architectures")
    if model_type is None and isinstance(archs, list) and archs and isinstance(archs[0], str):
        return _release(version)["architecture_to_model_type"].get(archs[0])
    return model_type if isinstance(model_type, str) else None


def needs_remote_code(config: Mapping[str, Any], version: str | None = None) -> bool:
    """Whether vLLM (trust_remote_code=False) refuses this config: its model type has no
    configuration class in vLLM or in the transformers release vLLM pins, and `auto_map` names
    the checkpoint's own AutoConfig (transformers: AutoConfig.from_pretrained,
    has_remote_code and not has_local_code)."""
    rel = _release(version)
    model_type = vllm_model_type(config, version)
    if model_type in rel["vllm_config_registry"] or model_type in rel[
            "speculative_decoding_configs"] or model_type in rel["architecture_to_model_type"].values():
        return False
    auto_map = config.get("auto_map")
    has_remote_code = isinstance(auto_map, Mapping) and "AutoConfig" in auto_map
    return has_remote_code and model_type not in rel["transformers_model_types"]


def remote_code_error(config: Mapping[str, Any], model_name: str,
                      local_abspath: str | None) -> StartupError:
    """The ValueError transformers raises through vLLM (resolve_trust_remote_code). `model_name`
    is the model as given to vLLM; `local_abspath` its absolute folder when it is a local one.
    (AutoConfig passes the `--` upstream repository of `auto_map` as the error message.)"""
    class_ref = str(config["auto_map"]["AutoConfig"])
    if "--" in class_ref:
        head = class_ref.split("--")[0]
    elif local_abspath is not None:
        head = (f"The repository {model_name} contains custom code which must be executed to "
                "correctly load the model. You can inspect the repository content at "
                f"{local_abspath} .\n")
    else:
        head = (f"The repository {model_name} contains custom code which must be executed to "
                "correctly load the model. You can inspect the repository content at "
                f"https://hf.co/{model_name} .\n")
    message = (f"{head} You can inspect the repository content at https://hf.co/{model_name}.\n"
               "Please pass the argument `trust_remote_code=True` to allow custom code to be run.")
    return StartupError.vllm("ValueError", message, cause="trust_remote_code",
                             hint="pass --trust-remote-code (vLLM runs the checkpoint's own code)")


def known_model_type(model_type: str | None, version: str | None = None) -> bool:
    """Whether vLLM reads this model type with a configuration class of its own or of the
    transformers release it pins (no remote code)."""
    rel = _release(version)
    return model_type is not None and (
        model_type in rel["vllm_config_registry"] or model_type in rel["transformers_model_types"]
        or model_type in rel["speculative_decoding_configs"]
        or model_type in rel["architecture_to_model_type"].values())


def unknown_model_type_error(config: Mapping[str, Any], model_name: str) -> StartupError:
    """transformers' AutoConfig.from_pretrained refusal of a model type it has no class for (or
    of a config without one), raised through vLLM's config parser."""
    model_type = config.get("model_type")
    if model_type is None:
        message = (f"Unrecognized model in {model_name}. Should have a `model_type` key in its "
                   "config.json.")
    else:
        message = (
            f"The checkpoint you are trying to load has model type `{model_type}` but Transformers "
            "does not recognize this architecture. This could be because of an issue with the "
            "checkpoint, or because your version of Transformers is out of date.\n\nYou can update "
            "Transformers with the command `pip install --upgrade transformers`. If this does not "
            "work, and the checkpoint is very new, then there may not be a release version that "
            "supports this model yet. In this case, you can get the most up-to-date code by "
            "installing Transformers from source with the command `pip install "
            "git+https://github.com/huggingface/transformers.git`")
    return StartupError.vllm("ValueError", message,
                             hint="vLLM has no configuration class for this model type; a newer "
                                  "vLLM (or the checkpoint's remote code) may")


def check_config_readable(config: Mapping[str, Any], *, model_name: str,
                          local_abspath: str | None, trust_remote_code: bool,
                          version: str | None = None) -> str | None:
    """vLLM's first start-up step, reading config.json (HFConfigParser.parse): raise its refusal
    for a config that needs the checkpoint's code without `--trust-remote-code`, or whose model
    type no configuration class knows; with the flag, the note that kvplan planned the raw
    fields (None when no remote code is involved)."""
    if needs_remote_code(config, version):
        if not trust_remote_code:
            raise remote_code_error(config, model_name, local_abspath)
        return REMOTE_CODE_NOTE
    auto_map = config.get("auto_map")
    if isinstance(auto_map, Mapping) and "AutoConfig" in auto_map:
        return None  # a known model type: its class wins over the checkpoint's code
    if not known_model_type(vllm_model_type(config, version), version):
        raise unknown_model_type_error(config, model_name)
    return None


def check_deprecated_quantization(method: str | None, *, allow: bool,
                                  version: str | None = None) -> str | None:
    """vLLM: ModelConfig._verify_quantization — a deprecated method refuses to start unless
    `--allow-deprecated-quantization`, which turns it into a warning. vLLM raises
    `ValueError(msg, method)` (two arguments), so its message is the tuple's repr."""
    if method is None or method not in _release(version)["deprecated_quantization_methods"]:
        return None
    text = ("The quantization method %s is deprecated and will be removed in future versions of "
            "vLLM.")
    if allow:
        return "vLLM warns: " + text.replace("%s", method)
    raise StartupError(
        f"vLLM would raise ValueError: ({text + ' To bypass, set `--allow-deprecated-quantization`.'!r}"
        f", {method!r})",
        hint="pass --allow-deprecated-quantization (vLLM then serves it with a warning)")
