"""`kvplan fit` search: brute force agrees, ranking, dtype gates, misses, prices, progress."""

from __future__ import annotations

import io
import math
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from kvplan.budget import hardware
from kvplan.budget.kv_dtype_support import check_kv_dtype_supported
from kvplan.budget.kv_memory import default_batch_limits
from kvplan.engines.vllm.build import Deployment
from kvplan.errors import InputError
from kvplan.output.progress import DelayedProgress
from kvplan.pipeline.deploy import Request, evaluate, resolve
from kvplan.pipeline.fit import parse_price, parse_prices_file, search

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
LLAMA_8B = str(CONFIGS / "meta-llama--Llama-3.1-8B")
SMALL = ["L4", "A10", "L40S", "H100"]  # catalogue prices 0.80, 0.86, 1.95, 2.95 USD/h


def _brute_force(model: str, gpus: list[str], dtypes: list[str], max_gpus: int, length: int,
                 conc: int) -> list[tuple[float, int, str, int, int, int, str]]:
    """Every GPU × TP × PP × DP × dtype, planned one by one with `evaluate` — DP included,
    not derived — and kept when whole requests × DP reach `conc`."""
    base = Request(model=model, deployment=Deployment(max_model_len=length))
    res = resolve(base)
    out = []
    for name in gpus:
        g = hardware.lookup_gpu(name)
        for dt in dtypes:
            if check_kv_dtype_supported(g, dt, native_only=True):
                continue
            for tp in (1, 2, 4, 8):
                for pp in (1, 2, 4, 8):
                    if tp * pp > max_gpus:
                        continue
                    dep = replace(base.deployment, tensor_parallel_size=tp,
                                  pipeline_parallel_size=pp, kv_cache_dtype=dt)
                    try:
                        p = evaluate(replace(base, gpu=g.name, deployment=dep), res).plan
                    except InputError:
                        continue
                    if not p.fits or p.max_concurrency is None:
                        continue
                    seqs = default_batch_limits(g.total_memory_bytes or 0, g.name)[1]
                    whole = min(math.floor(p.max_concurrency), seqs)
                    for dp in range(1, max_gpus // (tp * pp) + 1):
                        if whole * dp >= conc:
                            n = tp * pp * dp
                            out.append((round((g.usd_per_hour or 0) * n, 4), n, g.name, tp, pp,
                                        dp, dt))
                            break
    return sorted(out)


def test_brute_force_over_a_small_catalogue_finds_nothing_cheaper() -> None:
    length, conc, max_gpus = 32768, 12, 4
    brute = _brute_force(LLAMA_8B, SMALL, ["auto", "fp8"], max_gpus, length, conc)
    assert brute, "the brute force must find deployments, or the test proves nothing"
    fit = search(Request(model=LLAMA_8B), max_model_len=length, concurrency=conc, gpus=SMALL,
                 kv_dtypes=["auto", "fp8"], max_gpus=max_gpus, top=3)
    best = fit.candidates[0]
    cheapest_usd, fewest = brute[0][0], brute[0][1]
    assert best.usd_per_hour == cheapest_usd and best.num_gpus == fewest
    # every deployment the brute force finds is one fit found too (same count, unpruned)
    full = search(Request(model=LLAMA_8B), max_model_len=length, concurrency=conc, gpus=SMALL,
                  kv_dtypes=["auto", "fp8"], max_gpus=max_gpus, top=1000, prune=False)
    assert full.num_fitting == len(brute)
    assert {(c.gpu, c.tensor_parallel_size, c.pipeline_parallel_size, c.data_parallel_size,
             c.kv_cache_dtype) for c in full.candidates} == {b[2:] for b in brute}
    # pruning changes the work, not the answer
    assert [c.model_dump() for c in full.candidates[:3]] == [c.model_dump()
                                                              for c in fit.candidates]
    assert fit.planned + fit.pruned == full.planned and fit.pruned > 0


def test_ranking_is_usd_then_gpu_count_and_price_overrides_reorder() -> None:
    fit = search(Request(model=LLAMA_8B), max_model_len=32768, concurrency=12, gpus=SMALL,
                 kv_dtypes=["auto", "fp8"], max_gpus=4, top=50, prune=False)
    keys = [(c.usd_per_hour, c.num_gpus) for c in fit.candidates]
    assert keys == sorted(keys) and len(keys) > 3
    for c in fit.candidates:  # USD/h is the per-GPU price × every GPU of the deployment
        assert c.num_gpus == (c.tensor_parallel_size * c.pipeline_parallel_size
                              * c.data_parallel_size)
        assert c.usd_per_hour == pytest.approx(c.usd_per_gpu_hour * c.num_gpus)
        assert c.max_concurrency >= 12
    # an H100 at 0.10 USD/h beats everything else
    cheap = search(Request(model=LLAMA_8B), max_model_len=32768, concurrency=12, gpus=SMALL,
                   kv_dtypes=["auto", "fp8"], max_gpus=4, prices={"NVIDIA H100 SXM 80GB": 0.10})
    assert cheap.candidates[0].gpu == "NVIDIA H100 SXM 80GB"
    assert cheap.candidates[0].price_source == "--price"


def test_no_nvfp4_kv_on_hopper_and_gates_follow_the_release() -> None:
    fit = search(Request(model=LLAMA_8B), max_model_len=8192, concurrency=1,
                 gpus=["H100", "H200", "B200"], top=100, prune=False)
    hopper = {c.kv_cache_dtype for c in fit.candidates if "H100" in c.gpu or "H200" in c.gpu}
    assert "nvfp4" not in hopper and {"auto", "fp8"} <= hopper
    assert "nvfp4" in {c.kv_cache_dtype for c in fit.candidates if c.gpu == "NVIDIA B200"}
    gated = {(s.gpu, s.kv_cache_dtype) for s in fit.skipped}
    assert ("NVIDIA H100 SXM 80GB", "nvfp4") in gated
    assert ("NVIDIA B200", "nvfp4") not in gated
    # only nvfp4 asked, on Hopper: nothing to plan at all
    none = search(Request(model=LLAMA_8B), max_model_len=8192, concurrency=1, gpus=["H100"],
                  kv_dtypes=["nvfp4"])
    assert none.candidates == [] and none.planned == 0
    # fp8 on an A100 (sm80) runs only dequantised: not recommended
    a100 = search(Request(model=LLAMA_8B), max_model_len=8192, concurrency=1, gpus=["A100"],
                  kv_dtypes=["fp8"])
    assert a100.candidates == [] and a100.skipped[0].kv_cache_dtype == "fp8"


def test_a_model_too_large_for_any_option_gives_the_nearest_misses() -> None:
    # DeepSeek-V3: 671B parameters, FP8 weights ≈ 640 GiB; 4 × L4 hold about 88 GiB
    fit = search(Request(model=str(CONFIGS / "deepseek-ai--DeepSeek-V3")), max_model_len=8192,
                 concurrency=1, gpus=["L4", "T4"], max_gpus=4, top=3)
    assert fit.candidates == [] and fit.num_fitting == 0
    assert 1 <= len(fit.misses) <= 3
    assert all(m.weights_limited and "the weights alone need" in m.lacks for m in fit.misses)
    assert all(m.closeness == 0 for m in fit.misses)


GLM = str(CONFIGS / "zai-org--GLM-5.2")


def test_weight_limited_misses_are_the_largest_shapes_and_more_gpus_are_named() -> None:
    # bf16 GLM-5.2 ≈ 1,413 GiB of weights: 8 × B200 (~166 GiB usable each) hold ≈ 177 GiB each —
    # not enough; 16 × B200 (≈ 88 GiB each) and 32 × H100 (≈ 44 GiB < ~68 GiB usable) are
    fit = search(Request(model=GLM), max_model_len=131072, concurrency=4, gpus=["H100", "B200"],
                 max_gpus=8, top=5)
    assert fit.candidates == []
    # the nearest misses are the 8-GPU shapes (closest to holding the weights), not 1-GPU ones
    assert all(m.tensor_parallel_size * m.pipeline_parallel_size == 8 for m in fit.misses)
    assert fit.misses[0].gpu == "NVIDIA B200" and fit.misses[0].weights_limited
    assert fit.weights_need_more_gpus == {"NVIDIA B200": 16, "NVIDIA H100 SXM 80GB": 32}


def test_kv_dtypes_that_plan_identically_are_one_row() -> None:
    # GLM-5.2 on B200: KV `auto` resolves to fp8 (same pages, same numbers) → one row naming both
    fit = search(Request(model=GLM), max_model_len=131072, concurrency=4, gpus=["B200"],
                 kv_dtypes=["auto", "fp8"], max_gpus=16, top=5)
    assert fit.candidates
    shapes = [(c.tensor_parallel_size, c.pipeline_parallel_size, c.data_parallel_size)
              for c in fit.candidates]
    assert len(shapes) == len(set(shapes))  # no duplicate rows
    assert all(c.kv_cache_dtype == "auto" and c.merged_kv_cache_dtypes == ["fp8"]
               for c in fit.candidates)
    # on an H100 `auto` stays bf16: two rows per shape, nothing merged
    h100 = search(Request(model=LLAMA_8B), max_model_len=32768, concurrency=4, gpus=["H100"],
                  kv_dtypes=["auto", "fp8"], max_gpus=1, top=5)
    assert {c.kv_cache_dtype for c in h100.candidates} == {"auto", "fp8"}
    assert all(c.merged_kv_cache_dtypes == [] for c in h100.candidates)


def test_concurrency_miss_names_what_is_lacking() -> None:
    # Llama-3.1-8B at 128k on one L4: fits one request at most; 64 need more than 2 GPUs
    fit = search(Request(model=LLAMA_8B), max_model_len=131072, concurrency=64, gpus=["L4"],
                 kv_dtypes=["fp8"], max_gpus=2)
    assert fit.candidates == [] and fit.misses
    assert any("--max-gpus 2" in m.lacks or "needs" in m.lacks for m in fit.misses)
    assert fit.misses == sorted(fit.misses, key=lambda m: -m.closeness)


def test_misses_rank_by_the_share_of_the_target_they_reach() -> None:
    # Llama-3.1-8B at 128k × 64 within 2 GPUs: an H100 holds whole requests (DP-limited), an L4
    # does not hold one in bf16 — the H100 misses are nearer than any L4 miss
    fit = search(Request(model=LLAMA_8B), max_model_len=131072, concurrency=64,
                 gpus=["L4", "H100"], kv_dtypes=["auto"], max_gpus=2, top=20)
    assert fit.candidates == []
    first = fit.misses[0]
    assert first.gpu == "NVIDIA H100 SXM 80GB" and "--max-gpus 2" in first.lacks
    l4 = [m for m in fit.misses if m.gpu == "NVIDIA L4"]
    assert l4 and all(m.closeness < first.closeness for m in l4)
    assert all(m.closeness <= 1 / 64 for m in l4)  # under one request of the 64


def test_draft_is_searched_on_and_off_and_lines_carry_it() -> None:
    qwen = str(CONFIGS / "Qwen--Qwen3.5-27B")
    draft = str(CONFIGS / "z-lab--Qwen3.8-27B-DFlash2")
    fit = search(Request(model=qwen, draft=draft,
                         deployment=Deployment(num_speculative_tokens=7)),
                 max_model_len=65536, concurrency=4, gpus=["B200"], top=100, prune=False)
    on = [c for c in fit.candidates if c.speculative]
    off = [c for c in fit.candidates if not c.speculative]
    assert on and off
    assert all('"method":"dflash"' in c.vllm_serve and "--draft" in c.kvplan_check for c in on)
    assert not any("speculative" in c.vllm_serve or "--draft" in c.kvplan_check for c in off)
    assert fit.target.draft == draft


@pytest.mark.parametrize(("text", "expect"), [
    ("H100=2.10", ("NVIDIA H100 SXM 80GB", 2.10)), ("b200=$5", ("NVIDIA B200", 5.0)),
])
def test_parse_price(text: str, expect: tuple[str, float]) -> None:
    assert parse_price(text) == expect


@pytest.mark.parametrize("text", ["H100", "H100=", "=2", "H100=cheap", "H100=-1", "quantum=1",
                                  "H100=nan"])
def test_parse_price_rejects(text: str) -> None:
    with pytest.raises(InputError) as ei:
        parse_price(text)
    assert ei.value.hint


def test_prices_file_lines_and_json() -> None:
    assert parse_prices_file("# mine\nH100=2.5\n\nl4 = 0.5  # spot\n", "f") == {
        "NVIDIA H100 SXM 80GB": 2.5, "NVIDIA L4": 0.5}
    assert parse_prices_file('{"B200": 4}', "f") == {"NVIDIA B200": 4.0}
    for bad in ("H100 2.5", '{"H100": "x"}', "[1, 2]", '{"H100": 2', "nosuchgpu=1"):
        with pytest.raises(InputError) as ei:
            parse_prices_file(bad, "f")
        assert ei.value.message.startswith("f") and ei.value.hint


@pytest.mark.parametrize(("kw", "word"), [
    ({"concurrency": 0}, "--concurrency"), ({"max_gpus": 0}, "--max-gpus"),
    ({"top": 0}, "--top"), ({"kv_dtypes": ["fp9"]}, "fp9"), ({"gpus": ["nosuch"]}, "nosuch"),
])
def test_search_rejects_bad_arguments(kw: dict, word: str) -> None:  # type: ignore[type-arg]
    args = {"max_model_len": 8192, "concurrency": 1, "gpus": ["H100"], **kw}
    with pytest.raises(InputError) as ei:
        search(Request(model=LLAMA_8B), **args)
    assert word in ei.value.message


def test_progress_appears_only_after_a_second_and_on_a_terminal() -> None:
    now = [0.0]
    term = Console(file=io.StringIO(), force_terminal=True)
    p = DelayedProgress(term, "planning", clock=lambda: now[0])
    p(1, 10)
    now[0] = 0.9
    p(2, 10)
    assert not p.shown
    now[0] = 1.2
    p(3, 10)
    assert p.shown
    p.close()
    pipe = DelayedProgress(Console(file=io.StringIO(), force_terminal=False), "planning",
                           clock=lambda: now[0] + 5)
    pipe(1, 10)
    assert not pipe.shown
