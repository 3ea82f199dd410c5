"""`kvplan layers` is readable at 80 columns: identical layers share one row, names as a range
below the table, a legend for the compound cells; `layers --help` describes each option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
V4 = str(CONFIGS / "deepseek-ai--DeepSeek-V4-Flash")
ENV80 = {"COLUMNS": "80", "NO_COLOR": "1"}


@pytest.mark.parametrize("model", ["deepseek-ai--DeepSeek-V4-Flash", "Qwen--Qwen3.5-27B",
                                   "nvidia--Nemotron-H-56B-Base-8K"])
def test_layers_fit_80_columns(model: str) -> None:
    res = runner.invoke(app, ["layers", str(CONFIGS / model)], env=ENV80)
    assert res.exit_code == 0, res.output
    assert max(len(line) for line in res.stdout.splitlines()) <= 80


def test_deepseek_v4_rows_merge_and_names_are_whole() -> None:
    res = runner.invoke(app, ["layers", V4], env=ENV80)
    out = res.stdout
    rows = json.loads(runner.invoke(app, ["layers", V4, "--json"], env=ENV80).stdout)["layers"]
    # 43 layers: one SWA cache each (0..42); 21 compressed-attention layers (even 2..42) each
    # with an indexer, its compressor, the MLA cache and the MLA compressor; 20 odd ones
    # (3..41) with an MLA cache and its compressor → 43 + 4×21 + 2×20 = 167 layers, 7 rows
    assert len(rows) == 167
    body = out.split("─")[-1].split("1: ")[0]
    assert len([ln for ln in body.splitlines() if ln.strip()]) == 7
    # every row's names in full, as a range (no "model.l…" cut)
    for names in ("model.layers.{0..42}.attn.swa_cache", "model.layers.{2..42/2}.attn.indexer.k_cache",
                  "model.layers.{3..41/2}.attn.compressor.state_cache"):
        assert names in out
    assert "model.l…" not in out and "sliding…" not in out
    # MLA has no separate V head: no "512/0"; the fraction is shown rounded and explained
    assert "/0" not in out and "1×512" in out
    assert "≈4.56" in out and "page bytes ÷ block tokens" in out  # 73/16 = 4.5625
    assert "dtype*: quantized KV" in out and "KV quant FP8_PER_TENSOR" in out
    assert all(r["heads_x_dim"] != "1 × 512/0" for r in rows)


def test_layers_help_describes_every_option() -> None:
    import typer.main

    cmd = typer.main.get_command(app).commands["layers"]  # type: ignore[attr-defined]
    opts = [p for p in cmd.params if p.param_type_name == "option" and p.name != "help"]
    assert len(opts) == 11
    assert all(p.help for p in opts), [p.name for p in opts if not p.help]
    res = runner.invoke(app, ["layers", "--help"], env=ENV80)
    assert "picks the attention backends" in " ".join(res.stdout.split())
