"""GLM-5 (GlmMoeDsaForCausalLM) and DeepSeek-V3.2: DeepSeek sparse attention (DSA) = sparse MLA
plus a lightning indexer that keeps its own K cache.

What vLLM does (0.34.0 wheel; 0.31–0.33 are the same here):
- registry.py L125: GlmMoeDsaForCausalLM → vllm.models.deepseek_v32 (DeepseekV32ForCausalLM on CUDA).
- deepseek_v32/attention.py L183–184: a layer builds an indexer unless compute_skip_topk_layers
  (model_executor/models/utils.py L1019) skips it; MTP layers always build one.
- deepseek_v32/attention.py L100: indexer cache head_dim = index_head_dim + index_head_dim // 128 · 4,
  dtype uint8 → deepseek_v2.py L658 DeepseekV32IndexerCache.get_kv_cache_spec:
  MLAAttentionSpec(block_size = cache block, 1 head, max_tp_shards 1, cache_role INDEXER).
- mla_attention.py L1567 MLAAttention.get_kv_cache_spec: one latent of kv_lora_rank + rope =
  512 + 64 = 576 per token, replicated over TP (max_tp_shards 1).
- Block size: indexer backend [64] (backends/mla/indexer.py L237) + sparse MLA [MultipleOf(64)]
  (flashattn_mla_sparse.py L50) → Platform._preferred_block_size_for_backends = 64.
- kv_cache_planning.py L1187 get_kv_cache_groups: all full-attention type, one block size → one
  UniformTypeKVCacheSpecs group whose page is the sum of every layer's page.
"""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.specs import MLAAttentionSpec, SparseCacheRole
from kvplan.errors import UnsupportedError
from kvplan.models.description import LayerKind
from tests.models.helpers import HF_CONFIGS, check_h100_x8, h100_tp8, one, real

# GLM-5.2: index_topk_freq 4, index_skip_topk_offset 3, no pattern → layer i keeps its indexer
# iff max(i − 3 + 1, 0) % 4 == 0: i = 0, 1, 2 (max(…, 0) = 0), then i − 2 ≡ 0 (mod 4): 6, 10, …, 74
GLM52_INDEXER_LAYERS = [0, 1, 2, *range(6, 75, 4)]


def _by_kind(m, kind: LayerKind) -> list:
    return [x for x in m.layers if x.kind is kind]


def test_glm_5_1_every_layer_has_an_indexer() -> None:
    m = real("zai-org--GLM-5.1")
    # num_hidden_layers 78, no index_topk_freq → every layer keeps its indexer
    assert m.kind_counts() == {"mla": 78, "mla_indexer": 78}
    assert m.sparse_mla and m.use_mla and m.family == "deepseek_v32"
    assert one(x.head_size for x in _by_kind(m, LayerKind.MLA)) == 576  # 512 + 64
    assert one(x.head_size for x in _by_kind(m, LayerKind.MLA_INDEXER)) == 132  # 128 + 1·4
    # the indexer registers before its MLA layer (attention.py L185–195, then super().__init__)
    assert [x.name for x in m.layers[:2]] == ["model.layers.0.self_attn.indexer.k_cache",
                                              "model.layers.0.self_attn.attn"]
    # num_nextn_predict_layers 1 → MTP layer 78: an MLA layer and its (always present) indexer
    assert [(x.index, x.name, x.kind) for x in m.mtp_layers] == [
        (78, "model.layers.78.self_attn.indexer.k_cache", LayerKind.MLA_INDEXER),
        (78, "model.layers.78.self_attn.attn", LayerKind.MLA)]
    assert m.max_position_embeddings == 202752


def test_glm_5_2_index_share_keeps_21_indexers() -> None:
    m = real("zai-org--GLM-5.2")
    assert [x.index for x in _by_kind(m, LayerKind.MLA_INDEXER)] == GLM52_INDEXER_LAYERS
    assert len(GLM52_INDEXER_LAYERS) == 21
    assert m.kind_counts() == {"mla": 78, "mla_indexer": 21}
    # the MLA layers that own an indexer lead their index group (is_index_group_leader)
    assert [x.index for x in _by_kind(m, LayerKind.MLA) if x.index_head_dim] == GLM52_INDEXER_LAYERS


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.0", "0.34.0"])
def test_glm_5_2_specs_and_group_on_h100(version) -> None:
    res = build(real("zai-org--GLM-5.2"), h100_tp8(vllm_version=version))
    # 0.34 default 64 is taken by both backends; ≤ 0.33 default 16 is not → smallest common 64
    assert res.block_size == 64
    specs = {lp.name: lp.spec for lp in res.layers}
    mla = specs["model.layers.3.self_attn.attn"]
    idx = specs["model.layers.2.self_attn.indexer.k_cache"]
    assert isinstance(mla, MLAAttentionSpec) and isinstance(idx, MLAAttentionSpec)
    # kv auto → bf16 (2 B), FLASH_ATTN_MLA_SPARSE on SM90: 64 · 576 · 2 = 73,728 B, same on every
    # TP rank (num_kv_heads 1)
    assert (mla.page_size_bytes, mla.num_kv_heads, mla.is_index_group_leader) == (73728, 1, False)
    assert specs["model.layers.2.self_attn.attn"].is_index_group_leader  # type: ignore[attr-defined]
    # indexer: 64 · 132 · 1 B = 8,448 B, uint8 whatever the KV dtype, role INDEXER
    assert (idx.page_size_bytes, idx.dtype, idx.cache_role) == (8448, "uint8",
                                                                SparseCacheRole.INDEXER)
    assert len(specs) == 78 + 21
    out = plan(res.planner_input)
    assert out.groups is not None and len(out.groups) == 1
    # one UniformTypeKVCacheSpecs group: 78 · 73,728 + 21 · 8,448 = 5,750,784 + 177,408
    assert out.groups[0].group.spec.page_size_bytes == 5_928_192
    # cdiv(262144, 64) = 4096 blocks · 5,928,192 B = 24,281,874,432 B per request
    assert out.total_bytes_needed == (24_281_874_432,)


def test_fp8_kv_is_served_as_fp8_ds_mla_on_h100() -> None:
    # SM90 + fp8: FLASH_ATTN_MLA_SPARSE takes bf16 only → FLASHMLA_SPARSE, which serves fp8 as the
    # fp8_ds_mla blob (mla_attention.py L367 _canonicalize_sparse_mla_kv_cache_dtype): 656 B per
    # token (512 fp8 NoPE + 4·4 B scales + 64·2 B RoPE) → 64 · 656 = 41,984 B; indexer unchanged
    res = build(real("zai-org--GLM-5.1"), h100_tp8(kv_cache_dtype="fp8", max_model_len=202752))
    assert res.kv_cache_dtype == "fp8_ds_mla"
    specs = {lp.name: lp.spec for lp in res.layers}
    assert specs["model.layers.0.self_attn.attn"].page_size_bytes == 41984
    assert specs["model.layers.0.self_attn.indexer.k_cache"].page_size_bytes == 8448


def test_fp8_e4m3_kv_runs_flashinfer_sm90_sparse_on_h100() -> None:
    # SM90 sparse tail (cuda.py _get_backend_priorities): FLASH_ATTN_MLA_SPARSE (bf16 only),
    # FLASHMLA_SPARSE (auto / bfloat16 / fp8_ds_mla / its alias fp8 — not fp8_e4m3), then
    # FLASHINFER_MLA_SPARSE_SM90, which takes fp8_e4m3 as plain fp8 latent rows: 64 · 576 · 1 =
    # 36,864 B (not the 656 B fp8_ds_mla blob); the plan says so. vLLM 0.34.0 itself: the e2e
    # golden tests/data/vllm-e2e-0.34.0/zai-org--GLM-5.1@fp8_e4m3.json
    res = build(real("zai-org--GLM-5.1"), h100_tp8(kv_cache_dtype="fp8_e4m3", max_model_len=202752))
    assert res.kv_cache_dtype == "fp8_e4m3"
    attn = {lp.name: lp for lp in res.layers}["model.layers.0.self_attn.attn"]
    assert attn.backend == "FLASHINFER_MLA_SPARSE_SM90" and attn.spec.page_size_bytes == 36864
    assert any("FLASHINFER_MLA_SPARSE_SM90" in w for w in res.warnings)
    # `fp8` stays FlashMLA sparse's alias (fp8_ds_mla), and fp8_e5m2 has no SM90 sparse backend
    assert build(real("zai-org--GLM-5.1"), h100_tp8(kv_cache_dtype="fp8", max_model_len=202752)
                 ).kv_cache_dtype == "fp8_ds_mla"
    with pytest.raises(UnsupportedError, match="no sparse MLA attention backend"):
        build(real("zai-org--GLM-5.1"), h100_tp8(kv_cache_dtype="fp8_e5m2", max_model_len=202752))
    # A100 (SM80): every sparse MLA backend needs SM9x/SM10x
    with pytest.raises(UnsupportedError, match="no sparse MLA attention backend"):
        build(real("zai-org--GLM-5.1"), h100_tp8(sm=80, max_model_len=202752))


def test_glm_on_sm100_defaults_to_fp8_e4m3() -> None:
    # models/config.py L163 GlmMoeDsaForCausalLM: kv auto → fp8_e4m3 on SM10x; quantized KV on
    # SM10x prefers FLASHINFER_MLA_SPARSE (cuda.py L94–104), which keeps plain fp8 rows:
    # 64 · 576 · 1 = 36,864 B
    res = build(real("zai-org--GLM-5.1"), h100_tp8(sm=100, max_model_len=202752))
    assert res.kv_cache_dtype == "fp8_e4m3" and res.block_size == 64
    spec = {lp.name: lp.spec for lp in res.layers}["model.layers.0.self_attn.attn"]
    assert spec.page_size_bytes == 36864


def test_deepseek_v3_2_bf16_request_on_h100() -> None:
    # DeepSeek-V3.2: 61 layers, each with an indexer: 61 · (73,728 + 8,448) = 5,012,736 B per block;
    # max_position_embeddings 163840 → cdiv(163840, 64) = 2560 blocks = 12,832,604,160 B
    res = build(real("deepseek-ai--DeepSeek-V3.2"),
                h100_tp8(kv_cache_dtype="bfloat16", max_model_len=None))
    assert res.kv_cache_dtype == "auto"  # DeepseekV32ForCausalLM hook: bfloat16 → auto
    out = plan(res.planner_input)
    assert out.groups is not None and out.groups[0].group.spec.page_size_bytes == 5_012_736
    assert out.total_bytes_needed == (12_832_604_160,)


def test_mtp_draft_adds_one_mla_and_one_indexer() -> None:
    # --speculative-method mtp: layer 78's MLA + indexer join the same group: +82,176 B per block
    res = build(real("zai-org--GLM-5.2"), h100_tp8(speculative_method="mtp",
                                                    num_speculative_tokens=1))
    drafts = [lp for lp in res.layers if lp.is_draft]
    assert [(lp.name, lp.spec.page_size_bytes) for lp in drafts] == [
        ("model.layers.78.self_attn.indexer.k_cache", 8448),
        ("model.layers.78.self_attn.attn", 73728)]
    out = plan(res.planner_input)
    assert out.groups is not None and out.groups[0].group.spec.page_size_bytes == 5_928_192 + 82_176


def test_cli_check_glm_5_2_h100_x8() -> None:
    out = check_h100_x8(HF_CONFIGS / "zai-org--GLM-5.2" / "config.json")
    [group] = out["groups"]
    assert (group["block_size_tokens"], group["page_size_bytes"], group["padding_pct"]) == (
        64, 5_928_192, 0.0)
    # 42,949,672,960 // 5,928,192 = 7244 blocks · 64 = 463,616 tokens; 463,616 / 262,144 = 1.77
    # (vLLM's own planner gives the same: research case glm52_tp8, 0.31.0 and 0.34.0)
    assert out["kv_cache_size_tokens"] == 463_616
    assert out["capacity_log_line"] == ("GPU KV cache size: 463,616 tokens, Maximum concurrency "
                                        "for 262,144 tokens per request: 1.77x")
    assert not any("indexer" in w for w in out["warnings"])


def test_indexer_backend_constrains_the_block_size() -> None:
    from kvplan.errors import UnsupportedError

    # DeepseekV32IndexerBackend takes [64] (indexer.py L237): a multiple of 64 is accepted
    # (AttentionBackend.supports_block_size), 32 is not
    res = build(real("zai-org--GLM-5.2"), h100_tp8(block_size=128))
    assert res.block_size == 128
    page = {lp.name: lp.spec for lp in res.layers}["model.layers.0.self_attn.indexer.k_cache"]
    assert page.page_size_bytes == 128 * 132
    with pytest.raises(UnsupportedError, match="DEEPSEEK_V32_INDEXER"):
        build(real("zai-org--GLM-5.2"), h100_tp8(block_size=32))
