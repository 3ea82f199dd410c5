"""transformers' configuration classes as the resolver of record (imported lazily).

vLLM reads config.json through transformers: `AutoConfig.from_pretrained` picks the configuration
class registered for `model_type` (never remote code here), which fills defaults, derives fields
(`layer_types`, `head_dim`, ...) and maps aliases (`attribute_map`); `ModelConfig.hf_text_config`
is then `get_text_config()` of it (vLLM: transformers_utils/config.get_hf_text_config). This
module does the same on a parsed dict, offline, without torch. Only the paths that need it import
it: the fast adapters never do.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kvplan.errors import SPECS_HINT, ConfigError, UnsupportedError

# vLLM: transformers_utils/config._CONFIG_ATTRS_MAPPING (llm_config is read as text_config)
_CONFIG_ATTRS_MAPPING = {"llm_config": "text_config"}

# vLLM: transformers_utils/config._CONFIG_REGISTRY entries that reuse a transformers class
# under another model type (kimi_k2 and deepseek_v32 = "DeepseekV3Config")
_VLLM_CONFIG_ALIASES = {"kimi_k2": "deepseek_v3", "deepseek_v32": "deepseek_v3"}


@dataclass(frozen=True)
class Resolved:
    """The resolved configuration, as vLLM's ModelConfig holds it."""

    hf_config: Any  # transformers.PreTrainedConfig
    hf_text_config: Any  # ModelConfig.hf_text_config
    text_key: str | None  # the config.json key the text config came from (None: the top level)

    @property
    def model_type(self) -> str:
        return str(getattr(self.hf_config, "model_type", ""))

    @property
    def text_model_type(self) -> str:
        return str(getattr(self.hf_text_config, "model_type", ""))


class _DropBelowError(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextmanager
def _quiet_transformers() -> Iterator[None]:
    """Import transformers and keep its log lines ("PyTorch was not found", rope validation
    notes) off kvplan's stderr while it resolves: the import-time line through a filter (the
    import resets the level), the rest through the level, restored afterwards."""
    log = logging.getLogger("transformers")
    quiet = _DropBelowError()
    log.addFilter(quiet)
    try:
        import transformers  # noqa: F401
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            yield
        finally:
            log.setLevel(level)
    finally:
        log.removeFilter(quiet)


def transformers_version() -> str:
    with _quiet_transformers():
        import transformers
        return str(transformers.__version__)


def has_config_class(model_type: str) -> bool:
    """Whether vLLM reads `model_type` with a configuration class kvplan resolves: vLLM's own
    (`vllm_configs`, its _CONFIG_REGISTRY) or the installed transformers'."""
    from kvplan.models.resolution.vllm_configs import VLLM_CONFIG_CLASSES, VLLM_OWN_CLASSES
    if model_type in VLLM_CONFIG_CLASSES:
        return True
    if model_type in VLLM_OWN_CLASSES:  # vLLM's class wins; transformers' is never read
        return False
    with _quiet_transformers():
        from transformers import CONFIG_MAPPING
    return _VLLM_CONFIG_ALIASES.get(model_type, model_type) in CONFIG_MAPPING


def has_remote_config(config: Mapping[str, Any]) -> bool:
    """`auto_map` names the checkpoint's own configuration class (remote code)."""
    auto_map = config.get("auto_map")
    return isinstance(auto_map, Mapping) and "AutoConfig" in auto_map


def resolve(config: Mapping[str, Any], source: str, *, raw_fields: bool = False) -> Resolved:
    """config.json → transformers' configuration class instance and its text config.

    vLLM: transformers_utils/config.get_config (AutoConfig path, trust_remote_code=False) and
    get_hf_text_config. vLLM's own class wins for the model types of `vllm_configs` (vLLM:
    _CONFIG_REGISTRY, registered over transformers' class by _maybe_register_hf_config).
    Raises UnsupportedError when neither has a class for the model type (vLLM would need the
    checkpoint's remote code) and ConfigError when the class rejects the values.
    """
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError(f"{source}: config.json has no 'model_type', which transformers needs to "
                          "pick the configuration class", hint=SPECS_HINT)
    from kvplan.models.resolution.vllm_configs import VLLM_CONFIG_CLASSES, VLLM_OWN_CLASSES
    own = VLLM_CONFIG_CLASSES.get(model_type)
    if own is not None:
        config = own.build(config, source)
    with _quiet_transformers():
        from transformers import CONFIG_MAPPING
        class_type = _VLLM_CONFIG_ALIASES.get(model_type, model_type)
        if model_type in VLLM_OWN_CLASSES and own is None:
            # vLLM's own class, not mirrored: transformers' class of that name (newer
            # transformers releases add some) is not what vLLM reads
            class_type = ""
        if own is not None:
            import transformers
            cls = getattr(transformers, own.base or "PretrainedConfig")
        elif class_type not in CONFIG_MAPPING and raw_fields and has_remote_config(config):
            # --trust-remote-code: the checkpoint's class, which kvplan does not run, stores the
            # config.json fields as attributes; transformers' base class does the same
            from transformers import PretrainedConfig
            return _raw(PretrainedConfig, config)
        elif class_type not in CONFIG_MAPPING:
            import transformers
            what = (f"vLLM reads it with its own {VLLM_OWN_CLASSES[model_type]}, which kvplan "
                    "does not mirror" if model_type in VLLM_OWN_CLASSES else
                    f"transformers {transformers.__version__} has no configuration class for it "
                    "(vLLM reads such a config with a config class of its own or the checkpoint's "
                    "remote code, which kvplan does not run)")
            raise UnsupportedError(f"{source}: model_type {model_type!r} has no kvplan adapter "
                                   f"and {what}", hint=SPECS_HINT, vllm_stage="config")
        else:
            cls = CONFIG_MAPPING[class_type]
        try:
            hf_config = cls.from_dict(copy.deepcopy(dict(config)))
        except Exception as exc:  # transformers' strict validation: any failure is the config's
            detail = " ".join(str(exc).split())[:200]
            whose = f"vLLM's {own.name}" if own is not None else f"transformers' {cls.__name__}"
            raise ConfigError(f"{source}: {whose} rejects this config.json "
                              f"({type(exc).__name__}: {detail})") from None
        if own is not None:  # the class's model_type (vLLM: _register_config_class)
            hf_config.model_type = model_type
        for old, new in _CONFIG_ATTRS_MAPPING.items():
            if hasattr(hf_config, old) and not hasattr(hf_config, new):
                hf_config.update({new: getattr(hf_config, old)})
        try:
            text = hf_config.get_text_config()
        except Exception as exc:
            raise ConfigError(f"{source}: transformers cannot find the text config "
                              f"({' '.join(str(exc).split())[:200]})") from None
    if text is not hf_config and not hasattr(text, "num_attention_heads"):
        # vLLM: get_hf_text_config raises the same way
        raise UnsupportedError(f"{source}: the text config of {model_type!r} has no "
                               "num_attention_heads: vLLM does not serve it as a language model",
                               hint=SPECS_HINT)
    return Resolved(hf_config, text, _text_key(hf_config, text))


def _raw(base: Any, config: Mapping[str, Any]) -> Resolved:
    hf_config = base.from_dict(copy.deepcopy(dict(config)))
    return Resolved(hf_config, hf_config, None)


def _text_key(hf_config: Any, text: Any) -> str | None:
    if text is hf_config:
        return None
    for key, value in vars(hf_config).items():
        if value is text:
            return key
    return "text_config"
