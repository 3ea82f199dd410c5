"""The Dory, Cosmos3 Edge and HRM-Text adapters (kvplan/models/families/{dory,cosmos3_edge,
hrm_text}.py): the layers vLLM registers, by name, from the coverage configs vLLM 0.34.0's own code
confirmed (tests/data/coverage-configs/<ARCH>: the configuration classes' defaults; their
goldens are replayed by test_coverage_confirmed.py). Edits of those configs hit one branch each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.engines.vllm.build import Deployment, build
from kvplan.errors import StartupError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind, ModelDescription

BUILT = Path(__file__).resolve().parents[1] / "data" / "coverage-configs"


def _config(arch: str, **changes: Any) -> dict[str, Any]:
    return {**json.loads((BUILT / arch / "config.json").read_text()), **changes}


def _describe(arch: str, **changes: Any) -> ModelDescription:
    return describe_model(_config(arch, **changes), source=arch)


def _names(desc: ModelDescription, *kinds: LayerKind) -> list[str]:
    return [layer.name for layer in desc.layers if layer.kind in kinds]


def test_dory_attention_on_even_blocks_mlp_on_odd() -> None:
    desc = _describe("DoryForCausalLM")
    # DoryConfig: 72 blocks, "mlp" at odd positions; attention at even ones, full where
    # i % 8 == 6 (9 of them), sliding (window 1024) elsewhere (27)
    assert desc.family == "dory" and len(desc.layers) == 72
    assert _names(desc, LayerKind.FULL_ATTENTION) == [
        f"backbone.layers.{i}.mixer.attn" for i in range(6, 72, 8)]
    sliding = [layer for layer in desc.layers if layer.kind is LayerKind.SLIDING_WINDOW]
    assert [layer.index for layer in sliding] == [i for i in range(0, 72, 2) if i % 8 != 6]
    assert {(la.num_kv_heads, la.head_size, la.sliding_window) for la in sliding} == {
        (4, 256, 1024)}
    assert _names(desc, LayerKind.NO_KV) == [f"backbone.layers.{i}.mixer" for i in range(1, 72, 2)]
    # layer_types holds "mlp": CacheConfig.sliding_window stays None
    assert desc.model_sliding_window is None
    assert desc.max_position_embeddings == 8192


def test_dory_recurrent_loops_get_their_own_caches() -> None:
    # 2 loops over the recurrent blocks 2..69 (2 input, 2 output blocks), per_loop: each
    # recurrent attention block registers loop × 72 + i as well
    desc = _describe("DoryForCausalLM", n_input_layers=2, n_output_layers=2,
                     n_recurrent_layers=68, n_recurrent_loops=2)
    attn = _names(desc, LayerKind.FULL_ATTENTION, LayerKind.SLIDING_WINDOW)
    assert attn[:3] == ["backbone.layers.0.mixer.attn", "backbone.layers.2.mixer.attn",
                        "backbone.layers.74.mixer.attn"]
    # 36 attention blocks: 0 is an input block, 70 an output block, the other 34 run twice
    assert len(attn) == 2 + 34 * 2 and "backbone.layers.142.mixer.attn" not in attn
    assert "backbone.layers.140.mixer.attn" in attn  # block 68, loop 1
    # last_loop: one cache per block, overwritten by each loop
    last = _describe("DoryForCausalLM", n_recurrent_loops=2, recurrent_kv_cache_mode="last_loop")
    assert len(_names(last, LayerKind.FULL_ATTENTION, LayerKind.SLIDING_WINDOW)) == 36


def test_dory_refuses_tp_pp_and_releases_before_0_33() -> None:
    desc = _describe("DoryForCausalLM")
    dep = Deployment(sm=90, max_model_len=8192, available_kv_bytes=10**11)
    with pytest.raises(StartupError, match="Dory currently supports tensor_parallel_size=1 only"):
        build(desc, Deployment(**{**dep.__dict__, "tensor_parallel_size": 2}))
    with pytest.raises(StartupError, match="Pipeline parallelism is not supported"):
        build(desc, Deployment(**{**dep.__dict__, "pipeline_parallel_size": 2}))
    with pytest.raises(UnsupportedError, match="its model registry has it from 0.33.0 on"):
        build(desc, Deployment(**{**dep.__dict__, "vllm_version": "0.32.0"}))
    assert build(desc, Deployment(**{**dep.__dict__, "vllm_version": "0.33.0"})).layers


def test_cosmos3_edge_interleaves_attention_and_mlp_under_language_model() -> None:
    desc = _describe("Cosmos3EdgeForConditionalGeneration")
    # text_config: 28 blocks → 56 Nemotron-H layers, attention at 2i (8 KV heads × 128)
    assert desc.family == "cosmos3_edge" and len(desc.layers) == 56
    full = [layer for layer in desc.layers if layer.kind is LayerKind.FULL_ATTENTION]
    assert [la.name for la in full] == [
        f"language_model.model.layers.{2 * i}.mixer.attn" for i in range(28)]
    assert {(la.num_kv_heads, la.head_size) for la in full} == {(8, 128)}
    assert _names(desc, LayerKind.NO_KV)[0] == "language_model.model.layers.1.mixer"
    assert any("encoder cache" in w for w in desc.warnings)
    assert desc.max_position_embeddings == 131072


def test_cosmos3_edge_without_text_config_takes_the_text_class_defaults() -> None:
    config = _config("Cosmos3EdgeForConditionalGeneration")
    del config["text_config"]
    desc = describe_model(config, source="no-text-config")
    assert len(desc.layers) == 56
    assert any("Cosmos3EdgeTextConfig's defaults apply" in w for w in desc.warnings)


def test_hrm_text_names_every_cycle_step_of_both_stacks() -> None:
    desc = _describe("HrmTextForCausalLM")
    # num_layers_per_stack 16, H_cycles 2, L_cycles 3: L steps {0, 1, 2, 4, 5, 6}, H steps {3, 7}
    # → 16 × 6 + 16 × 2 = 128 full-attention layers, 12 KV heads (MHA) × 128
    assert desc.family == "hrm_text" and len(desc.layers) == 128
    names = [layer.name for layer in desc.layers]
    assert names[:7] == [f"model.L_module.layers.{s * 16}.self_attn.attn"
                         for s in (0, 1, 2, 4, 5, 6)] + ["model.L_module.layers.1.self_attn.attn"]
    assert names[96:98] == ["model.H_module.layers.48.self_attn.attn",
                            "model.H_module.layers.112.self_attn.attn"]
    assert {(la.kind, la.num_kv_heads, la.head_size) for la in desc.layers} == {
        (LayerKind.FULL_ATTENTION, 12, 128)}
    assert not desc.supports_pipeline_parallel
    assert any("PrefillPrefixLMAttention" in w for w in desc.warnings)


def test_hrm_text_legacy_per_stack_count() -> None:
    # num_layers_per_stack absent: num_hidden_layers is the per-stack count (HrmTextConfig)
    config = _config("HrmTextForCausalLM", num_hidden_layers=2, H_cycles=1, L_cycles=1)
    del config["num_layers_per_stack"]
    desc = describe_model(config, source="legacy")
    assert [layer.name for layer in desc.layers] == [
        "model.L_module.layers.0.self_attn.attn", "model.L_module.layers.1.self_attn.attn",
        "model.H_module.layers.2.self_attn.attn", "model.H_module.layers.3.self_attn.attn"]
