"""vLLM's model registry refuses architectures it has no class for and the Transformers backend
does not take (kvplan.models.resolution.arch_resolution): the real held-out Step-3.7-Flash configs,
whose architecture vLLM 0.34.0 does not register, and hand-made dicts for the other branches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kvplan
from kvplan.models.resolution.arch_resolution import (
    transformers_backend_serves,
    unresolved_architecture_error,
)

ROOT = Path(__file__).resolve().parents[2]
HELDOUT = ROOT / "tests" / "data" / "heldout-configs"
GOLDENS = ROOT / "tests" / "data" / "vllm-e2e-0.34.0"
FLAGS = dict(tensor_parallel_size=1, max_model_len=32768, max_num_batched_tokens=8192,
             kv_cache_memory="40GiB", gpu="H100", vllm="0.34.0")


def _config(name: str) -> dict:
    return json.loads((HELDOUT / name / "config.json").read_text())


@pytest.mark.parametrize("name", ["stepfun-ai--Step-3.7-Flash", "stepfun-ai--Step-3.7-Flash-FP8"])
def test_unregistered_architecture_is_refused_in_vllms_words(name: str) -> None:
    err = unresolved_architecture_error(_config(name), "0.34.0")
    assert err is not None
    assert err.error_type == "ValueError"
    assert err.vllm_message.startswith(
        "Model architectures ['Step3p7FlashForCausalLM'] are not supported for now. Supported "
        "architectures: dict_keys(['AfmoeForCausalLM', 'AliceAIForCausalLM', ")
    # the golden (vLLM's own text, cut off at 4000 characters by the harness) is a prefix of it
    golden = json.loads((GOLDENS / f"{name}.json").read_text())["vllm_error"]["message"]
    head = golden.split("Value error, ", 1)[1]
    assert err.vllm_message.startswith(head)


def test_check_refuses_at_startup_before_planning() -> None:
    plan = kvplan.check(str(HELDOUT / "stepfun-ai--Step-3.7-Flash"), **FLAGS)
    assert plan.refused_at_startup and not plan.fits
    assert "Model architectures ['Step3p7FlashForCausalLM'] are not supported for now" in (
        plan.error_message or "")


@pytest.mark.parametrize("arch", [
    "Qwen3ForCausalLM",            # in vLLM's registry
    "LlamaForRewardModeling",      # _normalize_arch: the base model LlamaForCausalLM is
    "TransformersForCausalLM",     # the Transformers backend's own class
    "MllamaForConditionalGeneration",  # retired in vLLM, but transformers' class is compatible
])
def test_architectures_vllm_resolves_are_not_refused(arch: str) -> None:
    assert unresolved_architecture_error({"architectures": [arch]}, "0.34.0") is None


def test_one_resolvable_architecture_is_enough() -> None:
    cfg = {"architectures": ["NoSuchModelForCausalLM", "Qwen3ForCausalLM"]}
    assert unresolved_architecture_error(cfg, "0.34.0") is None


def test_retired_architecture_says_since_when() -> None:
    err = unresolved_architecture_error({"architectures": ["Phi3SmallForCausalLM"]}, "0.34.0")
    assert err is not None
    assert err.vllm_message == (
        "Model architecture Phi3SmallForCausalLM was supported in vLLM until v0.9.2, and is not "
        "supported anymore. Please use an older version of vLLM if you want to use this model "
        "architecture.")


def test_transformers_backend_only_takes_compatible_classes() -> None:
    assert transformers_backend_serves("MllamaForConditionalGeneration", "0.34.0") is True
    assert transformers_backend_serves("NoSuchModelForCausalLM", "0.34.0") is False
    assert transformers_backend_serves("NoSuchModelForCausalLM", "0.31.0") is None


@pytest.mark.parametrize("cfg", [{}, {"architectures": []}, {"architectures": "x"},
                                 {"architectures": [3]}])
def test_no_architectures_no_verdict(cfg: dict) -> None:
    assert unresolved_architecture_error(cfg, "0.34.0") is None


def test_releases_without_data_are_not_checked() -> None:
    assert unresolved_architecture_error(_config("stepfun-ai--Step-3.7-Flash"), "0.31.0") is None
