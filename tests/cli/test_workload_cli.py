"""`kvplan check … --workload` and `kvplan fit --workload` through typer's runner; the API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.errors import InputError

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
GOLDEN = Path(__file__).resolve().parent.parent / "data" / "workload-oracle"
ENV = {"COLUMNS": "140", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}
LLAMA = [str(CONFIGS / "meta-llama--Llama-3.1-8B"), "--kv-cache-memory", "16GiB",
         "--max-model-len", "32768", "--max-num-batched-tokens", "8192"]


def _expected(name: str) -> dict:  # type: ignore[type-arg]
    return json.loads((GOLDEN / "expected" / f"{name}.json").read_text())


def test_check_workload_json_equals_vllm_scheduler() -> None:
    """The named model planned from its config gives the oracle's answer for the same KV cache
    (the case file holds kvplan's specs for this very deployment)."""
    res = runner.invoke(app, ["check", *LLAMA, "--vllm", "0.34.0", "--workload", "8192:1024",
                              "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    exp = _expected("llama31-8b-0.34.0")
    assert out["num_blocks"] == exp["num_blocks"]
    (w,) = out["workload"]
    assert (w["max_concurrent_without_preemption"], w["admission_peak"]) == (
        exp["max_concurrent_without_preemption"], exp["admission_peak"])
    assert w["prompt_tokens"] == 8192 and w["output_tokens"] == 1024
    assert [b["blocks"] for b in w["blocks_per_request_at_end"]] == exp["clean_run"]["blocks_at_end"]
    assert w["concurrency_capped_by"] == "kv_cache" and w["next_request_preempts"] is True


def test_check_json_equals_the_api() -> None:
    res = runner.invoke(app, ["check", *LLAMA, "--workload", "2k:512", "--workload", "8K:1K",
                              "--json"], env=ENV)
    cli = json.loads(res.stdout)
    api = kvplan.check(LLAMA[0], kv_cache_memory="16GiB", max_model_len=32768,
                       max_num_batched_tokens=8192, workload=["2k:512", "8K:1K"])
    assert cli["workload"] == api.model_dump(mode="json")["workload"]
    assert [w["label"] for w in cli["workload"]] == ["2k:512", "8K:1K"]
    # vLLM's notation: k is 1000, K is 1024
    assert [(w["prompt_tokens"], w["output_tokens"]) for w in cli["workload"]] == [
        (2000, 512), (8192, 1024)]


def test_check_table_section() -> None:
    res = runner.invoke(app, ["check", *LLAMA, "--workload", "8192:1024"], env=ENV)
    assert res.exit_code == 0
    out = res.stdout
    assert "scheduler, requests submitted together" in out
    row = next(line for line in out.splitlines() if line.strip().startswith("8192:1024"))
    assert row.split()[1:4] == ["14", "KV", "(full)"] and "full 144" in row
    assert "max_model_len: 4.00" in " ".join(out.split())


def test_markdown_section() -> None:
    res = runner.invoke(app, ["check", *LLAMA, "--workload", "8192:1024", "--format",
                              "markdown"], env=ENV)
    assert "**Workload**" in res.stdout
    assert "| 8192:1024 | 14 | KV (full) | 15 | KV (full) |" in res.stdout


def test_specs_file_workload_and_flag() -> None:
    case = GOLDEN / "cases" / "gpt-oss-20b-0.34.0.json"
    exp = _expected("gpt-oss-20b-0.34.0")
    out = json.loads(runner.invoke(app, ["check", "--specs", str(case), "--vllm", "0.34.0",
                                         "--json"], env=ENV).stdout)
    assert out["workload"][0]["max_concurrent_without_preemption"] == \
        exp["max_concurrent_without_preemption"]
    other = json.loads(runner.invoke(app, ["check", "--specs", str(case), "--vllm", "0.34.0",
                                           "--workload", "1k:100", "--json"], env=ENV).stdout)
    assert other["workload"][0]["label"] == "1k:100"
    assert other["workload"][0]["max_concurrent_without_preemption"] > \
        exp["max_concurrent_without_preemption"]


def test_pairs_file(tmp_path: Path) -> None:
    text = tmp_path / "pairs.csv"
    text.write_text("prompt_tokens,output_tokens\n8192,1024\n1024,256  # short\n\n4k,2k\n")
    js = tmp_path / "pairs.json"
    js.write_text(json.dumps([{"prompt": 8192, "output": 1024}, [1024, 256],
                              {"prompt_tokens": "4k", "output_tokens": "2k"}]))
    rows = [json.loads(runner.invoke(app, ["check", *LLAMA, "--workload", str(p), "--json"],
                                     env=ENV).stdout)["workload"][0] for p in (text, js)]
    assert rows[0]["num_pairs"] == rows[1]["num_pairs"] == 3
    assert rows[0]["prompt_tokens"] is None
    assert rows[0]["max_concurrent_without_preemption"] == \
        rows[1]["max_concurrent_without_preemption"]
    assert rows[0]["label"] == "pairs.csv"


def test_async_and_chunked_prefill_flags_reach_the_plan() -> None:
    sync = json.loads(runner.invoke(app, ["check", *LLAMA, "--no-async-scheduling", "--json"],
                                    env=ENV).stdout)
    assert sync["max_in_flight_tokens"] == 8192  # one batch in flight
    res = runner.invoke(app, ["check", *LLAMA, "--no-enable-chunked-prefill", "--workload",
                              "16k:1k", "--json"], env=ENV)
    # without chunked prefill vLLM refuses a batch below max_model_len at start-up
    # (SchedulerConfig.verify_max_model_len), before any workload
    assert res.exit_code == 1 and json.loads(res.stdout)["error_message"].startswith(
        "max_num_batched_tokens (8192) is smaller than max_model_len (32768).")
    whole = ["check", LLAMA[0], "--kv-cache-memory", "16GiB", "--max-model-len", "16384",
             "--max-num-batched-tokens", "16384", "--json"]
    chunked = json.loads(runner.invoke(app, [*whole, "--workload", "4k:8k"], env=ENV).stdout)
    off = json.loads(runner.invoke(app, [*whole, "--workload", "4k:8k",
                                         "--no-enable-chunked-prefill"], env=ENV).stdout)
    assert off["num_blocks"] == chunked["num_blocks"]
    assert off["workload"][0]["admission_peak"] <= chunked["workload"][0]["admission_peak"]


def test_a_prompt_that_never_fits_a_step_is_an_error() -> None:
    from dataclasses import replace

    from kvplan.engines.vllm import workload as W
    from kvplan.errors import UnsupportedError
    from tests.engines.vllm.test_workload import _full_rules

    rules, groups = _full_rules(9000, mnbt=4096)
    rules = replace(rules, enable_chunked_prefill=False)
    with pytest.raises(InputError, match="never fits one step"):
        W.estimate(rules, groups, W.Workload.of(6000, 100))
    with pytest.raises(UnsupportedError, match="no progress"):
        W.simulate(rules, groups, W.Workload.of(6000, 100), 3)


@pytest.mark.parametrize(("value", "message"), [
    ("1.5K:100", "Decimals are not allowed with binary suffixes"),
    ("8k", "neither PROMPT:OUTPUT nor a file"),
    ("0:100", "≥ 1 token"),
    ("30000:5000", "max_model_len"),
])
def test_bad_workloads_are_one_line_errors(value: str, message: str) -> None:
    res = runner.invoke(app, ["check", *LLAMA, "--workload", value], env=ENV)
    assert res.exit_code == 2, res.output
    assert res.stdout == ""
    assert res.stderr.startswith("Error: ") and message in res.stderr
    assert "Traceback" not in res.stderr


def test_decimal_suffix_is_vllms() -> None:
    plan = kvplan.check(LLAMA[0], kv_cache_memory="16GiB", max_model_len=32768,
                        max_num_batched_tokens=8192, workload="25.6k:1k")
    assert plan.workload is not None and plan.workload[0].prompt_tokens == 25_600
    with pytest.raises(InputError):
        kvplan.check(LLAMA[0], kv_cache_memory="16GiB", max_model_len=32768, workload="8k:x")


def test_fit_ranks_by_the_workload() -> None:
    res = runner.invoke(app, ["fit", str(CONFIGS / "meta-llama--Llama-3.1-8B"),
                              "--max-model-len", "32k", "--concurrency", "20", "--gpu", "H100",
                              "--kv-cache-dtype", "auto", "--max-gpus", "2", "--workload",
                              "8k:1k", "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["target"]["workload"] == "8k:1k"
    best = out["candidates"][0]
    assert best["workload_concurrency"] >= 20
    # the check line of the winner says the same
    import shlex

    args = shlex.split(best["kvplan_check"])
    assert args[:2] == ["kvplan", "check"] and args[-2:] == ["--workload", "8k:1k"]
    check = json.loads(runner.invoke(app, [*args[1:], "--json"], env=ENV).stdout)
    n = check["workload"][0]["max_concurrent_without_preemption"]
    assert best["workload_concurrency"] == n * best["data_parallel_size"]


def _golden_commands() -> list[tuple[str, str, list[str]]]:
    """(name, release, kvplan check arguments) of every named-model workload golden."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / "make_workload_goldens.py"
    spec = importlib.util.spec_from_file_location("make_workload_goldens", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = []
    for name, (args, workload, extra, _) in mod.CASES.items():
        for ver in mod.RELEASES:
            flags = [*args, "--vllm", ver, "--workload", workload]
            if extra.get("async_scheduling") is False:
                flags.append("--no-async-scheduling")
            if extra.get("enable_chunked_prefill") is False:
                flags.append("--no-enable-chunked-prefill")
            out.append((name, ver, flags))
    return out


@pytest.mark.parametrize(("name", "version", "flags"), _golden_commands(),
                         ids=[f"{n}-{v}" for n, v, _ in _golden_commands()])
def test_named_models_equal_vllm_scheduler(name: str, version: str, flags: list[str]) -> None:
    """`kvplan check MODEL … --workload` from the config (not the case file) gives vLLM's
    scheduler's answers for that deployment."""
    res = runner.invoke(app, ["check", *[f.replace("tests/data/hf-configs", str(CONFIGS))
                                         for f in flags], "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    exp = _expected(f"{name}-{version}")
    assert out["num_blocks"] == exp["num_blocks"]
    (w,) = out["workload"]
    assert (w["max_concurrent_without_preemption"], w["admission_peak"]) == (
        exp["max_concurrent_without_preemption"], exp["admission_peak"])


def test_a_deployment_that_does_not_start_gets_no_workload_answer() -> None:
    res = runner.invoke(app, ["check", LLAMA[0], "--kv-cache-memory", "1GiB", "--max-model-len",
                              "32768", "--workload", "8k:1k", "--json"], env=ENV)
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["workload"] is None
    assert any("--workload: not answered" in n for n in out["notes"])
