"""`kvplan ci` (deployment files) and `kvplan sweep` (tables, chart, JSON, plot) via typer's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines.vllm.planner import plan, plan_lengths, replace_input
from kvplan.pipeline.sweep import parse_lengths
from kvplan.sources.specfile import load_spec_file
from tests.golden import BUNDLED, load

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent.parent
CONFIGS = ROOT / "tests" / "data" / "hf-configs"


def test_example_deployments_file(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    res = runner.invoke(app, ["ci", "examples/deployments.toml", "--json"])
    assert res.exit_code == 1  # the PR #53499 entry does not fit on vLLM 0.33
    batch = json.loads(res.stdout)
    verdicts = {e["name"]: e["fits"] for e in batch["entries"]}
    assert verdicts["qwen3.5-27b-dflash-nvfp4 (PR #53499 on vLLM 0.33)"] is False
    assert verdicts["same, with the PR #53499 fix"] is True
    pr = next(e for e in batch["entries"] if e["name"].startswith("qwen3.5"))
    assert pr["plan"]["total_gib_needed"] == ["41.1"]


def test_ci_all_fit_and_bad_entries(tmp_path) -> None:
    good = tmp_path / "ok.toml"
    good.write_text(f'[[deployment]]\nname = "a"\nmodel = "{CONFIGS / "Qwen--Qwen3-8B"}"\n'
                    'max-model-len = 32768\nkv-cache-memory = "20GiB"\n')
    res = runner.invoke(app, ["ci", str(good)], env={"COLUMNS": "120"})
    assert res.exit_code == 0 and "FITS" in res.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text('[[deployment]]\nname = "x"\nmodel = "a/b"\nmax-modl-len = 3\n')
    res = runner.invoke(app, ["ci", str(bad)], env={"COLUMNS": "120"})
    assert res.exit_code == 2 and res.stdout == "" and "unknown key" in res.stderr
    for text, needle in (("[[deployment", "not valid TOML"), ("x = 1", "no [[deployment]]")):
        bad.write_text(text)
        res = runner.invoke(app, ["ci", str(bad)])
        assert res.exit_code == 2 and needle in res.stderr


def test_parse_lengths() -> None:  # each end as vLLM reads it (more in tests/test_lengths.py)
    assert parse_lengths("8K..64K") == [8192, 16384, 32768, 65536]
    assert parse_lengths("8k..64k") == [8000, 16000, 32000, 64000]
    assert parse_lengths("8K..1M")[-1] == 2**20


def test_plan_lengths_is_exact_per_length() -> None:
    inp = load_spec_file(load(BUNDLED / "cases" / "seed_dflash_qwen35_27b.json")).planner_input
    lengths = [1, 4096, 30592, 30593, 131072, 262144]
    _, points = plan_lengths(inp, lengths)
    for p in points:
        alone = plan(replace_input(inp, max_model_len=p.max_model_len))
        assert (p.total_bytes_needed, p.fits) == (alone.total_bytes_needed[0], alone.fits)
        assert p.max_concurrency == alone.max_concurrency
    assert [p.fits for p in points] == [True, True, True, False, False, False]


def test_sweep_table_json_and_plot(tmp_path) -> None:
    args = ["sweep", str(CONFIGS / "meta-llama--Llama-3.1-8B"), "--gpu", "H100,A100-80GB",
            "--kv-cache-dtype", "bf16,fp8", "--max-model-len", "8K..128K"]
    res = runner.invoke(app, args, env={"COLUMNS": "140", "NO_COLOR": "1"})
    assert res.exit_code == 0 and "largest max_model_len that fits" in res.stdout
    data = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert len(data["rows"]) == 4 and data["lengths"][0] == 8192
    bf16, fp8 = data["rows"][0], data["rows"][1]
    # fp8 halves Llama's 128 KiB/token-per-layer page: about twice the concurrency at every length
    for a, b in zip(bf16["points"], fp8["points"], strict=True):
        assert b["max_concurrency"] == pytest.approx(2 * a["max_concurrency"], rel=0.02)
    out = tmp_path / "sweep.png"
    res = runner.invoke(app, [*args, "--plot", str(out)])
    assert res.exit_code == 0 and out.stat().st_size > 10_000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = runner.invoke(app, [*args, "--plot", str(tmp_path / "x.gif")])
    assert res.exit_code == 2
