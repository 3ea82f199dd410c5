"""MiniMax-M3 (nvidia/MiniMax-M3-NVFP4: MiniMaxM3SparseForConditionalGeneration wrapping
MiniMaxM3SparseForCausalLM): GQA layers, 57 of 60 block-sparse with an indexer side cache.

What vLLM does (0.34.0 wheel; 0.31–0.33 the same here):
- transformers configuration_minimax_m3_vl.py L121–146: sparse_attention_config →
  index_head_dim (sparse_index_dim) and layer_types (sparse_attention_freq: 1 → minimax_m3_sparse).
- models/minimax_m3/nvidia/model.py L191 _sparse_attention_layer_ids; full layers
  MiniMaxM3Attention → Attention (FullAttentionSpec); sparse layers MiniMaxM3SparseAttention
  register `{prefix}.attn` (L1014) after the indexer's `{prefix}.attn.index_cache`
  (common/indexer.py L396) and return FullAttentionSpec(num_kv_heads, head 128, head_v 128) (L1042).
- common/indexer.py L155 MiniMaxM3IndexerCache.get_kv_cache_spec: MLAAttentionSpec(1 head,
  index_head_dim, bf16 by default (model.py L967 resolve_indexer_kv_dtype("bf16")), INDEXER).
- Kernel blocks: MiniMaxM3SparseBackend [128] (common/sparse_attention.py L174), indexer [128]
  (common/indexer.py L94), FLASH_ATTN [MultipleOf(16)] → block 128.
- kv_cache_planning.py L1187: all full-attention type, one block → one UniformTypeKVCacheSpecs.
"""

from __future__ import annotations

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import FullAttentionSpec, MLAAttentionSpec, SparseCacheRole
from kvplan.models.description import LayerKind
from tests.models.helpers import HF_CONFIGS, check_h100_x8, h100_tp8, real

NAME = "nvidia--MiniMax-M3-NVFP4"


def test_minimax_m3_layers() -> None:
    m = real(NAME)
    # sparse_attention_freq: 0, 0, 0, then 1 × 57 → 60 attention layers, 57 index caches
    assert m.kind_counts() == {"full_attention": 60, "mla_indexer": 57}
    assert [x.name for x in m.layers[3:5]] == [
        "language_model.model.layers.3.self_attn.attn.index_cache",
        "language_model.model.layers.3.self_attn.attn"]
    assert {(x.num_kv_heads, x.head_size) for x in m.layers
            if x.kind is LayerKind.FULL_ATTENTION} == {(4, 128)}
    assert {x.head_size for x in m.layers if x.kind is LayerKind.MLA_INDEXER} == {128}
    # kv_cache_quant_algo null → no KV quantization from the checkpoint
    assert m.quantization.kv_cache_dtype is None


def test_minimax_m3_specs_h100_tp8() -> None:
    res = build(real(NAME), h100_tp8())
    assert res.block_size == 128
    specs = {lp.name: lp.spec for lp in res.layers}
    main = specs["language_model.model.layers.3.self_attn.attn"]
    index = specs["language_model.model.layers.3.self_attn.attn.index_cache"]
    assert isinstance(main, FullAttentionSpec) and isinstance(index, MLAAttentionSpec)
    # main: 4 KV heads / 8 → 1 per rank; 128 · 1 · (128 + 128) · 2 B = 65,536 B
    assert (main.num_kv_heads, main.page_size_bytes) == (1, 65536)
    assert main == specs["language_model.model.layers.0.self_attn.attn"]  # same as full layers
    # index keys: 128 · 128 · 2 B (bf16) = 32,768 B, one vector per token
    assert (index.page_size_bytes, index.dtype, index.cache_role) == (
        32768, "bfloat16", SparseCacheRole.INDEXER)


def test_minimax_m3_cli_h100_x8() -> None:
    out = check_h100_x8(HF_CONFIGS / NAME / "config.json")
    [group] = out["groups"]
    # 60 · 65,536 + 57 · 32,768 = 3,932,160 + 1,867,776 = 5,799,936 B per block, no padding
    assert (group["block_size_tokens"], group["page_size_bytes"], group["padding_pct"]) == (
        128, 5_799_936, 0.0)
    # cdiv(262144, 128) = 2048 blocks = 11,878,268,928 B per request
    assert out["total_bytes_needed"] == [2048 * 5_799_936]
    # vLLM's own planner (research case minimax_m3_tp8, 0.31.0 and 0.34.0) logs the same
    assert out["capacity_log_line"] == ("GPU KV cache size: 947,840 tokens, Maximum concurrency "
                                        "for 262,144 tokens per request: 3.62x")


def test_minimax_m3_mtp_adds_a_sparse_layer() -> None:
    # text_config num_mtp_modules 1 → one forced-sparse MiniMaxM3DecoderLayer at model.layers.0
    # (nvidia/mtp.py L55–60, L109): a main cache and an index cache, in the one group:
    # 5,799,936 + 65,536 + 32,768 = 5,898,240 B per block
    m = real(NAME)
    assert [x.name for x in m.mtp_layers] == ["model.layers.0.self_attn.attn.index_cache",
                                              "model.layers.0.self_attn.attn"]
    out = check_h100_x8(HF_CONFIGS / NAME / "config.json", "--speculative-method", "mtp",
                        "--num-speculative-tokens", "1")
    assert out["pool_bytes_per_block"] == [5_898_240]
    # vLLM's own planner on the same 119 specs (oracle, 0.31.0 and 0.34.0) logs the same
    assert out["capacity_log_line"] == ("GPU KV cache size: 931,968 tokens, Maximum concurrency "
                                        "for 262,144 tokens per request: 3.56x")
