"""Llama-3.3-Nemotron-Super-49B-v1 (model_type nemotron-nas, DeciLMForCausalLM): per-layer
attention from block_configs.

Expected numbers worked out by hand from the config and vLLM 0.34.0
model_executor/models/nemotron_nas.py DeciLMDecoderLayer (L123-200).
"""

from __future__ import annotations

import pytest

from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.models.helpers import edited, indices, one, real

SUPER = "nvidia--Llama-3_3-Nemotron-Super-49B-v1"


def test_nemotron_super_49b() -> None:
    m = real(SUPER)
    # 80 blocks: 49 with attention (n_heads_in_group 8), 31 with attention no_op
    # (nemotron_nas.py L148: no attention module → no KV cache for those layers)
    assert m.kind_counts() == {"full_attention": 49, "no_kv": 31}
    no_op = [6, 7, 11, *range(42, 52), *range(53, 71)]  # read from block_configs[i].attention
    assert indices(m, LayerKind.NO_KV) == no_op
    attn = [layer for layer in m.layers if layer.kind is LayerKind.FULL_ATTENTION]
    # L149-150: KV heads = num_attention_heads 64 // n_heads_in_group 8 = 8
    assert one(layer.num_kv_heads for layer in attn) == 8
    # LlamaAttention (llama.py L158-159): no head_dim → hidden 8192 // 64 heads = 128
    assert one(layer.head_size for layer in attn) == 128
    assert one(layer.sliding_window for layer in attn) is None
    assert attn[0].name == "model.layers.0.self_attn.attn"
    # max_position_embeddings 131072; rope llama3 is not multiplied by its factor 8
    assert m.max_position_embeddings == 131072
    assert m.dtype == "bfloat16"
    assert m.family == "nemotron_nas" and m.warnings == ()


def test_per_layer_kv_heads_differ() -> None:
    # hand-edited: block 0 with n_heads_in_group 4 → 64 // 4 = 16 KV heads, block 1 keeps 8
    config = edited(SUPER, ("block_configs", 0, "attention", "n_heads_in_group"), 4)
    m = describe_model(config, source="edited")
    assert [m.layers[0].num_kv_heads, m.layers[1].num_kv_heads] == [16, 8]


def test_replace_with_linear_is_refused() -> None:
    # vLLM only reads attention.no_op; a replace_with_linear block is not implemented there
    config = edited(SUPER, ("block_configs", 3, "attention", "replace_with_linear"), True)
    with pytest.raises(UnsupportedError, match=r"block_configs\[3\].*replace_with_linear"):
        describe_model(config, source="edited")


def test_missing_or_short_block_configs_are_config_errors() -> None:
    config = edited(SUPER, ("block_configs",), [])
    with pytest.raises(ConfigError, match="block_configs"):
        describe_model(config, source="edited")
    config = edited(SUPER, ("block_configs", 0, "attention", "n_heads_in_group"), None)
    with pytest.raises(ConfigError, match="n_heads_in_group"):
        describe_model(config, source="edited")
