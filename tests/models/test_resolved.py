"""Models no fast adapter covers, planned through transformers' configuration classes (issue 9).

Every expected number is worked out by hand in the comment above it, from the config file,
transformers' configuration class defaults and vLLM 0.34.0's model code (registry.py → model file
→ its Attention(...) call), not from kvplan's output.
"""

from __future__ import annotations

import pytest

from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind, ModelDescription
from kvplan.models.resolution.resolved import ENCODER_CACHE_NOTE, FAMILY
from tests.models.helpers import DELETE, edited, real


def _shape(m: ModelDescription) -> set[tuple[str, int | None, int | None, int | None]]:
    return {(layer.kind.value, layer.num_kv_heads, layer.head_size, layer.sliding_window)
            for layer in m.layers}


def test_qwen2_5_vl_7b() -> None:
    # registry: Qwen2_5_VLForConditionalGeneration → qwen2_5_vl.py, whose language model is
    # Qwen2ForCausalLM (Qwen2Attention, no per-layer window). The file is flat; transformers'
    # Qwen2_5_VLConfig builds text_config from the top-level keys, and Qwen2_5_VLTextConfig drops
    # sliding_window (32768) because use_sliding_window is false; layer_types = 28 × full.
    # 28 layers, 4 KV heads, head size 3584 / 28 = 128, full attention, max 128000, bf16.
    m = real("Qwen--Qwen2.5-VL-7B-Instruct")
    assert m.family == FAMILY
    assert len(m.layers) == 28
    assert _shape(m) == {("full_attention", 4, 128, None)}
    assert m.model_sliding_window is None
    assert (m.max_position_embeddings, m.dtype) == (128000, "bfloat16")
    assert ENCODER_CACHE_NOTE in m.warnings


def test_qwen3_vl_8b_dense() -> None:
    # Qwen3VLForConditionalGeneration → qwen3_vl.py Qwen3LLMForCausalLM (Qwen3Attention, no
    # window). text_config: 36 layers, 8 KV heads, head_dim 128, max_position_embeddings 262144;
    # no top-level dtype, so vLLM's get_torch_dtype falls back to text_config.dtype = bfloat16.
    m = real("Qwen--Qwen3-VL-8B-Instruct")
    assert len(m.layers) == 36
    assert _shape(m) == {("full_attention", 8, 128, None)}
    assert (m.max_position_embeddings, m.dtype) == (262144, "bfloat16")
    assert m.model_type == "qwen3_vl"
    assert ENCODER_CACHE_NOTE in m.warnings


def test_qwen3_vl_30b_a3b_moe() -> None:
    # Qwen3VLMoeForConditionalGeneration → qwen3_vl_moe.py (Qwen3MoeAttention, no window).
    # 48 layers, 4 KV heads, head_dim 128 read from the config (hidden 2048 / 32 heads = 64 would
    # be wrong), max 262144, dtype from text_config: bfloat16.
    m = real("Qwen--Qwen3-VL-30B-A3B-Instruct")
    assert len(m.layers) == 48
    assert _shape(m) == {("full_attention", 4, 128, None)}
    assert (m.max_position_embeddings, m.dtype) == (262144, "bfloat16")


def test_phi_4_is_sliding_window_on_every_layer() -> None:
    # Phi3ForCausalLM → phi3.py = LlamaForCausalLM. Phi3Config has sliding_window (16384) and no
    # layer_types, so LlamaAttention passes no per-layer window and vLLM's Attention falls back to
    # CacheConfig.sliding_window, which EngineArgs sets to 16384 (layer_types absent).
    # 40 layers × sliding window 16384, 10 KV heads, head size 5120 / 40 = 128 (Phi3Config has no
    # head_dim), max 16384, bf16.
    m = real("microsoft--phi-4")
    assert len(m.layers) == 40
    assert _shape(m) == {("sliding_window", 10, 128, 16384)}
    assert m.model_sliding_window == 16384
    assert (m.max_position_embeddings, m.dtype) == (16384, "bfloat16")
    assert ENCODER_CACHE_NOTE not in m.warnings


def test_llava_1_5_text_config_takes_llama_defaults() -> None:
    # LlavaForConditionalGeneration → llava.py, language model from text_config (model_type llama
    # → LlamaForCausalLM). text_config gives only max_position_embeddings 4096 and the vocab;
    # transformers' LlamaConfig defaults: 32 layers, 32 heads, KV heads = heads = 32, hidden 4096
    # → head size 128. torch_dtype float16. No window.
    m = real("llava-hf--llava-1.5-7b-hf")
    assert len(m.layers) == 32
    assert _shape(m) == {("full_attention", 32, 128, None)}
    assert (m.max_position_embeddings, m.dtype) == (4096, "float16")
    assert m.family == "llama"  # the fast Llama adapter, fed the resolved text config
    assert ENCODER_CACHE_NOTE in m.warnings


def test_mistral_small_3_1_mistral3_wrapper() -> None:
    # Mistral3ForConditionalGeneration → mistral3.py, language model from text_config (model_type
    # mistral → MistralForCausalLM, LlamaAttention). sliding_window is null in the file (so
    # MistralConfig's 4096 default does not apply); 40 layers, 8 KV heads, head_dim 128 read from
    # the config (5120 / 32 = 160 would be wrong), max 131072, bf16.
    m = real("mistralai--Mistral-Small-3.1-24B-Instruct-2503")
    assert len(m.layers) == 40
    assert _shape(m) == {("full_attention", 8, 128, None)}
    assert m.model_sliding_window is None
    assert (m.max_position_embeddings, m.dtype) == (131072, "bfloat16")
    assert ENCODER_CACHE_NOTE in m.warnings


# --- errors that name the real cause --------------------------------------------------------

def test_pooling_architecture_without_adapter_is_refused_as_such() -> None:
    # vLLM 0.34 registers JinaVLForRanking only as a pooling model over Qwen2-VL's language model
    config = edited("meta-llama--Llama-3.1-8B", ("architectures",), ["JinaVLForRanking"])
    with pytest.raises(UnsupportedError) as info:
        describe_model(config, source="edited")
    assert "multimodal pooling model" in info.value.message
    assert "num_hidden_layers" not in info.value.message


def test_architecture_vllm_no_longer_serves() -> None:
    # registry.py _PREVIOUSLY_SUPPORTED_MODELS: "XverseForCausalLM": "0.23.0"
    config = edited("meta-llama--Llama-3.1-8B", ("architectures",), ["XverseForCausalLM"],
                    ("model_type",), "xverse")
    with pytest.raises(UnsupportedError, match=r"XverseForCausalLM was supported in vLLM until v0\.23\.0"):
        describe_model(config, source="edited")


def test_missing_adapter_is_not_reported_as_a_missing_field() -> None:
    # an architecture vLLM serves through an adapter kvplan lacks: the message names the missing
    # adapter (state-space layers), not num_hidden_layers (which is deleted here on purpose)
    config = edited("meta-llama--Llama-3.1-8B", ("architectures",), ["Qwen4ExpForCausalLM"],
                    ("num_hidden_layers",), DELETE)
    with pytest.raises(UnsupportedError) as info:
        describe_model(config, source="edited")
    assert "kvplan has no adapter" in info.value.message
    assert "num_hidden_layers" not in info.value.message


def test_type_unknown_to_transformers_names_the_missing_adapter() -> None:
    # hand-made, shaped like THUDM/chatglm3-6b (num_layers, multi_query_group_num: a type vLLM
    # reads with a config class of its own) under a made-up name, so that it stays unknown once
    # chatglm gets its adapter: the refusal names the missing adapter and transformers, never a
    # missing num_hidden_layers
    config = {"architectures": ["GlmLikeModel"], "model_type": "glm_like", "num_layers": 28,
              "num_attention_heads": 32, "multi_query_group_num": 2, "hidden_size": 4096}
    with pytest.raises(UnsupportedError) as info:
        describe_model(config, source="glm_like")
    assert "no kvplan adapter for model_type 'glm_like'" in info.value.message
    assert "transformers has no configuration class" in info.value.message
    assert "num_hidden_layers" not in info.value.message


def test_transformers_default_fills_an_absent_field() -> None:
    # Phi3Config defaults num_hidden_layers to 32: a phi3 config without it still plans, with 32
    # layers (a field transformers defaults is never required)
    config = edited("microsoft--phi-4", ("num_hidden_layers",), DELETE)
    m = describe_model(config, source="edited")
    assert len(m.layers) == 32


def test_unknown_model_type_names_transformers() -> None:
    config = {"architectures": ["FooBarForCausalLM"], "model_type": "foobar_unknown",
              "num_hidden_layers": 2}
    with pytest.raises(UnsupportedError, match="transformers has no configuration class"):
        describe_model(config, source="foo")


def test_transformers_validation_error_is_a_config_error() -> None:
    config = edited("microsoft--phi-4", ("num_attention_heads",), "forty")
    with pytest.raises(ConfigError, match="Phi3Config"):
        describe_model(config, source="edited")


def test_mla_config_of_a_native_mla_class_plans_mla_on_every_layer() -> None:
    # an MLA model type (vLLM's is_deepseek_mla list) with no fast adapter, whose vLLM class
    # builds MLAAttention (registry: glm4_moe_lite.py): one latent row per layer and token
    config = edited("deepseek-ai--DeepSeek-V3", ("architectures",), ["Glm4MoeLiteForCausalLM"],
                    ("model_type",), "glm4_moe_lite")
    desc = describe_model(config, source="edited")
    assert desc.use_mla and len(desc.layers) == 61
    assert {(layer.kind, layer.head_size, layer.head_size_v) for layer in desc.layers} == {
        (LayerKind.MLA, 512 + 64, 0)}
    assert desc.layers[0].name == "model.layers.0.self_attn.attn"


def test_mla_config_on_the_transformers_backend_is_refused() -> None:
    # vLLM's Transformers backend picks its attention class at run time: kvplan refuses rather
    # than guess, naming MLA
    config = edited("deepseek-ai--DeepSeek-V3", ("architectures",), ["TransformersForCausalLM"],
                    ("model_type",), "glm4_moe_lite")
    with pytest.raises(UnsupportedError, match="multi-head latent attention"):
        describe_model(config, source="edited")


# --- families without a real config yet (hand-made dicts, one branch each) ------------------
# No byte-exact published config of Phi-3.5-MoE, Ministral 3 / Devstral or Gemma 3 27B was found
# (tests/data/hf-configs/PROVENANCE.md, "Not found"); these dicts carry only the fields the
# branch under test reads, with the published models' values.

def test_phimoe_window_applies_to_every_layer() -> None:
    # PhiMoEForCausalLM → phimoe.py PhiMoEAttention: Attention(...) with no per-layer window, and
    # PhimoeConfig derives no layer_types → CacheConfig.sliding_window = 131072 on all 32 layers;
    # 8 KV heads, head size 4096 / 32 = 128 (PhimoeConfig has no head_dim)
    config = {"architectures": ["PhiMoEForCausalLM"], "model_type": "phimoe",
              "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
              "num_key_value_heads": 8, "sliding_window": 131072,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
    m = describe_model(config, source="hand-made phimoe")
    assert len(m.layers) == 32
    assert _shape(m) == {("sliding_window", 8, 128, 131072)}


def test_ministral3_text_config_in_a_mistral3_wrapper() -> None:
    # Mistral3ForConditionalGeneration with a "ministral3" text config (Ministral 3 8B shape):
    # transformers' Ministral3Config, vLLM's MistralForCausalLM (LlamaAttention); sliding_window
    # null → full attention; 34 layers, 8 KV heads, head_dim 128; max 262144
    config = {"architectures": ["Mistral3ForConditionalGeneration"], "model_type": "mistral3",
              "torch_dtype": "bfloat16",
              "text_config": {"model_type": "ministral3", "hidden_size": 4096,
                              "num_hidden_layers": 34, "num_attention_heads": 32,
                              "num_key_value_heads": 8, "head_dim": 128,
                              "max_position_embeddings": 262144, "sliding_window": None}}
    m = describe_model(config, source="hand-made ministral3")
    assert len(m.layers) == 34
    assert _shape(m) == {("full_attention", 8, 128, None)}
    assert m.max_position_embeddings == 262144
    assert ENCODER_CACHE_NOTE in m.warnings


def test_gemma3_without_max_position_embeddings_takes_the_transformers_default() -> None:
    # Gemma 3 27B's text_config has no max_position_embeddings: Gemma3TextConfig's default
    # 131072 applies (the fast Gemma 3 adapter asks transformers only for this absent field).
    # 62 layers, sliding_window_pattern 6 → layers 5, 11, ..., 59 full (10), 52 sliding 1024;
    # 16 KV heads, head_dim 128
    config = {"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
              "torch_dtype": "bfloat16",
              "text_config": {"model_type": "gemma3_text", "hidden_size": 5376,
                              "num_hidden_layers": 62, "num_attention_heads": 32,
                              "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024}}
    m = describe_model(config, source="hand-made gemma3")
    assert m.max_position_embeddings == 131072
    assert m.kind_counts() == {"sliding_window": 52, "full_attention": 10}
    assert _shape(m) == {("sliding_window", 16, 128, 1024), ("full_attention", 16, 128, None)}


def test_qwen3_vl_32b_sibling_plans_with_no_new_code() -> None:
    # another size of the Qwen3-VL family: text_config 64 layers, 8 KV heads, head_dim 128 (read;
    # 5120 / 64 = 80 would be wrong), max 262144, dtype from text_config (bfloat16)
    m = real("Qwen--Qwen3-VL-32B-Instruct")
    assert len(m.layers) == 64
    assert _shape(m) == {("full_attention", 8, 128, None)}
    assert (m.max_position_embeddings, m.dtype) == (262144, "bfloat16")


def test_cohere2_sliding_layers_see_one_token_more() -> None:
    # Cohere2ForCausalLM → commandr.py CohereAttention: a sliding_attention layer passes
    # per_layer_sliding_window = config.sliding_window + 1 (its training convention sees
    # [pos - window, pos]); full layers none, and CacheConfig.sliding_window is cleared because
    # layer_types is set. 4 layers (3 sliding, 1 full), 2 KV heads, head size 1024 / 8 = 128
    config = {"architectures": ["Cohere2ForCausalLM"], "model_type": "cohere2",
              "num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8,
              "num_key_value_heads": 2, "sliding_window": 4096, "max_position_embeddings": 8192,
              "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
              "torch_dtype": "bfloat16"}
    m = describe_model(config, source="hand-made cohere2")
    assert [layer.sliding_window for layer in m.layers] == [4097, 4097, 4097, None]
    assert m.model_sliding_window is None


def test_per_layer_window_rule_comes_from_vllms_classes() -> None:
    # tools/vllm_layer_names.py builds each class with alternating layer_types and a 128-token
    # window and reads each Attention's sliding_window: granitemoe.py passes
    # per_layer_sliding_window from granite_layer_attn_params, Qwen2MoeForCausalLM ignores
    # layer_types, Cohere2 adds one token
    from kvplan.models.resolution.layer_names import sliding_window_rule

    assert sliding_window_rule(("GraniteMoeSWAForCausalLM",)) == (True, 0)
    assert sliding_window_rule(("Qwen2MoeForCausalLM",)) == (False, 0)
    assert sliding_window_rule(("Cohere2ForCausalLM",)) == (True, 1)
    assert sliding_window_rule(("NoSuchForCausalLM",)) == (None, 0)
