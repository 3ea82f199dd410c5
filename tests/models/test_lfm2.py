"""LFM2 short-conv hybrid (hand-written config from transformers' Lfm2Config fields).

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

import pytest

from kvplan.errors import ConfigError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind, ShortConvDims
from tests.models.helpers import indices, of_kind, one

CONFIG = {"architectures": ["Lfm2ForCausalLM"], "model_type": "lfm2", "torch_dtype": "bfloat16",
          "num_hidden_layers": 6, "hidden_size": 2048, "num_attention_heads": 32,
          "num_key_value_heads": 8, "conv_L_cache": 3, "conv_dim": 2048,
          "full_attn_idxs": [2, 5]}


def test_lfm2_full_attn_idxs() -> None:
    m = describe_model(CONFIG, source="hand-written")
    # no layer_types → attention at full_attn_idxs 2, 5; the other 4 layers short conv
    assert indices(m, LayerKind.FULL_ATTENTION) == [2, 5]
    assert m.kind_counts() == {"short_conv": 4, "full_attention": 2}
    # attention head = 2048 / 32 = 64, 8 KV heads
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    assert one((layer.num_kv_heads, layer.head_size) for layer in full) == (8, 64)
    # conv state (L_cache - 1, conv_dim): conv_dim 2048, conv_L_cache 3
    assert one(layer.short_conv for layer in of_kind(m, LayerKind.SHORT_CONV)) == ShortConvDims(
        conv_dim=2048, l_cache=3)
    assert m.layers[0].name == "model.layers.0.short_conv"


def test_lfm2_layer_types_win_and_conv_dim_is_required() -> None:
    config = {**CONFIG, "layer_types": ["conv", "full_attention", "conv", "conv", "conv", "conv"]}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.FULL_ATTENTION) == [1]
    del config["conv_dim"]
    with pytest.raises(ConfigError, match="'conv_dim'"):
        describe_model(config, source="hand-written")
