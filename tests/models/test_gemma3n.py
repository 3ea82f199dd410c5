"""Gemma 3n (Gemma3nForCausalLM / Gemma3nForConditionalGeneration): cross-layer KV sharing.

vLLM 0.34.0 models/gemma3n.py Gemma3nAttention (same in 0.31–0.33): layers from
first_shared = num_hidden_layers − num_kv_shared_layers on pass kv_sharing_target_layer_name =
layer first_shared − 2 (sliding) / − 1 (full); v1/worker/gpu/attn_utils.py get_kv_cache_spec skips
every layer with a target, so they own no KV cache. No published Gemma 3n config.json was found
offline: tests/data/hf-configs/handmade--gemma-3n-defaults holds transformers' Gemma3nTextConfig
defaults (see PROVENANCE.md), on purpose.
"""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.serialize import contract_dict
from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from kvplan.models.resolution.resolved import ENCODER_CACHE_NOTE
from tests.golden import ORACLE_2026, VERSIONS, contract, load
from tests.models.helpers import HF_CONFIGS, check_h100_x8, h100_tp8, indices, read_config, real

DEFAULTS = "handmade--gemma-3n-defaults"


def _causal_lm() -> dict:
    """The same language model as a flat Gemma3nForCausalLM config (vLLM reads hf_config)."""
    config, _ = read_config(DEFAULTS)
    return {**config["text_config"], "architectures": ["Gemma3nForCausalLM"],
            "torch_dtype": "bfloat16"}


def test_defaults_layer_kinds() -> None:
    m = real(DEFAULTS)
    assert m.family == "gemma3n"
    # 35 layers, full when (i + 1) % 5 == 0: 4, 9, …, 34 (7 full, 28 sliding); the last
    # 15 (20..34) share: left with 16 sliding + 4 full (4, 9, 14, 19) owning a cache
    assert indices(m, LayerKind.NO_KV) == list(range(20, 35))
    assert indices(m, LayerKind.FULL_ATTENTION) == [4, 9, 14, 19]
    sliding = [x for x in m.layers if x.kind is LayerKind.SLIDING_WINDOW]
    assert len(sliding) == 16
    assert {(x.num_kv_heads, x.head_size, x.sliding_window) for x in sliding} == {(2, 256, 512)}
    assert ENCODER_CACHE_NOTE in m.warnings  # the multimodal wrapper plans its language model
    assert ENCODER_CACHE_NOTE not in describe_model(_causal_lm(), source="lm").warnings


def test_causal_lm_and_wrapper_have_the_same_layers() -> None:
    # the wrapper builds the same language model under `language_model` (gemma3n_mm.py)
    lm, wrapper = describe_model(_causal_lm(), source="lm").layers, real(DEFAULTS).layers
    assert all(w.name == "language_model." + c.name for c, w in zip(lm, wrapper, strict=True))
    assert [c.model_copy(update={"name": w.name}) for c, w in zip(lm, wrapper, strict=True)] == \
        list(wrapper)


def test_shared_layer_without_a_target_keeps_its_cache() -> None:
    # 4 layers, 3 shared → first_shared 1: sliding layers 1 and 2 target 1 − 2 = −1 → vLLM sets
    # no target (kv_shared_layer_index >= 0 fails) and they keep their cache; full layer 3
    # targets 1 − 1 = 0 → shares
    cfg = {"architectures": ["Gemma3nForCausalLM"], "num_hidden_layers": 4,
           "num_kv_shared_layers": 3, "max_position_embeddings": 4096,
           "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                           "full_attention"], "torch_dtype": "bfloat16"}
    m = describe_model(cfg, source="hand")
    assert [x.kind for x in m.layers] == [LayerKind.SLIDING_WINDOW] * 3 + [LayerKind.NO_KV]


def test_cli_h100_x8() -> None:
    out = check_h100_x8(HF_CONFIGS / DEFAULTS / "config.json", "--max-model-len", "32768")
    # per rank: 2 KV heads / 8 → 1 (replicated) · (256 + 256) · 2 B = 1,024 B/token; 0.34's
    # default block 64 (CacheConfig.DEFAULT_BLOCK_SIZE; FlashAttention takes it) → 65,536 B;
    # 20 layers with a cache → 4 full + 4 groups of 4 sliding; sliding blocks per request
    # cdiv(511 + 16384, 64) + 1 = 265, full 32768 / 64 = 512
    assert [(g["kind"], g["num_layers"], g["block_size_tokens"], g["page_size_bytes"])
            for g in out["groups"]] == [("sliding_window", 4, 64, 65536)] * 4 + [
        ("full_attention", 4, 64, 65536)]
    assert out["total_blocks_per_request"] == 4 * 265 + 512
    assert out["pool_bytes_per_block"] == [4 * 65536]


@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_plans_like_vllm(version: str, fix: bool) -> None:
    # golden-oracle-2026 case a06: the same 20 cache layers given to vLLM's own planner
    exp = load(ORACLE_2026 / "expected" / f"a06_gemma3n_kv_sharing_tp8.{version}"
               f"{'.patched' if fix else ''}.json")
    target = describe_model(_causal_lm(), source="lm")
    res = build(target, h100_tp8(vllm_version=version, with_fix=fix, max_model_len=32768,
                                 block_size=16))
    assert contract(contract_dict(plan(res.planner_input), extra_spec_keys=True)) == contract(exp)
