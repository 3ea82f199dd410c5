"""Invariants of the planner (hypothesis): unify, scaling, monotone demand, max-len search."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engines.vllm.grouping import unify_page_size_fixed, unify_page_size_released
from kvplan.engines.vllm.planner import PlannerInput, plan
from kvplan.engines.vllm.specs import FullAttentionSpec, MambaSpec, SlidingWindowSpec

heads = st.sampled_from([1, 2, 4, 8, 16])
head_sizes = st.sampled_from([64, 96, 128, 256])
dtypes = st.sampled_from(["bfloat16", "uint8"])
blocks = st.sampled_from([16, 32, 64, 128, 2912])


@st.composite
def attention_spec(draw):
    kw = dict(block_size=draw(blocks), num_kv_heads=draw(heads), head_size=draw(head_sizes),
              dtype=draw(dtypes))
    if draw(st.booleans()):
        return SlidingWindowSpec(sliding_window=draw(st.sampled_from([128, 1024, 4096])), **kw)
    return FullAttentionSpec(**kw)


@st.composite
def mamba_spec(draw):
    conv = (draw(st.integers(3, 11)), draw(st.sampled_from([1024, 4096, 10240])))
    ssm = (draw(st.sampled_from([8, 32, 48])), 128, 128)
    return MambaSpec(block_size=draw(blocks), shapes=(conv, ssm), dtypes=("bfloat16", "float32"),
                     num_speculative_blocks=draw(st.integers(0, 7)))


@st.composite
def layer_specs(draw):
    n = draw(st.integers(1, 12))
    specs = {}
    for i in range(n):
        specs[f"layer.{i}"] = draw(st.one_of(attention_spec(), mamba_spec()))
    return specs


@settings(max_examples=200, deadline=None)
@given(layer_specs(), st.booleans())
def test_after_unification_every_page_equals_the_maximum(specs, fixed):
    unify = unify_page_size_fixed if fixed else unify_page_size_released
    try:
        unified = unify(specs)
    except (AssertionError, NotImplementedError):
        return  # vLLM refuses these too
    pages = {s.page_size_bytes for s in unified.values()}
    assert pages == {max(s.page_size_bytes for s in specs.values())}


@settings(max_examples=200, deadline=None)
@given(layer_specs())
def test_a_scaled_block_is_a_multiple_of_the_original(specs):
    for unify in (unify_page_size_released, unify_page_size_fixed):
        try:
            unified = unify(specs)
        except (AssertionError, NotImplementedError):
            continue
        for name, spec in specs.items():
            assert unified[name].block_size % spec.block_size == 0


@settings(max_examples=200, deadline=None)
@given(layer_specs())
def test_the_fix_never_needs_more_blocks_than_released(specs):
    def total(fix: bool) -> int | None:
        r = plan(_input(specs, 131072, 1 << 34, fix))
        return None if r.grouping_error else r.total_blocks_per_request

    released, fixed = total(False), total(True)
    if released is not None and fixed is not None:
        assert fixed <= released


def _input(specs, max_model_len, avail, fix=False):
    return PlannerInput(worker_specs=(specs,), available_kv_bytes=(avail,),
                        max_model_len=max_model_len, max_num_batched_tokens=8192,
                        mamba_cache_mode="align", with_fix=fix)


@settings(max_examples=150, deadline=None)
@given(layer_specs(), st.integers(1, 200_000), st.integers(1, 200_000))
def test_demand_never_decreases_as_max_model_len_grows(specs, a, b):
    lo, hi = sorted((a, b))
    r_lo, r_hi = plan(_input(specs, lo, 1 << 40)), plan(_input(specs, hi, 1 << 40))
    if r_lo.grouping_error is None:
        assert r_lo.total_bytes_needed[0] <= r_hi.total_bytes_needed[0]


@settings(max_examples=150, deadline=None)
@given(layer_specs(), st.integers(1 << 24, 1 << 34), st.booleans())
def test_estimated_max_len_fits_and_the_next_length_does_not(specs, avail, fix):
    requested = 262144
    r = plan(_input(specs, requested, avail, fix))
    if r.grouping_error is not None:
        return
    est = r.estimated_max_model_len[0]
    if est == 0:
        assert not plan(_input(specs, 1, avail, fix)).fits
        return
    assert plan(_input(specs, est, avail, fix)).fits
    if est < requested:
        assert not plan(_input(specs, est + 1, avail, fix)).fits
    assert r.fits == (est == requested)


@settings(max_examples=100, deadline=None)
@given(layer_specs(), st.integers(1 << 26, 1 << 36))
def test_fits_iff_needed_within_available_minus_one_block(specs, avail):
    r = plan(_input(specs, 65536, avail))
    if r.grouping_error is not None:
        return
    assert r.fits == (r.total_bytes_needed[0] <= avail - r.pool_bytes_per_block[0])
    assert r.num_blocks == avail // r.pool_bytes_per_block[0]


def test_is_draft_never_changes_grouping():
    base = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16")
    specs = {f"l{i}": base for i in range(4)}
    draft = dict(specs, d0=replace(base, is_draft=True))
    assert len(plan(_input(draft, 4096, 1 << 30)).groups) == 1
