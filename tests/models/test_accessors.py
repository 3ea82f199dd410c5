"""vLLM's generic ModelConfig accessors on transformers-resolved configs (kvplan.models.resolution.accessors).

Expected values by hand from the config files and vLLM 0.34's model_arch_config_convertor.py.
"""

from __future__ import annotations

from kvplan.models.resolution import accessors as acc
from kvplan.models.resolution.resolve import Resolved, resolve
from tests.models.helpers import read_config


def _r(name: str) -> Resolved:
    return resolve(read_config(name)[0], name)


def test_mla_head_size_and_kv_heads() -> None:
    # DeepSeek-V3: is_deepseek_mla (deepseek_v3 with kv_lora_rank) → head size kv_lora_rank 512 +
    # qk_rope_head_dim 64 = 576; get_total_num_kv_heads still reads num_key_value_heads 128
    r = _r("deepseek-ai--DeepSeek-V3")
    assert acc.is_deepseek_mla(r)
    assert acc.head_size(r) == 576
    assert acc.total_num_kv_heads(r) == 128
    assert acc.num_hidden_layers(r) == 61


def test_kimi_k2_resolves_with_vllm_s_deepseek_v3_class() -> None:
    # vLLM registers DeepseekV3Config for model_type kimi_k2 (transformers has no kimi_k2)
    r = _r("moonshotai--Kimi-K2-Instruct")
    assert type(r.hf_config).__name__ == "DeepseekV3Config"
    assert acc.is_deepseek_mla(r) and acc.head_size(r) == 512 + 64


def test_falcon_multi_query_has_one_kv_head() -> None:
    # FalconModelArchConfigConvertor: multi_query without new_decoder_architecture → 1 KV head
    config = {"model_type": "falcon", "num_attention_heads": 71, "hidden_size": 4544,
              "multi_query": True, "new_decoder_architecture": False}
    r = resolve(config, "hand-made falcon-7b shape")
    assert acc.total_num_kv_heads(r) == 1
    assert acc.head_size(r) == 4544 // 71  # 64


def test_max_len_and_window_of_a_sliding_model() -> None:
    # Mistral-7B-v0.1: max_position_embeddings 32768, sliding_window 4096, no layer_types →
    # CacheConfig.sliding_window 4096
    r = _r("mistralai--Mistral-7B-v0.1")
    assert acc.derive_max_model_len(r) == (32768, "max_position_embeddings")
    assert acc.cache_sliding_window(r) == 4096
    # gpt-oss: layer_types mixes sliding and full → no model-level window
    r = _r("openai--gpt-oss-20b")
    assert acc.sliding_window(r) == 128 and acc.cache_sliding_window(r) is None


def test_class_flags_from_the_registry() -> None:
    # Qwen3.5 (IsHybrid; layer_types has linear_attention) is hybrid; Mamba is attention-free
    r = _r("Qwen--Qwen3.5-27B")
    assert acc.is_hybrid("Qwen3_5ForConditionalGeneration", r)
    assert not acc.is_hybrid("LlamaForCausalLM", _r("meta-llama--Llama-3.1-8B"))
    assert acc.is_attention_free("MambaForCausalLM")
    assert acc.has_noops("DeciLMForCausalLM")


def test_hybrid_class_with_attention_only_layer_types_is_not_hybrid() -> None:
    # ModelConfig.is_hybrid: granite-4.0-micro uses GraniteMoeHybridForCausalLM (IsHybrid) with
    # layer_types all "attention" → not hybrid
    config = {"model_type": "granitemoehybrid", "num_hidden_layers": 2,
              "layer_types": ["attention", "attention"]}
    r = resolve(config, "hand-made granite micro shape")
    assert not acc.is_hybrid("GraniteMoeHybridForCausalLM", r)
