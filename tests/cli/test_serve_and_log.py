"""`kvplan check --serve "vllm serve ..."` and `--from-log server.log` through typer's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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
    # the log's 41.1 GiB (its server planned the draft on its own 16-token block) is not what
    # vLLM 0.34.0 plans for this draft: a disagreement, said as a warning, not a note
    needed = {d["figure"]: d for d in out["disagreements"]}["KV needed for one request"]
    assert needed["logged"] == "41.1 GiB" and needed["kvplan"] != "41.1 GiB"
    assert any(w.startswith("the log disagrees") for w in out["warnings"])
    assert any("model loading took" in n for n in out["notes"])


def test_bad_serve_lines_and_logs_are_one_line_errors(tmp_path) -> None:
    for line in ("vllm serve", "ls -la", "vllm serve m --max-model-len", "vllm serve 'unbalanced"):
        res = runner.invoke(app, ["check", "--serve", line, "--kv-cache-memory", "1GiB"])
        assert res.exit_code == 2 and res.stdout == "" and res.stderr.startswith("Error: ")
    junk = tmp_path / "x.log"
    junk.write_text("hello\nworld\n")
    res = runner.invoke(app, ["check", "--from-log", str(junk)])
    assert res.exit_code == 2 and "vLLM" in res.stderr


# ---------------------------------------------------------------------------------------------
# issue 12: real logs next to a model and flags; zero or negative memory


LOGS = DATA / "logs"
CONFIGS = DATA / "hf-configs"
LLAMA_8B = CONFIGS / "meta-llama--Llama-3.1-8B"
QWEN3_8B = CONFIGS / "Qwen--Qwen3-8B"
H100_TOTAL = 85_045_477_376  # kvplan gpus: NVIDIA H100 SXM 80GB, the runtime-reported total


def _oracle_no_memory_text(version: str) -> str:
    """vLLM's own no-memory error (the shared oracle's output for that release)."""
    out = json.loads((DATA / "golden-oracle" / "expected" /
                      f"x_no_memory_for_blocks.{version}.json").read_text())
    return out["error"]["message"]


def test_model_and_flags_next_to_a_log_win_and_say_where_values_came_from() -> None:
    log = LOGS / "issue-kvcached-29-v0.9.2-wrapped-engine-config.log"  # names meta-llama/Llama-3.1-8B
    base = ["check", str(LLAMA_8B), "--from-log", str(log), "--gpu", "H100", "--json"]
    auto = json.loads(runner.invoke(app, base).stdout)
    fp8 = runner.invoke(app, [*base, "--kv-cache-dtype", "fp8"])
    out = json.loads(fp8.stdout)
    assert out["model"] == str(LLAMA_8B)  # the MODEL argument, not the id the log names
    assert out["max_model_len"] == 131072  # max_seq_len of the log's engine-config line
    assert out["provenance"] == {
        "enable_prefix_caching": "log", "gpu": "command line", "kv_cache_dtype": "command line",
        "max_model_len": "log", "model": "command line", "pipeline_parallel_size": "log",
        "tensor_parallel_size": "log"}
    assert auto["provenance"]["kv_cache_dtype"] == "log"  # the log's kv_cache_dtype=auto
    # the command line's fp8 halves every page of this full-attention model: half the bytes
    assert 2 * out["total_bytes_needed"][0] == auto["total_bytes_needed"][0]
    assert any("the log is from vLLM 0.9.2" in n for n in out["notes"])
    table = runner.invoke(app, base[:-1], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert ("inputs: log: enable_prefix_caching, kv_cache_dtype, max_model_len, pipeline_parallel_size, "
            "tensor_parallel_size; command line: gpu, model; the rest: defaults") in table.stdout


def test_a_log_without_a_model_asks_for_one(monkeypatch, tmp_path) -> None:
    res = runner.invoke(app, ["check", "--from-log", str(LOGS / "issue-vllm-23278-gpt-oss-120b-negative-kv.log")])
    assert res.exit_code == 2 and "the log names no model" in res.stderr
    assert "kvplan check MODEL --from-log LOG" in res.stderr
    use_hub_cache(monkeypatch, tmp_path, offline=True)  # the id the log names is not cached
    res = runner.invoke(app, ["check", "--from-log", str(LOGS / "issue-kvcached-29-v0.9.2-wrapped-engine-config.log"),
                              "--gpu", "H100"])
    assert res.exit_code == 2 and res.stdout == ""
    err, hint = res.stderr.splitlines()
    assert err.startswith("Error: the model the log names, 'meta-llama/Llama-3.1-8B', cannot be read here")
    assert hint.startswith("Hint: give the model next to the log")


def test_negative_memory_from_a_real_log_is_vllms_error_with_the_breakdown() -> None:
    # gpt-oss-120b's config is not bundled: the 20b one stands in; the error does not depend on it
    res = runner.invoke(app, ["check", str(CONFIGS / "openai--gpt-oss-20b"), "--from-log",
                              str(LOGS / "issue-vllm-23278-gpt-oss-120b-negative-kv.log"), "--gpu", "H100",
                              "--gpu-memory-utilization", "0.9", "--json", "--vllm", "0.34.0"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    assert out["error_message"] == _oracle_no_memory_text("0.34.0")
    assert out["num_blocks"] == 0 and out["available_kv_bytes"] == [-round(2.14 * 2**30)]
    terms = {t["name"]: t["num_bytes"] for t in out["budget"]["breakdown"]}
    # requested = ceil(79.2 GiB H100 × 0.9); the weights as logged ("Model loading took 65.9651 GiB")
    assert terms["requested memory"] == 76_540_929_639
    assert terms["model weights (logged)"] == -round(65.9651 * 2**30)
    assert sum(terms.values()) == -round(2.14 * 2**30)  # the rest is inferred: the lines add up
    logged = {r["name"]: r["logged_bytes"] for r in out["budget"]["log_comparison"]}
    assert logged == {"model weights": round(65.9651 * 2**30), "available KV cache memory": -round(2.14 * 2**30)}


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.0", "0.34.0"])
@pytest.mark.parametrize("flag", [["--available-kv-gib", "-2.14"], ["--kv-cache-memory", "0"],
                                  ["--kv-cache-memory", "-2GiB"]])
def test_zero_or_negative_memory_from_a_flag_is_vllms_error(version: str, flag: list[str]) -> None:
    res = runner.invoke(app, ["check", str(QWEN3_8B), *flag, "--vllm", version, "--json"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    assert out["error_type"] == "ValueError"
    assert out["error_message"] == _oracle_no_memory_text(version)
    assert out["num_blocks"] == 0 and out["max_concurrency"] == 0.0
    assert any("weights alone take" in w for w in out["warnings"])


def test_negative_memory_flag_with_a_gpu_shows_requested_memory_and_weights() -> None:
    res = runner.invoke(app, ["check", str(QWEN3_8B), "--available-kv-gib", "-2.14", "--gpu", "H100",
                              "--gpu-memory-utilization", "0.9", "--json"])
    assert res.exit_code == 1
    terms = [(t["name"], t["num_bytes"]) for t in json.loads(res.stdout)["budget"]["breakdown"]]
    assert [n for n, _ in terms] == ["requested memory", "model weights (kvplan)", "everything else (inferred)"]
    assert terms[0][1] == 76_540_929_639  # ceil(85,045,477,376 × 0.9)
    assert sum(b for _, b in terms) == -round(2.14 * 2**30)


def test_no_memory_text_of_031_is_the_one_users_posted() -> None:
    from kvplan.sources.vllm_log import parse_vllm_log

    posted = parse_vllm_log((LOGS / "issue-vllm-backport-15-no-memory.log").read_bytes()).capacity_error
    assert posted is not None and posted.message == _oracle_no_memory_text("0.31.0")


def test_markdown_names_the_inputs_and_the_logged_terms() -> None:
    res = runner.invoke(app, ["check", str(CONFIGS / "openai--gpt-oss-20b"), "--from-log",
                              str(LOGS / "issue-vllm-23278-gpt-oss-120b-negative-kv.log"), "--gpu", "H100",
                              "--gpu-memory-utilization", "0.9", "--format", "markdown"])
    assert res.exit_code == 1
    assert ("Inputs: log: `available_kv_gib`; command line: `gpu`, `gpu_memory_utilization`, `model`; "
            "the rest: defaults.") in res.stdout
    assert "| model weights | 65.97 |" in res.stdout and "| available KV cache memory | -2.14 |" in res.stdout
