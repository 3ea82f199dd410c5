"""DeepSeek-VL2 (model_type deepseek_vl_v2): its language_config is a DeepseekV2Config.

vLLM 0.34.0: transformers_utils/configs/deepseek_vl2.py builds
text_config = DeepseekVLV2TextConfig(**language_config), a transformers DeepseekV2Config, so every
field the file leaves out takes that class's default (transformers 5.20.2
models/deepseek_v2/configuration_deepseek_v2.py); models/deepseek_vl2.py plans that text config.
"""

from __future__ import annotations

from kvplan.models import describe_model
from tests.models.helpers import edited, one, real

VL2 = "deepseek-ai--deepseek-vl2"


def test_deepseek_vl2_language_model_takes_deepseekv2config_defaults() -> None:
    m = real(VL2)
    # language_config has no num_hidden_layers → DeepseekV2Config default 32; no kv_lora_rank
    # and no qk_rope_head_dim → 512 and 64; model_type deepseek_v2 with kv_lora_rank set →
    # is_deepseek_mla (model_arch_config_convertor.py L294-343): 32 MLA layers of one latent
    # "head" of 512 + 64 = 576, no V
    assert m.kind_counts() == {"mla": 32}
    assert m.use_mla
    assert one(layer.head_size for layer in m.layers) == 576
    assert one(layer.num_kv_heads for layer in m.layers) == 1
    assert m.max_position_embeddings == 4096  # language_config.max_position_embeddings
    assert m.dtype == "bfloat16"
    # no top-level architectures in the file (DeepseekVLV2Config would default it): found by
    # model_type
    assert m.model_type == "deepseek_vl_v2" and m.architectures == ()
    # every default used is said
    for key in ("num_hidden_layers", "kv_lora_rank", "qk_rope_head_dim"):
        assert any(f"language_config.{key}" in w for w in m.warnings), key


def test_tiny_style_mha_language_config() -> None:
    # a -tiny-style language_config (hand-edited): kv_lora_rank null, qk dims 0 →
    # deepseek_v2.py L1280 use_mha → DeepseekAttention, plain MHA with hidden // heads:
    # 1280 // 10 = 128 per head, num_key_value_heads 10, 12 layers
    config = edited(VL2, ("language_config", "kv_lora_rank"), None,
                    ("language_config", "qk_rope_head_dim"), 0,
                    ("language_config", "qk_nope_head_dim"), 0,
                    ("language_config", "hidden_size"), 1280,
                    ("language_config", "num_attention_heads"), 10,
                    ("language_config", "num_key_value_heads"), 10,
                    ("language_config", "num_hidden_layers"), 12)
    m = describe_model(config, source="tiny-style")
    assert m.kind_counts() == {"full_attention": 12}
    assert one(layer.num_kv_heads for layer in m.layers) == 10
    assert one(layer.head_size for layer in m.layers) == 128
    assert not m.use_mla
