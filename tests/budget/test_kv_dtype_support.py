"""The fp8 / nvfp4 KV support table against vLLM's own code: for every catalogue GPU and
release, the answer derived here from the facts `tools/kv_dtype_facts.py` read out of each
release's source (tests/data/vllm-kv-dtype-facts.json: FlashInfer's dtypes and compute
capabilities, `_nvfp4_kv_on_fa2`'s families, FlashAttention's FA3/FA4 fp8 rule, Triton's SM89
fp8 check, ROCm's supports_fp8, the MLA validator) and the catalogue's cited hardware (FP8 / FP4
tensor cores) must be the table's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.budget.hardware import Gpu, list_gpus, lookup_gpu, sm_version
from kvplan.budget.kv_dtype_support import (
    SUPPORT,
    KvSupport,
    check_kv_dtype_supported,
    kv_dtype_support,
    support_summary,
)
from kvplan.engines.vllm.profiles import SUPPORTED_VERSIONS

FACTS = json.loads((Path(__file__).parents[1] / "data" / "vllm-kv-dtype-facts.json").read_text())
RELEASES = sorted(FACTS["releases"])


def _expected(gpu: Gpu, dtype: str, facts: dict) -> KvSupport:  # type: ignore[type-arg]
    """vLLM's answer from the facts alone (MHA/GQA attention)."""
    fi, fa, tr = facts["flashinfer"], facts["flash_attn"], facts["triton_attn"]
    if gpu.is_amd:
        cdna = gpu.arch.startswith("CDNA") and "on_cdna()" in facts["rocm"]["supports_fp8"]
        if dtype.startswith("fp8") and cdna:
            return KvSupport.NATIVE if gpu.supports_fp8_kv else KvSupport.DEQUANTISED
        return KvSupport.REFUSED  # FlashInfer (every NVFP4 KV kernel) is CUDA only
    sm = sm_version(gpu)
    assert sm is not None
    cc = [sm // 10, sm % 10]
    lo, hi = fi["compute_capability_range"]
    fi_ok = lo <= cc <= hi and dtype in fi["kv_cache_dtypes"]
    family = sm // 10 * 10
    if dtype.startswith("fp8"):
        fa_ok = (dtype in fa["kv_cache_dtypes"] and cc >= fa["compute_capability_min"]
                 and ((fa["fp8_needs_fa3_on_sm90"] and family == 90)
                      or (fa["fp8_fa4_on_sm100"] and family == 100)))
        tr_ok = dtype in tr["kv_cache_dtypes"] and sm >= tr["fp8_needs_capability"]
        if not (fa_ok or fi_ok or tr_ok):
            return KvSupport.REFUSED
        return KvSupport.NATIVE if gpu.supports_fp8_kv else KvSupport.DEQUANTISED
    # nvfp4: FlashInfer only — the FA2 path on its families (plain nvfp4 only), else TRT-LLM
    if not fi_ok:
        return KvSupport.REFUSED
    if family in fi["nvfp4_fa2_families"]:
        if fi["nvfp4_fa2_plain_only"] and dtype != "nvfp4":
            return KvSupport.REFUSED
        decode_reads_nvfp4 = family == fi["xqa_decode_reads_nvfp4_family"]
        return (KvSupport.NATIVE if decode_reads_nvfp4 and gpu.supports_nvfp4_kv
                else KvSupport.DEQUANTISED)
    if family == fi["nvfp4_trtllm_family"]:
        return KvSupport.NATIVE if gpu.supports_nvfp4_kv else KvSupport.DEQUANTISED
    return KvSupport.REFUSED


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("dtype", ["fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4", "nvfp4_4over6"])
def test_table_matches_vllms_code_for_every_catalogue_gpu(release: str, dtype: str) -> None:
    facts = FACTS["releases"][release]
    wrong = []
    for g in list_gpus():
        got = kv_dtype_support(g, dtype, release)
        assert got is not None, g.name
        want = _expected(g, dtype, facts)
        if got.support is not want:
            wrong.append((g.name, got.support.value, want.value))
    assert not wrong, wrong


def test_the_facts_cover_every_release_kvplan_models() -> None:
    assert RELEASES == sorted(SUPPORTED_VERSIONS)
    # the one change across the four: FlashInfer's FA2 path for NVFP4 arrives in 0.32
    assert FACTS["releases"]["0.31.0"]["flashinfer"]["nvfp4_fa2_families"] == []
    for r in ("0.32.0", "0.33.0", "0.34.0"):
        assert FACTS["releases"][r]["flashinfer"]["nvfp4_fa2_families"] == [80, 90, 120]


@pytest.mark.parametrize("release", RELEASES)
def test_nvfp4_with_mla_is_refused_as_vllm_validates(release: str) -> None:
    assert FACTS["releases"][release]["mla"]["validate_nvfp4_kv_cache_with_mla"]
    for g in list_gpus():
        got = kv_dtype_support(g, "nvfp4", release, use_mla=True)
        assert got is not None and got.support is KvSupport.REFUSED


def test_every_row_names_the_vllm_code_it_mirrors_and_the_table_has_no_gaps() -> None:
    keys = set()
    for row in SUPPORT:
        assert row.mirrors and row.path
        key = (row.kv_format, row.attention, row.hardware, row.since)
        assert key not in keys, key  # one answer per question
        keys.add(key)
    for g in list_gpus():
        for dt in ("fp8", "nvfp4", "nvfp4_4over6"):
            for mla in (False, True):
                assert kv_dtype_support(g, dt, "0.31.0", use_mla=mla) is not None, (g.name, dt)


def test_the_issue_cases() -> None:
    h100, a100, b200 = lookup_gpu("h100"), lookup_gpu("a100"), lookup_gpu("b200")
    # NVFP4 KV on H100: refused in 0.31, dequantised (FlashInfer FA2) from 0.32
    assert kv_dtype_support(h100, "nvfp4", "0.31.0").support is KvSupport.REFUSED  # type: ignore[union-attr]
    for r in ("0.32.0", "0.33.0", "0.34.0"):
        ans = kv_dtype_support(h100, "nvfp4", r)
        assert ans is not None and ans.support is KvSupport.DEQUANTISED
        assert "FA2" in ans.path and "dequantised" in ans.text
    # fp8 on Ampere: FlashInfer, dequantised, in every release
    for r in RELEASES:
        ans = kv_dtype_support(a100, "fp8", r)
        assert ans is not None and ans.support is KvSupport.DEQUANTISED and "FlashInfer" in ans.path
    assert kv_dtype_support(b200, "nvfp4", "0.31.0").support is KvSupport.NATIVE  # type: ignore[union-attr]
    # check_kv_dtype_supported: refused always, dequantised only when native is asked for
    assert check_kv_dtype_supported(h100, "nvfp4", vllm_version="0.31.0") is not None
    assert check_kv_dtype_supported(h100, "nvfp4", vllm_version="0.34.0") is None
    assert check_kv_dtype_supported(h100, "nvfp4", vllm_version="0.34.0", native_only=True)
    assert support_summary(h100, "0.34.0")["nvfp4"]["support"] == "dequantised"


def test_the_table_answers_for_the_releases_kvplan_models() -> None:
    from kvplan.budget.kv_dtype_support import MODELLED_RELEASES, modelled_release
    from kvplan.errors import InputError

    assert MODELLED_RELEASES == SUPPORTED_VERSIONS
    assert modelled_release(None) == MODELLED_RELEASES[-1] and modelled_release("0.33") == "0.33.0"
    with pytest.raises(InputError):
        modelled_release("0.30.0")
