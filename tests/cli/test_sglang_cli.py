"""`kvplan check` / `kvplan explain` with `--engine sglang` and `--engine vllm,sglang`, SGLang
launch lines (`--serve`) and SGLang start-up logs (`--from-log`), through typer's runner. Every
number is checked against the engine called directly (kvplan.check / kvplan.compare)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parent.parent / "data"
LLAMA = str(DATA / "hf-configs" / "meta-llama--Llama-3.1-8B")
QWEN35 = str(DATA / "hf-configs" / "Qwen--Qwen3.5-27B")
GPT_OSS = str(DATA / "hf-configs" / "openai--gpt-oss-20b")
LOGS = DATA / "logs" / "sglang"


def run(*args: str) -> tuple[int, str, str]:
    res = runner.invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_engine_sglang_json_is_the_engines_plan_under_sglangs_names() -> None:
    code, out, err = run("check", LLAMA, "--gpu", "H100", "--engine", "sglang", "--tp", "2",
                         "--kv-cache-dtype", "fp8_e4m3", "--context-length", "32k", "--json")
    assert code == 0, err
    got = json.loads(out)
    ref = kvplan.check(LLAMA, engine="sglang", gpu="H100", tp_size=2, kv_cache_dtype="fp8_e4m3",
                       context_length=32000)
    assert got["engine"] == "sglang" and got["vllm_version"] is None
    s = got["sglang"]
    for key in ("mem_fraction_static", "max_total_num_tokens", "max_running_requests",
                "page_size", "full_max_total_num_tokens", "swa_max_total_num_tokens",
                "max_mamba_cache_size"):
        assert key in s
    assert s["max_total_num_tokens"] == ref.kv_cache_size_tokens
    assert s["resolved"]["attn_tp_size"] == 2 and s["resolved"]["context_len"] == 32000
    assert got["serving"]["holds"] and got["serving"]["context_length"] == 32000


def test_the_table_shows_the_pools_the_verdict_and_sglangs_log_line() -> None:
    code, out, _ = run("check", GPT_OSS, "--gpu", "H100", "--engine", "sglang",
                       "--context-length", "65536", "--concurrency", "4")
    assert code == 0
    plan = kvplan.check(GPT_OSS, engine="sglang", gpu="H100", context_length=65536,
                        concurrency=4)
    assert plan.sglang is not None and plan.serving is not None
    assert "HybridSWAPoolConfigurator" in out
    for row in plan.sglang.pools:  # the per-pool table: pool, layers, bytes/token, tokens
        assert f"{row.tokens:,}" in out and f"{row.bytes_per_token:,.0f}" in out
    assert f"hold {plan.serving.requests_at_length:,} × 65,536-token requests" in out
    assert f"max_total_num_tokens={plan.kv_cache_size_tokens}" in out


@pytest.mark.parametrize(("args", "text"), [
    (["--engine", "sglang", "--gpu-memory-utilization", "0.9"],
     "--gpu-memory-utilization is a vLLM flag; --engine sglang does not read it (SGLang's is "
     "--mem-fraction-static)"),
    (["--engine", "sglang", "--max-model-len", "32k"], "SGLang's is --context-length"),
    (["--engine", "sglang", "--max-num-seqs", "8"], "SGLang's is --max-running-requests"),
    (["--mem-fraction-static", "0.9"],
     "--mem-fraction-static is an SGLang flag; the engine is vLLM (its flag is "
     "--gpu-memory-utilization)"),
    (["--context-length", "32k"], "--context-length is an SGLang flag"),
    (["--concurrency", "4"], "--concurrency on check is read by SGLang plans"),
    (["--engine", "tgi"], "unknown --engine 'tgi'"),
    (["--engine", "vllm,sglang", "--max-model-len", "32k", "--context-length", "16k"],
     "--max-model-len and --context-length differ"),
])
def test_a_flag_of_the_other_engine_is_one_line_and_exit_2(args: list[str], text: str) -> None:
    code, out, err = run("check", LLAMA, "--gpu", "H100", *args)
    assert code == 2 and out == ""
    assert err.startswith("Error: ") and text in err.splitlines()[0]


def test_an_sglang_start_up_error_is_exit_1_with_the_plan_on_stdout() -> None:
    code, out, _ = run("check", LLAMA, "--gpu", "L4", "--engine", "sglang", "--json")
    assert code == 1
    got = json.loads(out)
    assert not got["fits"] and got["failure_cause"] == "weights"
    assert got["error_message"].startswith("Loaded weights leave no GPU memory for the KV cache "
                                           "under --mem-fraction-static=0.684")
    code, out, _ = run("check", LLAMA, "--gpu", "H100", "--engine", "sglang",
                       "--context-length", "200000")
    assert code == 1 and "refuses to start" in out


def test_sglang_starts_but_does_not_hold_the_requests() -> None:
    code, out, _ = run("check", QWEN35, "--gpu", "H100", "--engine", "sglang", "--json")
    assert code == 1
    got = json.loads(out)
    tokens = got["sglang"]["max_total_num_tokens"]
    assert got["error_message"] is None and got["failure_cause"] == "kv_cache"
    assert got["serving"]["reason"] == (
        f"1 request of 262,144 tokens need 262,144 tokens of KV; max_total_num_tokens is "
        f"{tokens:,} (0 requests at once)")
    # SGLang's own start-up warning, word for word (tp_worker.get_worker_info)
    assert (f"KV pool holds {tokens} tokens, fewer than --context-length 262144. One full-length "
            "request cannot fit") in " ".join(got["warnings"])
    assert got["estimated_max_model_len"] == [tokens]


def test_explain_gives_what_ifs_in_sglangs_flags_recomputed() -> None:
    code, out, _ = run("explain", LLAMA, "--gpu", "L4", "--engine", "sglang",
                       "--context-length", "32k", "--json")
    assert code == 1
    ex = json.loads(out)["explanation"]
    rows = {w["change"]: w for w in ex["what_ifs"]}
    assert set(rows) >= {"--kv-cache-dtype fp8_e4m3", "--tp-size 2"}
    tp2 = kvplan.check(LLAMA, engine="sglang", gpu="L4", context_length=32000, tp_size=2)
    assert rows["--tp-size 2"]["fits"] is tp2.fits is True
    assert rows["--tp-size 2"]["note"].startswith(f"{tp2.kv_cache_size_tokens:,} tokens: ")
    assert rows["--kv-cache-dtype fp8_e4m3"]["fits"] is False  # the weights, not the KV
    assert any("mem_fraction_static 0.684" in c["text"] for c in ex["causes"])


def test_a_launch_server_line_is_planned_as_sglang() -> None:
    line = (f"CUDA_VISIBLE_DEVICES=0,1 python3 -m sglang.launch_server --model-path {LLAMA} "
            "--tp 2 --mem-fraction-static 0.85 --context-length 32k --port 30000 --made-up 1")
    code, out, err = run("check", "--serve", line, "--gpu", "H100", "--json")
    assert code == 0, err
    got = json.loads(out)
    ref = kvplan.check(LLAMA, engine="sglang", gpu="H100", tp_size=2, mem_fraction_static=0.85,
                       context_length=32000)
    assert got["engine"] == "sglang"
    assert got["sglang"]["max_total_num_tokens"] == ref.kv_cache_size_tokens
    assert got["provenance"]["tp_size"] == "serve line"
    assert got["provenance"]["gpu"] == "command line"
    assert any("--made-up" in n for n in got["notes"])
    # the command line wins over the serve line, key by key
    code, out, _ = run("check", "--serve", line, "--gpu", "H100", "--tp-size", "4", "--json")
    assert json.loads(out)["sglang"]["resolved"]["attn_tp_size"] == 4
    # and --engine vllm with an SGLang line is a contradiction
    code, _, err = run("check", "--serve", line, "--gpu", "H100", "--engine", "vllm")
    assert code == 2 and "--serve starts SGLang" in err


def test_a_real_log_kvplan_lands_on_its_tokens_within_the_rounding() -> None:
    """SGLang's docs (Llama-3.1-8B on an H100): 78.81 GB free before the weights, 63.72 GB
    after, mem_fraction_static 0.88 → max_total_num_tokens=444500. kvplan, from that memory:
    within the rounding of the two printed values and one page."""
    log = LOGS / "docs-send-request-llama31-8b-h100.log"
    code, out, err = run("check", LLAMA, "--gpu", "H100", "--from-log", str(log), "--json")
    assert code == 0, err
    got = json.loads(out)
    check = got["sglang_log"]
    assert check["tokens_low"] <= 444500 <= check["tokens_high"]
    assert check["tokens_high"] - check["tokens_low"] < 200  # the rounding, not a guess
    assert abs(got["kv_cache_size_tokens"] - 444500) <= 50
    rows = {r["name"]: r for r in check["rows"]}
    assert rows["max_total_num_tokens"]["agrees"] is True
    assert rows["mem_fraction_static"]["logged"] == 0.88 == got["sglang"]["mem_fraction_static"]
    assert got["budget_mode"] == "from_log" and got["provenance"]["post_load_gib"] == "log"
    assert not any(w.startswith("DISAGREES") for w in got["warnings"])


def test_a_log_without_its_fraction_disagrees_loudly_until_it_is_given() -> None:
    log = LOGS / "issue-sglang-4760-llama31-8b-fa3.log"
    code, out, _ = run("check", LLAMA, "--gpu", "H100", "--from-log", str(log))
    assert code == 0
    assert "DISAGREES: the log's max_total_num_tokens 442,750 is outside kvplan's" in out
    assert "the log does not state mem_fraction_static" in out
    # with the fraction that release used on an H100, the log's #tokens is within the rounding
    code, out, _ = run("check", LLAMA, "--gpu", "H100", "--from-log", str(log),
                       "--mem-fraction-static", "0.88", "--json")
    got = json.loads(out)
    assert got["sglang_log"]["tokens_low"] <= 442750 <= got["sglang_log"]["tokens_high"]
    assert not any("DISAGREES" in w for w in got["warnings"])


def test_side_by_side_json_holds_both_engines_plans() -> None:
    code, out, err = run("check", GPT_OSS, "--gpu", "H100", "--engine", "vllm,sglang",
                         "--max-model-len", "64000", "--concurrency", "8", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert [r["engine"] for r in got["rows"]] == ["vllm", "sglang"]
    assert got["context_length"] == 64000 and got["concurrency"] == 8
    vplan = kvplan.check(GPT_OSS, gpu="H100", max_model_len=64000)
    splan = kvplan.check(GPT_OSS, engine="sglang", gpu="H100", context_length=64000,
                         concurrency=8)
    v, s = got["rows"]
    assert v["kv_tokens"] == vplan.kv_cache_size_tokens == got["plans"][0]["kv_cache_size_tokens"]
    assert s["kv_tokens"] == splan.kv_cache_size_tokens == got["plans"][1]["kv_cache_size_tokens"]
    assert s["serving"]["requests_at_length"] == splan.serving.requests_at_length  # type: ignore
    assert v["serving"]["requests_at_length"] == min(int(vplan.max_concurrency or 0), 1024)
    assert any(d.startswith("KV memory per GPU") for d in got["differences"])
    assert v["command"].startswith("vllm serve ") and "--max-model-len 64000" in v["command"]
    assert s["command"].startswith("python -m sglang.launch_server --model-path ")


def test_side_by_side_table_and_markdown() -> None:
    code, out, _ = run("check", LLAMA, "--gpu", "H100", "--engine", "sglang,vllm",
                       "--kv-cache-dtype", "fp8")
    assert code == 0
    assert "vLLM 0.34.0" in out and "SGLang 0.5.23" in out and "Why they differ" in out
    c = kvplan.compare(LLAMA, gpu="H100", kv_cache_dtype="fp8")
    assert c.plans[1].sglang is not None
    assert c.plans[1].sglang.resolved.kv_cache_dtype == "fp8_e4m3"  # type: ignore[union-attr]
    for r in c.rows:
        assert f"{r.kv_tokens:,}" in out
    code, md, _ = run("check", LLAMA, "--gpu", "H100", "--engine", "vllm,sglang",
                      "--format", "markdown")
    assert md.startswith("### kvplan:") and "| KV tokens |" in md


def test_sglang_markdown() -> None:
    code, md, _ = run("check", LLAMA, "--gpu", "H100", "--engine", "sglang", "--format",
                      "markdown")
    assert code == 0 and "| pool | layers | B/token |" in md and "**FITS**" in md


def test_side_by_side_explain_gives_each_engines_what_ifs_in_its_own_flags() -> None:
    """`check --engine vllm,sglang --explain`: vLLM's what-ifs in vLLM's flags and SGLang's in
    SGLang's, each the engine's own re-plan (the same rows `check --explain` gives per engine)."""
    args = ("check", LLAMA, "--gpu", "H100", "--engine", "vllm,sglang", "--max-model-len",
            "131072", "--concurrency", "4")
    _, plain, _ = run(*args, "--json")
    assert all(p["explanation"] is None for p in json.loads(plain)["plans"])
    code, out, _ = run(*args, "--explain", "--json")
    assert code == 1
    vplan, splan = json.loads(out)["plans"]
    vref = kvplan.check(LLAMA, gpu="H100", max_model_len=131072, explain=True)
    sref = kvplan.check(LLAMA, engine="sglang", gpu="H100", context_length=131072,
                        concurrency=4, explain=True)
    assert vref.explanation is not None and sref.explanation is not None
    assert [w["change"] for w in vplan["explanation"]["what_ifs"]] == \
        [w.change for w in vref.explanation.what_ifs]
    assert [(w["change"], w["fits"], w["note"]) for w in splan["explanation"]["what_ifs"]] == \
        [(w.change, w.fits, w.note) for w in sref.explanation.what_ifs]
    assert any(w.change == "--kv-cache-dtype fp8" for w in vref.explanation.what_ifs)
    assert any(w.change == "--kv-cache-dtype fp8_e4m3" for w in sref.explanation.what_ifs)

    code, table, _ = run(*args, "--explain")
    assert code == 1
    text = " ".join(table.split())
    assert "What if: vLLM 0.34.0 (vLLM's flags" in text
    assert "What if: SGLang 0.5.23 (SGLang's flags; each re-planned: holds 4 × 131,072" in text
    for w in sref.explanation.what_ifs:
        assert " ".join(w.change.split()) in text or w.change.split()[0] in text
    code, md, _ = run(*args, "--explain", "--format", "markdown")
    assert "What if: SGLang 0.5.23" in md and "| `--kv-cache-dtype fp8_e4m3` |" in md
    assert "What if: vLLM 0.34.0" in md and "| `--kv-cache-dtype fp8` |" in md


def test_fp8_e4m3_on_an_a100_through_triton_stops_after_the_pools() -> None:
    code, out, _ = run("check", GPT_OSS, "--engine", "sglang", "--gpu", "A100",
                       "--kv-cache-dtype", "fp8_e4m3")
    text = " ".join(out.split())
    assert code == 1
    assert ("SGLang 0.5.23 sizes the pools, then stops when its Triton attention kernels "
            "compile (CUDA-graph capture) — ValueError: type fp8e4nv not supported in this "
            "architecture.") in text
    assert "SGLang would log: max_total_num_tokens" not in text  # it never gets that far
    code, out, _ = run("check", GPT_OSS, "--engine", "sglang", "--gpu", "A100",
                       "--kv-cache-dtype", "fp8_e5m2", "--json")
    assert code == 0 and json.loads(out)["sglang"]["resolved"]["attention_backend"] == "triton"
    code, out, _ = run("check", LLAMA, "--engine", "sglang", "--gpu", "A100",
                       "--kv-cache-dtype", "fp8_e4m3", "--json")
    got = json.loads(out)
    assert code == 0 and got["sglang"]["resolved"]["attention_backend"] == "flashinfer"


def test_a_refusal_before_the_context_is_known_prints_no_context_length_zero() -> None:
    code, out, _ = run("check", LLAMA, "--engine", "sglang", "--gpu", "A100",
                       "--kv-cache-dtype", "fp8")
    text = " ".join(out.split())
    assert code == 1 and "ValueError: Unsupported kv_cache_dtype: fp8." in text
    assert "context_length 0" not in text and "context_length -" in text
