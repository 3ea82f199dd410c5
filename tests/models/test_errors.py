"""Error paths and the generic adapter (hand-written configs)."""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.models.helpers import DELETE, edited, indices, read_config

UNKNOWN: dict[str, Any] = {"architectures": ["FooForCausalLM"], "model_type": "foo",
                           "torch_dtype": "bfloat16", "num_hidden_layers": 4, "hidden_size": 1024,
                           "num_attention_heads": 8, "num_key_value_heads": 2}


def test_missing_required_field_names_field_and_source() -> None:
    config = edited("meta-llama--Llama-3.1-8B", ("num_hidden_layers",), DELETE)
    with pytest.raises(ConfigError) as info:
        describe_model(config, source="meta-llama/Llama-3.1-8B")
    assert "'num_hidden_layers'" in info.value.message
    assert "meta-llama/Llama-3.1-8B" in info.value.message


def test_missing_nested_field_names_its_path() -> None:
    config = edited("Qwen--Qwen3.5-27B", ("text_config", "num_hidden_layers"), DELETE)
    with pytest.raises(ConfigError, match=r"'text_config\.num_hidden_layers'"):
        describe_model(config, source="Qwen/Qwen3.5-27B")


def test_malformed_fields() -> None:
    with pytest.raises(ConfigError, match="must be an integer"):
        describe_model(edited("meta-llama--Llama-3.1-8B", ("num_key_value_heads",), "8"),
                       source="edited")
    with pytest.raises(ConfigError, match="num_hidden_layers is 24"):
        describe_model(edited("openai--gpt-oss-20b", ("num_hidden_layers",), 24,
                              ("layer_types",), ["full_attention"] * 3), source="edited")
    with pytest.raises(ConfigError, match="model dtype"):
        describe_model(edited("meta-llama--Llama-3.1-8B", ("torch_dtype",), "int8"),
                       source="edited")
    with pytest.raises(ConfigError, match="JSON object"):
        describe_model(["not", "a", "dict"], source="list")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="neither 'model_type' nor 'architectures'"):
        describe_model({"num_hidden_layers": 2}, source="bare")


def test_unknown_model_without_layer_pattern_is_unsupported() -> None:
    with pytest.raises(UnsupportedError) as info:
        describe_model(UNKNOWN, source="org/foo")
    # says which field is missing, and how to describe the model by hand
    assert "'layer_types'" in info.value.message
    assert "model_type 'foo'" in info.value.message
    assert info.value.hint is not None and "kvplan check --specs FILE.json" in info.value.hint


def test_unknown_model_with_layer_types_uses_generic_adapter() -> None:
    # hand-written: layer_types [sliding, full, sliding, full], sliding_window 512
    config = {**UNKNOWN, "sliding_window": 512,
              "layer_types": ["sliding_attention", "full_attention"] * 2}
    m = describe_model(config, source="org/foo")
    assert m.family == "generic"
    assert indices(m, LayerKind.SLIDING_WINDOW) == [0, 2]
    assert indices(m, LayerKind.FULL_ATTENTION) == [1, 3]
    # 2 KV heads; 1024 / 8 = 128; window 512
    assert {(layer.num_kv_heads, layer.head_size) for layer in m.layers} == {(2, 128)}
    assert m.layers[0].sliding_window == 512
    # the assumption is written down
    assert any("no kvplan adapter for model_type 'foo'" in w and "Llama-style" in w
               for w in m.warnings)


def test_generic_adapter_refuses_layer_kinds_it_cannot_size() -> None:
    config = {**UNKNOWN, "layer_types": ["mamba", "full_attention"] * 2}
    with pytest.raises(UnsupportedError, match="'mamba'") as info:
        describe_model(config, source="org/foo")
    assert "--specs" in (info.value.hint or "")
    # linear_attention without linear_* fields
    config = {**UNKNOWN, "layer_types": ["linear_attention", "full_attention"] * 2}
    with pytest.raises(UnsupportedError, match="linear_num_key_heads"):
        describe_model(config, source="org/foo")


def test_unknown_layer_type_in_a_known_family() -> None:
    config, _ = read_config("Qwen--Qwen3.5-27B")
    config["text_config"]["layer_types"][0] = "sliding_attention"
    with pytest.raises(UnsupportedError, match="sliding_attention"):
        describe_model(config, source="edited")
