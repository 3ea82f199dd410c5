"""`--hf-overrides` as vLLM 0.34 applies it (ModelConfig.__post_init__ / _apply_dict_overrides /
_update_nested), checked on a transformers config in vLLM's own code during development: a
nested config merges key by key, a top-level dict parameter is replaced, flat values go to the
top-level config only."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.models.resolution.overrides import apply_hf_overrides, hf_overrides_json, parse_hf_overrides
from tests.models.helpers import HF_CONFIGS

QWEN3 = HF_CONFIGS / "Qwen--Qwen3-8B"
QWEN25VL = json.loads((HF_CONFIGS / "Qwen--Qwen2.5-VL-7B-Instruct" / "config.json").read_text())


def test_nested_config_merges_top_level_dict_replaces_flat_goes_top() -> None:
    # hand-made overrides on a real multimodal config, one per branch of vLLM's rule
    ov = {"text_config": {"max_position_embeddings": 65536, "rope_scaling": {"factor": 2.0}},
          "rope_scaling": {"rope_type": "default"}, "sliding_window": 99}
    base = {**QWEN25VL, "text_config": {"rope_scaling": {"rope_type": "mrope", "x": 1}}}
    out = apply_hf_overrides(base, ov)
    assert out["text_config"]["max_position_embeddings"] == 65536
    assert out["text_config"]["rope_scaling"] == {"rope_type": "mrope", "x": 1, "factor": 2.0}
    assert out["rope_scaling"] == {"rope_type": "default"}  # replaced, not merged
    assert out["sliding_window"] == 99 and "sliding_window" not in out["text_config"]
    assert base["text_config"] == {"rope_scaling": {"rope_type": "mrope", "x": 1}}  # unchanged


def test_a_dict_key_that_is_not_a_nested_config_is_replaced() -> None:
    out = apply_hf_overrides({"quantization_config": {"a": 1, "b": 2}}, {"quantization_config":
                                                                           {"a": 3}})
    assert out["quantization_config"] == {"a": 3}


@pytest.mark.parametrize("text,problem", [("{bad", "not JSON"), ("[1]", "JSON object"),
                                          ("3", "JSON object")])
def test_bad_overrides_are_input_errors(text: str, problem: str) -> None:
    with pytest.raises(InputError, match=problem):
        parse_hf_overrides(text)


def test_canonical_json_is_the_same_for_a_dict_and_its_text() -> None:
    assert hf_overrides_json({"b": 1, "a": {"y": 2, "x": 1}}) == hf_overrides_json(
        '{"a": {"x": 1, "y": 2}, "b": 1}') == '{"a": {"x": 1, "y": 2}, "b": 1}'
    assert hf_overrides_json("{}") is None and hf_overrides_json(None) is None


def test_max_position_embeddings_override_lets_a_longer_context_start() -> None:
    # Qwen3-8B: max_position_embeddings 40960; 128k is refused as vLLM does, and starts once the
    # override raises the derived length (vLLM 0.34 does not scale it by a YaRN factor)
    runner = CliRunner()
    args = ["check", str(QWEN3), "--gpu", "H100", "--max-model-len", "128k", "--json"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1 and "greater than the derived max_model_len" in refused.output
    yarn = {"rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                             "original_max_position_embeddings": 32768}}
    still = runner.invoke(app, [*args, "--hf-overrides", json.dumps(yarn)])
    assert still.exit_code == 1 and "max_position_embeddings=40960" in still.output
    ok = runner.invoke(app, [*args, "--hf-overrides",
                             json.dumps({**yarn, "max_position_embeddings": 131072})])
    assert ok.exit_code == 0, ok.output
    plan = json.loads(ok.stdout)
    assert plan["max_model_len"] == 128_000  # vLLM's human_readable_int: k = 10^3
    assert any("--hf-overrides: max_position_embeddings, rope_scaling" in w
               for w in plan["warnings"])
    api = kvplan.check(str(QWEN3), gpu="H100", max_model_len="128k",
                       hf_overrides={**yarn, "max_position_embeddings": 131072})
    assert api.model_dump(mode="json") == plan


def test_serve_line_and_ci_entry_take_hf_overrides() -> None:
    runner = CliRunner()
    serve = (f"vllm serve {QWEN3} --max-model-len 131072 "
             "--hf-overrides '{\"max_position_embeddings\": 131072}'")
    res = runner.invoke(app, ["check", "--serve", serve, "--gpu", "H100", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["max_model_len"] == 131072
    from kvplan.pipeline.batch import request_from_entry

    req = request_from_entry({"model": str(QWEN3), "hf_overrides": {"max_position_embeddings":
                                                                     131072}}, {}, "test")
    assert req.hf_overrides == '{"max_position_embeddings": 131072}'
