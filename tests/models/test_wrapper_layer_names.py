"""Multimodal wrappers' layer names as vLLM 0.34.0's model classes give them: a language model
under the wrapper's `language_model` module (`language_model.model.layers.N...`), or a bare
decoder stack at the wrapper's own module (Idefics3 / SmolVLM: `model.text_model.layers.N...`,
idefics3.py). Configs: the ones tests/models/test_coverage_confirmed.py checks against vLLM's
own output (Idefics3 / SmolVLM built from class defaults, Llava's published one)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kvplan.models import describe_model
from kvplan.models.resolution.layer_names import decoder_module, language_model_prefix

DATA = Path(__file__).resolve().parents[1] / "data"


def _names(folder: Path) -> list[str]:
    path = folder / "config.json"
    desc = describe_model(json.loads(path.read_text()), source=str(path))
    return [layer.name for layer in desc.layers]


@pytest.mark.parametrize("arch", ["Idefics3ForConditionalGeneration",
                                  "SmolVLMForConditionalGeneration"])
def test_bare_decoder_stack_sits_at_the_wrappers_module(arch: str) -> None:
    assert language_model_prefix((arch,)) is None
    assert decoder_module((arch,)) == "model.text_model"
    names = _names(DATA / "coverage-configs" / arch)
    assert names and all(re.fullmatch(r"model\.text_model\.layers\.\d+\.self_attn\.attn", n)
                         for n in names), names[:3]
    assert names == [f"model.text_model.layers.{i}.self_attn.attn" for i in range(len(names))]


def test_language_model_wrapper_keeps_its_prefix() -> None:
    arch = "LlavaForConditionalGeneration"
    assert decoder_module((arch,)) is None
    assert language_model_prefix((arch,)) == "language_model"
    names = _names(DATA / "hf-configs" / "llava-hf--llava-1.5-7b-hf")
    assert names and all(n.startswith("language_model.model.layers.") for n in names)


def test_a_plain_decoder_is_not_renamed() -> None:
    assert decoder_module(("LlamaForCausalLM",)) is None
    assert language_model_prefix(("LlamaForCausalLM",)) is None
