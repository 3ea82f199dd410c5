"""Kimi-Linear-48B-A3B-Instruct (KimiLinearForCausalLM): MLA layers between Kimi delta attention
(KDA) layers.

What vLLM does (0.34.0 wheel; 0.31–0.33 the same for this model):
- registry.py L147: KimiLinearForCausalLM → vllm.models.kimi_k3 (nvidia/model.py on CUDA).
- transformers_utils/configs/kimi_linear.py L225 is_kda_layer: (i + 1) in kda_layers (1-indexed);
  nvidia/model.py L724–785: KDA → KimiLinearGatedDeltaNetAttention, else MultiHeadLatentAttention,
  both registered at model.layers.{i}.self_attn.
- KDA: layers/mamba/abstract.py L78 MambaSpec(GDN_ATTN) with mamba_utils.py L304 kda_state_shape
  (conv (K − 1, (H·d + 2·H·d) / tp), recurrent (H / tp, d, d)) and L141 kda_state_dtype: conv in
  the model dtype, recurrent fp32 (gdn/kimi_gdn_linear_attn.py L163 passes no ssm dtype).
- MLA: kimi_k3/nvidia/mla.py L163 head = kv_lora_rank + qk_rope_head_dim, L426 MLAAttentionSpec.
- platforms/interface.py L950 _align_hybrid_block_size: MLA forces a ≥ 128 kernel alignment
  (L1100), block = 128 · cdiv(mamba page, 128 · MLA 1-token page); L1145 pads the mamba page.
"""

from __future__ import annotations

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import MambaSpec, MLAAttentionSpec
from kvplan.models.description import LayerKind
from tests.models.helpers import HF_CONFIGS, check_h100_x8, h100_tp8, indices, one, real

NAME = "moonshotai--Kimi-Linear-48B-A3B-Instruct"


def test_kimi_linear_layers() -> None:
    m = real(NAME)
    # full_attn_layers (1-indexed) 4, 8, …, 24, 27 → 0-indexed 3, 7, 11, 15, 19, 23, 26; the other
    # 20 are kda_layers
    assert m.kind_counts() == {"kda": 20, "mla": 7}
    assert indices(m, LayerKind.MLA) == [3, 7, 11, 15, 19, 23, 26]
    assert m.layers[0].name == "model.layers.0.self_attn" and m.layers[0].kind is LayerKind.KDA
    mla = [x for x in m.layers if x.kind is LayerKind.MLA]
    assert one(x.head_size for x in mla) == 576  # kv_lora_rank 512 + qk_rope_head_dim 64
    gdn = one(x.gdn for x in m.layers if x.kind is LayerKind.KDA)
    # linear_attn_config: num_heads 32, head_dim 128, short_conv_kernel_size 4 (q, k, v alike)
    assert (gdn.num_k_heads, gdn.num_v_heads, gdn.head_k_dim, gdn.head_v_dim, gdn.conv_kernel) == (
        32, 32, 128, 128, 4)
    assert m.use_mla and m.is_hybrid
    # no max_position_embeddings in the file: KimiLinearConfig's default 4096 (model_max_length
    # 1048576 only allows a longer --max-model-len)
    assert m.max_position_embeddings == 4096


def test_kimi_linear_specs_h100_tp8() -> None:
    res = build(real(NAME), h100_tp8())
    specs = {lp.name: lp.spec for lp in res.layers}
    kda, mla = specs["model.layers.0.self_attn"], specs["model.layers.3.self_attn"]
    assert isinstance(kda, MambaSpec) and isinstance(mla, MLAAttentionSpec)
    # KDA per rank: conv (3, 3 · 32 · 128 / 8 = 1536) bf16 = 9,216 B; recurrent (4, 128, 128) fp32
    # = 262,144 B → 271,360 B
    assert kda.shapes == ((3, 1536), (4, 128, 128)) and kda.dtypes == ("bfloat16", "float32")
    assert kda.state_content_size_bytes == 271_360
    # MLA 1-token page 576 · 2 = 1,152 B; alignment 128 (MLA) → block 128 · cdiv(271,360, 147,456)
    # = 256; attention page 256 · 1,152 = 294,912 B; the mamba page is padded to it (+8.68%)
    assert res.block_size == 256
    assert mla.page_size_bytes == kda.page_size_bytes == 294_912


def test_kimi_linear_cli_h100_x8() -> None:
    out = check_h100_x8(HF_CONFIGS / NAME / "config.json")
    # kv_cache_planning.py L568: buckets MLA 7 / KDA 20 → 20 ≥ 1.5 · 7 → group size 7: KDA in
    # 3 groups (7, 7, 6) → 1 padding layer (1 / 20 = 5.00%)
    assert out["padding_layer_warnings"] == [
        "Add 1 padding layers, may waste at most 5.00% KV cache memory"]
    assert [g["kind"] for g in out["groups"]] == ["mamba"] * 3 + ["mla_attention"]
    assert {(g["block_size_tokens"], g["page_size_bytes"]) for g in out["groups"]} == {
        (256, 294_912)}
    # pool block 7 · 294,912 = 2,064,384 B; per request MLA cdiv(262144, 256) = 1024 blocks,
    # each KDA group 2 (align mode, MambaSpec.max_memory_usage_bytes) → 1030
    assert out["pool_bytes_per_block"] == [2_064_384]
    assert out["total_blocks_per_request"] == 1030
    assert out["total_bytes_needed"] == [1030 * 2_064_384]
    # vLLM's own planner (research case kimi_linear_tp8, 0.31.0 / 0.32.0 / 0.34.0) logs the same
    assert out["capacity_log_line"] == ("GPU KV cache size: 5,295,054 tokens, Maximum concurrency "
                                        "for 262,144 tokens per request: 20.20x")



# ---- Kimi-K3 (KimiK3ForConditionalGeneration, moonshotai/Kimi-K3) ------------------------------
# nvidia/model.py L1788–1792: the text model under language_model.; L724–740: with
# use_full_rank_gate the KDA layers are KimiK3DeltaAttention (nvidia/kda.py), whose
# get_state_dtype passes mamba_ssm_cache_dtype (L578) and whose get_kv_cache_spec (L919–928) adds
# one prefill-checkpoint block (alignment 16, layers/mamba/kda_checkpoint.py) when the "auto"
# prefill backend resolves to FlashKDA: SM 9x/10x/12x, head_dim 128, bf16 activations, a
# gate_lower_bound (L370 is_flashkda_supported).
K3 = "moonshotai--Kimi-K3"


def test_kimi_k3_layers() -> None:
    m = real(K3)
    # 93 layers: full_attn_layers 4, 8, …, 92, 93 (24 MLA), the other 69 KDA
    assert m.kind_counts() == {"kda": 69, "mla": 24}
    assert m.layers[0].name == "language_model.model.layers.0.self_attn"
    # linear_attn_config head_dim 128 and gate_lower_bound −5.0 → FlashKDA-eligible
    assert {x.model_version for x in m.layers if x.kind is LayerKind.KDA} == {"kimi_k3_flashkda"}


def test_kimi_k3_cli_h100_x8() -> None:
    out = check_h100_x8(HF_CONFIGS / K3 / "config.json")
    # KDA per rank: 96 heads / 8 = 12; conv (3, 3 · 96 · 128 / 8 = 4608) bf16 = 27,648 B;
    # recurrent (12, 128, 128) fp32 (ssm dtype auto) = 786,432 B → 814,080 B.
    # _align_hybrid_block_size: 128 · cdiv(814,080, 128 · 1,152) = 128 · 6 = 768 tokens;
    # MLA page 768 · 1,152 = 884,736 B; the KDA page is padded to it (+8.68%)
    assert {(g["block_size_tokens"], g["page_size_bytes"]) for g in out["groups"]} == {
        (768, 884_736)}
    # buckets MLA 24 / KDA 69 → group size 24: KDA in 3 groups of 23 → 3 padding layers (4.35%)
    assert out["padding_layer_warnings"] == [
        "Add 3 padding layers, may waste at most 4.35% KV cache memory"]
    # per request: MLA cdiv(262144, 768) = 342; each KDA group 2 + 1 checkpoint block = 3
    assert [g["blocks_per_request"] for g in out["groups"]] == [3, 3, 3, 342]
    assert out["pool_bytes_per_block"] == [24 * 884_736]
    # vLLM's own planner on these 93 specs (oracle, 0.31.0 and 0.34.0) logs the same
    assert out["capacity_log_line"] == ("GPU KV cache size: 1,510,128 tokens, Maximum concurrency "
                                        "for 262,144 tokens per request: 5.76x")


def test_kimi_k3_ssm_dtype_and_sm80_have_no_checkpoint() -> None:
    from kvplan.engines.vllm.specs import MambaSpec

    m = real(K3)
    name = "language_model.model.layers.0.self_attn"
    spec = {lp.name: lp.spec for lp in build(m, h100_tp8(mamba_ssm_cache_dtype="bfloat16")
                                             ).layers}[name]
    # recurrent state in bf16: 12 · 128 · 128 · 2 = 393,216 B (+ conv 27,648 B)
    assert isinstance(spec, MambaSpec) and spec.state_content_size_bytes == 420_864
    assert spec.num_prefill_checkpoint_blocks == 1 and spec.prefill_checkpoint_alignment == 16
    # SM80: FlashKDA unsupported → Triton prefill → no checkpoint block
    spec = {lp.name: lp.spec for lp in build(m, h100_tp8(sm=80)).layers}[name]
    assert isinstance(spec, MambaSpec) and spec.num_prefill_checkpoint_blocks == 0


def test_kimi_k31_is_refused_before_0_34() -> None:
    import pytest

    from kvplan.errors import UnsupportedError
    from kvplan.models import describe_model
    from tests.models.helpers import edited

    # hand-made: the K3 file under the K3.1 name, which registry.py has only from 0.34 (L493)
    m = describe_model(edited(K3, ("architectures",), ["KimiK31ForConditionalGeneration"]),
                       source="k31")
    with pytest.raises(UnsupportedError, match="vLLM 0.33.0 does not serve"):
        build(m, h100_tp8(vllm_version="0.33.0"))
    assert build(m, h100_tp8()).block_size == 768
