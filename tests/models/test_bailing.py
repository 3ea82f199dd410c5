"""Bailing hybrids: BailingMoeV2_5ForCausalLM (MLA + lightning linear attention),
BailingMoeV3ForCausalLM (MLA + Kimi delta attention) and BailingMoeV3VLForConditionalGeneration.

vLLM 0.34.0 (the same code in 0.31–0.33): registry.py L81–82 / L367; bailing_moe_linear.py
is_linear_layer (L68) and get_mamba_state_shape_from_config (L768: linear_attention_state_shape
of num_attention_heads × config.head_dim); bailing_moe_v3.py _is_kda_layer (L131) and
_get_kda_state_shape_for_config (L140); bailing_moe_v3_vl.py L371 (BailingMoeV3ForCausalLM on
text_config under `language_model`). The text models' model_type bailing_hybrid resolves to
transformers' BailingHybridConfig, whose __post_init__ sets head_dim = qk_rope_head_dim; the VL's
text config is vLLM's BailingMoeV3TextConfig, which keeps head_dim. vLLM's own functions on these
configs (oracle venv, 0.34.0) give the same shapes as the comments below.

No published config.json was found with the search tools (fragments only), so the configs are
hand-made from the configuration classes' fields, on purpose.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.serialize import contract_dict
from kvplan.engines.vllm.specs import MambaSpec, MambaType, MLAAttentionSpec
from kvplan.models import describe_model
from kvplan.models.coverage import ENCODER_CACHE_NOTE
from kvplan.models.description import LayerKind
from tests.golden import ORACLE_2026, VERSIONS, contract, load
from tests.models.helpers import check_h100_x8, h100_tp8, indices


def _text(arch: str) -> dict[str, Any]:
    return {"architectures": [arch], "model_type": "bailing_hybrid", "torch_dtype": "bfloat16",
            "num_hidden_layers": 10, "hidden_size": 4096, "num_attention_heads": 32,
            "head_dim": 128, "layer_group_size": 4, "short_conv_kernel_size": 4,
            "kv_lora_rank": 512, "qk_rope_head_dim": 64, "max_position_embeddings": 262144}


def _vl() -> dict[str, Any]:
    return {"architectures": ["BailingMoeV3VLForConditionalGeneration"],
            "model_type": "bailing_moe_v3_vl", "torch_dtype": "bfloat16",
            "text_config": {"num_hidden_layers": 12, "hidden_size": 2048,
                            "num_attention_heads": 16, "head_dim": 128, "layer_group_size": 5},
            "vision_config": {"spatial_merge_size": 2}}


def _specs(config: dict[str, Any]) -> dict[str, Any]:
    m = describe_model(config, source="hand-made")
    return {lp.name: lp.spec for lp in build(m, h100_tp8()).layers}


def test_v2_5_layers() -> None:
    m = describe_model(_text("BailingMoeV2_5ForCausalLM"), source="hand-made")
    # MLA where (i + 1) % 4 == 0: 3, 7; the trailing 8, 9 stay linear → 2 MLA + 8 linear
    assert indices(m, LayerKind.MLA) == [3, 7]
    assert m.kind_counts() == {"linear_attention": 8, "mla": 2}
    assert m.layers[3].name == "model.layers.3.self_attn.attn"
    assert m.layers[0].name == "model.layers.0.self_attn"
    # MLA head kv_lora_rank 512 + qk_rope_head_dim 64 = 576
    assert m.layers[3].head_size == 576
    # BailingHybridConfig: head_dim 128 → qk_rope_head_dim 64 (with a warning)
    lin = m.layers[0].linear_attention
    assert lin is not None and (lin.num_heads, lin.head_dim) == (32, 64)
    assert any("qk_rope_head_dim (64)" in w for w in m.warnings)
    assert m.use_mla and m.family == "bailing_v2_5"


def test_v2_5_specs_tp8() -> None:
    specs = _specs(_text("BailingMoeV2_5ForCausalLM"))
    lin, mla = specs["model.layers.0.self_attn"], specs["model.layers.3.self_attn.attn"]
    assert isinstance(lin, MambaSpec) and isinstance(mla, MLAAttentionSpec)
    # (32 / 8 = 4, 64, 64) in the model dtype: 16,384 · 2 = 32,768 B
    assert lin.shapes == ((4, 64, 64),) and lin.dtypes == ("bfloat16",)
    assert lin.mamba_type is MambaType.LINEAR
    assert lin.state_content_size_bytes == 32_768


def test_v3_layers_and_specs_tp8() -> None:
    m = describe_model(_text("BailingMoeV3ForCausalLM"), source="hand-made")
    # MLA where (i + 1) % 4 == 0 (3, 7) or i >= 10 // 4 · 4 = 8 (8, 9) → 4 MLA, 6 KDA
    assert indices(m, LayerKind.MLA) == [3, 7, 8, 9]
    assert m.kind_counts() == {"kda": 6, "mla": 4}
    specs = _specs(_text("BailingMoeV3ForCausalLM"))
    kda = specs["model.layers.0.self_attn"]
    assert isinstance(kda, MambaSpec)
    # conv (3, 3 · 32 · 64 / 8 = 768) bf16 = 4,608 B; recurrent (4, 64, 64) fp32 = 65,536 B
    assert kda.shapes == ((3, 768), (4, 64, 64)) and kda.dtypes == ("bfloat16", "float32")
    assert kda.state_content_size_bytes == 4_608 + 65_536
    assert kda.mamba_type is MambaType.GDN_ATTN


def test_v3_absent_fields_take_bailing_hybrid_defaults() -> None:
    config = {"architectures": ["BailingMoeV3ForCausalLM"], "model_type": "bailing_hybrid",
              "torch_dtype": "bfloat16"}
    m = describe_model(config, source="hand-made")
    # BailingHybridConfig: 42 layers, layer_group_size 6 → MLA at 5, 11, ..., 41 (7) and none
    # trailing (42 = 7 · 6); 32 heads, head_dim = qk_rope_head_dim 64, max positions 262144
    assert indices(m, LayerKind.MLA) == [5 + 6 * k for k in range(7)]
    assert m.kind_counts() == {"kda": 35, "mla": 7}
    kda = m.layers[0].gdn
    assert kda is not None and (kda.num_v_heads, kda.head_v_dim, kda.conv_kernel) == (32, 64, 4)
    assert m.max_position_embeddings == 262144


def test_v3_vl_layers() -> None:
    m = describe_model(_vl(), source="hand-made")
    # layer_group_size 5, 12 layers: MLA at 4, 9 and i >= 12 // 5 · 5 = 10 (10, 11)
    assert indices(m, LayerKind.MLA) == [4, 9, 10, 11]
    assert m.layers[0].name == "language_model.model.layers.0.self_attn"
    assert m.layers[4].name == "language_model.model.layers.4.self_attn.attn"
    # vLLM's BailingMoeV3TextConfig keeps head_dim 128; 16 heads; conv 4 (class default)
    kda = m.layers[0].gdn
    assert kda is not None and (kda.num_v_heads, kda.head_v_dim, kda.conv_kernel) == (16, 128, 4)
    assert ENCODER_CACHE_NOTE in m.warnings
    # no max_position_embeddings: BailingMoeV3TextConfig's 32768
    assert m.max_position_embeddings == 32768


def test_v3_vl_cli_h100_x8(tmp_path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(_vl()))
    out = check_h100_x8(cfg, "--max-model-len", "32768")
    kinds = [g["kind"] for g in out["groups"]]
    assert set(kinds) == {"mamba", "mla_attention"}
    # KDA per rank: conv (3, 3 · 16 · 128 / 8 = 768) bf16 = 4,608 B; recurrent (2, 128, 128)
    # fp32 = 131,072 B → 135,680 B
    assert {g["natural_page_size_bytes"] for g in out["groups"] if g["kind"] == "mamba"} == {
        135_680}
    # 4 MLA and 8 KDA layers in all
    assert sum(g["num_layers"] for g in out["groups"] if g["kind"] == "mla_attention") == 4
    assert sum(g["num_layers"] for g in out["groups"] if g["kind"] == "mamba") >= 8


@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_v2_5_plans_like_vllm(version: str, fix: bool) -> None:
    # golden case a06 (tests/data/golden-oracle-2026): the same MLA + linear-attention layer mix
    # through vLLM's own planner; the specs here come from the config, not from the case file
    suffix = ".patched" if fix else ""
    name = f"a06_bailing_v2_5_style_mla_linear_tp8.{version}{suffix}.json"
    exp = load(ORACLE_2026 / "expected" / name)
    m = describe_model(_text("BailingMoeV2_5ForCausalLM"), source="hand-made")
    res = build(m, h100_tp8(vllm_version=version, with_fix=fix))
    assert contract(contract_dict(plan(res.planner_input), extra_spec_keys=True)) == contract(exp)
