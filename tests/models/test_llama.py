"""Llama 3.1, Mistral 7B, Mixtral and Llama 4 (chunked local attention).

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.models.helpers import DELETE, edited, indices, one, real

NAME = "model.layers.{}.self_attn.attn"


def test_llama_3_1_8b() -> None:
    m = real("meta-llama--Llama-3.1-8B")
    # num_hidden_layers 32, no sliding_window / layer_types → 32 full-attention layers
    assert m.kind_counts() == {"full_attention": 32}
    assert m.family == "llama" and m.model_type == "llama"
    assert m.architectures == ("LlamaForCausalLM",)
    # num_key_value_heads 8; no head_dim → hidden_size 4096 / num_attention_heads 32 = 128
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128
    assert one(layer.head_size_v for layer in m.layers) is None  # V head = K head
    assert one(layer.sliding_window for layer in m.layers) is None
    assert [layer.name for layer in m.layers[:2]] == [NAME.format(0), NAME.format(1)]
    assert [layer.index for layer in m.layers] == list(range(32))
    assert m.dtype == "bfloat16"  # torch_dtype
    assert m.max_position_embeddings == 131072
    assert m.quantization.method is None and m.quantization.kv_cache_dtype is None
    assert m.model_sliding_window is None
    assert m.num_nextn_predict_layers == 0 and m.mtp_layers == ()
    assert m.warnings == ()


def test_llama_3_1_70b() -> None:
    m = real("meta-llama--Llama-3.1-70B")
    # 80 layers; 8 KV heads; hidden 8192 / 64 heads = 128
    assert m.kind_counts() == {"full_attention": 80}
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128


def test_llama_3_1_70b_instruct_fp8_with_hf_quant_config() -> None:
    m = real("nvidia--Llama-3.1-70B-Instruct-FP8")
    # same architecture as the 70B: 80 full layers, 8 KV heads of 8192 / 64 = 128
    assert m.kind_counts() == {"full_attention": 80}
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128
    # config.json has no quantization_config; hf_quant_config.json: producer modelopt,
    # quant_algo FP8 → vLLM quant method "modelopt"; kv_cache_quant_algo FP8 → "fp8_e4m3"
    q = m.quantization
    assert (q.method, q.weight_format, q.kv_cache_dtype) == ("modelopt", "FP8", "fp8_e4m3")
    assert q.source == "hf_quant_config.json"


def test_mistral_7b_every_layer_sliding() -> None:
    m = real("mistralai--Mistral-7B-v0.1")
    # sliding_window 4096 and no layer_types → vLLM's model-level window on all 32 layers
    assert m.kind_counts() == {"sliding_window": 32}
    assert one(layer.sliding_window for layer in m.layers) == 4096
    assert m.model_sliding_window == 4096
    # 8 KV heads; 4096 / 32 heads = 128
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128
    assert m.family == "mistral"


def test_mistral_null_window_is_full_and_absent_window_is_4096() -> None:
    # explicit "sliding_window": null (Mistral-7B-v0.2 style) → no window
    m = describe_model(edited("mistralai--Mistral-7B-v0.1", ("sliding_window",), None),
                       source="edited")
    assert m.kind_counts() == {"full_attention": 32}
    # key absent → MistralConfig's default 4096
    m = describe_model(edited("mistralai--Mistral-7B-v0.1", ("sliding_window",), DELETE),
                       source="edited")
    assert one(layer.sliding_window for layer in m.layers) == 4096


def test_sibling_checkpoint_reads_fields() -> None:
    # a smaller sibling: 16 layers, 4 KV heads, head_dim given explicitly as 64
    config = edited("meta-llama--Llama-3.1-8B", ("num_hidden_layers",), 16,
                    ("num_key_value_heads",), 4, ("head_dim",), 64)
    m = describe_model(config, source="sibling")
    assert m.kind_counts() == {"full_attention": 16}
    assert one(layer.num_kv_heads for layer in m.layers) == 4
    assert one(layer.head_size for layer in m.layers) == 64


def test_llama_layer_types_give_per_layer_windows() -> None:
    # hand-written: 4 layers, layer_types sliding/full alternating, sliding_window 1024
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
        "num_hidden_layers": 4, "hidden_size": 2048, "num_attention_heads": 16,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention", "full_attention"] * 2,
    }
    m = describe_model(config, source="hand-written")
    # layers 0, 2 get the window; 1, 3 full (mixed layer_types → no model-level window)
    assert indices(m, LayerKind.SLIDING_WINDOW) == [0, 2]
    assert indices(m, LayerKind.FULL_ATTENTION) == [1, 3]
    # no num_key_value_heads → num_attention_heads 16; 2048 / 16 = 128
    assert one(layer.num_kv_heads for layer in m.layers) == 16
    assert one(layer.head_size for layer in m.layers) == 128
    assert m.model_sliding_window is None


def test_mixtral_model_type_dispatch() -> None:
    # hand-written Mixtral-style config without architectures: model_type picks the adapter;
    # sliding_window null → 4 full layers, 8 KV heads, 4096 / 32 = 128
    config = {"model_type": "mixtral", "torch_dtype": "bfloat16", "num_hidden_layers": 4,
              "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
              "sliding_window": None}
    m = describe_model(config, source="hand-written")
    assert m.family == "mixtral"
    assert m.kind_counts() == {"full_attention": 4}
    assert one(layer.head_size for layer in m.layers) == 128


def test_llama4_chunked_local_attention() -> None:
    # hand-written Llama 4 text config (Llama4TextConfig fields): 8 layers, no no_rope_layers →
    # NoPE every no_rope_layer_interval (default 4) layers: (i + 1) % 4 == 0 → layers 3, 7 full;
    # the other 6 are chunked local with attention_chunk_size 8192
    config = {"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text",
              "torch_dtype": "bfloat16", "num_hidden_layers": 8, "hidden_size": 5120,
              "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
              "attention_chunk_size": 8192}
    m = describe_model(config, source="hand-written")
    assert m.family == "llama4"
    assert indices(m, LayerKind.FULL_ATTENTION) == [3, 7]
    assert indices(m, LayerKind.CHUNKED_LOCAL) == [0, 1, 2, 4, 5, 6]
    chunked = [layer for layer in m.layers if layer.kind is LayerKind.CHUNKED_LOCAL]
    assert one(layer.attention_chunk_size for layer in chunked) == 8192
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128


def test_llama4_nested_text_config_and_explicit_no_rope_layers() -> None:
    # hand-written Llama4ForConditionalGeneration: text_config with no_rope_layers [1, 0, 1, 1]
    # → layer 1 NoPE (full), layers 0, 2, 3 chunked with attention_chunk_size 4096
    config = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4",
              "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4,
                              "hidden_size": 1024, "num_attention_heads": 8,
                              "num_key_value_heads": 2, "attention_chunk_size": 4096,
                              "no_rope_layers": [1, 0, 1, 1], "torch_dtype": "bfloat16"}}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.FULL_ATTENTION) == [1]
    assert indices(m, LayerKind.CHUNKED_LOCAL) == [0, 2, 3]
    # no head_dim in the hand-written config → Llama4TextConfig default 128
    assert one(layer.head_size for layer in m.layers) == 128
    assert one(layer.num_kv_heads for layer in m.layers) == 2
