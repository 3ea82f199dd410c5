"""GPU catalogue: every row and alias, forgiving lookup, unknown names, KV-dtype gates."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from kvplan.budget.hardware import (
    Gpu,
    gpu_lookup_keys,
    gpu_total_memory_bytes,
    list_gpus,
    lookup_gpu,
    normalize_gpu_name,
    sm_version,
)
from kvplan.budget.kv_dtype_support import check_kv_dtype_supported
from kvplan.errors import InputError

SHARED_CSV = Path("/work/shared/data/gpus.csv")


def _csv_rows() -> list[dict[str, str]]:
    text = resources.files("kvplan").joinpath("data", "gpus.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


KVPLAN_COLUMNS = ["spec_memory_gb", "spec_memory_source", "gddr_ecc", "nominal_total_gib",
                  "usd_per_hour", "usd_per_hour_source", "nvidia_smi_total_mib",
                  "nvidia_smi_total_source"]


def test_packaged_csv_is_the_shared_reference_plus_kvplan_columns():
    """Each line is the shared line byte for byte, then kvplan's appended cells."""
    if not SHARED_CSV.exists():
        pytest.skip("shared reference data not available")
    packaged = resources.files("kvplan").joinpath("data", "gpus.csv").read_text(encoding="utf-8")
    shared = SHARED_CSV.read_text(encoding="utf-8")
    p_lines, s_lines = packaged.split("\n"), shared.split("\n")
    assert len(p_lines) == len(s_lines)
    assert p_lines[0] == s_lines[0] + "," + ",".join(KVPLAN_COLUMNS)
    for p, s in zip(p_lines[1:], s_lines[1:], strict=True):
        assert p.startswith(s + ",") if s else p == ""


def test_catalogue_has_every_csv_row_with_its_values():
    rows = _csv_rows()
    gpus = list_gpus()
    assert [g.name for g in gpus] == [r["name"] for r in rows]
    assert len(gpus) == 34
    assert len({g.name for g in gpus}) == len(gpus)
    for g, r in zip(gpus, rows, strict=True):
        total = r["total_memory_bytes"].strip()
        if total:
            assert g.total_memory_bytes == int(total) and not g.total_memory_nominal
        else:  # every row without a measurement gets a nominal total
            assert g.total_memory_nominal and g.total_memory_bytes
        assert g.vendor == r["vendor"]
        assert g.arch == r["arch"]
        assert g.supports_fp8_kv == r["fp8"].startswith("native")
        assert g.supports_nvfp4_kv == r["nvfp4"].startswith("native")
        if g.is_nvidia:
            assert isinstance(g.compute_capability, tuple)
            assert f"{g.compute_capability[0]}.{g.compute_capability[1]}" == r["compute_capability"]
        else:
            assert g.compute_capability == r["compute_capability"]
            assert str(g.compute_capability).startswith("gfx")


@pytest.mark.parametrize("gpu", list_gpus(), ids=lambda g: g.name)
def test_each_row_is_found_by_its_name_and_every_alias(gpu: Gpu):
    found = lookup_gpu(gpu.name)
    assert found == gpu
    assert found.resolved_from is None
    for alias in gpu.aliases:
        hit = lookup_gpu(alias)
        assert hit.name == gpu.name, alias
        if alias != gpu.name:
            assert hit.resolved_from is not None and alias in hit.resolved_from
    # case, spacing and punctuation do not matter
    assert lookup_gpu(gpu.name.upper().replace(" ", "-")).name == gpu.name
    assert lookup_gpu(f"  {gpu.name.lower()}  ").name == gpu.name


@pytest.mark.parametrize(("typed", "name", "ambiguous"), [
    ("h100", "NVIDIA H100 SXM 80GB", True),
    ("H100", "NVIDIA H100 SXM 80GB", True),
    ("H100-80GB", "NVIDIA H100 SXM 80GB", True),
    ("h100 80gb", "NVIDIA H100 SXM 80GB", True),
    ("h100-sxm", "NVIDIA H100 SXM 80GB", False),
    ("H100 SXM", "NVIDIA H100 SXM 80GB", False),
    ("H100_SXM5", "NVIDIA H100 SXM 80GB", False),
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM 80GB", False),
    ("h100-pcie", "NVIDIA H100 PCIe 80GB", False),
    ("h100 nvl", "NVIDIA H100 NVL 94GB", False),
    ("a100", "NVIDIA A100 SXM 80GB", True),
    ("a100-80gb", "NVIDIA A100 SXM 80GB", True),
    ("A100-80GB", "NVIDIA A100 SXM 80GB", True),
    ("a100-40gb", "NVIDIA A100 SXM 40GB", True),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM 80GB", False),
    ("a100 pcie 80gb", "NVIDIA A100 PCIe 80GB", False),
    ("b200", "NVIDIA B200", False),
    ("B300", "NVIDIA B300", False),
    ("h200", "NVIDIA H200 141GB (SXM)", True),
    ("H200-NVL", "NVIDIA H200 NVL", False),
    ("gh200", "NVIDIA GH200 96GB", True),
    ("l40s", "NVIDIA L40S", False),
    ("L40", "NVIDIA L40", False),
    ("l4", "NVIDIA L4", False),
    ("a10g", "NVIDIA A10G", False),
    ("A10", "NVIDIA A10", False),
    ("rtx4090", "NVIDIA GeForce RTX 4090", False),
    ("RTX 5090", "NVIDIA GeForce RTX 5090", False),
    ("3090", "NVIDIA GeForce RTX 3090", False),
    ("rtx pro 6000", "NVIDIA RTX PRO 6000 Blackwell 96GB", False),
    ("v100", "NVIDIA V100 16GB", True),
    ("V100-32GB", "NVIDIA V100 32GB", False),
    ("Tesla T4", "NVIDIA T4", False),
    ("dgx spark", "NVIDIA DGX Spark (GB10)", False),
    ("mi300x", "AMD Instinct MI300X", False),
    ("MI300X", "AMD Instinct MI300X", False),
    ("mi355x", "AMD Instinct MI355X", False),
    ("mi250", "AMD Instinct MI250X", True),
])
def test_forgiving_aliases(typed: str, name: str, ambiguous: bool):
    g = lookup_gpu(typed)
    assert g.name == name
    assert g.resolved_from is not None and typed in g.resolved_from
    assert ("ambiguous" in g.resolved_from or "MI250 and" in g.resolved_from) == ambiguous


def test_ambiguous_h100_says_it_chose_sxm():
    g = lookup_gpu("h100")
    assert "SXM" in g.name
    assert "ambiguous" in g.resolved_from and "PCIe" in g.resolved_from and "NVL" in g.resolved_from
    assert g.total_memory_bytes == 85045477376


def test_normalisation():
    assert normalize_gpu_name("NVIDIA H100-80G") == "h10080gb"
    assert normalize_gpu_name("h100 80 GB") == "h10080gb"
    assert normalize_gpu_name("AMD Instinct MI300X") == "mi300x"
    keys = gpu_lookup_keys()
    for g in list_gpus():
        assert keys[normalize_gpu_name(g.name)] == g.name


@pytest.mark.parametrize(("typed", "expect"), [
    ("h1000", "H100"), ("rtx 9090", "RTX 5090"), ("a1000", "A100"), ("mi300", "MI300X"),
    ("l40x", "L40"), ("b20", "B200"),
])
def test_unknown_gpu_error_lists_close_matches(typed: str, expect: str):
    try:
        g = lookup_gpu(typed)
    except InputError as e:
        assert typed in e.message
        assert e.hint and expect in e.hint
        assert "--gpu-memory" in e.hint
    else:  # a few of these are accepted short names; then they must resolve to the expected part
        assert expect in g.name


def test_unknown_gpu_raises():
    with pytest.raises(InputError) as ei:
        lookup_gpu("quantum-gpu-9000")
    assert "unknown GPU" in ei.value.message
    assert ei.value.hint
    with pytest.raises(InputError):
        lookup_gpu("  ")


def test_unmeasured_row_has_a_nominal_total_and_the_override_wins():
    g = lookup_gpu("h100 pcie")
    # 80 GB × 0.983 = 78.64 GiB = 80,527.36 MiB → floored to 80,527 MiB
    assert g.total_memory_nominal and g.total_memory_bytes == 80527 * 2**20
    assert gpu_total_memory_bytes(g) == 80527 * 2**20
    assert gpu_total_memory_bytes(g, "79GiB") == 79 * 2**30
    with pytest.raises(InputError) as ei:  # a row with neither stays an error
        gpu_total_memory_bytes(g.model_copy(update={"total_memory_bytes": None}))
    assert "--gpu-memory" in ei.value.hint
    assert gpu_total_memory_bytes(lookup_gpu("l40s")) == 47803596800
    assert gpu_total_memory_bytes(lookup_gpu("l40s"), 123) == 123


def test_sm_version():
    assert sm_version(lookup_gpu("h100")) == 90
    assert sm_version(lookup_gpu("b200")) == 100
    assert sm_version(lookup_gpu("b300")) == 103
    assert sm_version(lookup_gpu("rtx 5090")) == 120
    assert sm_version(lookup_gpu("gb10")) == 121
    assert sm_version(lookup_gpu("a100")) == 80
    assert sm_version(lookup_gpu("l40s")) == 89
    assert sm_version(lookup_gpu("t4")) == 75
    assert sm_version(lookup_gpu("v100")) == 70
    assert sm_version(lookup_gpu("mi300x")) is None


# --- KV dtype gates (vLLM 0.34 backend selection unless stated) ---------------------------


def test_fp8_on_volta_and_turing_has_no_backend():
    for name in ("v100", "v100-32gb", "t4"):
        reason = check_kv_dtype_supported(lookup_gpu(name), "fp8")
        assert reason is not None and "SM80" in reason and "SM89" in reason
        assert check_kv_dtype_supported(lookup_gpu(name), "fp8_e5m2") is not None


def test_fp8_on_ampere_runs_only_through_flashinfer():
    a100 = lookup_gpu("a100")
    assert check_kv_dtype_supported(a100, "fp8") is None  # FlashInfer accepts it from sm80
    reason = check_kv_dtype_supported(a100, "fp8", native_only=True)
    assert reason is not None and "FlashInfer" in reason and "tensor cores" in reason
    # MLA: Triton MLA needs SM89 for fp8, the other MLA backends sm90/sm100
    assert "SM89" in check_kv_dtype_supported(a100, "fp8", use_mla=True)
    assert check_kv_dtype_supported(lookup_gpu("h100"), "fp8", use_mla=True) is None
    assert check_kv_dtype_supported(lookup_gpu("h100"), "fp8_e5m2", use_mla=True) is not None


def test_fp8_native_from_ada():
    for name in ("l4", "l40s", "rtx 4090", "h100", "h200", "b200", "rtx 5090", "gb10"):
        g = lookup_gpu(name)
        assert check_kv_dtype_supported(g, "fp8", native_only=True) is None, name
        assert check_kv_dtype_supported(g, "fp8_e4m3") is None
        assert check_kv_dtype_supported(g, "fp8_per_token_head") is None


def test_nvfp4_on_ampere_and_hopper():
    for name in ("a100", "a10", "rtx 3090", "h100"):
        g = lookup_gpu(name)
        # vLLM 0.31: TRT-LLM kernels of the sm100 family only
        reason = check_kv_dtype_supported(g, "nvfp4", vllm_version="0.31.0")
        assert reason is not None and "sm100" in reason
        # vLLM 0.32+ (_nvfp4_kv_on_fa2 is in flashinfer.py from 0.32.0): FlashInfer's FA2 path
        # reads plain nvfp4 on the sm80/sm90 families...
        for v in ("0.32.0", "0.33.0", "0.34.0"):
            assert check_kv_dtype_supported(g, "nvfp4", vllm_version=v) is None, (name, v)
        # ...not the 4over6 variant, not at head_size 64, not with sinks, and not natively
        assert "TRT-LLM" in check_kv_dtype_supported(g, "nvfp4_4over6")
        assert "head_size 64" in check_kv_dtype_supported(g, "nvfp4", head_size=64)
        assert "sink" in check_kv_dtype_supported(g, "nvfp4", has_sinks=True)
        assert "FP4 tensor cores" in check_kv_dtype_supported(g, "nvfp4", native_only=True)


def test_nvfp4_on_blackwell_and_older_gpus():
    for name in ("b200", "b300", "gb200"):
        g = lookup_gpu(name)
        assert check_kv_dtype_supported(g, "nvfp4", vllm_version="0.33") is None
        assert check_kv_dtype_supported(g, "nvfp4_4over6") is None
        assert check_kv_dtype_supported(g, "nvfp4", native_only=True) is None
    for name in ("rtx 5090", "gb10"):  # sm120/sm121: FA2 prefill + XQA decode from 0.32
        g = lookup_gpu(name)
        assert check_kv_dtype_supported(g, "nvfp4") is None
        assert check_kv_dtype_supported(g, "nvfp4", vllm_version="0.32.0") is None
        assert check_kv_dtype_supported(g, "nvfp4", vllm_version="0.31.0") is not None
    for name in ("v100", "t4"):
        assert check_kv_dtype_supported(lookup_gpu(name), "nvfp4") is not None
    assert "MLA" in check_kv_dtype_supported(lookup_gpu("b200"), "nvfp4", use_mla=True)


def test_amd_gates():
    mi300 = lookup_gpu("mi300x")
    assert check_kv_dtype_supported(mi300, "fp8") is None
    assert check_kv_dtype_supported(mi300, "fp8", native_only=True) is None
    assert "ROCm" in check_kv_dtype_supported(mi300, "nvfp4")
    mi250 = lookup_gpu("mi250x")
    assert check_kv_dtype_supported(mi250, "fp8") is None  # RocmPlatform.supports_fp8() is true
    assert check_kv_dtype_supported(mi250, "fp8", native_only=True) is not None


def test_bf16_kv_needs_ampere_and_unquantized_is_always_fine():
    assert "float16" in check_kv_dtype_supported(lookup_gpu("t4"), "bfloat16")
    assert check_kv_dtype_supported(lookup_gpu("t4"), "bf16") is not None
    assert check_kv_dtype_supported(lookup_gpu("a100"), "bfloat16") is None
    for g in list_gpus():
        assert check_kv_dtype_supported(g, "auto") is None
        assert check_kv_dtype_supported(g, "float16") is None


def test_unknown_kv_dtype_is_an_input_error():
    with pytest.raises(InputError):
        check_kv_dtype_supported(lookup_gpu("h100"), "fp7")
    with pytest.raises(InputError):
        check_kv_dtype_supported(lookup_gpu("h100"), "nvfp4", vllm_version="latest")


def test_catalogue_loads_lazily():
    code = ("import kvplan.budget.hardware as h; assert h._catalogue.cache_info().currsize == 0; "
            "h.lookup_gpu('h100'); assert h._catalogue.cache_info().currsize == 1")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_nominal_rule_reproduces_every_measured_row_within_1_5_percent():
    """The vendor capacity × ECC share × runtime share, applied to the rows that *are* measured,
    lands within 1.5% of the measurement (H100 SXM: 80 × 0.983 = 78.64 vs 79.20 GiB)."""
    from kvplan.budget.hardware import nominal_total_bytes

    measured = [g for g in list_gpus() if not g.total_memory_nominal and g.spec_memory_gb]
    assert len(measured) >= 18
    for g in measured:
        rule = nominal_total_bytes(g.vendor, g.spec_memory_gb, gddr_ecc=g.gddr_ecc)
        assert abs(rule / g.total_memory_bytes - 1) <= 0.015, g.name
    # most measured rows are at or above the rule: a nominal total seldom overstates
    above = sum(1 for g in measured if g.total_memory_bytes >= nominal_total_bytes(
        g.vendor, g.spec_memory_gb, gddr_ecc=g.gddr_ecc))
    assert above >= 0.7 * len(measured)  # 14 of 19: the share is about the lower quartile


def test_every_row_has_a_vendor_capacity_and_priced_rows_cite_a_source():
    for g in list_gpus():
        assert g.spec_memory_gb and g.spec_memory_source, g.name
        if g.usd_per_hour is not None:
            src = g.usd_per_hour_source or ""
            assert src.startswith("estimate") or "https://" in src, g.name


def test_nvidia_smi_totals_are_sourced_and_above_the_runtime_total():
    """nvidia-smi's memory.total (SGLang's figure) has a source, and the runtime (vLLM's
    cudaMemGetInfo figure) reports less: the driver reserve."""
    with_smi = [g for g in list_gpus() if g.nvidia_smi_total_mib is not None]
    assert {g.name for g in with_smi} >= {"NVIDIA H100 SXM 80GB", "NVIDIA H200 141GB (SXM)",
                                          "NVIDIA B200", "NVIDIA L4"}
    for g in with_smi:
        assert g.nvidia_smi_total_source and "http" in g.nvidia_smi_total_source
        if g.total_memory_bytes is not None and not g.total_memory_nominal:
            assert g.total_memory_bytes < g.nvidia_smi_total_mib * 2**20
    assert lookup_gpu("H100").nvidia_smi_total_mib == 81559
