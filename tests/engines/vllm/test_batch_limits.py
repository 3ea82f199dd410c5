"""vLLM's scheduler batch limits: EngineArgs._set_default_max_num_seqs_and_batched_tokens_args
(the GPU's defaults, --performance-mode throughput, the whole-prompt floor, the
max_num_seqs × max_model_len cap) and SchedulerConfig.verify_max_model_len."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan.engines.vllm.build import Deployment
from kvplan.engines.vllm.build.batch import scheduler_batch_limits
from kvplan.errors import InputError, StartupError

H100 = dict(gpu_total_memory_bytes=85_045_477_376, gpu_name="NVIDIA H100 SXM 80GB", sm=90)
A100 = dict(gpu_total_memory_bytes=85_899_345_920, gpu_name="NVIDIA A100 SXM 80GB", sm=80)


def _limits(mml: int, *, whole: bool = False, **dep: object) -> tuple[int, int]:
    return scheduler_batch_limits(Deployment(**{**H100, **dep}), mml,  # type: ignore[arg-type]
                                  whole_prompts=whole)


def test_gpu_defaults_and_throughput_doubles_only_the_defaults() -> None:
    assert _limits(32768) == (8192, 1024)
    assert _limits(32768, performance_mode="throughput") == (16384, 2048)
    assert _limits(32768, performance_mode="interactivity") == (8192, 1024)
    # a given value is kept, the other default still doubles
    assert _limits(32768, performance_mode="throughput", max_num_batched_tokens=4096) == (4096, 2048)
    assert _limits(32768, performance_mode="throughput", max_num_seqs=64) == (16384, 64)
    a100 = scheduler_batch_limits(Deployment(**A100, performance_mode="throughput"),  # type: ignore[arg-type]
                                  32768, whole_prompts=False)
    assert a100 == (4096, 512)


def test_default_batch_capped_by_requests_times_length() -> None:
    # vLLM: "Ensure max_num_batched_tokens does not exceed model limit" (Whisper's 448)
    assert _limits(4) == (4096, 1024)
    assert _limits(448, whole=True, max_num_seqs=2) == (896, 2)
    # and a default max_num_seqs never exceeds max_num_batched_tokens
    assert _limits(32768, max_num_batched_tokens=512) == (512, 512)
    assert _limits(2) == (2048, 1024)


def test_whole_prompts_raise_a_default_and_refuse_a_short_given_batch() -> None:
    assert _limits(32768, whole=True) == (32768, 1024)
    assert _limits(4096, whole=True) == (8192, 1024)
    with pytest.raises(StartupError, match=r"max_num_batched_tokens \(8192\) is smaller than "
                                           r"max_model_len \(32768\)"):
        _limits(32768, whole=True, max_num_batched_tokens=8192)
    assert _limits(32768, max_num_batched_tokens=8192) == (8192, 1024)  # chunked: no check


def test_unknown_performance_mode_is_bad_input() -> None:
    with pytest.raises(InputError, match="--performance-mode must be balanced, interactivity or "
                                         "throughput, got 'fast'"):
        Deployment(performance_mode="fast")


@given(mml=st.integers(1, 1 << 20), whole=st.booleans(),
       mode=st.sampled_from(("balanced", "interactivity", "throughput")),
       seqs=st.one_of(st.none(), st.integers(1, 4096)))
def test_default_batch_invariants(mml: int, whole: bool, mode: str, seqs: int | None) -> None:
    mnbt, n = _limits(mml, whole=whole, performance_mode=mode, max_num_seqs=seqs)
    assert 1 <= mnbt <= n * mml  # never more tokens than the running requests can hold
    assert n == seqs if seqs is not None else 1 <= n <= mnbt
    if whole:
        assert mnbt >= min(mml, n * mml)  # a whole prompt fits a step
    balanced = _limits(mml, whole=whole, max_num_seqs=seqs)
    assert (mnbt >= balanced[0] and n >= balanced[1]) if mode == "throughput" \
        else (mnbt, n) == balanced
