"""SGLang start-up logs from public pages (tests/data/logs/sglang/SOURCES.md), parsed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import InputError
from kvplan.sources.sglang_log import looks_like_sglang_log, parse_sglang_log

LOGS = Path(__file__).resolve().parent.parent / "data" / "logs" / "sglang"


def read(name: str):  # type: ignore[no-untyped-def]
    return parse_sglang_log((LOGS / name).read_bytes())


def test_a_complete_single_gpu_start_up() -> None:
    log = read("docs-send-request-llama31-8b-h100.log")
    assert log.model == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert log.mem_fraction_static == 0.88 and log.tp_size == 1
    assert log.server_args["chunked_prefill_size"] == 8192
    assert (log.pre_model_load_gib, log.post_load_gib) == (78.81, 63.72)
    assert log.kv_tokens is None  # 0.4.1 printed no #tokens
    assert log.kv_size_gib == pytest.approx(54.26)
    assert log.max_total_num_tokens == 444500 and log.max_running_requests == 2049
    assert log.context_len == 131072 and log.model_class == "LlamaForCausalLM"


def test_four_ranks_and_the_launch_line_in_the_log() -> None:
    log = read("llms-in-clouds-qwq-32b-4xl4-tp4.log")
    assert log.ranks == ["TP0", "TP1", "TP2", "TP3"]
    assert log.tp_size == 4 and log.mem_fraction_static == 0.85
    assert (log.pre_model_load_gib, log.post_load_gib, log.weights_gib) == (21.63, 6.09, 15.54)
    assert log.kv_tokens == 46611 == log.max_total_num_tokens
    assert log.chunked_prefill_size == 2048 and log.model == "/home/model/Qwen/QwQ-32B"


def test_no_begin_line_and_mem_usage() -> None:
    log = read("issue-sglang-4760-llama31-8b-fa3.log")
    assert log.pre_model_load_gib is None and log.mem_fraction_static is None
    assert (log.post_load_gib, log.weights_gib, log.kv_tokens) == (63.48, 15.11, 442750)


def test_the_05_wordings() -> None:
    log = read("issue-ktransformers-1870-qwen35-moe-mamba.log")
    assert log.post_load_gib == 19.08 and log.weights_gib == 3.76
    assert log.max_mamba_cache_size == 82 and log.kv_tokens == 580364
    assert log.max_running_requests == 1 and log.context_len == 8192
    log = read("issue-club-3090-1261-dtype-wording.log")
    assert log.kv_tokens == 454112 and log.kv_dtype == "float8_e4m3fn"
    assert log.kv_size_gib == pytest.approx(6.92)  # the first pool (the target's)
    log = read("issue-sglang-4826-gemma3.log")
    assert log.model_class == "Gemma3ForConditionalGeneration" and log.kv_tokens == 834615


def test_errors_and_the_below_context_warning() -> None:
    text = ("[2026-01-01 00:00:00 TP0] Load weight begin. avail mem=78.40 GB\n"
            "[2026-01-01 00:00:09 TP0] KV pool holds 5508 tokens, fewer than --context-length "
            "131072. One full-length request cannot fit, so long requests will be refused or "
            "truncated at serving time.\n"
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n")
    log = parse_sglang_log(text)
    assert log.pre_model_load_gib == 78.40
    assert log.warnings[0].startswith("KV pool holds 5508 tokens, fewer than --context-length")
    assert log.errors == ["RuntimeError: Not enough memory. Please try to increase "
                          "--mem-fraction-static."]


def test_what_is_not_an_sglang_log() -> None:
    vllm = Path(__file__).resolve().parent.parent / "data" / "logs" / \
        "v0.34.0-qwen3-32b-tp2-ok.log"
    assert not looks_like_sglang_log(vllm.read_bytes())
    assert looks_like_sglang_log((LOGS / "issue-sglang-4826-gemma3.log").read_bytes())
    for bad in (b"hello\nworld\n", b"\x00\x01binary"):
        with pytest.raises(InputError):
            parse_sglang_log(bad)
