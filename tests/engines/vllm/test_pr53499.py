"""The deployment of vLLM PR #53499 at spec level, number by number (shared docs §13)."""

from __future__ import annotations

from dataclasses import replace

from kvplan.engines.vllm.planner import plan
from kvplan.sources.specfile import load_spec_file
from tests.golden import BUNDLED, load

SEED = load(BUNDLED / "cases" / "seed_dflash_qwen35_27b.json")


def _plan(fix: bool, mnbt: int = 16384, version: str = "0.33.0"):
    inp = load_spec_file(SEED, vllm_version=version, with_fix=fix).planner_input
    return plan(replace(inp, max_num_batched_tokens=mnbt))


def test_released_behaviour() -> None:
    r = _plan(False)
    draft = r.groups[-1]
    assert r.grouping is not None and r.grouping.path == "uniform_page_size"
    assert {g.group.spec.page_size_bytes for g in r.groups} == {3_354_624}  # 1152 · 2912
    assert len(r.groups) == 15  # 10 GDN + 4 full + 1 draft, group_size 5
    assert r.pool_bytes_per_block == (16_773_120,)  # 5 · 3,354,624
    assert draft.group.spec.block_size == 16
    assert draft.blocks_per_request == 2177  # cdiv(2047 + 2·16384, 16) + 1
    assert r.total_blocks_per_request == 2631  # 90 + 364 + 2177
    assert r.total_gib_needed == ("41.1",)
    assert not r.fits and r.error is not None
    assert "(41.1 GiB KV cache is needed" in r.error.message


def test_with_the_fix_the_draft_block_scales_to_816() -> None:
    r = _plan(True)
    draft = r.groups[-1].group.spec
    assert draft.block_size == 816  # 16 · ⌊3,354,624 / 65,536⌋ = 16 · 51
    assert r.groups[-1].blocks_per_request == 44  # cdiv(34815, 816) + 1
    assert r.total_blocks_per_request == 498
    assert r.total_gib_needed == ("7.78",)
    assert r.fits


def test_smaller_batches_released_and_fixed() -> None:
    assert _plan(False, mnbt=4096).total_gib_needed == ("17.11",)  # 641 draft blocks, 1095 total
    assert _plan(True, mnbt=4096).total_gib_needed == ("7.31",)  # 14 draft blocks, 468 total


def test_the_fix_is_a_switch_on_every_release() -> None:
    for version in ("0.31.0", "0.32.0", "0.33.0", "0.34.0"):
        assert _plan(False, version=version).total_blocks_per_request == 2631
        assert _plan(True, version=version).total_blocks_per_request == 498
