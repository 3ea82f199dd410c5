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


def derived_max_len(cfg: Cfg, class_values: Mapping[str, int] | None = None) -> int | None:
    """vLLM's derived max model length: config.json's values of the length keys, else the ones the
    config class sets (`class_values`)."""
    values: dict[str, int] = {}
    for key in _MAX_LEN_KEYS:
        value = cfg.get_int(key, None)
        if value is None and class_values is not None:
            value = class_values.get(key)
        if value is not None:
            values[key] = value
    if "model_max_length" in values:
        return values["model_max_length"]
    return min(values.values()) if values else None


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
