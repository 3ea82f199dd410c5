"""`kvplan fit` says what its ranking rests on: dequantised KV paths offered when asked for and
marked, nominal-memory GPUs marked and said to be ranked on that estimate, a --vendor filter, and
a model-level refusal said once, before any shape is planned."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app

CONFIGS = Path(__file__).parents[1] / "data" / "hf-configs"
LLAMA = str(CONFIGS / "meta-llama--Llama-3.1-8B")
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def _fit(*args: str) -> tuple[dict, str, int]:  # type: ignore[type-arg]
    res = CliRunner().invoke(app, ["fit", LLAMA, *args, "--json"], env=ENV)
    text = CliRunner().invoke(app, ["fit", LLAMA, *args], env=ENV)
    return json.loads(res.stdout), " ".join(text.stdout.split()), text.exit_code


def test_fp8_on_ampere_is_offered_when_asked_and_marked_dequantised() -> None:
    args = ("--max-model-len", "32k", "--concurrency", "4", "--gpu", "A100-80GB,A10")
    named, text, code = _fit(*args, "--kv-cache-dtype", "fp8")
    assert code == 0 and named["target"]["kv_cache_dtypes_given"]
    assert named["candidates"] and all(c["kv_cache_dequantised"] for c in named["candidates"])
    assert "fp8 (deq.)" in text and "(deq.) the GPU has no hardware for this KV dtype" in text
    default, text, _ = _fit(*args)
    assert not any(c["kv_cache_dequantised"] for c in default["candidates"])
    assert any(s["kv_cache_dtype"] == "fp8" and s["support"] == "dequantised"
               for s in default["skipped"])
    assert "name it with --kv-cache-dtype fp8 to include them" in text


def test_nominal_memory_is_marked_and_the_ranking_says_so() -> None:
    out, text, _ = _fit("--max-model-len", "32k", "--concurrency", "4", "--gpu",
                        "MI325X,H100 PCIe")  # both nominal in the catalogue
    assert out["candidates"] and all(c["total_memory_nominal"] for c in out["candidates"])
    assert "MI325X*" in text and "H100 PCIe 80GB*" in text
    assert "ranked on that estimate" in text


def test_vendor_filter() -> None:
    amd, text, _ = _fit("--max-model-len", "32k", "--concurrency", "4", "--vendor", "amd")
    assert amd["target"]["vendors"] == ["amd"]
    assert amd["target"]["gpus"] and all(g.startswith("AMD") for g in amd["target"]["gpus"])
    assert "(AMD)" in text
    nv, _, _ = _fit("--max-model-len", "32k", "--concurrency", "4", "--vendor", "NVIDIA",
                    "--gpu", "H100,MI300X")
    assert nv["target"]["gpus"] == ["NVIDIA H100 SXM 80GB"]
    res = CliRunner().invoke(app, ["fit", LLAMA, "--max-model-len", "32k", "--concurrency", "4",
                                   "--vendor", "intel"], env=ENV)
    assert res.exit_code == 2 and res.stderr.startswith("Error: --vendor intel")
    res = CliRunner().invoke(app, ["gpus", "--vendor", "amd", "--json"], env=ENV)
    assert {r["vendor"] for r in json.loads(res.stdout)} == {"AMD"}


def test_a_model_level_refusal_is_said_once_before_the_search() -> None:
    out, text, code = _fit("--max-model-len", "200k", "--concurrency", "2",
                           "--gpu", "H100,A100-80GB,L40S")
    assert code == 1 and out["planned"] == 0 and out["candidates"] == [] and out["misses"] == []
    assert out["refusal"].startswith("vLLM would raise ValueError: User-specified max_model_len")
    assert text.count("User-specified max_model_len") == 1
    assert "before any deployment matters" in text
    assert "not plannable" not in text
