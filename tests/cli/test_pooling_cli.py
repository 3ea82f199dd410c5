"""Pooling models through typer's runner: `--runner` / `--convert`, serve lines with them, and
encoders that need no KV cache (kvplan.models.pooling)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.sources.serve_line import parse_serve_command
from tests.hubcache import make_hub_cache, use_hub_cache

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
QWEN3_8B = CONFIGS / "Qwen--Qwen3-8B" / "config.json"
RERANKER = CONFIGS / "BAAI--bge-reranker-v2-m3" / "config.json"
# Qwen3-8B as an embedding model (Qwen3-Embedding-8B's geometry): 36 layers × 16 tokens × 2 ×
# 8 KV heads × 128 × 2 B = 2,359,296 B per block; cdiv(40960, 16) = 2560 blocks = 6,039,797,760 B
# needed; vLLM checks it against the budget minus the null block (one pool block)
NEEDED = 6_039_797_760
POOL_BLOCK = 2_359_296


def _check(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    res = runner.invoke(app, ["check", *args, "--json"])
    return res.exit_code, (json.loads(res.stdout) if res.stdout.strip() else {})


def test_runner_pooling_plans_the_kv_cache_and_runs_the_check() -> None:
    common = (str(QWEN3_8B), "--runner", "pooling", "--block-size", "16")
    code, out = _check(*common, "--kv-cache-memory", str(NEEDED + POOL_BLOCK))
    assert code == 0 and out["total_bytes_needed"] == [NEEDED] and out["margin_bytes"] == 0
    assert any("pooling runner (--convert embed" in w for w in out["warnings"])
    code, out = _check(*common, "--kv-cache-memory", str(NEEDED + POOL_BLOCK - 1))
    assert code == 1 and out["verdict"] != "FITS"  # one byte short: vLLM's start-up error
    code, out = _check(str(QWEN3_8B), "--convert", "embed", "--block-size", "16",
                       "--kv-cache-memory", str(NEEDED + POOL_BLOCK))
    assert code == 0 and any("pooling runner" in w for w in out["warnings"])


def test_encoder_fits_with_no_kv_cache_even_with_no_kv_memory() -> None:
    code, out = _check(str(RERANKER), "--kv-cache-memory", "0")
    assert code == 0 and out["verdict"] == "FITS"
    assert out["groups"] == [] and out["total_bytes_needed"] == [0]
    assert any("no KV cache: encoder-only attention" in w for w in out["warnings"])


def test_encoder_with_runner_generate_is_one_line_error() -> None:
    res = runner.invoke(app, ["check", str(RERANKER), "--runner", "generate",
                              "--kv-cache-memory", "1GiB"])
    assert res.exit_code == 2
    assert res.stderr.startswith("Error: ") and "only with --runner pooling" in res.stderr
    assert "Traceback" not in res.output


def test_serve_line_with_runner_pooling(monkeypatch, tmp_path) -> None:
    cmd = parse_serve_command("vllm serve Qwen/Qwen3-8B --runner pooling --convert embed")
    assert cmd.options["runner"] == "pooling" and cmd.options["convert"] == "embed"
    make_hub_cache(tmp_path, "Qwen/Qwen3-8B", {"config.json": QWEN3_8B})
    use_hub_cache(monkeypatch, tmp_path, offline=True)
    line = (f"vllm serve Qwen/Qwen3-8B --runner pooling --block-size 16 "
            f"--kv-cache-memory-bytes {NEEDED + POOL_BLOCK}")
    code, out = _check("--serve", line)
    assert code == 0 and out["total_bytes_needed"] == [NEEDED]
    assert out["provenance"]["runner"] == "serve line"
    assert any("pooling runner" in w for w in out["warnings"])
    # the same line without --runner: Qwen3ForCausalLM generates (vLLM reads a
    # sentence-transformers modules.json to pick pooling; kvplan does not fetch it)
    code, out = _check("--serve", line.replace("--runner pooling ", ""))
    assert code == 0 and not any("pooling runner" in w for w in out["warnings"])
