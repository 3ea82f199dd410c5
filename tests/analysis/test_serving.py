"""The verdict at a context length and a concurrency (analysis/serving.py), on hand-made results
that hit one rule each: page rounding, the request cap, a start-up error."""

from __future__ import annotations

from kvplan.analysis.serving import sglang_serving, vllm_serving
from kvplan.engines.sglang.result import SglangError, SglangResult


def _result(tokens: int, page: int, cap: int) -> SglangResult:
    return SglangResult(sglang_version="0.5.23", fits=True, page_size=page,
                        max_total_num_tokens=tokens, max_running_requests=cap)


def test_a_request_takes_whole_pages() -> None:
    # 1,000 tokens on 64-token pages take 16 pages = 1,024 tokens: 4,096 hold 4, not 4.096
    s = sglang_serving(_result(4096, 64, 100), context_length=1000, concurrency=4)
    assert (s.tokens_per_request, s.requests_at_length, s.holds) == (1024, 4, True)
    s = sglang_serving(_result(4095, 64, 100), context_length=1000, concurrency=4)
    assert (s.requests_at_length, s.holds) == (3, False)
    assert s.reason == ("4 requests of 1,000 tokens need 4,096 tokens of KV; "
                        "max_total_num_tokens is 4,095 (3 requests at once)")


def test_the_request_cap_binds() -> None:
    s = sglang_serving(_result(10**6, 1, 5), context_length=1000, concurrency=8)
    assert (s.requests_at_length, s.holds) == (5, False)
    assert s.reason == "max_running_requests is 5: fewer than the 8 requests asked for"


def test_a_start_up_error_holds_nothing() -> None:
    r = SglangResult(sglang_version="0.5.23", fits=False, error=SglangError(
        type="RuntimeError", message="Not enough memory.", stage="pool_sizing"))
    s = sglang_serving(r, context_length=1000, concurrency=1)
    assert not s.holds and s.reason == "SGLang refuses to start: Not enough memory."


def test_vllm_whole_requests_within_max_num_seqs() -> None:
    s = vllm_serving(fits=True, max_concurrency=3.7, kv_tokens=485120, context_length=131072,
                     concurrency=3, max_num_seqs=1024)
    assert (s.requests_at_length, s.holds) == (3, True)
    s = vllm_serving(fits=True, max_concurrency=3.7, kv_tokens=485120, context_length=131072,
                     concurrency=4, max_num_seqs=1024)
    assert not s.holds and s.reason == ("vLLM's maximum concurrency at 131,072 tokens is "
                                        "3.70x")


def test_sglang_pool_bytes_and_concurrency_at_the_length() -> None:
    # 1,000 tokens on 64-token pages take 1,024 tokens; 100 B a token
    r = SglangResult(sglang_version="0.5.23", fits=True, page_size=64,
                     max_total_num_tokens=10_240, max_running_requests=100,
                     cell_size_bytes_per_token=100.0)
    s = sglang_serving(r, context_length=1000, concurrency=3)
    assert (s.kv_bytes_needed, s.kv_pool_bytes) == (3 * 1024 * 100, 10_240 * 100)
    assert (s.concurrency_at_length, s.capped_by_requests) == (10.0, False)
    r = r.model_copy(update={"max_running_requests": 4})
    s = sglang_serving(r, context_length=1000, concurrency=3)
    assert (s.concurrency_at_length, s.capped_by_requests, s.holds) == (4.0, True, True)
    s = vllm_serving(fits=True, max_concurrency=3.7, kv_tokens=485120, context_length=131072,
                     concurrency=3, max_num_seqs=1024)
    assert s.kv_bytes_needed is None and s.concurrency_at_length is None
