"""Quantization as checkpoints declare it (hand-written configs; the real ones are covered by
the family tests: fp8, mxfp4, modelopt FP8 / NVFP4 / MIXED_PRECISION)."""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.errors import UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import QuantizationInfo

BASE: dict[str, Any] = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                        "torch_dtype": "bfloat16", "num_hidden_layers": 2, "hidden_size": 1024,
                        "num_attention_heads": 8, "num_key_value_heads": 2}


def quant(qc: dict[str, Any] | None = None, hf_quant: dict[str, Any] | None = None
          ) -> QuantizationInfo:
    config = dict(BASE) if qc is None else {**BASE, "quantization_config": qc}
    return describe_model(config, source="hand-written", hf_quant_config=hf_quant).quantization


def test_compressed_tensors_fp8_kv_cache_scheme() -> None:
    # llm-compressor FP8 checkpoint: weights 8-bit float; kv_cache_scheme → vLLM "fp8"
    q = quant({"quant_method": "compressed-tensors",
               "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"},
                                             "targets": ["Linear"]}},
               "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor",
                                   "symmetric": True, "dynamic": False}})
    assert (q.method, q.weight_format, q.kv_cache_dtype) == ("compressed-tensors", "FP8", "fp8")
    # without kv_cache_scheme: no KV dtype; W4A16 int weights
    q = quant({"quant_method": "compressed_tensors",
               "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}})
    assert (q.method, q.weight_format, q.kv_cache_dtype) == ("compressed-tensors", "INT4", None)
    # a 4-bit KV scheme is rejected by vLLM's validate_kv_cache_scheme
    with pytest.raises(UnsupportedError, match="kv_cache_scheme"):
        quant({"quant_method": "compressed-tensors",
               "kv_cache_scheme": {"num_bits": 4, "type": "float"}})


def test_modelopt_nvfp4_kv() -> None:
    # config.json ModelOpt export: kv_cache_scheme 4-bit float → "nvfp4"
    q = quant({"quant_method": "modelopt", "quant_algo": "NVFP4",
               "kv_cache_scheme": {"dynamic": False, "num_bits": 4, "type": "float"}})
    assert (q.method, q.weight_format, q.kv_cache_dtype) == ("modelopt_fp4", "NVFP4", "nvfp4")
    # legacy hf_quant_config.json with kv_cache_quant_algo NVFP4 and FP8 weights
    q = quant(hf_quant={"producer": {"name": "modelopt"},
                        "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "NVFP4"}})
    assert (q.method, q.weight_format, q.kv_cache_dtype) == ("modelopt", "FP8", "nvfp4")


def test_modelopt_unknown_kv_algo_falls_back_to_auto() -> None:
    config = {**BASE, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8",
                                              "kv_cache_quant_algo": "INT8"}}
    m = describe_model(config, source="hand-written")
    assert m.quantization.kv_cache_dtype is None
    assert any("falls back to 'auto'" in w for w in m.warnings)


def test_unknown_modelopt_quant_algo_is_rejected() -> None:
    # vLLM: _normalize_quantization_config raises "Unknown ModelOpt quant algo"
    with pytest.raises(UnsupportedError, match="quant_algo"):
        quant(hf_quant={"producer": {"name": "modelopt"},
                        "quantization": {"quant_algo": "W4A8_AWQ"}})


def test_config_json_wins_over_hf_quant_config() -> None:
    q = quant({"quant_method": "fp8"},
              hf_quant={"producer": {"name": "modelopt"},
                        "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}})
    assert (q.method, q.kv_cache_dtype, q.source) == (
        "fp8", None, "config.json quantization_config")


def test_gptq_awq_bits() -> None:
    assert quant({"quant_method": "gptq", "bits": 4}).weight_format == "INT4"
    assert quant({"quant_method": "awq", "bits": 4}).weight_format == "INT4"
    assert quant().method is None
