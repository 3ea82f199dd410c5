"""MiniMax-M2.5 NVFP4 (real config, all full attention) and MiniMax-Text-01 linear attention
(hand-written config with Text-01's attn_type_list).

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

from kvplan.errors import UnsupportedError
from kvplan.models import describe_model, mtp_draft
from kvplan.models.description import LayerKind, LinearAttentionDims
from tests.models.helpers import indices, of_kind, one, real


def test_minimax_m2_5_nvfp4() -> None:
    m = real("nvidia--MiniMax-M2.5-NVFP4")
    # attn_type_list: 62 × 1 (softmax), and vLLM's MiniMaxM2 builds full attention everywhere
    assert m.kind_counts() == {"full_attention": 62}
    # 8 KV heads, head_dim 128; sliding_window null
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128
    assert one(layer.sliding_window for layer in m.layers) is None
    # quantization_config (wins over hf_quant_config.json): quant_method modelopt, quant_algo
    # NVFP4 → "modelopt_fp4"; kv_cache_scheme {dynamic false, 8 bits, float} → "fp8_e4m3"
    q = m.quantization
    assert (q.method, q.weight_format, q.kv_cache_dtype, q.source) == (
        "modelopt_fp4", "NVFP4", "fp8_e4m3", "config.json quantization_config")
    # num_mtp_modules 3 are recorded, but vLLM 0.34 has no MiniMax-M2 MTP drafter
    assert m.num_nextn_predict_layers == 3 and m.mtp_layers == ()
    try:
        mtp_draft(m)
    except UnsupportedError as exc:
        assert "MiniMaxM2" in exc.message
    else:
        raise AssertionError("expected UnsupportedError")
    assert m.warnings == ()


def test_minimax_text_01_linear_attention() -> None:
    # hand-written MiniMax-Text-01-style config: 8 layers, attn_type_list 7 × 0 (lightning
    # linear attention) then 1 (softmax); 64 heads × head_dim 128; 8 KV heads
    config = {"architectures": ["MiniMaxText01ForCausalLM"], "model_type": "minimax_text_01",
              "torch_dtype": "bfloat16", "num_hidden_layers": 8, "hidden_size": 6144,
              "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
              "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1]}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.LINEAR_ATTENTION) == list(range(7))
    assert indices(m, LayerKind.FULL_ATTENTION) == [7]
    # linear state (heads, head_dim, head_dim) = (64, 128, 128)
    assert one(layer.linear_attention for layer in of_kind(m, LayerKind.LINEAR_ATTENTION)) == (
        LinearAttentionDims(num_heads=64, head_dim=128))
    assert (m.layers[7].num_kv_heads, m.layers[7].head_size) == (8, 128)
    assert m.is_hybrid
    # vLLM dropped this architecture after 0.23: said in the warnings
    assert any("removed" in w for w in m.warnings)


def test_minimax_layer_types_default_alternates() -> None:
    # hand-written transformers MiniMaxConfig without attn_type_list / layer_types: full where
    # (i + 1) % 2 == 1 → even layers full, odd linear; head = 4096 / 32 = 128
    config = {"model_type": "minimax", "torch_dtype": "bfloat16", "num_hidden_layers": 4,
              "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.FULL_ATTENTION) == [0, 2]
    assert indices(m, LayerKind.LINEAR_ATTENTION) == [1, 3]
    assert one(layer.linear_attention.head_dim for layer in of_kind(
        m, LayerKind.LINEAR_ATTENTION)) == 128
