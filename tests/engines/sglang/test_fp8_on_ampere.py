"""An FP8 KV cache on Ampere (sm80 / sm86), as SGLang 0.5.23 does it: no server-argument check
gates it, the pool is sized at one byte per element, FlashInfer (the default backend there for
MHA/GQA models) serves it dequantised; the Triton backend (MLA models, gpt-oss and Gemma 4 off
Hopper / Blackwell) cannot compile its kernels for FP8 E4M3 there (Triton: fp8e4nv needs sm89),
so SGLang stops at the CUDA-graph capture, after the pools are sized; FP8 E5M2 compiles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines.sglang import (
    Platform,
    ProfiledMemory,
    SglangDeployment,
    SglangGpu,
    plan_sglang,
)
from kvplan.engines.sglang.server_args import TRITON_FP8E4NV_ERROR
from kvplan.models import describe_model

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "hf-configs"
A100 = SglangGpu(total_memory_mib=81920, platform=Platform.SM80)
A10 = SglangGpu(total_memory_mib=23028, platform=Platform.SM86)
L40S = SglangGpu(total_memory_mib=46068, platform=Platform.SM89)


def _desc(name: str):  # type: ignore[no-untyped-def]
    return describe_model(json.loads((CONFIGS / name / "config.json").read_text()), source=name)


def _plan(name: str, gpu: SglangGpu, kv: str, **flags):  # type: ignore[no-untyped-def]
    free = gpu.total_memory_mib / 1024 - 1.2
    return plan_sglang(_desc(name), SglangDeployment(kv_cache_dtype=kv, **flags), gpu=gpu,
                       memory=ProfiledMemory(pre_model_load_gib=free, available_gib=(free - 14,)))


@pytest.mark.parametrize("kv", ["fp8_e4m3", "fp8_e5m2"])
def test_flashinfer_serves_fp8_on_ampere_at_one_byte(kv: str) -> None:
    bf16 = _plan("meta-llama--Llama-3.1-8B", A100, "auto")
    fp8 = _plan("meta-llama--Llama-3.1-8B", A100, kv)
    assert fp8.fits and fp8.error is None and fp8.resolved is not None
    assert fp8.resolved.attention_backend == "flashinfer"
    assert fp8.cell_size_bytes_per_token == bf16.cell_size_bytes_per_token / 2  # type: ignore
    assert fp8.max_total_num_tokens in (2 * bf16.max_total_num_tokens,  # type: ignore[operator]
                                        2 * bf16.max_total_num_tokens + 1)  # type: ignore


@pytest.mark.parametrize("gpu", [A100, A10])
def test_triton_cannot_read_fp8_e4m3_on_ampere_after_the_pools_are_sized(gpu: SglangGpu) -> None:
    e4m3 = _plan("openai--gpt-oss-20b", gpu, "fp8_e4m3")
    e5m2 = _plan("openai--gpt-oss-20b", gpu, "fp8_e5m2")
    assert e4m3.resolved is not None and e4m3.resolved.attention_backend == "triton"
    assert not e4m3.fits and e4m3.error is not None
    assert (e4m3.error.type, e4m3.error.stage, e4m3.error.message) == (
        "ValueError", "attention_kernel",
        "type fp8e4nv not supported in this architecture. The supported fp8 dtypes are "
        "('fp8e4b15', 'fp8e5')")
    assert e4m3.error.message == TRITON_FP8E4NV_ERROR
    # the pools were sized (and logged) first: the same as the e5m2 pools, which serve
    assert e5m2.fits and e5m2.error is None
    assert e4m3.max_total_num_tokens == e5m2.max_total_num_tokens is not None
    assert e4m3.swa_max_total_num_tokens == e5m2.swa_max_total_num_tokens


def test_triton_reads_fp8_e4m3_from_ada_on() -> None:
    assert _plan("openai--gpt-oss-20b", L40S, "fp8_e4m3").fits


def test_explicit_triton_backend_on_a_gqa_model() -> None:
    r = _plan("meta-llama--Llama-3.1-8B", A100, "fp8_e4m3", attention_backend="triton")
    assert r.error is not None and r.error.stage == "attention_kernel"
    assert _plan("meta-llama--Llama-3.1-8B", A100, "fp8_e5m2", attention_backend="triton").fits
