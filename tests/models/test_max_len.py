"""vLLM's max-model-len rule (`_get_and_verify_max_len`), against vLLM's own outputs.

tests/data/vllm-functions/max_model_len.<v>.json holds what vLLM 0.31/0.32/0.34 itself returned
(or raised) for the bundled configs and four hand-made variants, made by
tools/vllm_max_model_len.py; no value there was computed by kvplan.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan import models as config
from kvplan.cli import app
from kvplan.errors import EXIT_DOES_NOT_FIT, StartupError
from kvplan.models.resolution.max_len import allow_long_from_env, derived_max_model_len, verify_max_model_len

DATA = Path(__file__).parent.parent / "data"
CONFIGS = DATA / "hf-configs"
QWEN3_8B = CONFIGS / "Qwen--Qwen3-8B"
runner = CliRunner()


def _cases(version: str) -> list[dict]:
    return json.loads((DATA / "vllm-functions" / f"max_model_len.{version}.json").read_text())["cases"]


def _describe(case: dict):
    if "config_json" in case:
        return config.describe_model(case["config_json"], source=case["config"])
    return config.describe_model(json.loads((CONFIGS / case["config"] / "config.json").read_text()),
                                 source=case["config"])


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.34.0"])
def test_same_length_or_same_error_as_vllm(version: str) -> None:
    cases = _cases(version)
    assert len(cases) == 120
    for case in cases:
        model = _describe(case)
        try:
            got, _ = verify_max_model_len(model, case["max_model_len"], allow_long=case["allow_long"])
        except StartupError as e:
            assert "error" in case, case
            assert e.message == "vLLM would raise " + case["error"], case
            assert e.exit_code == EXIT_DOES_NOT_FIT
            continue
        assert "error" not in case, (case, got)
        assert got == case["result"], case


def test_derived_lengths_by_hand() -> None:
    qwen = _describe({"config": "Qwen--Qwen3-8B"})
    assert derived_max_model_len(qwen) == (40960.0, "max_position_embeddings")  # × 1.0 (RoPE)
    llama = _describe({"config": "meta-llama--Llama-3.1-8B"})
    assert derived_max_model_len(llama) == (131072.0, "max_position_embeddings")  # llama3: no ×8
    nemotron = _describe({"config": "nvidia--Nemotron-H-56B-Base-8K"})
    got = derived_max_model_len(nemotron)  # no RoPE: still a float (vLLM's pydantic field)
    assert got == (8192.0, "max_position_embeddings") and isinstance(got[0], float)


def test_no_length_key_defaults_to_2048_with_vllms_warning() -> None:
    """vLLM: _get_and_verify_max_len assumes 2048 when no length key exists (× the RoPE factor),
    and takes a requested length unchecked."""
    cfg = json.loads((QWEN3_8B / "config.json").read_text())
    del cfg["max_position_embeddings"]
    model = config.describe_model(cfg, source="no-length")
    model = model.model_copy(update={"max_length_fields": ()})
    length, warning = verify_max_model_len(model, None)
    assert length == 2048 and warning is not None and "Assuming the model's maximum length is 2048" in warning
    assert verify_max_model_len(model, 1_000_000) == (1_000_000, None)


def test_allow_long_env_values() -> None:
    assert [allow_long_from_env(v) for v in ("1", "true", " TRUE ", "0", "yes", "", None)] == [
        True, True, True, False, False, False, False]


def test_cli_refuses_past_the_derived_length_with_vllms_message(monkeypatch) -> None:
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    args = ["check", str(QWEN3_8B), "--max-model-len", "131072", "--kv-cache-memory", "80GiB"]
    # a refusal is a plan: exit 1, the plan on stdout (like a capacity miss), nothing on stderr
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == EXIT_DOES_NOT_FIT and res.stderr == ""
    plan = json.loads(res.stdout)
    assert (plan["verdict"], plan["fits"], plan["failure_cause"], plan["refused_at_startup"]) == (
        "DOES NOT FIT", False, "max_model_len", True)
    assert plan["max_model_len"] == 131072 and plan["groups"] == []
    # vLLM 0.34.0's text (tests/data/vllm-functions/max_model_len.0.34.0.json)
    assert plan["error_type"] == "ValueError"
    assert plan["error_message"].startswith(
        "User-specified max_model_len (131072) is greater than the derived max_model_len "
        "(max_position_embeddings=40960.0 or model_max_length=None in model's config.json). To "
        "allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.")
    assert plan["failure_hint"] == ("use --max-model-len 40960 or less, or set "
                                    "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 if the model really supports more")
    table = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert table.exit_code == EXIT_DOES_NOT_FIT and table.stderr == ""
    assert "DOES NOT FIT vLLM refuses it at start-up (max_model_len)" in table.stdout
    assert "vLLM 0.34.0 would raise ValueError: User-specified max_model_len (131072)" in table.stdout
    assert "what helps: use --max-model-len 40960 or less" in table.stdout


def test_cli_plans_past_the_derived_length_with_the_env_var(monkeypatch) -> None:
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    res = runner.invoke(app, ["check", str(QWEN3_8B), "--max-model-len", "131072",
                              "--kv-cache-memory", "80GiB", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["max_model_len"] == 131072
    assert any(w.startswith("vLLM warns: User-specified max_model_len (131072)")
               for w in out["warnings"])


def test_serve_line_env_var_counts_too(monkeypatch) -> None:
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    line = f"vllm serve {QWEN3_8B} --max-model-len 131072 --kv-cache-memory-bytes 80G"
    refused = runner.invoke(app, ["check", "--serve", line])
    assert refused.exit_code == EXIT_DOES_NOT_FIT and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in refused.stdout
    allowed = runner.invoke(app, ["check", "--serve", "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 " + line])
    assert allowed.exit_code == 0, allowed.output


def test_ci_and_sweep_read_the_env_var_too(monkeypatch, tmp_path) -> None:
    deployments = tmp_path / "d.toml"
    deployments.write_text(f'[[deployment]]\nname = "long"\nmodel = "{QWEN3_8B}"\n'
                           'max-model-len = 131072\nkv-cache-memory = "80GiB"\n')
    monkeypatch.delenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", raising=False)
    assert runner.invoke(app, ["ci", str(deployments)]).exit_code == EXIT_DOES_NOT_FIT
    sweep = runner.invoke(app, ["sweep", str(QWEN3_8B), "--max-model-len", "32k,64k",
                                "--kv-cache-memory", "80GiB", "--json"])
    points = json.loads(sweep.stdout)["rows"][0]["points"]
    assert [p["fits"] for p in points] == [True, False]  # 65,536 > 40,960: vLLM refuses it
    monkeypatch.setenv("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "1")
    assert runner.invoke(app, ["ci", str(deployments)]).exit_code == 0
    sweep = runner.invoke(app, ["sweep", str(QWEN3_8B), "--max-model-len", "32k,64k",
                                "--kv-cache-memory", "80GiB", "--json"])
    assert [p["fits"] for p in json.loads(sweep.stdout)["rows"][0]["points"]] == [True, True]
