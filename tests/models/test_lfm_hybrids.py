"""LFM2-MoE, LFM2-VL, LFM3 (+ its VL / audio wrappers): short-conv hybrids.

What vLLM does (0.34.0 wheel; lfm2_moe.py / lfm2_vl.py the same in 0.31–0.33, lfm3*.py 0.34 only):
- lfm2_moe.py: layer_types[i] == "full_attention" → Lfm2MoeAttention (head = hidden // heads) at
  model.layers.{i}.self_attn.attn, else ShortConv(dim=hidden_size) at model.layers.{i}.short_conv;
  mamba_utils.short_conv_state_shape: (L_cache − 1 + num_spec, dim / tp).
- lfm2_vl.py: the text_config's architecture under the prefix "language".
- lfm3.py: full_attention / sliding_attention → Lfm3Attention (config.head_dim, per-layer window
  sliding_window on sliding layers), any other type → ShortConv(dim=hidden_size);
  lfm3_vl.py / lfm3_audio.py: Lfm3ForCausalLM on text_config under "language_model".
- platforms/interface.py _align_hybrid_block_size: block = 64 (0.34 default) · cdiv(state page,
  64 · one-token attention page); the state page is padded to the attention page.

The configs are hand-made (tests/data/hf-configs/PROVENANCE.md); every expected number is
worked out from them by hand. Their per-layer specs were also compared with the specs vLLM's own
model classes build on CPU (0.31/0.33/0.34, TP 1): names, order, shapes, heads, windows, dtypes equal.
"""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import FullAttentionSpec, MambaSpec, MambaType, SlidingWindowSpec
from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind, ShortConvDims
from kvplan.models.resolution.resolved import ENCODER_CACHE_NOTE
from tests.models.helpers import (
    HF_CONFIGS,
    assert_plan_equals_oracle,
    check_json,
    h100_tp8,
    indices,
    of_kind,
    one,
    read_config,
    real,
)

LFM2_MOE = "kvplan-handmade--LFM2-8B-A1B-like"
LFM2_VL = "kvplan-handmade--LFM2-VL-1.6B-like"
LFM3 = "kvplan-handmade--LFM3-like"
LFM3_VL = "kvplan-handmade--LFM3-VL-like"
LFM3_AUDIO = "kvplan-handmade--LFM3-Audio-like"


def test_lfm2_moe_layers() -> None:
    m = real(LFM2_MOE)
    # layer_types: full_attention at 2, 6, 10, 14, 18, 21; the other 18 of 24 are conv
    assert indices(m, LayerKind.FULL_ATTENTION) == [2, 6, 10, 14, 18, 21]
    assert m.kind_counts() == {"short_conv": 18, "full_attention": 6}
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    # head 2048 // 32 = 64, num_key_value_heads 8
    assert one((x.num_kv_heads, x.head_size) for x in full) == (8, 64)
    # ShortConv(dim=hidden_size 2048), conv_L_cache 3
    assert one(x.short_conv for x in m.layers if x.short_conv) == ShortConvDims(conv_dim=2048,
                                                                                 l_cache=3)
    assert m.layers[0].name == "model.layers.0.short_conv"
    assert full[0].name == "model.layers.2.self_attn.attn"


def test_lfm2_moe_specs_tp8() -> None:
    res = build(real(LFM2_MOE), h100_tp8(max_model_len=32768))
    specs = {lp.name: lp.spec for lp in res.layers}
    conv, attn = specs["model.layers.0.short_conv"], specs["model.layers.2.self_attn.attn"]
    assert isinstance(conv, MambaSpec) and isinstance(attn, FullAttentionSpec)
    # conv (3 − 1, 2048 / 8 = 256) bf16 = 1,024 B
    assert conv.shapes == ((2, 256),) and conv.dtypes == ("bfloat16",)
    assert conv.mamba_type is MambaType.SHORT_CONV and conv.state_content_size_bytes == 1024
    # attention 8 / 8 = 1 KV head × 64: one token = 2 · 64 · 2 B = 256 B; block 64 ·
    # cdiv(1,024, 64 · 256) = 64; page 64 · 256 = 16,384 B, the conv page padded to it
    assert attn.num_kv_heads == 1 and res.block_size == 64
    assert attn.page_size_bytes == conv.page_size_bytes == 16_384


def test_lfm2_moe_needs_layer_types() -> None:
    config, _ = read_config(LFM2_MOE)
    del config["layer_types"]  # Lfm2MoeConfig has no default; vLLM indexes it per layer
    with pytest.raises(ConfigError, match="'layer_types'"):
        describe_model(config, source="edited")


def test_lfm2_moe_check_cli() -> None:
    out = check_json(HF_CONFIGS / LFM2_MOE / "config.json", "--gpu", "H100", "-tp", "8",
                     "--max-model-len", "32768", "--kv-cache-memory", "40GiB")
    # 18 conv layers and 6 attention layers: group size 6 → conv in 3 groups of 6, one attention
    # group; every page 16,384 B (above)
    assert [g["kind"] for g in out["groups"]] == ["mamba"] * 3 + ["full_attention"]
    assert {g["page_size_bytes"] for g in out["groups"]} == {16_384}
    # per request: attention cdiv(32,768, 64) = 512 blocks; each conv group 2 (align mode) → 518
    assert out["total_blocks_per_request"] == 518


def test_lfm2_vl_plans_the_text_model() -> None:
    m = real(LFM2_VL)
    # text_config (lfm2): full_attn_idxs 2, 5, 8, 10, 12, 14 of 16; conv_dim 2048
    assert indices(m, LayerKind.FULL_ATTENTION) == [2, 5, 8, 10, 12, 14]
    assert m.kind_counts() == {"short_conv": 10, "full_attention": 6}
    assert one(x.short_conv for x in m.layers if x.short_conv) == ShortConvDims(conv_dim=2048,
                                                                                 l_cache=3)
    assert m.layers[2].name == "language.model.layers.2.self_attn.attn"
    assert ENCODER_CACHE_NOTE in m.warnings


def test_lfm2_vl_with_a_moe_text_model() -> None:
    config, _ = read_config(LFM2_VL)
    moe, _ = read_config(LFM2_MOE)
    config["text_config"] = {k: v for k, v in moe.items() if k != "architectures"}
    m = describe_model(config, source="edited")
    # an lfm2_moe text_config: ShortConv(dim=hidden_size 2048), attention at its layer_types
    assert m.family == "lfm2_moe" and indices(m, LayerKind.FULL_ATTENTION) == [2, 6, 10, 14, 18, 21]


def test_lfm3_layers() -> None:
    m = real(LFM3)
    # Lfm3Config pattern over 24 layers: full at i % 4 == 2 → 2, 6, …, 22 (6); sliding at
    # i % 4 == 0, i > 0 → 4, 8, …, 20 (5); conv the other 13
    assert indices(m, LayerKind.FULL_ATTENTION) == [2, 6, 10, 14, 18, 22]
    assert indices(m, LayerKind.SLIDING_WINDOW) == [4, 8, 12, 16, 20]
    assert m.kind_counts() == {"short_conv": 13, "full_attention": 6, "sliding_window": 5}
    attn = of_kind(m, LayerKind.FULL_ATTENTION) + of_kind(m, LayerKind.SLIDING_WINDOW)
    # head_dim 128, num_key_value_heads 4; window 256 on the sliding layers only
    assert one((x.num_kv_heads, x.head_size) for x in attn) == (4, 128)
    assert one(x.sliding_window for x in of_kind(m, LayerKind.SLIDING_WINDOW)) == 256
    # ShortConv(dim=hidden_size 2048), conv_L_cache 7
    assert one(x.short_conv for x in m.layers if x.short_conv) == ShortConvDims(conv_dim=2048,
                                                                                 l_cache=7)


def test_lfm3_specs_tp4() -> None:
    res = build(real(LFM3), h100_tp8(tensor_parallel_size=4, max_model_len=32768))
    specs = {lp.name: lp.spec for lp in res.layers}
    conv = specs["model.layers.0.short_conv"]
    full, swa = specs["model.layers.2.self_attn.attn"], specs["model.layers.4.self_attn.attn"]
    assert isinstance(conv, MambaSpec) and isinstance(swa, SlidingWindowSpec)
    # conv (7 − 1, 2048 / 4 = 512) bf16 = 6,144 B; attention 4 / 4 = 1 KV head × 128: one token
    # 2 · 128 · 2 B = 512 B; block 64 · cdiv(6,144, 64 · 512) = 64; page 64 · 512 = 32,768 B
    assert conv.shapes == ((6, 512),) and conv.state_content_size_bytes == 6144
    assert res.block_size == 64 and swa.sliding_window == 256
    assert conv.page_size_bytes == full.page_size_bytes == swa.page_size_bytes == 32_768


def test_lfm3_wrappers_plan_the_text_model_under_language_model() -> None:
    plain = real(LFM3)
    for name in (LFM3_VL, LFM3_AUDIO):
        m = real(name)
        assert [(x.kind, x.sliding_window) for x in m.layers] == [
            (x.kind, x.sliding_window) for x in plain.layers]
        assert m.layers[2].name == "language_model.model.layers.2.self_attn.attn"
        assert ENCODER_CACHE_NOTE in m.warnings
    # the hub's Lfm3AudioConfig keeps the text model under `lfm` (lfm3_audio.py pops it)
    config, _ = read_config(LFM3_AUDIO)
    config["lfm"] = config.pop("text_config")
    m = describe_model(config, source="edited")
    assert m.kind_counts() == plain.kind_counts()
    assert m.layers[0].name == "language_model.model.layers.0.short_conv"


def test_lfm3_is_served_from_vllm_0_34_only() -> None:
    with pytest.raises(UnsupportedError, match="from 0.34.0 on"):
        build(real(LFM3), h100_tp8(vllm_version="0.33.0", max_model_len=32768))


def test_lfm3_plan_equals_vllm_planner_on_its_specs() -> None:
    # golden-oracle-2026 a07: the specs above (13 conv + 6 full + 5 sliding, TP 4) planned by
    # vLLM 0.34.0's own planner (tools/oracle_ext.py)
    out = check_json(HF_CONFIGS / LFM3 / "config.json", "--gpu", "H100", "-tp", "4",
                     "--max-model-len", "32768", "--kv-cache-memory", "40GiB",
                     "--max-num-batched-tokens", "8192")
    assert_plan_equals_oracle(out, "a07_lfm3_short_conv_swa_full_tp4")
