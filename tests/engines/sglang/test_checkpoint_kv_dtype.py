"""An `auto` KV cache on a quantized checkpoint, as a real SGLang 0.5.23 run sizes it:
kv_cache_dtype.configure_kv_cache_dtype reads the loaded model's quant_config.kv_cache_quant_algo
(the shared CPU oracle, with no model object, sized every such pool in the model dtype).
ModelOpt declares FP8 for any 8-bit float kv_cache_scheme; compressed-tensors only for the
static, symmetric, per-tensor scales its KV method loads (is_supported_scheme)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines.sglang import Platform, SglangDeployment, SglangGpu
from kvplan.engines.sglang.model import sglang_model
from kvplan.engines.sglang.profiles import SGLANG_0_5_23
from kvplan.engines.sglang.server_args import resolve
from kvplan.models import describe_model

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "hf-configs"
H100 = SglangGpu(total_memory_mib=81559, platform=Platform.SM90)


def _kv_dtype(config: dict, hf_quant: dict | None = None) -> str:  # type: ignore[type-arg]
    desc = describe_model(config, source="test", hf_quant_config=hf_quant)
    args = resolve(sglang_model(desc, SGLANG_0_5_23), SglangDeployment(), H100, SGLANG_0_5_23)
    return args.kv_cache_torch_dtype


def _llama() -> dict:  # type: ignore[type-arg]
    return json.loads((CONFIGS / "meta-llama--Llama-3.1-8B" / "config.json").read_text())


def test_modelopt_fp8_checkpoint_takes_an_fp8_pool() -> None:
    folder = CONFIGS / "nvidia--Llama-3.1-70B-Instruct-FP8"
    config = json.loads((folder / "config.json").read_text())
    quant = json.loads((folder / "hf_quant_config.json").read_text())
    assert quant["quantization"]["kv_cache_quant_algo"] == "FP8"
    assert _kv_dtype(config, quant) == "float8_e4m3fn"
    assert _kv_dtype(config) == "bfloat16"  # the same weights without the declaration


@pytest.mark.parametrize(("scheme", "pool"), [
    ({"type": "float", "num_bits": 8, "strategy": "tensor", "dynamic": False,
      "symmetric": True}, "float8_e4m3fn"),
    ({"type": "float", "num_bits": 8, "strategy": "tensor"}, "float8_e4m3fn"),
    # scales SGLang's CompressedTensorsKVCacheMethod does not load: no FP8 declared
    ({"type": "float", "num_bits": 8, "strategy": "attn_head", "dynamic": False}, "bfloat16"),
    ({"type": "float", "num_bits": 8, "strategy": "tensor", "dynamic": True}, "bfloat16"),
    ({"type": "float", "num_bits": 8, "strategy": "tensor", "symmetric": False}, "bfloat16"),
])
def test_compressed_tensors_kv_scheme(scheme: dict, pool: str) -> None:  # type: ignore[type-arg]
    config = _llama()
    config["quantization_config"] = {"quant_method": "compressed-tensors",
                                     "format": "float-quantized", "config_groups": {},
                                     "kv_cache_scheme": scheme}
    assert _kv_dtype(config) == pool
