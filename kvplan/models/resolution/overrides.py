"""vLLM's `--hf-overrides`: a JSON object applied to the model's config before anything reads it.

Mirrors `ModelConfig.__post_init__` (vllm/config/model.py, 0.31-0.34): flat values go to
`PretrainedConfig.update` on the top-level config; dict values either update a nested sub-config
key by key (`_apply_dict_overrides` → `_update_nested`) or, for a dict-valued parameter such as
`rope_scaling`, replace it whole. Pure: config dicts in, a new config dict out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kvplan.errors import InputError

# config keys that hold a nested transformers config (a PretrainedConfig in vLLM), not a value
SUB_CONFIG_KEYS = frozenset({"text_config", "llm_config", "language_config", "vision_config",
                             "audio_config", "encoder_config", "decoder_config", "thinker_config",
                             "talker_config"})


def parse_hf_overrides(value: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """`--hf-overrides` as vLLM takes it: a JSON object (or an already-parsed mapping)."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return dict(value)
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InputError(f"--hf-overrides is not JSON ({exc.msg} at column {exc.colno})",
                         hint="give a JSON object, e.g. --hf-overrides "
                              "'{\"max_position_embeddings\": 131072}'") from None
    if not isinstance(parsed, dict):
        raise InputError(f"--hf-overrides must be a JSON object, got {type(parsed).__name__}",
                         hint="e.g. --hf-overrides '{\"rope_scaling\": {\"rope_type\": \"yarn\", "
                              "\"factor\": 4.0, \"original_max_position_embeddings\": 32768}}'")
    return parsed


def hf_overrides_json(value: str | Mapping[str, Any] | None) -> str | None:
    """--hf-overrides as canonical JSON (hashable, for a frozen request); None when empty."""
    parsed = parse_hf_overrides(value)
    return json.dumps(parsed, sort_keys=True) if parsed else None


def _is_sub_config(key: str, current: Any) -> bool:
    return isinstance(current, Mapping) and (key in SUB_CONFIG_KEYS or "model_type" in current)


def _update_nested(target: dict[str, Any], updates: Mapping[str, Any]) -> None:
    # vLLM ModelConfig._update_nested: inside a nested config, dicts merge into dicts
    for key, value in updates.items():
        current = target.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            child = dict(current)
            _update_nested(child, value)
            target[key] = child
        else:
            target[key] = value


def apply_hf_overrides(config: Mapping[str, Any], overrides: Mapping[str, Any] | None
                       ) -> dict[str, Any]:
    """The config vLLM's model sees after `--hf-overrides` (a new dict; `config` is unchanged).
    vLLM: a top-level dict value updates a nested config, or replaces a dict-valued parameter
    (`_apply_dict_overrides`); flat values go through `PretrainedConfig.update`."""
    out = dict(config)
    for key, value in (overrides or {}).items():
        current = out.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping) and _is_sub_config(
                key, current):
            child = dict(current)
            _update_nested(child, value)
            out[key] = child
        else:
            out[key] = value
    return out


def overrides_note(overrides: Mapping[str, Any] | None) -> str | None:
    """One line for the plan: which config keys the overrides set."""
    if not overrides:
        return None
    return "config overridden by --hf-overrides: " + ", ".join(sorted(overrides))
