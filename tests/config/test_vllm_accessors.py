"""kvplan's port of vLLM's generic accessors equals vLLM's own, on every real config.

tests/data/vllm_accessors_0.34.0.json is vLLM 0.34.0's ModelArchConfigConvertor output
(tools/vllm_accessors.py, run in the oracle's venv with transformers 5.20.2): vLLM's numbers,
not kvplan's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.config import accessors as acc
from kvplan.config.resolve import resolve
from tests.config.helpers import read_config

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "data"
                     / "vllm_accessors_0.34.0.json").read_text())


def test_golden_is_vllm_0_34_0() -> None:
    assert GOLDEN["vllm_version"] == "0.34.0"


@pytest.mark.parametrize("name", sorted(GOLDEN["configs"]))
def test_accessors_equal_vllm(name: str) -> None:
    want = GOLDEN["configs"][name]
    assert "error" not in want
    r = resolve(read_config(name)[0], name)
    n = acc.num_hidden_layers(r)
    assert n == want["num_hidden_layers"]
    per_layer = acc.per_layer_text_configs(r) or [None] * n
    assert [acc.head_size(r, c) for c in per_layer] == want["head_size"]
    assert [acc.total_num_kv_heads(r, c) for c in per_layer] == want["total_num_kv_heads"]
    value, key = acc.derive_max_model_len(r)
    assert [value, key] == want["derived_max_model_len"]
    assert acc.is_deepseek_mla(r) == want["is_deepseek_mla"]
    assert acc.sliding_window(r) == want["sliding_window"]
    assert acc.layer_types(r) == want["layer_types"]
    if want["dtype"] is not None:
        assert acc.config_dtype(r) == want["dtype"]


def test_every_real_config_has_a_golden_entry() -> None:
    from tests.config.helpers import HF_CONFIGS
    assert {p.parent.name for p in HF_CONFIGS.glob("*/config.json")} <= set(GOLDEN["configs"])
