"""ChatGLM3-6B and its sibling GLM-4-9B-chat (model_type chatglm): vLLM's own ChatGLMConfig.

Every expected number is worked out by hand from the config and vLLM 0.34.0's source
(transformers_utils/configs/chatglm.py = ChatGLMConfig; model_executor/models/chatglm.py = model).
"""

from __future__ import annotations

import pytest

from kvplan.errors import UnsupportedError
from kvplan.models import describe_model
from tests.models.helpers import DELETE, edited, one, real

NAME = "transformer.encoder.layers.{}.self_attention.attn"


def test_chatglm3_6b() -> None:
    m = real("THUDM--chatglm3-6b")
    # num_layers 28 (ChatGLMConfig attribute_map num_hidden_layers → num_layers;
    # chatglm.py GLMTransformer builds config.num_layers GLMBlocks), all full attention
    assert m.kind_counts() == {"full_attention": 28}
    assert m.family == "chatglm" and m.architectures == ("ChatGLMModel",)
    # chatglm.py L61-65: multi_query_attention true → KV heads = multi_query_group_num 2
    assert one(layer.num_kv_heads for layer in m.layers) == 2
    # chatglm.py L75: head_dim = hidden_size 4096 // num_attention_heads 32 = 128 (K and V)
    assert one(layer.head_size for layer in m.layers) == 128
    assert one(layer.head_size_v for layer in m.layers) is None
    assert one(layer.sliding_window for layer in m.layers) is None
    # chatglm.py L281 prefix "transformer.encoder.layers", L213 "self_attention", L121 "attn"
    assert [layer.name for layer in m.layers[:2]] == [NAME.format(0), NAME.format(1)]
    # ChatGLMConfig: max_position_embeddings = seq_length 8192; no other length key → 8192
    assert m.max_position_embeddings == 8192
    assert m.dtype == "float16"  # torch_dtype
    assert m.warnings == ()


def test_glm_4_9b_chat_sibling_needs_no_new_code() -> None:
    m = real("THUDM--glm-4-9b-chat")
    # num_hidden_layers 40 = num_layers 40; MQA with multi_query_group_num 2; 4096 // 32 = 128
    assert m.kind_counts() == {"full_attention": 40}
    assert one(layer.num_kv_heads for layer in m.layers) == 2
    assert one(layer.head_size for layer in m.layers) == 128
    # seq_length 131072 (rope_ratio 500 only changes rope theta, chatglm.py L98-104)
    assert m.max_position_embeddings == 131072
    assert m.dtype == "bfloat16"


def test_without_multi_query_attention_every_head_has_kv() -> None:
    # chatglm.py L61-65: multi_query_attention false → KV heads = num_attention_heads 32, even
    # though multi_query_group_num 2 is still in the file
    config = edited("THUDM--chatglm3-6b", ("multi_query_attention",), False)
    m = describe_model(config, source="edited")
    assert one(layer.num_kv_heads for layer in m.layers) == 32


def test_absent_fields_take_the_chatglmconfig_defaults() -> None:
    # ChatGLMConfig defaults: num_layers 28, seq_length 2048 (→ max_position_embeddings);
    # the alias num_hidden_layers wins over num_layers when both are given (attribute_map)
    config = edited("THUDM--chatglm3-6b", ("num_layers",), DELETE, ("seq_length",), DELETE)
    m = describe_model(config, source="edited")
    assert m.kind_counts() == {"full_attention": 28}
    assert m.max_position_embeddings == 2048
    assert any("seq_length" in w and "2048" in w for w in m.warnings)
    config = edited("THUDM--glm-4-9b-chat", ("num_layers",), 12)
    assert len(describe_model(config, source="edited").layers) == 40


def test_kv_channels_is_not_the_head_size() -> None:
    # chatglm.py L75 never reads kv_channels: 4096 // 32 = 128 even if kv_channels says 96
    config = edited("THUDM--chatglm3-6b", ("kv_channels",), 96)
    m = describe_model(config, source="edited")
    assert one(layer.head_size for layer in m.layers) == 128
    assert any("kv_channels" in w for w in m.warnings)


def test_glm_4v_config_is_refused_with_vllms_reason() -> None:
    # chatglm.py ChatGLMForCausalLM.__init__ raises for a config with vision_config
    config = edited("THUDM--glm-4-9b-chat", ("vision_config",), {"num_hidden_layers": 63})
    with pytest.raises(UnsupportedError, match="GLM4VForCausalLM"):
        describe_model(config, source="glm-4v")
