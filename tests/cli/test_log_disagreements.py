"""A log that disagrees is loud: `kvplan check --from-log` on real vLLM start-up logs
(tests/data/logs, SOURCES.md) — every figure the log states that the plan does not reproduce is a
`warning:` with both values and the likely reasons, and an entry of `disagreements` in the JSON;
a log that agrees (within its own 2-decimal rounding) has none; the capacity error's "available
KV cache memory" is the budget when the log has no other."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app

DATA = Path(__file__).parents[1] / "data"
LOGS = DATA / "logs"
CFG = DATA / "hf-configs"
QWEN35 = str(CFG / "Qwen--Qwen3.5-27B" / "config.json")
DFLASH = str(CFG / "z-lab--Qwen3.8-27B-DFlash2" / "config.json")


def _check(*args: str) -> tuple[dict, str, int]:  # type: ignore[type-arg]
    env = {"COLUMNS": "200", "NO_COLOR": "1"}
    res_json = CliRunner().invoke(app, ["check", *args, "--json"], env=env)
    res_text = CliRunner().invoke(app, ["check", *args], env=env)
    assert res_json.exit_code == res_text.exit_code, (res_json.output, res_text.output)
    return json.loads(res_json.stdout), res_text.stdout, res_text.exit_code


def _figures(plan: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {d["figure"]: d for d in plan["disagreements"]}


def test_capacity_error_log_against_a_plan_that_fits_is_a_warning_not_a_note() -> None:
    """The issue's case: the server died with the capacity error (41.1 GiB needed) after
    'Setting attention block size to 2912 tokens'; kvplan, with another draft on the command
    line, plans 2,944-token blocks and FITS — three disagreements, said as a warning."""
    plan, text, code = _check(QWEN35, "--draft", DFLASH, "--from-log",
                              str(LOGS / "v0.34.0-qwen35-27b-dflash-capacity-error.log"))
    assert plan["verdict"] == "FITS" and code == 0
    found = _figures(plan)
    assert set(found) == {"verdict", "attention block size", "KV needed for one request"}
    assert found["verdict"]["logged"].startswith("vLLM refused to start")
    assert found["verdict"]["kvplan"] == "FITS"
    assert found["attention block size"]["logged"].startswith("2,912 tokens")
    assert found["attention block size"]["kvplan"] == "2,944 tokens"
    assert (found["KV needed for one request"]["logged"],
            found["KV needed for one request"]["kvplan"]) == ("41.1 GiB", "7.31 GiB")
    # the draft differs from the log's (z-lab/Qwen3.5-27B-DFlash): the most likely reason
    assert found["verdict"]["likely_reasons"][0].startswith("the model:")
    assert "z-lab/Qwen3.5-27B-DFlash" in found["verdict"]["likely_reasons"][0]
    reasons = " ".join(found["attention block size"]["likely_reasons"])
    for what in ("the release:", "the flags:", "--block-size"):
        assert what in reasons
    warning = [w for w in plan["warnings"] if w.startswith("the log disagrees")]
    assert len(warning) == 1 and "2,912" in warning[0] and "2,944" in warning[0]
    assert "warning: the log disagrees with this plan on 3 figures" in text
    assert not any("differs from it" in n for n in plan["notes"])  # no quiet note


def test_capacity_error_available_memory_is_the_budget_when_the_log_has_no_other() -> None:
    """A traceback pasted alone (tpu-inference PR #223): its only memory figure is the capacity
    error's 'available KV cache memory (0.71 GiB)'. It used to end in 'no KV cache budget'; now
    it is the budget (plus vLLM's null block, added back), the KV needed matches the log's
    16.00 GiB, and the log's estimate 5,632 against kvplan's is reported."""
    plan, text, code = _check(str(CFG / "meta-llama--Llama-3.1-8B"), "--from-log",
                              str(LOGS / "issue-tpu-inference-223-models-s-wording.log"))
    assert code == 1 and plan["verdict"] == "DOES NOT FIT"
    assert plan["check_gib"] == ["0.71"]  # what vLLM's check saw, null block held back
    pool = plan["pool_bytes_per_block"][0]
    assert abs(plan["available_kv_bytes"][0] - pool - 0.71 * 2**30) < 2  # the block added back
    assert plan["total_gib_needed"] == ["16.0"]
    assert any("matches it" in n for n in plan["notes"])
    assert any("capacity error's 'available KV cache memory (0.71 GiB)'" in n
               for n in plan["notes"])
    found = _figures(plan)
    assert "KV needed for one request" not in found and "verdict" not in found
    est = found["estimated maximum model length"]
    assert est["logged"] == "5,632" and est["kvplan"] == f"{min(plan['estimated_max_model_len']):,}"
    assert any(r.startswith("the release: the log does not name its vLLM version")
               for r in est["likely_reasons"])
    assert "no KV cache budget" not in text


def test_a_log_that_agrees_within_its_rounding_has_no_disagreement() -> None:
    """JSON-format log of Qwen3-8B TP 2: 431,232 tokens logged, kvplan 431,168 from the rounded
    29.61 GiB — one block apart, inside the ±0.005 GiB the log's rounding allows."""
    plan, text, code = _check(str(CFG / "Qwen--Qwen3-8B"), "--from-log",
                              str(LOGS / "constructed-json-logging.log"))
    assert code == 0 and plan["disagreements"] == []
    assert plan["kv_cache_size_tokens"] != 431_232  # not equal, yet within the rounding
    assert abs(plan["kv_cache_size_tokens"] - 431_232) <= 64
    assert "disagrees" not in text


def test_another_model_on_the_command_line_is_named_first() -> None:
    """vLLM 0.31 TP 4 log of Qwen3-Next-80B-A3B-Instruct-FP8 planned with the Thinking model's
    config: the cache size and concurrency differ; the model is the first likely reason, the
    flag kvplan does not model (enable_expert_parallel) is named."""
    plan, text, _ = _check(str(CFG / "Qwen--Qwen3-Next-80B-A3B-Thinking"), "--from-log",
                           str(LOGS / "v0.31.0-qwen3-next-80b-tp4-docker.log"))
    found = _figures(plan)
    assert found["GPU KV cache size"]["logged"] == "1,148,928 tokens"
    assert found["maximum concurrency"]["logged"] == "29.91x for 131,072 tokens"
    assert "attention block size" not in found  # 272 tokens: kvplan agrees
    first = found["GPU KV cache size"]["likely_reasons"][0]
    assert first.startswith("the model: the log served Qwen/Qwen3-Next-80B-A3B-Instruct-FP8")
    assert any("enable_expert_parallel" in r for r in found["GPU KV cache size"]["likely_reasons"])


def test_a_log_that_started_against_a_plan_that_does_not_fit() -> None:
    """The log's server started; the command line's smaller budget does not fit: the verdict
    disagrees; the command line's budget and its replacing the log's are the reasons named
    first."""
    plan, text, code = _check(str(CFG / "Qwen--Qwen3-8B"), "--from-log",
                              str(LOGS / "constructed-json-logging.log"),
                              "--kv-cache-memory", "1GiB")
    assert code == 1
    verdict = _figures(plan)["verdict"]
    assert verdict["logged"] == "vLLM started (GPU KV cache size 431,232 tokens)"
    assert verdict["kvplan"] == "DOES NOT FIT"
    assert verdict["likely_reasons"][0].startswith("the budget: kvplan's is explicit")
    assert verdict["likely_reasons"][1].startswith("the flags: the command line replaced the "
                                                   "log's available_kv_gib")
