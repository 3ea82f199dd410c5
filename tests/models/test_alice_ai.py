"""AliceAIForCausalLM: Kimi delta attention (KDA) state layers and gated full attention.

vLLM 0.34.0 (registered from 0.33.0 on): registry.py L76; alice_ai.py AliceAIDecoderBlock
(L334–348: layer_types[i] picks KimiGatedDeltaNetAttention at `{prefix}.linear_attn` or
Qwen3NextAttention at `{prefix}.self_attn`), _make_kimi_kda_config (L118: the linear_* fields),
get_mamba_state_shape_from_config (kda_state_shape) and kda_state_dtype without an SSM dtype
(fp32 recurrent state). No published config.json was found, so the config is hand-made from the
fields vLLM reads, on purpose.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import FullAttentionSpec, MambaSpec
from kvplan.errors import ConfigError, StartupError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.models.helpers import check_h100_x8, h100_tp8, indices


def _config(**changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["AliceAIForCausalLM"], "model_type": "alice_ai",
        "torch_dtype": "bfloat16", "num_hidden_layers": 8, "hidden_size": 4096,
        "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 2,
        "linear_num_key_heads": 32, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
        "max_position_embeddings": 262144}
    config.update(changes)
    return config


def test_layers() -> None:
    m = describe_model(_config(), source="hand-made")
    # (3 linear + 1 full) × 2 → full at 3 and 7, 6 KDA
    assert indices(m, LayerKind.FULL_ATTENTION) == [3, 7]
    assert m.kind_counts() == {"kda": 6, "full_attention": 2}
    assert m.layers[0].name == "model.layers.0.linear_attn"
    assert m.layers[3].name == "model.layers.3.self_attn.attn"
    assert (m.layers[3].num_kv_heads, m.layers[3].head_size) == (4, 128)
    assert m.family == "alice_ai" and m.is_hybrid


def test_specs_tp8() -> None:
    m = describe_model(_config(), source="hand-made")
    specs = {lp.name: lp.spec for lp in build(m, h100_tp8()).layers}
    kda, full = specs["model.layers.0.linear_attn"], specs["model.layers.3.self_attn.attn"]
    assert isinstance(kda, MambaSpec) and isinstance(full, FullAttentionSpec)
    # conv (3, 3 · 32 · 128 / 8 = 1536) bf16 = 9,216 B; recurrent (32 / 8 = 4, 128, 128) fp32
    # = 262,144 B → 271,360 B
    assert kda.shapes == ((3, 1536), (4, 128, 128)) and kda.dtypes == ("bfloat16", "float32")
    assert kda.state_content_size_bytes == 271_360
    # 4 KV heads over TP 8 → 1 per rank (replicated), head 128
    assert (full.num_kv_heads, full.head_size) == (1, 128)


def test_bad_configs() -> None:
    with pytest.raises(ConfigError, match="matching key/value"):
        describe_model(_config(linear_num_value_heads=64), source="hand-made")
    with pytest.raises(ConfigError, match="layer_types"):
        describe_model(_config(layer_types=None), source="hand-made")


def test_refused_before_0_33() -> None:
    m = describe_model(_config(), source="hand-made")
    with pytest.raises(UnsupportedError, match="from 0.33.0 on"):
        build(m, h100_tp8(vllm_version="0.32.0"))


def test_cli_h100_x8(tmp_path) -> None:
    # vLLM has no configuration class for alice_ai: a checkpoint carries its own (auto_map),
    # which vLLM runs only with --trust-remote-code
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(_config(auto_map={"AutoConfig": "configuration_alice.AliceConfig"})))
    out = check_h100_x8(cfg, "--trust-remote-code")
    assert {g["kind"] for g in out["groups"]} == {"mamba", "full_attention"}
    assert {g["natural_page_size_bytes"] for g in out["groups"] if g["kind"] == "mamba"} == {
        271_360}
    assert sum(g["num_layers"] for g in out["groups"] if g["kind"] == "full_attention") == 2


def test_pipeline_parallel_refused_as_vllm_does() -> None:
    # vLLM 0.34: AliceAIForCausalLM is not SupportsPP (its forward also raises
    # "AliceAI does not support pipeline parallelism")
    m = describe_model(_config(), source="alice")
    assert not m.supports_pipeline_parallel
    with pytest.raises(StartupError, match="SupportsPP"):
        build(m, h100_tp8(tensor_parallel_size=4, pipeline_parallel_size=2))
