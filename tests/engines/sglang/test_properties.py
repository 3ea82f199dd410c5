"""Invariants of the SGLang engine (hypothesis), on real configs: the token capacity never falls
when the budget grows (for a Mamba hybrid: unless its state slots rose), it is always a whole
number of pages, the running requests respect their bounds, and a longer chunked prefill never
raises mem_fraction_static."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engines.sglang import KvBudget, Platform, SglangDeployment, SglangGpu, plan_sglang
from kvplan.engines.sglang.model import sglang_model
from kvplan.engines.sglang.profiles import SGLANG_0_5_23
from kvplan.engines.sglang.server_args import resolve
from kvplan.models import describe_model
from kvplan.models.description import ModelDescription

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "hf-configs"
H100 = SglangGpu(total_memory_mib=81559, platform=Platform.SM90)
B200 = SglangGpu(total_memory_mib=183359, platform=Platform.SM100)
MODELS = ["meta-llama--Llama-3.1-8B", "openai--gpt-oss-20b", "deepseek-ai--DeepSeek-V3",
          "Qwen--Qwen3-Next-80B-A3B-Thinking", "google--gemma-4-26B-A4B",
          "deepseek-ai--DeepSeek-V3.2"]


@cache
def desc(name: str) -> ModelDescription:
    return describe_model(json.loads((CONFIGS / name / "config.json").read_text()), source=name)


def tokens(name: str, dep: SglangDeployment, budget: int, gpu: SglangGpu = H100) -> int:
    return pools(name, dep, budget, gpu)[0]


def pools(name: str, dep: SglangDeployment, budget: int, gpu: SglangGpu = H100
          ) -> tuple[int, int]:
    """(KV tokens, Mamba state slots) for a KV budget."""
    r = plan_sglang(desc(name), dep, gpu=gpu, memory=KvBudget(budget_bytes=(budget,)))
    return r.max_total_num_tokens or 0, r.max_mamba_cache_size or 0


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(MODELS), budget=st.integers(2**28, 2**36),
       extra=st.integers(0, 2**34), tp=st.sampled_from([1, 2, 4, 8]))
def test_tokens_never_fall_when_the_budget_grows(name: str, budget: int, extra: int,
                                                 tp: int) -> None:
    dep = SglangDeployment(tp_size=tp)
    (small, small_slots), (big, big_slots) = pools(name, dep, budget), pools(name, dep, budget + extra)
    # a hybrid's state pool is carved out first (_handle_max_mamba_cache): one more slot may take
    # a few tokens' bytes, so its tokens may fall only when its slots rose
    assert small_slots <= big_slots
    assert small <= big or small_slots < big_slots


@settings(max_examples=60, deadline=None)
@given(budget=st.integers(2**28, 2**36), page=st.sampled_from([1, 16, 32, 64, 128]),
       name=st.sampled_from(["meta-llama--Llama-3.1-8B", "openai--gpt-oss-20b",
                             "Qwen--Qwen3-Next-80B-A3B-Thinking"]))
def test_tokens_are_whole_pages(budget: int, page: int, name: str) -> None:
    r = plan_sglang(desc(name), SglangDeployment(page_size=page, tp_size=4), gpu=H100,
                    memory=KvBudget(budget_bytes=(budget,)))
    if r.fits:
        assert r.page_size == page
        assert r.max_total_num_tokens is not None and r.max_total_num_tokens % page == 0
        if r.swa_max_total_num_tokens is not None:
            assert r.swa_max_total_num_tokens % page == 0


@settings(max_examples=60, deadline=None)
@given(budget=st.integers(2**26, 2**36), mrr=st.none() | st.integers(1, 8192),
       name=st.sampled_from(MODELS))
def test_running_requests_respect_their_bounds(budget: int, mrr: int | None, name: str) -> None:
    r = plan_sglang(desc(name), SglangDeployment(tp_size=8, max_running_requests=mrr),
                    gpu=H100, memory=KvBudget(budget_bytes=(budget,)))
    if not r.fits:
        assert r.error is not None and r.error.message
        return
    assert r.max_running_requests is not None and r.max_total_num_tokens is not None
    assert r.max_running_requests <= r.max_total_num_tokens // 2
    if mrr is not None:
        assert r.max_running_requests <= mrr
    if r.max_mamba_cache_size is not None:
        assert r.max_running_requests <= r.max_mamba_cache_size


@settings(max_examples=60, deadline=None)
@given(small=st.integers(512, 32768), grow=st.integers(0, 32768), tp=st.sampled_from([1, 8]),
       gpu=st.sampled_from([H100, B200]))
def test_a_longer_chunked_prefill_never_raises_mem_fraction_static(small: int, grow: int,
                                                                   tp: int,
                                                                   gpu: SglangGpu) -> None:
    m = sglang_model(desc("meta-llama--Llama-3.1-8B"), SGLANG_0_5_23)
    a = resolve(m, SglangDeployment(chunked_prefill_size=small, tp_size=tp), gpu, SGLANG_0_5_23)
    b = resolve(m, SglangDeployment(chunked_prefill_size=small + grow, tp_size=tp), gpu,
                SGLANG_0_5_23)
    assert b.mem_fraction_static <= a.mem_fraction_static
