"""`kvplan check --serve "vllm serve ..."` and `--from-log server.log` through typer's runner."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app
from tests.golden import BUNDLED, contract, load
from tests.hubcache import make_hub_cache, use_hub_cache

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data"
TARGET = DATA / "hf-configs" / "Qwen--Qwen3.5-27B" / "config.json"
DRAFT = DATA / "hf-configs" / "z-lab--Qwen3.8-27B-DFlash2" / "config.json"


def test_serve_line_plans_exactly_that_deployment() -> None:
    spec = json.dumps({"method": "dflash", "model": str(DRAFT), "num_speculative_tokens": 7,
                       "kv_cache_dtype": "bfloat16"})
    line = (f"vllm serve {TARGET} --kv-cache-dtype nvfp4 --max-model-len 262144 "
            f"--max-num-batched-tokens=16384 --speculative-config '{spec}' "
            "--kv-cache-memory-bytes 34359738368 --port 8000 --served-model-name q --made-up 1")
    res = runner.invoke(app, ["check", "--serve", line, "--gpu", "A100-80GB", "--vllm", "0.34.0",
                              "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    exp = contract(load(BUNDLED / "expected" / "seed_dflash_v034_defaults.0.34.0.json"))
    got = contract(out["vllm_contract"])
    assert got["total_bytes_needed"] == exp["total_bytes_needed"]
    assert got["num_blocks"] == exp["num_blocks"]
    assert any("--made-up" in n for n in out["notes"])  # unknown flags are named, not fatal


def test_log_is_explained_with_its_own_budget(monkeypatch, tmp_path) -> None:
    # the log's model and draft, served from an offline hub cache
    make_hub_cache(tmp_path, "Qwen/Qwen3.5-27B", {"config.json": TARGET})
    make_hub_cache(tmp_path, "z-lab/Qwen3.5-27B-DFlash", {"config.json": DRAFT})
    use_hub_cache(monkeypatch, tmp_path, offline=True)
    log = DATA / "logs" / "v0.34.0-qwen35-27b-dflash-capacity-error.log"
    res = runner.invoke(app, ["check", "--from-log", str(log), "--json"])
    out = json.loads(res.stdout)
    assert out["budget_mode"] == "from a vLLM log line"
    assert out["available_kv_bytes"] == [32 * 2**30]  # "Available KV cache memory: 32.0 GiB"
    assert out["vllm_version"] == "0.34.0" and out["max_model_len"] == 262144
    assert any("vLLM needed 41.1 GiB vs 31.98 GiB" in n for n in out["notes"])
    assert any("model loading took" in n for n in out["notes"])


def test_bad_serve_lines_and_logs_are_one_line_errors(tmp_path) -> None:
    for line in ("vllm serve", "ls -la", "vllm serve m --max-model-len", "vllm serve 'unbalanced"):
        res = runner.invoke(app, ["check", "--serve", line, "--kv-cache-memory", "1GiB"])
        assert res.exit_code == 2 and res.stdout == "" and res.stderr.startswith("Error: ")
    junk = tmp_path / "x.log"
    junk.write_text("hello\nworld\n")
    res = runner.invoke(app, ["check", "--from-log", str(junk)])
    assert res.exit_code == 2 and "vLLM" in res.stderr
