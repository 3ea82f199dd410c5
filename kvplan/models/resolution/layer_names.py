"""The names vLLM's model classes give their KV-cache layers, where an adapter's own naming is not
vLLM's: the module a multimodal wrapper builds its language model under, and the attention module
path of the architectures the generic path plans.

Data, extracted from vLLM 0.34.0's own model code (read only when a config needs it):
* kvplan/data/vllm_lm_prefixes_0.34.0.json — tools/vllm_lm_prefix.py: the `prefix=` a wrapper's
  __init__ gives its language model (e.g. `language_model` → `language_model.model.layers.N...`),
  or the module of a bare decoder stack (Idefics3: `model.text_model` → `model.text_model.layers.N...`);
* kvplan/data/vllm_layer_names_0.34.0.json — tools/vllm_layer_names.py: the attention layer names
  of vLLM's model class built on the meta device (e.g. Falcon `transformer.h.{}.self_attention.attn`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

LM_PREFIX_FILE = "vllm_lm_prefixes_0.34.0.json"
LAYER_NAMES_FILE = "vllm_layer_names_0.34.0.json"


@cache
def _load(name: str, key: str) -> dict:  # type: ignore[type-arg]
    with resources.files("kvplan").joinpath("data", name).open(encoding="utf-8") as fh:
        data: dict = json.load(fh)[key]  # type: ignore[type-arg]
    return data


def language_model_prefix(archs: tuple[str, ...]) -> str | None:
    """Where the multimodal wrapper among `archs` builds its language model (vLLM: the wrapper's
    `prefix=maybe_prefix(prefix, "language_model")`); None: no wrapper known."""
    table = _load(LM_PREFIX_FILE, "language_model_prefix")
    for arch in archs:
        if arch in table:
            return str(table[arch])
    return None


def decoder_module(archs: tuple[str, ...]) -> str | None:
    """The module under which the multimodal wrapper among `archs` builds a bare decoder stack as
    its language model, whose layers are `<module>.layers.N` (vLLM: idefics3.py
    `Idefics3Model.text_model = LlamaModel(prefix=maybe_prefix(prefix, "text_model"))` under the
    wrapper's `model`, named by its get_mm_mapping); None: no such wrapper known."""
    table = _load(LM_PREFIX_FILE, "decoder_module")
    for arch in archs:
        if arch in table:
            return str(table[arch])
    return None


def sliding_window_rule(archs: tuple[str, ...]) -> tuple[bool | None, int]:
    """(whether vLLM's model class gives each `sliding_attention` layer its own window, the
    tokens it adds to the config's window) for the first of `archs` whose class was built with
    alternating layer_types (tools/vllm_layer_names.py; Cohere2 adds 1, commandr.py); (None, 0)
    when not extracted."""
    table = _load(LAYER_NAMES_FILE, "per_layer_sliding_window")
    for arch in archs:
        rule = table.get(arch)
        if rule is True or rule is False:
            return rule, 0
        if isinstance(rule, str) and rule.startswith("offset "):
            return True, int(rule.removeprefix("offset "))
    return None, 0


def attention_layer_pattern(archs: tuple[str, ...]) -> str | None:
    """The name vLLM's model class gives each attention layer, `{}` for the layer index, for the
    first of `archs` whose model class was extracted; None when unknown or not one pattern."""
    table = _load(LAYER_NAMES_FILE, "layer_names")
    for arch in archs:
        patterns = table.get(arch)
        if patterns:
            return str(patterns[0]) if len(patterns) == 1 else None
    return None
