"""kvplan's port of vLLM's generic accessors equals vLLM's own, on every real config.

tests/data/vllm_accessors_0.34.0.json is vLLM 0.34.0's ModelArchConfigConvertor output
(tools/vllm_accessors.py, run in the oracle's venv with transformers 5.20.2): vLLM's numbers,
not kvplan's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import UnsupportedError
from kvplan.models import describe_model
from kvplan.models.resolution import accessors as acc
from kvplan.models.resolution.resolve import resolve
from tests.models.helpers import read_config

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "data"
                     / "vllm_accessors_0.34.0.json").read_text())


def test_golden_is_vllm_0_34_0() -> None:
    assert GOLDEN["vllm_version"] == "0.34.0"


# configs the generic accessors do not reproduce, and the fast adapter that plans them instead
# (its numbers are checked against vLLM's planner in tests/config/test_frontier_golden.py)
GENERIC_DIFFERS = {
    "deepseek-ai--DeepSeek-V4-Flash": "DeepSeek-V4's compress-ratio MLA (head_dim, no "
                                      "kv_lora_rank): kvplan.models.families.deepseek_v4",
    "deepseek-ai--DeepSeek-V4-Pro": "DeepSeek-V4's compress-ratio MLA: kvplan.models.families.deepseek_v4",
    "moonshotai--Kimi-Linear-48B-A3B-Instruct": "vLLM reads it with its own KimiLinearConfig "
        "(no layer_types); transformers' class derives them: kvplan.models.families.kimi",
    "handmade--Inkling": "vLLM reads it with its own InklingMMConfig (per-layer SWA heads the "
                         "generic accessors do not give): kvplan.models.families.inkling",
    "handmade--flint-defaults": "vLLM reads it with its own FlintConfig (absent layer_types: all "
        "full); transformers 5.24's class derives a sliding pattern: kvplan.models.families.flint",
}


@pytest.mark.parametrize("name", sorted(GOLDEN["configs"]))
def test_accessors_equal_vllm(name: str) -> None:
    want = GOLDEN["configs"][name]
    config = read_config(name)[0]
    if "error" in want:  # vLLM itself reads it only with the checkpoint's remote code
        assert config["model_type"] in want["error"]
        return
    try:
        r = resolve(config, name)
        if name in GENERIC_DIFFERS:
            raise UnsupportedError(GENERIC_DIFFERS[name])
    except UnsupportedError:
        # a config class vLLM registers itself (ChatGLMConfig, KimiK3Config, ...): the fast
        # adapter that reads it by hand must give vLLM's layer count and heads
        m = describe_model(config, source=name)
        attn = {x.index: x for x in m.layers if x.kind.is_attention and x.head_size}
        assert len({x.index for x in m.layers}) == want["num_hidden_layers"]
        if name not in GENERIC_DIFFERS:  # DeepSeek-V4's caches each have their own head size
            assert {want["head_size"][i] for i in attn} == {x.head_size for x in attn.values()}
        return
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
    from tests.models.helpers import HF_CONFIGS
    assert {p.parent.name for p in HF_CONFIGS.glob("*/config.json")} <= set(GOLDEN["configs"])
