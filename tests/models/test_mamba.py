"""Mamba-family hybrids: Nemotron-H 56B (real config); Jamba, Mamba1, Mamba2, Falcon-H1 and
Granite-4.0-H (hand-written configs from their transformers configuration classes).

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

from kvplan.models import describe_model
from kvplan.models.description import LayerKind, Mamba1Dims, Mamba2Dims
from tests.models.helpers import indices, of_kind, one, real


def test_nemotron_h_56b() -> None:
    m = real("nvidia--Nemotron-H-56B-Base-8K")
    # hybrid_override_pattern (118 chars) = "M-M-M-M*" + 9 × "-M-M-M-M-M*" + "-M-M-M-M-M-":
    # M = 4 + 9×5 + 5 = 54, * = 1 + 9 = 10, - = 3 + 9×5 + 6 = 54
    assert m.kind_counts() == {"mamba2": 54, "no_kv": 54, "full_attention": 10}
    assert len(m.layers) == 118
    # "*" at 7, then every 11 positions: 7, 18, 29, ..., 106
    assert indices(m, LayerKind.FULL_ATTENTION) == [7 + 11 * k for k in range(10)]
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    # 8 KV heads; no head_dim → NemotronHConfig default 128 (= the file's attention_head_dim)
    assert one(layer.num_kv_heads for layer in full) == 8
    assert one(layer.head_size for layer in full) == 128
    assert m.layers[7].name == "model.layers.7.mixer.attn"
    assert m.layers[0].name == "model.layers.0.mixer" and m.layers[1].kind is LayerKind.NO_KV
    # mamba: mamba_num_heads 256 × mamba_head_dim 64 = 16384; ssm_state_size 256;
    # conv_kernel 4; n_groups 8
    assert one(layer.mamba2 for layer in of_kind(m, LayerKind.MAMBA2)) == Mamba2Dims(
        intermediate_size=16384, state_size=256, conv_kernel=4, n_groups=8, num_heads=256,
        head_dim=64)
    # no mamba_ssm_cache_dtype in the file → vLLM's NemotronH hook sets float32
    assert m.mamba_ssm_dtype == "float32"
    assert m.is_hybrid
    assert m.num_nextn_predict_layers == 0
    assert m.warnings == ()


def test_jamba() -> None:
    # hand-written Jamba config (JambaConfig fields): 8 layers, attn_layer_period 8, offset 4 →
    # attention at layer 4 only; the other 7 are Mamba1
    config = {"architectures": ["JambaForCausalLM"], "model_type": "jamba",
              "torch_dtype": "bfloat16", "num_hidden_layers": 8, "hidden_size": 4096,
              "num_attention_heads": 32, "num_key_value_heads": 8, "attn_layer_period": 8,
              "attn_layer_offset": 4, "mamba_d_state": 16, "mamba_d_conv": 4,
              "mamba_expand": 2}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.FULL_ATTENTION) == [4]
    assert m.kind_counts() == {"mamba1": 7, "full_attention": 1}
    # attention: 8 KV heads, 4096 / 32 = 128, named model.layers.4.attn
    assert (m.layers[4].num_kv_heads, m.layers[4].head_size) == (8, 128)
    assert m.layers[4].name == "model.layers.4.attn"
    # mamba: mamba_expand 2 × hidden 4096 = 8192, state 16, conv 4
    assert one(layer.mamba1 for layer in of_kind(m, LayerKind.MAMBA1)) == Mamba1Dims(
        intermediate_size=8192, state_size=16, conv_kernel=4)
    assert m.layers[0].name == "model.layers.0.mixer"


def test_mamba1() -> None:
    # hand-written MambaConfig: 4 layers, intermediate_size 1536, state_size 16, conv_kernel 4
    config = {"architectures": ["MambaForCausalLM"], "model_type": "mamba",
              "torch_dtype": "float16", "num_hidden_layers": 4, "hidden_size": 768,
              "intermediate_size": 1536, "state_size": 16, "conv_kernel": 4}
    m = describe_model(config, source="hand-written")
    assert m.kind_counts() == {"mamba1": 4}
    assert one(layer.mamba1 for layer in m.layers) == Mamba1Dims(
        intermediate_size=1536, state_size=16, conv_kernel=4)
    assert m.layers[0].name == "backbone.layers.0.mixer"
    assert m.dtype == "float16"
    assert not m.is_hybrid


def test_mamba2() -> None:
    # hand-written Mamba2Config: expand 2 × hidden 2560 = 5120 = num_heads 80 × head_dim 64;
    # n_groups 1, state 128, conv 4
    config = {"architectures": ["Mamba2ForCausalLM"], "model_type": "mamba2",
              "torch_dtype": "bfloat16", "num_hidden_layers": 2, "hidden_size": 2560,
              "expand": 2, "num_heads": 80, "head_dim": 64, "n_groups": 1,
              "state_size": 128, "conv_kernel": 4}
    m = describe_model(config, source="hand-written")
    assert one(layer.mamba2 for layer in m.layers) == Mamba2Dims(
        intermediate_size=5120, state_size=128, conv_kernel=4, n_groups=1, num_heads=80,
        head_dim=64)


def test_falcon_h1_parallel_attention_and_mamba() -> None:
    # hand-written FalconH1Config: 2 layers, each with attention (2 KV heads × head_dim 64) and a
    # parallel Mamba2 branch: mamba_d_ssm 1536, mamba_n_heads 24, mamba_d_head "auto" →
    # 1536 / 24 = 64, mamba_n_groups 1, mamba_d_state 128, mamba_d_conv 4
    config = {"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1",
              "torch_dtype": "bfloat16", "num_hidden_layers": 2, "hidden_size": 1024,
              "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
              "mamba_d_ssm": 1536, "mamba_n_heads": 24, "mamba_d_head": "auto",
              "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4}
    m = describe_model(config, source="hand-written")
    assert m.kind_counts() == {"full_attention": 2, "mamba2": 2}
    # vLLM registers the SSM branch of layer i as model.{num_hidden_layers + i}.mixer
    assert [layer.name for layer in m.layers] == [
        "model.layers.0.attn", "model.2.mixer", "model.layers.1.attn", "model.3.mixer"]
    assert [layer.index for layer in m.layers] == [0, 0, 1, 1]
    assert one(layer.mamba2 for layer in of_kind(m, LayerKind.MAMBA2)) == Mamba2Dims(
        intermediate_size=1536, state_size=128, conv_kernel=4, n_groups=1, num_heads=24,
        head_dim=64)
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    assert one((layer.num_kv_heads, layer.head_size) for layer in full) == (2, 64)


def test_granite_4_0_h() -> None:
    # hand-written GraniteMoeHybridConfig: layer_types [mamba, mamba, attention, mamba];
    # attention head = 1536 / 12 = 128 with 4 KV heads; mamba: mamba_expand 2 × 1536 = 3072,
    # mamba_n_heads 48, mamba_d_head auto → 3072 / 48 = 64, groups 1, state 128, conv 4
    config = {"architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
              "torch_dtype": "bfloat16", "num_hidden_layers": 4, "hidden_size": 1536,
              "num_attention_heads": 12, "num_key_value_heads": 4,
              "layer_types": ["mamba", "mamba", "attention", "mamba"], "mamba_expand": 2,
              "mamba_n_heads": 48, "mamba_n_groups": 1, "mamba_d_state": 128,
              "mamba_d_conv": 4}
    m = describe_model(config, source="hand-written")
    assert indices(m, LayerKind.FULL_ATTENTION) == [2]
    assert m.layers[2].name == "model.layers.2.self_attn.attn"
    assert (m.layers[2].num_kv_heads, m.layers[2].head_size) == (4, 128)
    assert one(layer.mamba2 for layer in of_kind(m, LayerKind.MAMBA2)) == Mamba2Dims(
        intermediate_size=3072, state_size=128, conv_kernel=4, n_groups=1, num_heads=48,
        head_dim=64)
    # transformers 5 names ("linear_attention"/"full_attention") give the same layers
    config["layer_types"] = ["linear_attention", "linear_attention", "full_attention",
                             "linear_attention"]
    assert describe_model(config, source="hand-written").layers == m.layers
