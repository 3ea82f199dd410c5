"""A refusal is a plan: every start-up failure kvplan predicts — a length past the derived maximum,
a configuration vLLM rejects (pipeline parallelism on a model without SupportsPP, an
encoder-decoder's batched tokens), weights larger than the memory, no memory for the cache —
exits 1 with the whole plan on stdout (`--json`: verdict, failure_cause, vLLM's error text), like
a capacity miss; never an empty stdout."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.analysis.plan import FailureCause
from kvplan.cli import app
from kvplan.errors import STARTUP_CAUSES, StartupError
from kvplan.pipeline import deploy
from kvplan.pipeline.deploy import Request, evaluate_plan

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"
LLAMA = str(CONFIGS / "meta-llama--Llama-3.1-8B")  # max_position_embeddings 131072
ZAMBA2 = str(CONFIGS / "kvplan-handmade--Zamba2-2.7B-like")  # not SupportsPP in vLLM 0.34
WHISPER = str(CONFIGS / "openai--whisper-large-v3")  # max_target_positions 448
DEEPSEEK = str(CONFIGS / "deepseek-ai--DeepSeek-V3")


def _run(args: list[str]) -> tuple[int, dict, str]:
    res = runner.invoke(app, [*args, "--json"])
    assert res.stdout, f"empty stdout: {res.stderr}"
    return res.exit_code, json.loads(res.stdout), res.stderr


# every start-up failure: (args, failure_cause, vLLM's exception type, a piece of vLLM's text)
FAILURES = [
    pytest.param([LLAMA, "--gpu", "H100", "--max-model-len", "1M"], "max_model_len", "ValueError",
                 "User-specified max_model_len (1048576) is greater than the derived "
                 "max_model_len (max_position_embeddings=131072.0", id="derived-max-length"),
    pytest.param([ZAMBA2, "--gpu", "H100", "-pp", "2", "--max-model-len", "4096"], "config",
                 "NotImplementedError", "Pipeline parallelism is not supported for this model. "
                 "Supported models implement the `SupportsPP` interface.", id="pp-not-supported"),
    pytest.param([WHISPER, "--gpu", "L4", "--max-num-batched-tokens", "256"], "config",
                 "ValueError", "max_num_batched_tokens (256) is smaller than max_model_len (448)",
                 id="encoder-decoder-batched-tokens"),
    pytest.param([DEEPSEEK, "--gpu", "L4"], "weights", "ValueError",
                 "No available memory for the cache blocks", id="weights-larger-than-memory"),
    pytest.param([LLAMA, "--kv-cache-memory", "0"], "no_kv_memory", "ValueError",
                 "No available memory for the cache blocks", id="no-memory-for-the-cache"),
    pytest.param([LLAMA, "--kv-cache-memory", "1GiB"], "kv_cache", "ValueError",
                 "larger than the available KV cache memory", id="capacity-miss"),
]


@pytest.mark.parametrize(("args", "cause", "error_type", "text"), FAILURES)
def test_every_start_up_failure_is_a_plan(args: list[str], cause: str, error_type: str,
                                          text: str) -> None:
    code, plan, stderr = _run(["check", *args])
    assert code == 1 and stderr == ""
    assert (plan["verdict"], plan["fits"], plan["failure_cause"]) == ("DOES NOT FIT", False, cause)
    assert plan["error_type"] == error_type and text in plan["error_message"]
    assert plan["refused_at_startup"] == (cause in STARTUP_CAUSES)
    assert plan["kvplan_version"] == kvplan.__version__ and plan["model"] == args[0]
    # the same plan through the API; the table and markdown say it too
    table = runner.invoke(app, ["check", *args], env={"COLUMNS": "400"})
    assert table.exit_code == 1 and table.stderr == "" and "DOES NOT FIT" in table.stdout
    assert text in table.stdout
    md = runner.invoke(app, ["check", *args, "--format", "markdown"])
    assert md.exit_code == 1 and "**DOES NOT FIT**" in md.stdout and text in md.stdout


def test_a_refusal_keeps_what_was_asked() -> None:
    code, plan, _ = _run(["check", LLAMA, "--gpu", "H100", "--max-model-len", "256K",
                          "--kv-cache-memory", "20GiB", "--vllm", "0.32.0"])
    assert code == 1 and plan["max_model_len"] == 262_144 and plan["vllm_version"] == "0.32.0"
    assert plan["gpu"] == "NVIDIA H100 SXM 80GB" and plan["available_kv_bytes"] == [20 * 2**30]
    assert plan["budget_mode"] == "explicit (--kv-cache-memory)" and plan["groups"] == []
    assert plan["failure_hint"].startswith("use --max-model-len 131072 or less")
    # explain and the what-ifs have nothing to add: still the plan, exit 1
    res = runner.invoke(app, ["explain", LLAMA, "--max-model-len", "256K", "--kv-cache-memory",
                              "20GiB"])
    assert res.exit_code == 1 and "refuses it at start-up (max_model_len)" in res.stdout


def test_serve_line_refusal_is_a_plan_with_its_provenance() -> None:
    code, plan, _ = _run(["check", "--serve", f"vllm serve {LLAMA} --max-model-len 1m "
                          "--kv-cache-memory-bytes 20G"])
    assert code == 1 and plan["failure_cause"] == "max_model_len"
    assert plan["max_model_len"] == 1_000_000 and plan["available_kv_bytes"] == [20 * 2**30]
    assert plan["provenance"]["max_model_len"] == "serve line"


def test_api_returns_the_refusal_plan() -> None:
    plan = kvplan.check(ZAMBA2, gpu="H100", pipeline_parallel_size=2, max_model_len=4096)
    assert not plan.fits and plan.refused_at_startup and plan.failure_cause == "config"
    assert plan.error_type == "NotImplementedError"


def test_startup_causes_are_failure_causes() -> None:
    assert set(STARTUP_CAUSES) <= {c.value for c in FailureCause}
    with pytest.raises(ValueError, match="unknown start-up cause"):
        StartupError.vllm("ValueError", "x", cause="nope")


def test_a_startup_error_reads_back_vllms_type_and_text() -> None:
    # the plain form other code raises: "vLLM would raise <Type>: <vLLM's text>"
    e = StartupError("vLLM would raise ValueError: it is wrong: really", hint="h")
    assert (e.error_type, e.vllm_message, e.cause, e.hint) == ("ValueError", "it is wrong: really",
                                                               "config", "h")
    e = StartupError.vllm("RuntimeError", "text", cause="trust_remote_code")
    assert e.message == "vLLM would raise RuntimeError: text" and e.exit_code == 1


def test_a_refusal_while_loading_the_model_slots_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # custom code without --trust-remote-code is refused while the config is read (resolve):
    # such a StartupError becomes the same kind of plan, with its cause
    text = ("The repository x contains custom code which must be executed to correctly load the "
            "model. Please pass the argument `trust_remote_code=True` to allow custom code to be run.")

    def refuse(req: Request) -> None:
        raise StartupError.vllm("ValueError", text, cause="trust_remote_code",
                                hint="add --trust-remote-code")

    monkeypatch.setattr(deploy, "resolve", refuse)
    req = Request(model="org/custom", gpu="H100",
                  deployment=replace(Request(model="x").deployment, max_model_len=4096))
    plan = evaluate_plan(req)
    assert (plan.fits, plan.failure_cause, plan.refused_at_startup) == (
        False, FailureCause.TRUST_REMOTE_CODE, True)
    assert plan.error_message == text and plan.failure_hint == "add --trust-remote-code"
    assert plan.max_model_len == 4096 and plan.gpu == "NVIDIA H100 SXM 80GB"


# ---- --max-model-len auto fits by construction: the fitted length and its margin -----------------

PR_ARGS = ["check", str(Path(__file__).resolve().parents[2] / "examples/configs/Qwen--Qwen3.5-27B"),
           "--draft", str(Path(__file__).resolve().parents[2] / "examples/configs/z-lab--Qwen3.8-27B-DFlash2"),
           "--kv-cache-dtype", "nvfp4", "--draft-kv-cache-dtype", "bfloat16",
           "--num-speculative-tokens", "7", "--max-num-batched-tokens", "16384",
           "--kv-cache-memory", "32GiB", "--gpu", "A100-80GB", "--vllm", "0.33.0",
           "--draft-block-size", "16"]


def test_auto_shows_the_fitted_length_and_its_margin() -> None:
    code, plan, _ = _run([*PR_ARGS, "--max-model-len", "auto"])
    assert code == 0 and plan["fits"]
    assert plan["max_model_len"] == 262_144 and plan["max_model_len_after_planning"] == 30_592
    # vLLM's capacity check runs at the fitted length: what it needs there fits
    (needed,), (check,) = plan["total_bytes_needed_after_planning"], plan["check_memory_bytes"]
    assert needed <= check and plan["margin_bytes"] == check - needed >= 0
    assert plan["total_bytes_needed"] == [44_130_078_720]  # the contract: at the requested length
    # at the fitted length the plan is the one of --max-model-len 30592, needs and margin alike
    _, fixed, _ = _run([*PR_ARGS, "--max-model-len", "30592"])
    assert fixed["total_bytes_needed"] == [needed] and fixed["margin_bytes"] == plan["margin_bytes"]
    table = runner.invoke(app, [*PR_ARGS, "--max-model-len", "auto"], env={"COLUMNS": "200"})
    assert "FITS at max_model_len 30,592, margin 8,388,608 B (0.01 GiB)" in table.stdout
    assert "margin -" not in table.stdout and "-9.11 GiB" not in table.stdout
    assert "auto-fit: vLLM reduces max_model_len from 262,144 to 30,592" in table.stdout
