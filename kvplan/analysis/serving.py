"""Whether a KV cache holds `concurrency` requests of `context_length` tokens at once — the
question both servers answer differently (vLLM refuses to start below one request; SGLang starts
and warns) — as one engine-agnostic verdict (`ServingCheck`)."""

from __future__ import annotations

from pydantic import Field

from kvplan.engines.sglang.result import SglangResult
from kvplan.frozen import Frozen


class ServingCheck(Frozen):
    context_length: int = Field(description="the request length asked about (tokens)")
    concurrency: int = Field(description="the requests of that length asked to run at once")
    kv_tokens: int | None = Field(description="tokens the KV cache holds per replica")
    tokens_per_request: int | None = Field(
        description="what one request of context_length takes: the length rounded up to the "
                    "page (SGLang); None for vLLM (its groups' blocks, see max_concurrency)")
    requests_at_length: int = Field(
        description="whole requests of context_length held at once per replica, within the "
                    "request cap")
    request_cap: int | None = Field(
        default=None, description="max_running_requests (SGLang) / max_num_seqs (vLLM)")
    holds: bool
    reason: str | None = Field(default=None, description="why it does not hold")
    concurrency_at_length: float | None = Field(
        default=None, description="requests of context_length the KV tokens hold at once "
                                  "(SGLang: max_total_num_tokens / tokens_per_request), within "
                                  "the request cap; None for vLLM (see the plan's max_concurrency)")
    capped_by_requests: bool = Field(
        default=False, description="the request cap, not the tokens, limits concurrency_at_length")
    kv_bytes_needed: int | None = Field(
        default=None, description="token-pool bytes per GPU the `concurrency` requests of "
                                  "context_length need: concurrency × tokens_per_request × "
                                  "SGLang's cell size (bytes per token, every pool's share); "
                                  "None for vLLM")
    kv_pool_bytes: int | None = Field(
        default=None, description="the token pool per GPU: max_total_num_tokens × the cell size "
                                  "(SGLang; a Mamba hybrid's state pool is apart); None for vLLM")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def sglang_serving(result: SglangResult, *, context_length: int, concurrency: int
                   ) -> ServingCheck:
    """SGLang: a request of L tokens takes ⌈L / page⌉ pages of the token pool
    (mem_cache.allocator: page-granular); the scheduler runs at most max_running_requests."""
    page = result.page_size or 1
    per_request = -(-context_length // page) * page
    tokens = result.max_total_num_tokens
    cap = result.max_running_requests
    if not result.fits or tokens is None:
        why = result.error.message if result.error is not None else "SGLang does not start"
        return ServingCheck(context_length=context_length, concurrency=concurrency,
                            kv_tokens=tokens, tokens_per_request=per_request,
                            requests_at_length=0, request_cap=cap, holds=False,
                            reason=f"SGLang refuses to start: {why}")
    by_tokens = tokens // per_request
    n = min(by_tokens, cap) if cap is not None else by_tokens
    at_length = tokens / per_request
    capped = cap is not None and cap < at_length
    cell = result.cell_size_bytes_per_token
    reason = None
    if n < concurrency:
        if by_tokens < concurrency:
            reason = (f"{_plural(concurrency, 'request')} of {context_length:,} tokens need "
                      f"{concurrency * per_request:,} tokens of KV; max_total_num_tokens is "
                      f"{tokens:,} ({_plural(by_tokens, 'request')} at once)")
        else:
            reason = (f"max_running_requests is {cap:,}: fewer than the "
                      f"{concurrency:,} requests asked for")
    return ServingCheck(context_length=context_length, concurrency=concurrency, kv_tokens=tokens,
                        tokens_per_request=per_request, requests_at_length=n, request_cap=cap,
                        holds=n >= concurrency, reason=reason,
                        concurrency_at_length=round(float(cap) if capped and cap is not None
                                                    else at_length, 4),
                        capped_by_requests=capped,
                        kv_bytes_needed=(int(concurrency * per_request * cell)
                                         if cell is not None else None),
                        kv_pool_bytes=int(tokens * cell) if cell is not None else None)


def vllm_serving(*, fits: bool, max_concurrency: float | None, kv_tokens: int | None,
                 context_length: int, concurrency: int, max_num_seqs: int | None,
                 error: str | None = None) -> ServingCheck:
    """vLLM: its own "Maximum concurrency for L tokens per request" (the blocks every group
    needs), whole requests, within max_num_seqs."""
    if not fits or max_concurrency is None:
        return ServingCheck(context_length=context_length, concurrency=concurrency,
                            kv_tokens=kv_tokens, tokens_per_request=None, requests_at_length=0,
                            request_cap=max_num_seqs, holds=False,
                            reason=f"vLLM refuses to start: {error}" if error else
                            "vLLM refuses to start")
    whole = int(max_concurrency + 1e-9)
    n = min(whole, max_num_seqs) if max_num_seqs is not None else whole
    reason = None
    if n < concurrency:
        reason = (f"vLLM's maximum concurrency at {context_length:,} tokens is "
                  f"{max_concurrency:.2f}x" if whole < concurrency else
                  f"max_num_seqs is {max_num_seqs:,}: fewer than the {concurrency:,} requests "
                  "asked for")
    return ServingCheck(context_length=context_length, concurrency=concurrency,
                        kv_tokens=kv_tokens, tokens_per_request=None, requests_at_length=n,
                        request_cap=max_num_seqs, holds=n >= concurrency, reason=reason)
