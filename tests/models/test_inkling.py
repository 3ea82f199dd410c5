"""Inkling (InklingForConditionalGeneration / InklingForCausalLM): full and sliding-window
attention, each decoder layer with a short-conv state kept as a paged sliding-window cache.

What vLLM does (0.34.0 wheel; 0.31–0.33 the same for the KV cache):
- registry.py: Inkling* → vllm.models.inkling (nvidia/model.py on CUDA); config classes of its
  own (models/inkling/configs.py InklingMMConfig / InklingModelConfig).
- nvidia/model.py InklingDecoderLayer: InklingConvState (model.layers.{i}.conv_state) is built
  before InklingAttention (model.layers.{i}.attn); layer i is local iff i in local_layer_ids.
- nvidia/sconv_swa_attn.py InklingConvState.get_kv_cache_spec: SlidingWindowSpec(block_size =
  sliding_window = sconv_kernel_size, num_kv_heads // tp, head_size = next_power_of_2(2·head_dim
  + 2·hidden / num_kv_heads), head_size_v 0, bf16), backend InklingSconvBackend.
- nvidia/attention.py InklingAttention.get_kv_cache_spec: SlidingWindowSpec(window
  sliding_window_size) or FullAttentionSpec, cache block size, FlashAttentionBackend.
The config is hand-made (tests/data/hf-configs/PROVENANCE.md): no public copy of the hub file.
"""

from __future__ import annotations

import copy

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import FullAttentionSpec, SlidingWindowSpec
from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.models.helpers import HF_CONFIGS, check_h100_x8, h100_tp8, read_config, real

NAME = "handmade--Inkling"


def test_inkling_layers() -> None:
    m = real(NAME)
    # 66 decoder layers, each a conv state + an attention layer; local_layer_ids = all but
    # 5, 11, …, 65 (11 global) → 55 sliding-window attention layers + 66 conv states (windows)
    assert m.kind_counts() == {"sliding_window": 55 + 66, "full_attention": 11}
    assert [x.name for x in m.layers[:2]] == ["model.layers.0.conv_state", "model.layers.0.attn"]
    conv = {(x.num_kv_heads, x.head_size, x.head_size_v, x.sliding_window, x.block_size)
            for x in m.layers if x.name.endswith("conv_state")}
    # global: 8 heads, next_power_of_2(2·128 + 2·6144/8 = 1792) = 2048; local: 16 heads,
    # next_power_of_2(2·128 + 2·6144/16 = 1024) = 1024; window = block = sconv_kernel_size 4
    assert conv == {(8, 2048, 0, 4, 4), (16, 1024, 0, 4, 4)}
    local = [x for x in m.layers if x.name.endswith(".attn") and x.kind is LayerKind.SLIDING_WINDOW]
    assert {(x.num_kv_heads, x.head_size, x.sliding_window) for x in local} == {(16, 128, 512)}
    assert not m.is_hybrid
    assert any("encoder cache" in w for w in m.warnings)


def test_inkling_causal_lm_reads_the_flat_config() -> None:
    config, _ = read_config(NAME)
    flat = {**copy.deepcopy(config["text_config"]), "architectures": ["InklingForCausalLM"]}
    m = describe_model(flat, source="inkling-text")
    assert [x.name for x in m.layers] == [x.name for x in real(NAME).layers]
    assert not any("encoder cache" in w for w in m.warnings)
    # no local_layer_ids: InklingModelConfig's default [] → every layer global
    flat.pop("local_layer_ids")
    m = describe_model(flat, source="inkling-no-local")
    assert m.kind_counts() == {"sliding_window": 66, "full_attention": 66}


def test_inkling_specs_h100_tp8() -> None:
    res = build(real(NAME), h100_tp8())
    specs = {lp.name: lp.spec for lp in res.layers}
    g_conv, l_conv = specs["model.layers.5.conv_state"], specs["model.layers.0.conv_state"]
    assert isinstance(g_conv, SlidingWindowSpec) and isinstance(l_conv, SlidingWindowSpec)
    # per rank: 8 / 8 = 1 head × 2048 and 16 / 8 = 2 heads × 1024, 4 tokens of bf16 (K only):
    # both 4 · 2048 · 2 = 16,384 B, whatever the KV cache dtype
    assert (g_conv.num_kv_heads, g_conv.block_size, g_conv.page_size_bytes) == (1, 4, 16_384)
    assert (l_conv.num_kv_heads, l_conv.block_size, l_conv.page_size_bytes) == (2, 4, 16_384)
    # 0.34's default block 64 (FlashAttention takes any multiple of 16, the conv backend any)
    g_attn, l_attn = specs["model.layers.5.attn"], specs["model.layers.0.attn"]
    assert isinstance(g_attn, FullAttentionSpec) and not isinstance(g_attn, SlidingWindowSpec)
    assert (g_attn.block_size, g_attn.page_size_bytes) == (64, 64 * 1 * 128 * 2 * 2)
    assert (l_attn.block_size, l_attn.sliding_window) == (64, 512)
    fp8 = {lp.name: lp.spec for lp in build(real(NAME), h100_tp8(kv_cache_dtype="fp8")).layers}
    assert fp8["model.layers.5.conv_state"].page_size_bytes == 16_384  # the conv state stays bf16
    assert fp8["model.layers.5.attn"].page_size_bytes == 64 * 1 * 128 * 2  # fp8 K + V


def test_inkling_cli_check() -> None:
    out = check_h100_x8(HF_CONFIGS / NAME / "config.json", "--block-size", "16")
    # 11 global + 55 local decoder layers: groups of 11 (the smallest kind count); every page
    # 16,384 B: the conv states (4 tokens), the local attention (16 · 2 · 256 · 2 B) and the
    # global attention scaled to 32 tokens (32 · 1 · 256 · 2 B)
    assert {g["page_size_bytes"] for g in out["groups"]} == {16_384}
    assert sorted({g["block_size_tokens"] for g in out["groups"]}) == [4, 16, 32]
