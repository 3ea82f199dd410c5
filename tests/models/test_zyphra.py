"""Zamba2 (Mamba2 backbone + shared attention blocks) and ZAYA1 (CCA state + replicated attention).

What vLLM does (0.34.0 wheel; zamba2.py the same in 0.31–0.33 for the specs, zaya.py 0.34 only):
- zamba2.py Zamba2Model: num_mem_blocks shared attention blocks; block b owns one Attention per
  hybrid layer it serves (hybrid ordinal k with k % num_mem_blocks == b), named model.attn.{j},
  j counting from b · (H + M − 1) // M; heads = KV heads = num_attention_heads, head
  attention_head_dim (Zamba2Config: 2 · hidden // heads). Every layer has a MambaMixer2 named
  "{H + i}.mixer" (intermediate mamba_expand · hidden, n_mamba_heads heads).
- zaya.py: each layer registers ZayaCCA (MambaSpec, SHORT_CONV, tp_replicated, state
  ((heads + kv) · head_dim, cca_time0 + cca_time1 − 2) and (kv · head_dim // 2,)) at
  model.layers.{i}.self_attn.qkv_proj, then an Attention with every head on every rank
  (ReplicatedLinear) at model.layers.{i}.self_attn.attn; speculative decoding raises.
- platforms/interface.py _align_hybrid_block_size reads the model's KV heads per rank
  (ModelConfig.get_num_kv_heads), kv_cache_planning.py unify_kv_cache_spec_page_size pads a
  smaller Mamba page to the largest page.

The configs are hand-made (tests/data/hf-configs/PROVENANCE.md); every expected number is
worked out from them by hand. Their per-layer specs were also compared with the specs vLLM's own
model classes build on CPU (TP 1): names, order, shapes, heads, windows, dtypes equal.
"""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import FullAttentionSpec, MambaSpec, MambaType
from kvplan.errors import StartupError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import CcaDims, LayerKind, Mamba2Dims
from tests.models.helpers import (
    HF_CONFIGS,
    assert_plan_equals_oracle,
    check_json,
    h100_tp8,
    indices,
    of_kind,
    one,
    read_config,
    real,
)

ZAMBA2 = "kvplan-handmade--Zamba2-2.7B-like"
ZAYA = "kvplan-handmade--ZAYA1-8B-like"


def test_zamba2_layers() -> None:
    m = real(ZAMBA2)
    # layers_block_type: hybrid at 6, 12, …, 42 (7 groups of 5 mamba + 1 hybrid after layer 0),
    # 47 and 51 → H = 9 attention layers; all 54 layers have a Mamba2 mixer
    assert indices(m, LayerKind.FULL_ATTENTION) == [6, 18, 30, 42, 51, 12, 24, 36, 47]
    assert m.kind_counts() == {"full_attention": 9, "mamba2": 54}
    # num_mem_blocks 2: block 0 serves ordinals 0, 2, 4, 6, 8 → attn.0–4; block 1 starts at
    # 1 · (9 + 1) // 2 = 5 and serves 1, 3, 5, 7 → attn.5–8
    assert [x.name for x in of_kind(m, LayerKind.FULL_ATTENTION)] == [
        f"model.attn.{j}" for j in range(9)]
    # heads = KV heads = 32, head 2 · 2560 // 32 = 160
    assert one((x.num_kv_heads, x.head_size) for x in of_kind(m, LayerKind.FULL_ATTENTION)) == (
        32, 160)
    mamba = of_kind(m, LayerKind.MAMBA2)
    assert mamba[0].name == "9.mixer" and mamba[-1].name == "62.mixer"  # H + i
    # intermediate 2 · 2560 = 5120, 80 heads of 5120 // 80 = 64, 1 group, state 64, conv 4
    assert one(x.mamba2 for x in mamba) == Mamba2Dims(
        intermediate_size=5120, state_size=64, conv_kernel=4, n_groups=1, num_heads=80,
        head_dim=64)


def test_zamba2_specs_tp2() -> None:
    res = build(real(ZAMBA2), h100_tp8(tensor_parallel_size=2, max_model_len=4096))
    specs = {lp.name: lp.spec for lp in res.layers}
    mixer, attn = specs["9.mixer"], specs["model.attn.0"]
    assert isinstance(mixer, MambaSpec) and isinstance(attn, FullAttentionSpec)
    # 1 group at TP 2 → 2 groups (extra_groups_for_head_shards); conv dim 5120 + 2 · 2 · 64 =
    # 5376 → (3, 2688) bf16 = 16,128 B; ssm (80 / 2, 64, 64) bf16 = 327,680 B → 343,808 B
    assert mixer.shapes == ((3, 2688), (40, 64, 64))
    assert mixer.state_content_size_bytes == 343_808
    # attention 16 KV heads × 160: one token 2 · 16 · 160 · 2 B = 10,240 B; block 64 ·
    # cdiv(343,808, 64 · 10,240) = 64; page 655,360 B
    assert attn.num_kv_heads == 16 and res.block_size == 64
    assert attn.page_size_bytes == mixer.page_size_bytes == 655_360


def test_zamba2_long_context() -> None:
    config, _ = read_config(ZAMBA2)
    config["use_long_context"] = True  # Zamba2Config: max_position_embeddings 16384
    assert describe_model(config, source="edited").max_position_embeddings == 16384


def test_zaya_layers() -> None:
    m = real(ZAYA)
    # 40 layers, each a CCA state then a full attention layer (layer_types all "hybrid")
    assert m.kind_counts() == {"cca": 40, "full_attention": 40}
    assert [x.name for x in m.layers[:2]] == ["model.layers.0.self_attn.qkv_proj",
                                              "model.layers.0.self_attn.attn"]
    # cca_time0 + cca_time1 − 2 = 2 + 2 − 2 = 2 steps of history
    assert one(x.cca for x in m.layers if x.cca) == CcaDims(num_heads=8, num_kv_heads=2,
                                                            head_dim=128, history=2)
    assert all(x.tp_replicated for x in m.layers)


def test_zaya_specs_tp8_keep_every_head() -> None:
    res = build(real(ZAYA), h100_tp8(max_model_len=32768))
    specs = {lp.name: lp.spec for lp in res.layers}
    cca, attn = specs["model.layers.0.self_attn.qkv_proj"], specs["model.layers.0.self_attn.attn"]
    assert isinstance(cca, MambaSpec) and isinstance(attn, FullAttentionSpec)
    # state ((8 + 2) · 128 = 1280, 2) and (2 · 128 // 2 = 128,) bf16: 5,120 + 256 = 5,376 B,
    # the same on every rank
    assert cca.shapes == ((1280, 2), (128,)) and cca.dtypes == ("bfloat16", "bfloat16")
    assert cca.mamba_type is MambaType.SHORT_CONV and cca.tp_replicated
    assert cca.state_content_size_bytes == 5376
    # the alignment reads max(1, 2 // 8) = 1 KV head: one token 2 · 128 · 2 B = 512 B → block
    # 64 · cdiv(5,376, 64 · 512) = 64, state page padded to 64 · 512 = 32,768 B; the attention
    # layers keep both KV heads: page 64 · 2 · 2 · 128 · 2 B = 65,536 B
    assert res.block_size == 64 and attn.num_kv_heads == 2
    assert cca.page_size_bytes == 32_768 and attn.page_size_bytes == 65_536


def test_zaya_check_cli_tp8() -> None:
    out = check_json(HF_CONFIGS / ZAYA / "config.json", "--gpu", "H100", "-tp", "8",
                     "--max-model-len", "32768", "--kv-cache-memory", "40GiB")
    # unify_kv_cache_spec_page_size pads the CCA page (32,768 B) to the attention page 65,536 B
    assert [(g["kind"], g["page_size_bytes"]) for g in out["groups"]] == [
        ("mamba", 65_536), ("full_attention", 65_536)]
    # per request: attention cdiv(32,768, 64) = 512 blocks + 2 CCA blocks (align mode)
    assert out["total_blocks_per_request"] == 514
    # both groups hold 40 layers: the pool has 40 shared tensors, one block 40 · 65,536 B
    assert out["pool_bytes_per_block"] == [40 * 65_536]


def test_zaya_sliding_layers_and_speculative_refusal() -> None:
    config, _ = read_config(ZAYA)
    config["layer_types"] = ["hybrid", "hybrid_sliding"] * 20
    config["sliding_window"] = 4096
    m = describe_model(config, source="edited")
    # "hybrid_sliding" layers get per_layer_sliding_window = sliding_window
    assert indices(m, LayerKind.SLIDING_WINDOW) == list(range(1, 40, 2))
    assert one(x.sliding_window for x in of_kind(m, LayerKind.SLIDING_WINDOW)) == 4096
    with pytest.raises(UnsupportedError, match="speculative"):
        build(real(ZAYA), h100_tp8(max_model_len=32768, speculative_method="ngram",
                                   num_speculative_tokens=2))


def test_zaya_plan_equals_vllm_planner_on_its_specs() -> None:
    # golden-oracle-2026 a06: the specs above (40 CCA + 40 attention, TP 8) planned by vLLM
    # 0.34.0's own planner (tools/oracle_ext.py)
    out = check_json(HF_CONFIGS / ZAYA / "config.json", "--gpu", "H100", "-tp", "8",
                     "--max-model-len", "32768", "--kv-cache-memory", "40GiB",
                     "--max-num-batched-tokens", "8192")
    assert_plan_equals_oracle(out, "a06_zaya1_cca_replicated_tp8")


@pytest.mark.parametrize("name", [ZAMBA2, ZAYA])
def test_pipeline_parallel_refused_as_vllm_does(name: str) -> None:
    # vLLM 0.34: Zamba2ForCausalLM / ZayaForCausalLM do not implement SupportsPP, so
    # ModelConfig.verify_with_parallel_config raises NotImplementedError for PP > 1
    m = real(name)
    assert not m.supports_pipeline_parallel
    with pytest.raises(StartupError, match="SupportsPP"):
        build(m, h100_tp8(max_model_len=4096, tensor_parallel_size=4, pipeline_parallel_size=2))
    build(m, h100_tp8(max_model_len=4096, tensor_parallel_size=4))  # PP 1 still plans


def test_pipeline_parallel_refusal_exit_code() -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["check", str(HF_CONFIGS / ZAMBA2), "--gpu", "H100",
                                   "--pipeline-parallel-size", "2", "--max-model-len", "4096",
                                   "--json"])
    assert res.exit_code == 1, res.output  # vLLM refuses at start-up, like other StartupErrors
    assert "Pipeline parallelism is not supported for this model" in res.output
    assert "Traceback" not in res.output


def test_zaya_family_rules_as_data() -> None:
    m = real(ZAYA)
    assert not m.supports_speculative_decoding
    assert m.speculative_decoding_refusal is not None and "ZAYA1" in m.speculative_decoding_refusal
    # an edited copy that drops the rule plans speculative decoding: the build reads the field,
    # not the family name
    allowed = m.model_copy(update={"speculative_decoding_refusal": None})
    res = build(allowed, h100_tp8(max_model_len=32768, speculative_method="ngram",
                                  num_speculative_tokens=2))
    assert res.layers
