"""One answer per question: NVFP4 / FP8 KV support per GPU and release comes from one table
(budget.kv_dtype_support), and check, gpus, fit and sweep say the same thing. The issue's case:
NVFP4 KV on H100 was "FITS, no warning" in check, "-" in gpus and "not native" in fit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.budget.hardware import lookup_gpu
from kvplan.budget.kv_dtype_support import KvSupport, kv_dtype_support
from kvplan.cli import app

QWEN3 = str(Path(__file__).parents[1] / "data" / "hf-configs" / "Qwen--Qwen3-8B")
ENV = {"COLUMNS": "160", "NO_COLOR": "1"}
H100 = "NVIDIA H100 SXM 80GB"


def _json(*args: str) -> tuple[dict | list, int]:  # type: ignore[type-arg]
    res = CliRunner().invoke(app, [*args, "--json"], env=ENV)
    return json.loads(res.stdout), res.exit_code


@pytest.mark.parametrize(("release", "gpu", "dtype"), [
    ("0.31.0", "H100", "nvfp4"), ("0.34.0", "H100", "nvfp4"), ("0.32.0", "A100-80GB", "nvfp4"),
    ("0.34.0", "A100-80GB", "fp8"), ("0.34.0", "B200", "nvfp4"), ("0.31.0", "RTX 5090", "nvfp4"),
])
def test_check_gpus_fit_and_sweep_agree(release: str, gpu: str, dtype: str) -> None:
    g = lookup_gpu(gpu)
    answer = kv_dtype_support(g, dtype, release)
    assert answer is not None
    # check: refused → DOES NOT FIT with vLLM's error; dequantised → a warning; native → silent
    plan, code = _json("check", QWEN3, "--gpu", g.name, "--kv-cache-dtype", dtype,
                       "--max-model-len", "32768", "--vllm", release)
    assert isinstance(plan, dict)
    said = [w for w in plan["warnings"] if dtype in w and g.name in w]
    if answer.support is KvSupport.REFUSED:
        assert code == 1 and not plan["fits"]
        assert plan["error_message"].startswith("No valid attention backend found")
    elif answer.support is KvSupport.DEQUANTISED:
        assert code == 0 and said == [answer.text]
    else:
        assert code == 0 and said == []
    # gpus: the same word for the same release
    rows, _ = _json("gpus", "--vllm", release)
    assert isinstance(rows, list)
    row = next(r for r in rows if r["name"] == g.name)
    assert row["kv_cache_dtype_support"][dtype]["support"] == answer.support.value
    # fit: refused never tried; dequantised tried only when named, and marked
    fit_named, _ = _json("fit", QWEN3, "--max-model-len", "32768", "--concurrency", "1",
                         "--gpu", g.name, "--kv-cache-dtype", dtype, "--vllm", release)
    fit_default, _ = _json("fit", QWEN3, "--max-model-len", "32768", "--concurrency", "1",
                           "--gpu", g.name, "--vllm", release)
    assert isinstance(fit_named, dict) and isinstance(fit_default, dict)
    named_rows = [c for c in fit_named["candidates"] if c["kv_cache_dtype"] == dtype]
    default_rows = [c for c in fit_default["candidates"]
                    if dtype in (c["kv_cache_dtype"], *c["merged_kv_cache_dtypes"])]
    skipped = {(s["kv_cache_dtype"], s["support"]) for s in fit_default["skipped"]}
    if answer.support is KvSupport.REFUSED:
        assert named_rows == [] and default_rows == [] and (dtype, "refused") in skipped
    elif answer.support is KvSupport.DEQUANTISED:
        assert named_rows and all(c["kv_cache_dequantised"] for c in named_rows)
        assert default_rows == [] and (dtype, "dequantised") in skipped
    else:
        assert named_rows and not any(c["kv_cache_dequantised"] for c in named_rows)
        assert default_rows
    # sweep: the same warning, once; a refused dtype fits at no length
    sweep, _ = _json("sweep", QWEN3, "--gpu", g.name, "--kv-cache-dtype", dtype,
                     "--max-model-len", "8K,32K", "--vllm", release)
    assert isinstance(sweep, dict)
    texts = [w["text"] for w in sweep["warnings"]]
    (swept,) = sweep["rows"]
    if answer.support is KvSupport.NATIVE:
        assert not any(dtype in t and g.name in t for t in texts)
        assert swept["largest_fitting_max_model_len"] == 32768
    else:
        assert answer.text in texts
        fits = swept["largest_fitting_max_model_len"]
        assert (fits == 0) == (answer.support is KvSupport.REFUSED)


def test_the_issue_case_nvfp4_on_h100_in_the_newest_release() -> None:
    """Not FITS with no warning, not '-', not 'not native': dequantised, everywhere."""
    plan, code = _json("check", QWEN3, "--gpu", "H100", "--kv-cache-dtype", "nvfp4",
                       "--max-model-len", "32768")
    assert isinstance(plan, dict) and code == 0
    assert any("only dequantised" in w and "FA2" in w for w in plan["warnings"])
    res = CliRunner().invoke(app, ["gpus"], env=ENV)
    h100_line = next(ln for ln in res.stdout.splitlines() if H100 in ln)
    assert "deq." in h100_line.split("GiB", 1)[1]
