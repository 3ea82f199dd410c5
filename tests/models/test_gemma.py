"""Gemma 4 (real config), Gemma 2 / Gemma 3 and Gemma 4 KV sharing (hand-written configs).

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.models.helpers import indices, of_kind, one, real


def test_gemma_4_26b_a4b() -> None:
    m = real("google--gemma-4-26B-A4B")
    # text_config.layer_types: full at 5, 11, 17, 23, 29 → 5 full + 25 sliding
    assert m.kind_counts() == {"sliding_window": 25, "full_attention": 5}
    assert indices(m, LayerKind.FULL_ATTENTION) == [5, 11, 17, 23, 29]
    sliding = of_kind(m, LayerKind.SLIDING_WINDOW)
    # sliding layers: num_key_value_heads 8, head_dim 256, sliding_window 1024
    assert one(layer.num_kv_heads for layer in sliding) == 8
    assert one(layer.head_size for layer in sliding) == 256
    assert one(layer.sliding_window for layer in sliding) == 1024
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    # full layers: attention_k_eq_v → num_global_key_value_heads 2; global_head_dim 512
    assert one(layer.num_kv_heads for layer in full) == 2
    assert one(layer.head_size for layer in full) == 512
    assert one(layer.head_size_v for layer in m.layers) is None  # K = V size
    # num_kv_shared_layers 0 → no KV-sharing layers
    assert LayerKind.NO_KV.value not in m.kind_counts()
    assert m.family == "gemma4"
    assert m.dtype == "bfloat16"
    assert m.model_sliding_window is None  # mixed layer_types


def test_gemma4_kv_shared_layers_own_no_cache() -> None:
    # hand-written Gemma 4 text config: 6 layers [S, S, F, S, S, F], num_kv_shared_layers 2 →
    # layers 4 and 5 (>= 6 - 2) reuse layers 3 (last S) and 2 (last F): NO_KV.
    # attention_k_eq_v false → full layers keep num_key_value_heads 2 (not the global 1).
    config = {"architectures": ["Gemma4ForCausalLM"], "model_type": "gemma4_text",
              "dtype": "bfloat16", "num_hidden_layers": 6, "hidden_size": 1536,
              "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
              "global_head_dim": 512, "num_global_key_value_heads": 1,
              "attention_k_eq_v": False, "num_kv_shared_layers": 2, "sliding_window": 512,
              "layer_types": ["sliding_attention", "sliding_attention", "full_attention"] * 2}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.NO_KV) == [4, 5]
    assert indices(m, LayerKind.SLIDING_WINDOW) == [0, 1, 3]
    assert indices(m, LayerKind.FULL_ATTENTION) == [2]
    assert m.layers[2].num_kv_heads == 2 and m.layers[2].head_size == 512
    assert m.layers[0].head_size == 256 and m.layers[0].sliding_window == 512


def test_gemma4_bidirectional_all_halves_window_and_last_layer_full() -> None:
    # hand-written: use_bidirectional_attention "all" → window (512 // 2) + 1 = 257;
    # layer_types ends in sliding → transformers forces the last layer to full
    config = {"model_type": "gemma4_text", "dtype": "bfloat16", "num_hidden_layers": 3,
              "hidden_size": 1024, "num_attention_heads": 4, "num_key_value_heads": 1,
              "head_dim": 256, "global_head_dim": 512, "sliding_window": 512,
              "use_bidirectional_attention": "all",
              "layer_types": ["sliding_attention"] * 3}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.SLIDING_WINDOW) == [0, 1]
    assert indices(m, LayerKind.FULL_ATTENTION) == [2]
    assert one(layer.sliding_window for layer in of_kind(m, LayerKind.SLIDING_WINDOW)) == 257
    assert any("forces it to full" in w for w in m.warnings)


def test_gemma2_alternating_pattern() -> None:
    # hand-written Gemma 2 config without layer_types: Gemma2Config alternates
    # sliding when (i + 1) % 2 → layers 0, 2 sliding; 1, 3 full; window 4096
    config = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
              "torch_dtype": "bfloat16", "num_hidden_layers": 4, "hidden_size": 2304,
              "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
              "sliding_window": 4096}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.SLIDING_WINDOW) == [0, 2]
    assert indices(m, LayerKind.FULL_ATTENTION) == [1, 3]
    assert one(layer.sliding_window for layer in of_kind(m, LayerKind.SLIDING_WINDOW)) == 4096
    assert one(layer.num_kv_heads for layer in m.layers) == 4
    assert one(layer.head_size for layer in m.layers) == 256
    assert m.family == "gemma2"


def test_gemma3_nested_text_config_5_to_1_pattern() -> None:
    # hand-written Gemma3ForConditionalGeneration: text_config with 12 layers, no layer_types →
    # sliding_window_pattern 6: full where (i + 1) % 6 == 0 → 5, 11; the other 10 sliding 1024
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "torch_dtype": "bfloat16",
              "text_config": {"model_type": "gemma3_text", "num_hidden_layers": 12,
                              "hidden_size": 5376, "num_attention_heads": 32,
                              "num_key_value_heads": 16, "head_dim": 128,
                              "sliding_window": 1024}}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.FULL_ATTENTION) == [5, 11]
    assert m.kind_counts() == {"sliding_window": 10, "full_attention": 2}
    assert one(layer.sliding_window for layer in of_kind(m, LayerKind.SLIDING_WINDOW)) == 1024
    assert one(layer.num_kv_heads for layer in m.layers) == 16
    assert one(layer.head_size for layer in m.layers) == 128
    assert m.family == "gemma3"
