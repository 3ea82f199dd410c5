"""--performance-mode as vLLM reads it: throughput doubles the default batch limits, which the
start-up profile (sampler activation: max_num_seqs logits) and the plan both see."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
ENV = {"COLUMNS": "140", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}
QWEN = str(Path(__file__).parents[1] / "data" / "hf-configs" / "Qwen--Qwen3-8B")


def _plan(*args: str) -> dict:  # type: ignore[type-arg]
    res = runner.invoke(app, ["check", *args, "--gpu", "H100", "--max-model-len", "32768",
                              "--json"], env=ENV)
    assert res.exit_code in (0, 1), res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_throughput_doubles_the_defaults_and_shrinks_the_budget() -> None:
    plain = _plan(QWEN)
    fast = _plan(QWEN, "--performance-mode", "throughput")
    assert (plain["max_num_batched_tokens"], plain["max_num_seqs"]) == (8192, 1024)
    assert (fast["max_num_batched_tokens"], fast["max_num_seqs"]) == (16384, 2048)
    # the profile's sampler run takes max_num_seqs × vocab logits: twice the requests, less KV
    assert fast["available_kv_bytes"][0] < plain["available_kv_bytes"][0]
    assert any("doubled by --performance-mode throughput" in w for w in fast["warnings"])
    # given limits stay as given
    given = _plan(QWEN, "--performance-mode", "throughput", "--max-num-seqs", "64",
                  "--max-num-batched-tokens", "4096")
    assert (given["max_num_batched_tokens"], given["max_num_seqs"]) == (4096, 64)


def test_serve_line_flag_is_read_not_ignored() -> None:
    line = f"vllm serve {QWEN} --performance-mode throughput"
    got = _plan("--serve", line)
    assert got["max_num_seqs"] == 2048
    assert not any("performance" in w and "not model" in w for w in got["warnings"])


def test_interactivity_says_what_is_not_modelled_and_bad_mode_is_exit_2() -> None:
    got = _plan(QWEN, "--performance-mode", "interactivity")
    assert got["max_num_seqs"] == 1024
    assert any(w.startswith("--performance-mode interactivity: vLLM captures a CUDA graph")
               for w in got["warnings"])
    res = runner.invoke(app, ["check", QWEN, "--gpu", "H100", "--performance-mode", "fast"],
                        env=ENV)
    assert res.exit_code == 2 and res.stderr.startswith(
        "Error: --performance-mode must be balanced, interactivity or throughput, got 'fast'")
