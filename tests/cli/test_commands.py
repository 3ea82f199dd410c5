"""`kvplan gpus`, `kvplan layers`, --help and the estimated budget through typer's runner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def test_help_lists_commands_and_exit_codes() -> None:
    res = runner.invoke(app, ["--help"], env=ENV)
    assert res.exit_code == 0
    for word in ("check", "gpus", "layers", "Exit codes", "0 = fits", "1 = does not fit"):
        assert word in res.stdout


def test_gpus_table_and_json() -> None:
    res = runner.invoke(app, ["gpus"], env=ENV)
    assert res.exit_code == 0 and "NVIDIA H100 SXM 80GB" in res.stdout
    rows = json.loads(runner.invoke(app, ["gpus", "--json"]).stdout)
    h100 = next(r for r in rows if r["name"] == "NVIDIA H100 SXM 80GB")
    assert h100["total_memory_bytes"] == 85_045_477_376  # deviceQuery totalGlobalMem, gpus.csv


def test_layers_of_gpt_oss() -> None:
    # gpt-oss-20b: 24 layers alternating sliding window 128 / full, 8 KV heads × 64
    out = json.loads(runner.invoke(app, ["layers", str(CONFIGS / "openai--gpt-oss-20b"),
                                         "--json"]).stdout)
    rows = out["layers"]
    assert len(rows) == 24
    assert [r["kind"] for r in rows[:2]] == ["sliding_window", "full_attention"]
    assert {r["heads_x_dim"] for r in rows} == {"8 × 64"}
    assert {r["window"] for r in rows[::2]} == {128}
    assert {r["page_bytes_per_token"] for r in rows} == {str(8 * (64 + 64) * 2)}


def test_layers_of_qwen35_with_its_mtp_layer_at_tp2() -> None:
    # Qwen3.5-27B at TP 2: 4 KV heads → 2 per rank; GDN conv_dim 10240 → 5120 per rank, 1 MTP
    out = json.loads(runner.invoke(app, [
        "layers", str(CONFIGS / "Qwen--Qwen3.5-27B" / "config.json"), "-tp", "2",
        "--speculative-method", "mtp", "--num-speculative-tokens", "1", "--json"]).stdout)
    rows = out["layers"]
    assert len(rows) == 65  # 64 + 1 MTP layer
    assert rows[3]["heads_x_dim"] == "2 × 256"
    assert rows[0]["heads_x_dim"] == "4×5120 + 24×128×128"  # conv (K-1+1 spec, 5120), ssm
    assert rows[-1]["draft"] is True and rows[-1]["kind"] == "full_attention"


def test_estimated_budget_is_named_and_itemised() -> None:
    res = runner.invoke(app, ["check", str(CONFIGS / "meta-llama--Llama-3.1-8B"), "--gpu", "H100",
                              "--max-model-len", "131072", "--json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 0
    assert out["budget_mode"] == "estimated"
    names = [t["name"] for t in out["budget"]["breakdown"]]
    assert names[:3] == ["requested memory", "model weights", "non-torch memory"]
    total = sum(t["num_bytes"] for t in out["budget"]["breakdown"])
    assert total == out["available_kv_bytes"][0]


def test_unknown_gpu_and_missing_budget_are_input_errors() -> None:
    res = runner.invoke(app, ["check", str(CONFIGS / "meta-llama--Llama-3.1-8B"), "--gpu", "H900"])
    assert res.exit_code == 2 and res.stdout == "" and "Error:" in res.stderr
    res = runner.invoke(app, ["check", str(CONFIGS / "meta-llama--Llama-3.1-8B")])
    assert res.exit_code == 2 and "no KV cache budget" in res.stderr


def test_explain_command_is_check_with_explain() -> None:
    seed = str(Path(__file__).resolve().parent.parent / "data" / "golden" / "cases"
               / "seed_dflash_qwen35_27b.json")
    a = runner.invoke(app, ["explain", "--specs", seed, "--json"])
    b = runner.invoke(app, ["check", "--specs", seed, "--explain", "--json"])
    assert a.exit_code == b.exit_code == 1
    assert json.loads(a.stdout) == json.loads(b.stdout)
    assert json.loads(a.stdout)["explanation"]["what_ifs"][0]["change"].startswith("apply the PR")


def test_bare_kvplan_prints_the_formatted_help_and_exits_2() -> None:
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-m", "kvplan"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("Usage: ") and "Error:" not in res.stderr
    assert "\n  check " in res.stderr  # the command list, one per line, not squashed
