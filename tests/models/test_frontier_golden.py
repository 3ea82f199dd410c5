"""Config → specs → plan for the frontier architectures, equal to vLLM's own planner run on the
same layer mixes (tests/data/golden-oracle-2026, cases a01–a04), every release, released and
with the PR #53499 fix. The specs come from the real configs here, not from the case files."""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.serialize import contract_dict
from kvplan.models import mtp_draft
from tests.golden import ORACLE_2026, VERSIONS, contract, load
from tests.models.helpers import h100_tp8, real

# (case, config, deployment changes): the case's max_model_len / block / speculative settings
CASES = [
    ("a01_dsv32_tp8_indexer_mtp", "deepseek-ai--DeepSeek-V3.2",
     dict(max_model_len=163840, speculative_method="mtp", num_speculative_tokens=1)),
    ("a02_glm52_indexshare_tp8", "zai-org--GLM-5.2", {}),
    ("a03_dsv4_flash_tp8_blhnc", "deepseek-ai--DeepSeek-V4-Flash", {}),
    ("a04_mimo_v2_flash_tp8_diffkv", "XiaomiMiMo--MiMo-V2-Flash", dict(block_size=16)),
    ("a07_inkling_tp8_sconv", "handmade--Inkling", dict(block_size=16)),
]


@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("case", "config", "changes"), CASES, ids=[c[0] for c in CASES])
def test_real_config_plans_like_vllm(case, config, changes, version, fix) -> None:
    suffix = ".patched" if fix else ""
    exp = load(ORACLE_2026 / "expected" / f"{case}.{version}{suffix}.json")
    target = real(config)
    draft = mtp_draft(target) if changes.get("speculative_method") == "mtp" else None
    res = build(target, h100_tp8(vllm_version=version, with_fix=fix, **changes), draft)
    got = contract(contract_dict(plan(res.planner_input), extra_spec_keys=True))
    want = contract(exp)
    if case.startswith("a03"):
        _drop_oracle_cache_dtype(got, want)
    assert got == want


def _drop_oracle_cache_dtype(got: dict, want: dict) -> None:
    """The shared oracle fills cache_dtype_str from the case's dtype for every MLA-kind layer;
    vLLM leaves it None on DeepSeek-V4's indexer K cache and compressor rings (deepseek_v4/
    attention.py L868, compressor.py L179). It sizes nothing; compare all else."""
    for g_got, g_want in zip(got["groups"], want["groups"], strict=True):
        for s_got, s_want in zip(g_got["layer_specs"] or [], g_want["layer_specs"] or [],
                                 strict=True):
            if s_got.get("cache_dtype_str") is None and "cache_dtype_str" in s_want:
                s_got.pop("cache_dtype_str", None)
                s_want.pop("cache_dtype_str")


@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize("version", [v for v in VERSIONS if v != "0.31.0"])
@pytest.mark.parametrize("k", [0, 3])
def test_glm53_flash_plans_like_vllm(version, fix, k) -> None:
    """a06 / a08: GLM-5.3-Flash (hand-made config, PROVENANCE.md), without and with its MTP
    drafter (3 tokens), from 0.32 on (kvplan refuses 0.31)."""
    suffix = ".patched" if fix else ""
    case = "a08_glm53_flash_tp8_kpool_mtp3" if k else "a06_glm53_flash_tp8_kpool"
    exp = load(ORACLE_2026 / "expected" / f"{case}.{version}{suffix}.json")
    target = real("handmade--GLM-5.3-Flash")
    spec = dict(speculative_method="mtp", num_speculative_tokens=k) if k else {}
    res = build(target, h100_tp8(vllm_version=version, with_fix=fix, max_model_len=131072,
                                 available_kv_bytes=20 * 2**30, **spec),
                mtp_draft(target) if k else None)
    got = contract(contract_dict(plan(res.planner_input), extra_spec_keys=True))
    assert got == contract(exp)
