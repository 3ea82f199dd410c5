"""Flint (FlintForCausalLM, vLLM 0.33+): sliding / full attention; sinks are logits, not cache.

vLLM 0.34.0 models/flint/model.py FlintAttention (identical in 0.33.0): num_key_value_heads ×
head_dim on every layer, config.sliding_window on "sliding_attention" layers; it asserts a
FlashInfer impl, a bf16 model and an auto / bf16 KV cache. No published Flint config was found:
tests/data/hf-configs/handmade--flint-defaults holds vLLM's FlintConfig defaults (PROVENANCE.md).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines.vllm.build import build
from kvplan.errors import UnsupportedError
from kvplan.models import describe_model
from tests.models.helpers import HF_CONFIGS, edited, h100_tp8, one, real

DEFAULTS = "handmade--flint-defaults"
B200 = dict(sm=100)  # SM10x: FlashInfer comes first for causal attention


def test_defaults_are_all_full_attention() -> None:
    m = real(DEFAULTS)
    # FlintConfig: no layer_types → 49 × full attention, 4 KV heads × 128
    assert m.family == "flint" and m.kind_counts() == {"full_attention": 49}
    assert one((x.num_kv_heads, x.head_size) for x in m.layers) == (4, 128)
    assert m.model_sliding_window is None  # layer_types (all full) is not all sliding


def test_hybrid_layer_types() -> None:
    types = ["sliding_attention", "sliding_attention", "full_attention"] * 16 + ["full_attention"]
    m = describe_model(edited(DEFAULTS, ("layer_types",), types), source="hybrid")
    # 16 × 2 sliding (window 513, the token itself included) + 17 full
    assert m.kind_counts() == {"sliding_window": 32, "full_attention": 17}
    assert {x.sliding_window for x in m.layers if x.sliding_window} == {513}
    off = edited(DEFAULTS, ("layer_types",), types, ("use_sliding_window",), False)
    assert describe_model(off, source="off").kind_counts() == {"full_attention": 49}


def test_flashinfer_dtype_and_release_checks() -> None:
    m = real(DEFAULTS)
    build(m, h100_tp8(max_model_len=262144, **B200))  # FlashInfer on SM100: plans
    with pytest.raises(UnsupportedError, match="FlashInfer"):
        build(m, h100_tp8(max_model_len=262144))  # SM90 picks FLASH_ATTN: vLLM asserts
    build(m, h100_tp8(max_model_len=262144, attention_backend="FLASHINFER"))
    with pytest.raises(UnsupportedError, match="bfloat16"):
        build(m, h100_tp8(max_model_len=262144, kv_cache_dtype="fp8", **B200))
    with pytest.raises(UnsupportedError, match="0.33.0"):
        build(m, h100_tp8(vllm_version="0.32.0", max_model_len=262144, **B200))


def test_cli_b200_x4() -> None:
    res = CliRunner().invoke(app, [
        "check", str(HF_CONFIGS / DEFAULTS / "config.json"), "--json", "--gpu", "B200",
        "-tp", "4", "--kv-cache-memory", "40GiB", "--max-num-batched-tokens", "8192"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    # per rank 4 / 4 = 1 KV head · (128 + 128) · 2 B = 512 B/token; block 64 → 32,768 B;
    # 49 full layers in one group; 262144 / 64 = 4096 blocks per request
    assert [(g["kind"], g["num_layers"], g["block_size_tokens"], g["page_size_bytes"])
            for g in out["groups"]] == [("full_attention", 49, 64, 32768)]
    assert out["total_blocks_per_request"] == 4096
    # 40 GiB / (49 · 32,768 B) = 26,749 blocks (floor of 26,749.38)
    assert out["num_blocks"] == 26749
