"""Helpers for plain-attention decoders whose configuration class is vLLM's own
(vllm/transformers_utils/configs/) or the checkpoint's remote code, which kvplan never runs: it
reads the fields and applies that class's defaults by hand, each family module citing its class.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.config._common import Cfg, attention, finish
from kvplan.config.quant import quantization_info
from kvplan.model import LayerDescription, ModelDescription

# vLLM: ModelArchConfigConvertorBase.derive_max_model_len_and_key — the smallest of these
# attributes of the text config; model_max_length, when set, overrides them all.
_MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_target_positions", "max_sequence_length",
                 "max_seq_length", "seq_len")


# vLLM: config/model.py _get_and_verify_max_len — rope types whose `factor` is not applied
_NO_FACTOR = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")


def rope_factor(cfg: Cfg) -> float:
    """The rope scaling factor vLLM multiplies the derived max length by (`rope_parameters`, or
    the older `rope_scaling` that vLLM patches into it; 1 for the types listed above)."""
    params = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if not isinstance(params, Mapping):
        return 1.0
    nested = [p for p in params.values() if isinstance(p, Mapping) and p]
    factor = 1.0
    for p in nested or [params]:
        if p.get("rope_type", p.get("type", "default")) not in _NO_FACTOR:
            factor = p.get("factor", factor)
    return float(factor) if isinstance(factor, int | float) else 1.0


def class_int(cfg: Cfg, keys: tuple[str, ...], default: int | None, cls: str) -> int:
    """The first of `keys` present in config.json (aliases of one attribute, the winning one
    first), else the config class's default (noted in the warnings); no default → required."""
    for key in keys:
        value = cfg.get_int(key, None)
        if value is not None:
            return value
    if default is None:
        return cfg.req_int(keys[0], f"{cls} has no default for it")
    cfg.warn(f"'{cfg.field(keys[0])}' is absent: used the {cls} default {default}")
    return default


def derived_max_len(cfg: Cfg, class_values: Mapping[str, int] | None = None,
                    cls: str = "config class") -> int | None:
    """vLLM's derived max model length: config.json's values of the length keys, else the ones the
    config class sets (`class_values`), times the rope scaling factor."""
    values: dict[str, int] = {}
    for key in _MAX_LEN_KEYS:
        value = cfg.get_int(key, None)
        if value is not None:
            values[key] = value
    if not values and class_values:
        values = dict(class_values)
        cfg.warn(f"config.json states no maximum length: used the {cls} default "
                 f"{min(values.values())}")
    elif class_values:
        values = {**class_values, **values}
    if "model_max_length" in values:
        derived = values["model_max_length"]
    elif values:
        derived = min(values.values())
    else:
        return None
    return int(derived * rope_factor(cfg))


def uniform_layers(num_layers: int, name: str, *, kv_heads: int, head_size: int
                   ) -> list[LayerDescription]:
    """`num_layers` identical full-attention layers named `name.format(i)`."""
    return [attention(i, name.format(i), kv_heads=kv_heads, head_size=head_size)
            for i in range(num_layers)]


def plain_model(top: Cfg, text: Cfg, hf_quant_config: dict | None, *, family: str,
                layers: list[LayerDescription], max_len: int | None) -> ModelDescription:
    """The description, with vLLM's derived max length in place of the raw field."""
    desc = finish(top, text, family=family, layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
    return desc.model_copy(update={"max_position_embeddings": max_len})
