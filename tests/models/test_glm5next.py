"""GLM-5.3-Flash (Glm5NextForConditionalGeneration / Glm5NextForCausalLM): KDA layers between
sparse MLA layers whose DSA indexer keeps a kpool-compressed K cache and a tail ring.

What vLLM does (0.34.0 wheel; 0.32 / 0.33 the same for the KV cache):
- registry.py: Glm5Next* → vllm.models.glm5next (common/model.py).
- common/model.py Glm5NextDecoderLayer: layer_types[i] == "linear_attention" → KDA
  (Glm5NextLinearAttention at model.layers.{i}.self_attn), else Glm5NextMLAAttention.
- common/kda.py: MambaSpec(GDN_ATTN), kda_state_shape / kda_state_dtype(mamba_ssm_cache_dtype);
  FlashKDA prefill (SM 9x/10x/12x, bf16, head_dim 128, a gate bound) → one checkpoint block.
- common/attention.py: Indexer registers Glm5NextIndexerCache (DeepSeek-V3.2 uint8 rows of
  128 + 4 bytes, tokens_per_state = index_kpool, Glm5NextIndexerBackend: kernel blocks index_kpool
  × 32 / 64) and Glm5NextTailCache (CircularBufferSpec: ring = index_kpool ·
  next_power_of_2(cdiv(index_kpool + k, index_kpool)) slots × 2 heads × index_head_dim bf16,
  KpoolTailBackend → BLHNC only) before MLAAttention ({prefix}.attn).
- platforms/interface.py _align_hybrid_block_size: first backend = the indexer's (min kernel block
  index_kpool · 32), MLA ≥ 128, block = A · cdiv(mamba page, A · MLA 1-token page).
The config is hand-made (tests/data/hf-configs/PROVENANCE.md): no public copy of the hub file.
"""

from __future__ import annotations

import copy

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import CircularBufferSpec, MambaSpec, MLAAttentionSpec, SparseCacheRole
from kvplan.errors import InputError, UnsupportedError
from kvplan.models import describe_model, mtp_draft
from kvplan.models.description import LayerKind
from tests.models.helpers import (
    HF_CONFIGS,
    check_h100_x8,
    h100_tp8,
    indices,
    one,
    read_config,
    real,
)

NAME = "handmade--GLM-5.3-Flash"
L = "language_model.model.layers"


def _text_only() -> dict:
    """The same model as Glm5NextForCausalLM: the text config at the top level."""
    config, _ = read_config(NAME)
    return {**copy.deepcopy(config["text_config"]), "architectures": ["Glm5NextForCausalLM"]}


def test_glm5next_layers() -> None:
    m = real(NAME)
    # 45 layers: 3, 7, …, 43 (11) are MLA, each with an indexer K cache and a tail ring; the other
    # 34 are KDA
    assert m.kind_counts() == {"kda": 34, "mla": 11, "mla_indexer": 11, "kpool_tail": 11}
    assert indices(m, LayerKind.MLA) == list(range(3, 45, 4))
    assert [x.name for x in m.layers[3:6]] == [
        f"{L}.3.self_attn.indexer.k_cache", f"{L}.3.self_attn.indexer.tail_cache",
        f"{L}.3.self_attn.attn"]
    assert m.layers[0].name == f"{L}.0.self_attn" and m.layers[0].kind is LayerKind.KDA
    mla = one((x.head_size, x.index_head_dim) for x in m.layers if x.kind is LayerKind.MLA)
    assert mla == (512, 128)  # kv_lora_rank 512 + qk_rope_head_dim 0; an indexer on every layer
    # indexer rows: 128 fp8 values + 128 / 128 fp32 scales = 132 bytes, one per 4 tokens
    idx = one((x.head_size, x.tokens_per_state, x.fixed_dtype) for x in m.layers
              if x.kind is LayerKind.MLA_INDEXER)
    assert idx == (132, 4, "uint8")
    gdn = one(x.gdn for x in m.layers if x.kind is LayerKind.KDA)
    assert (gdn.num_k_heads, gdn.head_k_dim, gdn.conv_kernel) == (64, 128, 4)
    assert m.sparse_mla and m.use_mla and m.is_hybrid
    assert m.max_position_embeddings == 1_048_576
    assert any("encoder cache" in w for w in m.warnings)  # a multimodal wrapper
    # MTP: one MLA layer past the 45, with its own indexer and ring
    assert [x.name for x in m.mtp_layers] == [
        "model.layers.45.self_attn.indexer.k_cache", "model.layers.45.self_attn.indexer.tail_cache",
        "model.layers.45.self_attn.attn"]


def test_glm5next_causal_lm_names_and_defaults() -> None:
    m = describe_model(_text_only(), source="glm5next-text")
    assert m.layers[0].name == "model.layers.0.self_attn"
    # no layer_types and no kda_layers read: Glm5NextTextConfig's default map (i % 4 == 3 → MLA)
    assert indices(m, LayerKind.MLA) == list(range(3, 45, 4))
    assert not any("encoder cache" in w for w in m.warnings)


def test_glm5next_specs_h100_tp8_reproduce_the_vllm_log() -> None:
    res = build(real(NAME), h100_tp8(max_model_len=131072))
    specs = {lp.name: lp.spec for lp in res.layers}
    kda, attn = specs[f"{L}.0.self_attn"], specs[f"{L}.3.self_attn.attn"]
    idx, tail = specs[f"{L}.3.self_attn.indexer.k_cache"], specs[f"{L}.3.self_attn.indexer.tail_cache"]
    assert isinstance(kda, MambaSpec) and isinstance(attn, MLAAttentionSpec)
    # KDA per rank: conv (3, 3 · 64 · 128 / 8 = 3072) bf16 = 18,432 B; recurrent (8, 128, 128)
    # fp32 = 524,288 B → 542,720 B; FlashKDA on SM90 → one prefill checkpoint block, alignment 16
    assert kda.shapes == ((3, 3072), (8, 128, 128)) and kda.dtypes == ("bfloat16", "float32")
    assert kda.state_content_size_bytes == 542_720
    assert (kda.num_prefill_checkpoint_blocks, kda.prefill_checkpoint_alignment) == (1, 16)
    # alignment A = max(indexer kernel 4 · 32 = 128, MLA 128) → 128 · cdiv(542,720, 128 · 1,024) =
    # 640 tokens; MLA page 640 · 1,024 = 655,360 B; KDA padded by (655,360 − 542,720) / 542,720
    # = 20.75 % (vLLM's GLM-5.3-Flash log: 640-token blocks, "Padding mamba page size by 20.75%")
    assert res.block_size == 640
    assert attn.page_size_bytes == kda.page_size_bytes == 655_360
    assert round(100 * (655_360 - 542_720) / 542_720, 2) == 20.75
    assert attn.is_index_group_leader
    # indexer: 640 / 4 = 160 entries × 132 B = 21,120 B
    assert isinstance(idx, MLAAttentionSpec) and idx.cache_role is SparseCacheRole.INDEXER
    assert idx.page_size_bytes == 21_120
    # ring: 4 · next_power_of_2(cdiv(4 + 0, 4)) = 4 slots × 2 heads × 128 × 2 B = 2,048 B
    assert isinstance(tail, CircularBufferSpec) and not tail.dcp_sharded
    assert (tail.block_size, tail.page_size_bytes) == (4, 2_048)
    assert res.planner_input.supported_kv_cache_layouts == ("BLHNC",)


def test_glm5next_mtp_ring_grows_with_the_draft_tokens() -> None:
    target = real(NAME)
    res = build(target, h100_tp8(max_model_len=131072, speculative_method="mtp",
                                 num_speculative_tokens=3), mtp_draft(target))
    specs = {lp.name: lp.spec for lp in res.layers}
    # 4 · next_power_of_2(cdiv(4 + 3, 4) = 2) = 8 slots, target and MTP layer alike
    assert specs[f"{L}.3.self_attn.indexer.tail_cache"].block_size == 8
    assert specs["model.layers.45.self_attn.indexer.tail_cache"].block_size == 8
    # conv state holds K − 1 + 3 = 6 columns: 6 · 3072 · 2 + 524,288 = 561,152 B → still 640
    assert res.block_size == 640


def test_glm5next_block_must_hold_the_ring() -> None:
    # 129 draft tokens: conv (3 + 129) · 3072 · 2 + 524,288 = 1,335,296 B → block 128 ·
    # cdiv(1,335,296, 131,072) = 1,408; ring 4 · next_power_of_2(cdiv(133, 4) = 34) = 256 does not
    # divide it (vLLM asserts in Glm5NextTailCache.get_kv_cache_spec)
    target = real(NAME)
    with pytest.raises(InputError, match="multiple of the tail ring"):
        build(target, h100_tp8(max_model_len=131072, speculative_method="mtp",
                               num_speculative_tokens=129), mtp_draft(target))


def test_glm5next_sm100_auto_kv_is_fp8_from_0_33() -> None:
    # Glm5NextModelConfig.verify_and_update_config (0.33+): SM10x, KV auto, index_topk set → fp8
    target = real(NAME)
    assert build(target, h100_tp8(sm=100, vllm_version="0.33.0")).kv_cache_dtype == "fp8"
    assert build(target, h100_tp8(sm=100, vllm_version="0.32.0")).kv_cache_dtype == "auto"
    assert build(target, h100_tp8(sm=90)).kv_cache_dtype == "auto"


def test_glm5next_0_31_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="0.31"):
        build(real(NAME), h100_tp8(vllm_version="0.31.0"))


def test_glm5next_dense_mla_config_has_no_indexer() -> None:
    config = _text_only() | {"index_topk": None}
    m = describe_model(config, source="glm5next-dense")
    assert m.kind_counts() == {"kda": 34, "mla": 11} and not m.sparse_mla


def test_glm5next_cli_check() -> None:
    out = check_h100_x8(HF_CONFIGS / NAME / "config.json")
    # the KDA layers (34) dealt over the MLA group size: groups of 9, 9, 8, 8 pages of 655,360 B;
    # the 11 MLA + 11 indexer layers in one packed group (11 · 655,360 + 11 · 21,120 = 7,441,280 B);
    # the 11 rings in another (11 · 2,048 = 22,528 B)
    pages = sorted((g["block_size_tokens"], g["page_size_bytes"]) for g in out["groups"])
    assert pages == [(4, 22_528), (640, 5_242_880), (640, 5_242_880), (640, 5_898_240),
                     (640, 5_898_240), (640, 7_441_280)]
