"""Helpers for plain-attention decoders whose configuration class is vLLM's own
(vllm/transformers_utils/configs/) or the checkpoint's remote code, which kvplan never runs: it
reads the fields and applies that class's defaults by hand, each family module citing its class.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.models._common import Cfg, attention, finish
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.quant import quantization_info
from kvplan.models.resolution.max_len import POSSIBLE_KEYS, derived_max_model_len


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


def class_lengths(cfg: Cfg, class_values: Mapping[str, int], cls: str = "config class"
                  ) -> dict[str, int]:
    """The length keys the config class sets (vLLM derives the max length from them when
    config.json states none); noted in the warnings when config.json states no length at all."""
    if not any(cfg.has(k) for k in POSSIBLE_KEYS):
        cfg.warn(f"config.json states no maximum length: used the {cls} default "
                 f"{min(class_values.values())}")
    return dict(class_values)


def uniform_layers(num_layers: int, name: str, *, kv_heads: int, head_size: int
                   ) -> list[LayerDescription]:
    """`num_layers` identical full-attention layers named `name.format(i)`."""
    return [attention(i, name.format(i), kv_heads=kv_heads, head_size=head_size)
            for i in range(num_layers)]


def plain_model(top: Cfg, text: Cfg, hf_quant_config: dict | None, *, family: str,
                layers: list[LayerDescription], lengths: Mapping[str, int]) -> ModelDescription:
    """The description; `max_position_embeddings` is vLLM's derived max length (rope factor
    applied, `kvplan.models.resolution.max_len`) so the layers table shows what vLLM would run with."""
    desc = finish(top, text, family=family, layers=layers, length_defaults=lengths,
                  quantization=quantization_info(top, text, hf_quant_config))
    derived, _ = derived_max_model_len(desc)
    return desc.model_copy(update={"max_position_embeddings": int(derived) if derived else None})
