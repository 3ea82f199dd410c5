"""OLMo Hybrid (OlmoHybridForCausalLM): gated delta net layers, full attention every fourth layer.

What vLLM does (0.31.0–0.34.0 wheels, olmo_hybrid.py unchanged):
- layer_types[i] == "linear_attention" → OlmoHybridGatedDeltaNetAttention at
  model.layers.{i}.linear_attn: mamba_utils.gated_delta_net_state_shape (conv (K − 1,
  (2 · k_dim · k_heads + v_dim · v_heads) / tp), recurrent (v_heads / tp, v_dim, k_dim)); it keeps
  MambaBase.get_prefill_checkpoint_alignment (None): no prefill checkpoints, unlike Qwen's GDN.
- else OlmoHybridAttention at model.layers.{i}.self_attn.attn: head = hidden // heads, KV heads
  `num_key_value_heads or num_attention_heads`.

The config is hand-made (tests/data/hf-configs/PROVENANCE.md); every expected number is worked
out from it by hand. Its per-layer specs were also compared with the specs vLLM's own model class
builds on CPU (0.31/0.33/0.34, TP 1): names, order, shapes, heads, dtypes equal.
"""

from __future__ import annotations

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import FullAttentionSpec, MambaSpec, MambaType
from kvplan.models import describe_model
from kvplan.models.description import GdnDims, LayerKind
from tests.models.helpers import h100_tp8, indices, of_kind, one, read_config, real

NAME = "kvplan-handmade--Olmo-Hybrid-7B-like"


def test_olmo_hybrid_layers() -> None:
    m = real(NAME)
    # full_attention at i % 4 == 3 → 3, 7, …, 31 (8 of 32); the other 24 linear_attention
    assert indices(m, LayerKind.FULL_ATTENTION) == list(range(3, 32, 4))
    assert m.kind_counts() == {"gdn": 24, "full_attention": 8}
    # head 3840 // 30 = 128, 30 KV heads
    assert one((x.num_kv_heads, x.head_size) for x in of_kind(m, LayerKind.FULL_ATTENTION)) == (
        30, 128)
    assert one(x.gdn for x in m.layers if x.gdn) == GdnDims(
        num_k_heads=30, num_v_heads=30, head_k_dim=96, head_v_dim=192, conv_kernel=4)
    assert m.layers[0].name == "model.layers.0.linear_attn"


def test_olmo_hybrid_defaults() -> None:
    config, _ = read_config(NAME)
    for key in ("layer_types", "linear_num_key_heads", "linear_num_value_heads",
                "linear_key_head_dim", "linear_value_head_dim", "num_key_value_heads"):
        del config[key]
    m = describe_model(config, source="edited")
    # OlmoHybridConfig: the same 3:1 pattern; k / v heads = 30 heads; key dim
    # int(0.75 · 3840 / 30) = 96, value dim 2 · 96 = 192; KV heads = 30
    assert indices(m, LayerKind.FULL_ATTENTION) == list(range(3, 32, 4))
    assert one(x.gdn for x in m.layers if x.gdn) == GdnDims(
        num_k_heads=30, num_v_heads=30, head_k_dim=96, head_v_dim=192, conv_kernel=4)
    assert one(x.num_kv_heads for x in of_kind(m, LayerKind.FULL_ATTENTION)) == 30


def test_olmo_hybrid_specs_tp2_sm90_align() -> None:
    res = build(real(NAME), h100_tp8(tensor_parallel_size=2, max_model_len=32768))
    specs = {lp.name: lp.spec for lp in res.layers}
    gdn, attn = specs["model.layers.0.linear_attn"], specs["model.layers.3.self_attn.attn"]
    assert isinstance(gdn, MambaSpec) and isinstance(attn, FullAttentionSpec)
    # conv dim 2 · 96 · 30 + 192 · 30 = 11,520 → (3, 5,760) bf16 = 34,560 B; recurrent
    # (30 / 2, 192, 96) bf16 = 552,960 B → 587,520 B
    assert gdn.shapes == ((3, 5760), (15, 192, 96)) and gdn.mamba_type is MambaType.GDN_ATTN
    assert gdn.state_content_size_bytes == 587_520
    # no prefill checkpoints even on SM90 in align mode (Qwen3-Next would export one)
    assert gdn.num_prefill_checkpoint_blocks == 0 and gdn.prefill_checkpoint_alignment is None
    # attention 15 KV heads × 128: one token 2 · 15 · 128 · 2 B = 7,680 B; block 64 ·
    # cdiv(587,520, 64 · 7,680 = 491,520) = 128; page 128 · 7,680 = 983,040 B
    assert res.block_size == 128
    assert attn.page_size_bytes == gdn.page_size_bytes == 983_040
