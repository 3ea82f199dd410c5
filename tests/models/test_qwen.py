"""Qwen2.5, Qwen3 dense / MoE (incl. FP8), Qwen3-Next and Qwen3.5 / Qwen3.6 (gated delta nets).

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

import pytest

from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import GdnDims, LayerKind
from tests.models.helpers import DELETE, edited, indices, of_kind, one, real


def test_qwen2_5_7b_use_sliding_window_false() -> None:
    m = real("Qwen--Qwen2.5-7B")
    # sliding_window 131072 but use_sliding_window false → Qwen2Config nulls the window:
    # all 28 layers full attention
    assert m.kind_counts() == {"full_attention": 28}
    assert one(layer.sliding_window for layer in m.layers) is None
    # 4 KV heads; vLLM's Qwen2Attention: head = hidden 3584 / 28 heads = 128
    assert one(layer.num_kv_heads for layer in m.layers) == 4
    assert one(layer.head_size for layer in m.layers) == 128
    assert m.family == "qwen2"


def test_qwen3_8b() -> None:
    m = real("Qwen--Qwen3-8B")
    # 36 layers, sliding_window null → all full; 8 KV heads; head_dim 128
    assert m.kind_counts() == {"full_attention": 36}
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128


def test_qwen3_30b_a3b_moe() -> None:
    m = real("Qwen--Qwen3-30B-A3B")
    # 48 layers, 4 KV heads, head_dim 128 (32 heads × 128 ≠ hidden 2048: head_dim is explicit)
    assert m.kind_counts() == {"full_attention": 48}
    assert one(layer.num_kv_heads for layer in m.layers) == 4
    assert one(layer.head_size for layer in m.layers) == 128
    assert m.family == "qwen3_moe"
    assert m.quantization.method is None


def test_qwen3_30b_a3b_fp8() -> None:
    m = real("Qwen--Qwen3-30B-A3B-FP8")
    # same layers as the BF16 checkpoint
    assert m.kind_counts() == {"full_attention": 48}
    assert one(layer.num_kv_heads for layer in m.layers) == 4
    # quantization_config: quant_method fp8 (block 128×128) → FP8 weights, no KV dtype declared
    q = m.quantization
    assert (q.method, q.weight_format, q.kv_cache_dtype) == ("fp8", "FP8", None)
    assert q.source == "config.json quantization_config"


QWEN3_NEXT_GDN = GdnDims(num_k_heads=16, num_v_heads=32, head_k_dim=128, head_v_dim=128,
                         conv_kernel=4)


def test_qwen3_next_80b() -> None:
    m = real("Qwen--Qwen3-Next-80B-A3B-Thinking")
    # 48 layers, no layer_types, full_attention_interval 4 → full at (i+1) % 4 == 0:
    # 3, 7, ..., 47 → 12 full + 36 GDN
    assert m.kind_counts() == {"gdn": 36, "full_attention": 12}
    assert indices(m, LayerKind.FULL_ATTENTION) == list(range(3, 48, 4))
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    # 2 KV heads, head_dim 256
    assert one(layer.num_kv_heads for layer in full) == 2
    assert one(layer.head_size for layer in full) == 256
    # linear_num_key_heads 16, linear_num_value_heads 32, key/value head dims 128, conv 4
    assert one(layer.gdn for layer in of_kind(m, LayerKind.GDN)) == QWEN3_NEXT_GDN
    assert m.layers[0].name == "model.layers.0.linear_attn"
    assert m.layers[3].name == "model.layers.3.self_attn.attn"
    # no mamba_ssm_dtype hook for Qwen3-Next in vLLM
    assert m.mamba_ssm_dtype is None
    # no num_nextn_predict_layers: vLLM's Qwen3NextMTP defaults to 1 (noted in warnings)
    assert m.num_nextn_predict_layers == 1
    assert any("num_nextn_predict_layers" in w for w in m.warnings)
    assert m.is_hybrid


@pytest.mark.parametrize(
    ("name", "layers", "kv_heads", "v_heads"),
    [
        # 64 layers, full_attention_interval 4 → 16 full + 48 GDN; 4 KV heads; 48 value heads
        ("Qwen--Qwen3.5-27B", 64, 4, 48),
        # 40 layers → 10 full + 30 GDN; 2 KV heads; 32 value heads
        ("Qwen--Qwen3.5-35B-A3B", 40, 2, 32),
        # 60 layers → 15 full + 45 GDN; 2 KV heads; 64 value heads
        ("Qwen--Qwen3.5-397B-A17B", 60, 2, 64),
    ],
)
def test_qwen3_5(name: str, layers: int, kv_heads: int, v_heads: int) -> None:
    m = real(name)
    assert m.kind_counts() == {"gdn": layers * 3 // 4, "full_attention": layers // 4}
    # text_config.layer_types matches the interval: full at 3, 7, 11, ...
    assert indices(m, LayerKind.FULL_ATTENTION) == list(range(3, layers, 4))
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    assert one(layer.num_kv_heads for layer in full) == kv_heads
    assert one(layer.head_size for layer in full) == 256  # head_dim 256
    # linear_num_key_heads 16, key/value head dims 128, conv kernel 4
    assert one(layer.gdn for layer in of_kind(m, LayerKind.GDN)) == GdnDims(
        num_k_heads=16, num_v_heads=v_heads, head_k_dim=128, head_v_dim=128, conv_kernel=4)
    # text_config.mamba_ssm_dtype float32 (copied by vLLM's Qwen3.5 config hook)
    assert m.mamba_ssm_dtype == "float32"
    # dtype only in text_config ("bfloat16")
    assert m.dtype == "bfloat16"
    assert m.max_position_embeddings == 262144
    # mtp_num_hidden_layers 1 → one full-attention MTP layer after the decoder layers
    assert m.num_nextn_predict_layers == 1
    assert [(layer.index, layer.name) for layer in m.mtp_layers] == [
        (layers, "mtp.layers.0.self_attn.attn")]
    assert m.family == "qwen3_5"
    assert m.warnings == ()


def test_qwen3_6_27b_nvfp4() -> None:
    m = real("nvidia--Qwen3.6-27B-NVFP4")
    # Qwen3.5-27B layout: 64 layers → 16 full + 48 GDN, 4 KV heads × 256, 48 value heads
    assert m.kind_counts() == {"gdn": 48, "full_attention": 16}
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    assert one(layer.num_kv_heads for layer in full) == 4
    assert one(layer.head_size for layer in full) == 256
    assert one(layer.gdn.num_v_heads for layer in of_kind(m, LayerKind.GDN)) == 48
    assert m.mamba_ssm_dtype == "float32"
    # config.json quantization_config (wins over hf_quant_config.json): quant_method modelopt,
    # quant_algo MIXED_PRECISION → "modelopt_mixed"; kv_cache_scheme {dynamic false, 8-bit float}
    # → get_kv_cache_quant_algo_string → "fp8" → MODELOPT map → "fp8_e4m3"
    q = m.quantization
    assert (q.method, q.weight_format, q.kv_cache_dtype) == (
        "modelopt_mixed", "MIXED_PRECISION", "fp8_e4m3")
    assert q.source == "config.json quantization_config"


def test_qwen3_5_sibling_and_interval_without_layer_types() -> None:
    # a sibling with 8 layers and no layer_types: interval 4 → full at 3, 7
    config = edited("Qwen--Qwen3.5-27B", ("text_config", "num_hidden_layers"), 8,
                    ("text_config", "layer_types"), DELETE,
                    ("text_config", "linear_num_value_heads"), 24)
    m = describe_model(config, source="sibling")
    assert indices(m, LayerKind.FULL_ATTENTION) == [3, 7]
    assert one(layer.gdn.num_v_heads for layer in of_kind(m, LayerKind.GDN)) == 24


def test_gdn_missing_field_names_it() -> None:
    config = edited("Qwen--Qwen3.5-27B", ("text_config", "linear_num_value_heads"), DELETE)
    with pytest.raises(ConfigError, match=r"text_config\.linear_num_value_heads"):
        describe_model(config, source="edited")


def test_qwen3_use_sliding_window_from_max_window_layers() -> None:
    # hand-written Qwen3 config: use_sliding_window true, sliding_window 4096,
    # max_window_layers 0 → transformers layer_types all sliding → every layer gets 4096
    base = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "dtype": "bfloat16",
            "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
            "num_key_value_heads": 2, "head_dim": 128, "use_sliding_window": True,
            "sliding_window": 4096, "max_window_layers": 0,
            "max_position_embeddings": 40960}
    m = describe_model(base, source="hand-written")
    assert m.kind_counts() == {"sliding_window": 4}
    assert one(layer.sliding_window for layer in m.layers) == 4096
    # max_window_layers 2 → layer_types [full, full, sliding, sliding]: mixed, and vLLM's
    # Qwen3 attention has no per-layer window → all full, with a warning
    m = describe_model({**base, "max_window_layers": 2}, source="hand-written")
    assert m.kind_counts() == {"full_attention": 4}
    assert any("per-layer window" in w for w in m.warnings)
    # max_window_layers 28 (≥ 4 layers) → all full, no warning
    m = describe_model({**base, "max_window_layers": 28}, source="hand-written")
    assert m.kind_counts() == {"full_attention": 4} and m.warnings == ()


def test_qwen2_partial_sliding_window_rejected() -> None:
    # hand-written Qwen2: use_sliding_window with max_window_layers 2 < 4 layers → vLLM's
    # Qwen2DecoderLayer asserts
    config = {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "dtype": "bfloat16",
              "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
              "num_key_value_heads": 2, "use_sliding_window": True, "sliding_window": 4096,
              "max_window_layers": 2}
    with pytest.raises(UnsupportedError, match="max_window_layers"):
        describe_model(config, source="hand-written")
