"""`kvplan sweep --engine sglang` / `vllm,sglang`: every point is the engine's plan at that
context length."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import kvplan
from kvplan.cli import app

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
QWEN35 = str(CONFIGS / "Qwen--Qwen3.5-27B")
LLAMA_8B = str(CONFIGS / "meta-llama--Llama-3.1-8B")


def test_each_sglang_point_is_the_engines_plan() -> None:
    sweep = kvplan.sweep(QWEN35, engine="sglang", gpu="H100", max_model_len="8192,65536,262144")
    (row,) = sweep.rows
    assert row.engine == "sglang" and sweep.sglang_version == "0.5.23"
    assert sweep.vllm_version is None
    for p in row.points:
        plan = kvplan.check(QWEN35, engine="sglang", gpu="H100", context_length=p.max_model_len)
        assert plan.serving is not None and plan.sglang is not None
        assert p.fits is plan.fits
        tokens = plan.kv_cache_size_tokens or 0
        cap = plan.sglang.max_running_requests or 0
        assert p.max_concurrency == round(min(tokens / p.max_model_len, cap), 4)
    assert [p.fits for p in row.points] == [True, True, False]  # 262,144 > its pool
    assert row.largest_fitting_max_model_len == plan.kv_cache_size_tokens


def test_both_engines_rows_on_the_cli() -> None:
    res = CliRunner().invoke(app, ["sweep", LLAMA_8B, "--engine", "vllm,sglang", "--gpu", "L40S",
                                   "--max-model-len", "32768,131072", "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert [r["engine"] for r in got["rows"]] == ["vllm", "sglang"]
    assert got["sglang_version"] == "0.5.23"
    res = CliRunner().invoke(app, ["sweep", LLAMA_8B, "--engine", "sglang", "--gpu", "L40S",
                                   "--max-num-batched-tokens", "4096"])
    assert res.exit_code == 2 and "--max-num-batched-tokens is a vLLM flag" in res.stderr
