"""Config parameter-count estimates for the families of issue 9, checked by hand and against
published totals (no model.safetensors.index.json of these checkpoints could be found; the
published figures are the model cards' / hub pages' parameter counts, cited per test).
"""

from __future__ import annotations

import json

import pytest

from kvplan.budget.weights import count_parameters, weight_bytes_from_config
from tests.models.helpers import HF_CONFIGS


def cfg(name: str) -> dict:
    return json.loads((HF_CONFIGS / name / "config.json").read_text())


def test_nemotron_3_super_latent_non_gated_experts() -> None:
    # vLLM nemotron_h.py NemotronHMoE: experts take moe_latent_size 1024 inputs
    # (fc1/fc2_latent_proj 4096 ↔ 1024 around them) and are non-gated (relu2 without mul):
    # per expert up 2688×1024 + down 1024×2688 = 5,505,024; 512 experts × 40 'E' layers
    pc = count_parameters(cfg("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8"))
    assert pc.experts == 40 * 512 * 5_505_024 == 112_742_891_520
    # shared expert (non-gated, 1 × 5376): 2 × 5376 × 4096; latent projections 2 × 1024 × 4096
    assert pc.mlp == 40 * (2 * 5376 * 4096 + 2 * 1024 * 4096)
    # router: gate 512 × 4096 + e_score_correction_bias 512, per MoE layer
    assert pc.router == 40 * (512 * 4096 + 512)
    # Mamba2 (40 'M'): in_proj (2·8192 + 2·8·128 + 128) × 4096 = 76,021,760, conv 10240 × 4 +
    # bias 10240, dt_bias/A_log/D 3 × 128, norm 8192, out_proj 4096 × 8192 → 109,635,968;
    # attention (8 '*'): q 4096² + k,v 2 × 256 × 4096 + o 4096² = 35,651,584
    assert pc.attention == 40 * 109_635_968 + 8 * 35_651_584
    # + embedding and LM head 131072 × 4096 each + 89 norms of 4096
    assert pc.total == 120_668_707_840
    # published: "120B total parameters, 12B active" (model name / card) → within 1 %
    assert abs(pc.total / 120e9 - 1) < 0.01
    # MTP ("*E", not loaded for the target): attention + MoE layer + enorm, hnorm,
    # eh_proj 4096 × 8192, two layer norms and a final_layernorm
    assert pc.extra == 35_651_584 + 2_873_098_752 + 33_554_432 + 5 * 4096


def test_nemotron_3_nano_non_gated_experts_without_latent() -> None:
    # no moe_latent_size: experts on hidden 2688, non-gated: 128 × 2 × 1856 × 2688 each 'E'
    # layer (+ gate 128 × 2688 + bias 128, shared 2 × 3712 × 2688); pattern: 23 M, 23 E, 6 *
    # Mamba: in_proj (2·4096 + 2·8·128 + 64) × 2688, conv 6144 × 4 + 6144, 3 × 64, norm 4096,
    # out_proj 2688 × 4096; attention: q, o 4096 × 2688, k, v 256 × 2688
    h = 2688
    mamba = 10304 * h + 6144 * 4 + 6144 + 3 * 64 + 4096 + h * 4096
    moe = 128 * h + 128 + 128 * 2 * 1856 * h + 2 * 3712 * h
    attention = 2 * 4096 * h + 2 * 256 * h
    pc = count_parameters(cfg("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"))
    assert pc.total == 2 * 131072 * h + 23 * (mamba + moe) + 6 * attention + 53 * h
    assert abs(pc.total / 31.6e9 - 1) < 0.01  # published "31.6B total parameters" (model card)


def test_llama_nemotron_super_49b_per_block() -> None:
    # vLLM nemotron_nas.py: 49 attention blocks (64 heads, 8 KV heads × 128):
    # q, o 8192² + k, v 1024 × 8192 = 150,994,944 each
    pc = count_parameters(cfg("nvidia--Llama-3_3-Nemotron-Super-49B-v1"))
    assert pc.attention == 49 * 150_994_944
    # gated MLP per block, _ffn_mult_to_intermediate_size(mult) = int(2·mult·8192/3) up to a
    # multiple of 256: 0.5 → 2816 (×6), 1.0 → 5632 (×8), 1.3125 → 7168 (×10),
    # 2.625 → 14336 (×6), 3.28125 → 17920 (×1), 5.25 → 28672 (×49); sum 1,642,496
    assert pc.mlp == 3 * 8192 * 1_642_496
    # norms: 49 input_layernorm + 80 post_attention_layernorm + final
    assert pc.norms == 130 * 8192
    assert pc.total == 49_867_145_216
    assert abs(pc.total / 49.9e9 - 1) < 0.01  # published 49.9B (hub page)


@pytest.mark.parametrize(("name", "total", "published"), [
    # ChatGLM3-6B: embedding + output 65024 × 4096 each; per layer query_key_value
    # (32 + 2·2) × 128 = 4608 × 4096 + bias 4608, dense 4096², dense_h_to_4h 2·13696 × 4096,
    # dense_4h_to_h 4096 × 13696, 2 norms; 28 layers + final norm. Published 6.24B.
    ("THUDM--chatglm3-6b",
     2 * 65024 * 4096 + 28 * (4608 * 4096 + 4608 + 4096**2 + 3 * 13696 * 4096 + 2 * 4096) + 4096,
     6.24e9),
    # GLM-4-9B-chat: the same with 151552 vocab and 40 layers. Published 9.4B.
    ("THUDM--glm-4-9b-chat",
     2 * 151552 * 4096 + 40 * (4608 * 4096 + 4608 + 4096**2 + 3 * 13696 * 4096 + 2 * 4096)
     + 4096, 9.4e9),
    # EXAONE-3.0-7.8B: 102400 × 4096 twice (untied); q, o 4096², k, v 1024 × 4096; gated MLP
    # 3 × 14336 × 4096; 32 layers × 2 norms + final. Published 7.8B.
    ("LGAI-EXAONE--EXAONE-3.0-7.8B-Instruct",
     2 * 102400 * 4096 + 32 * (2 * 4096**2 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096)
     + 4096, 7.8e9),
])
def test_dense_remote_code_families(name: str, total: int, published: float) -> None:
    pc = count_parameters(cfg(name))
    assert pc.total == total
    assert abs(pc.total / published - 1) < 0.01


def test_deepseek_vl2_language_config_is_looked_into() -> None:
    # language_config (DeepseekV2Config defaults for what it omits): 32 layers, MLA with
    # q_lora_rank null: q_proj 32·192 × 2560, kv_a_proj_with_mqa 576 × 2560, kv_b_proj
    # 32·256 × 512, o_proj 2560 × 4096 = 31,883,264 per layer (+ kv_a_layernorm 512, counted
    # with the norms); MoE (first_k_dense 1):
    # 72 experts × 3 × 1536 × 2560, 2 shared (3 × 3072 × 2560), gate 72 × 2560 + bias 72
    pc = count_parameters(cfg("deepseek-ai--deepseek-vl2"))
    assert pc.attention == 32 * 31_883_264
    assert pc.experts == 31 * 72 * 3 * 1536 * 2560
    assert pc.other > 0.4e9  # the SigLIP tower (width 1152, 27 layers) as a rough ViT
    # vLLM resolves 32 layers (transformers' default); DeepSeek-VL2 publishes 27.5B parameters,
    # which the same count with 30 layers gives: each of the 2 extra MoE layers is
    # 31,883,264 + 512 + 72·3·1536·2560 + 3·3072·2560 + 72·2560 + 72 + 2·2560 = 905,012,808
    assert abs((pc.total - 2 * 905_012_808) / 27.5e9 - 1) < 0.01


def test_minicpm3_defaults() -> None:
    # transformers MiniCPM3Config defaults (= MiniCPM3-4B): tied 73448 × 2560 embedding;
    # per layer q_a 768 × 2560, q_b 40·96 × 768, kv_a 288 × 2560, kv_b 40·128 × 256,
    # o 2560 × 40·64, 2 lora norms (768 + 256), gated MLP 3 × 6400 × 2560, 2 norms; 62 layers
    config = {"architectures": ["MiniCPM3ForCausalLM"], "model_type": "minicpm3"}
    per_layer = (768 * 2560 + 3840 * 768 + 288 * 2560 + 5120 * 256 + 2560 * 2560 + 1024
                 + 3 * 6400 * 2560 + 2 * 2560)
    pc = count_parameters(config)
    assert pc.total == 73448 * 2560 + 62 * per_layer + 2560
    assert abs(pc.total / 4.07e9 - 1) < 0.01  # published 4.07B (hub page)


def test_chatglm_bytes_match_a_real_index_total() -> None:
    # ChatGLM2-6B's pytorch_model.bin.index.json has "total_size": 12487168064 (quoted in a
    # public fine-tuning script, find_string id 31367392693). ChatGLM2-6B has the shapes of
    # ChatGLM3-6B (28 layers, hidden 4096, padded vocab 65024, ffn 13696, MQA 2 groups, qkv bias;
    # see its printed config, find_string id 48980543818). The checkpoint also stores
    # rotary_pos_emb.inv_freq: (128 / 2) / 2 = 32 float16 values = 64 B, not a parameter.
    wb = weight_bytes_from_config(cfg("THUDM--chatglm3-6b"))
    assert wb.total_bytes == 2 * wb.parameter_count  # float16
    assert wb.total_bytes + 64 == 12_487_168_064
    assert wb.num_kv_heads == 2  # multi_query_group_num


def test_internlm2_and_exaone_class_defaults() -> None:
    # hand-written (no published InternLM2 config found): remote InternLM2Config defaults
    # hidden 4096, 32 layers, 32 heads (= KV heads), intermediate 11008, vocab 103168, untied;
    # vLLM internlm2.py builds wqkv / wo without bias even when the config says bias true
    internlm2 = {"architectures": ["InternLM2ForCausalLM"], "model_type": "internlm2",
                 "bias": True, "tie_word_embeddings": False}
    per_layer = 4 * 4096 * 4096 + 3 * 11008 * 4096 + 2 * 4096
    assert count_parameters(internlm2).total == 2 * 103168 * 4096 + 32 * per_layer + 4096
    # EXAONE-3.0 without intermediate_size: ExaoneConfig takes 4 × hidden = 16384
    config = {k: v for k, v in cfg("LGAI-EXAONE--EXAONE-3.0-7.8B-Instruct").items()
              if k != "intermediate_size"}
    dense = count_parameters(cfg("LGAI-EXAONE--EXAONE-3.0-7.8B-Instruct")).mlp
    assert count_parameters(config).mlp == dense // 14336 * 16384


def test_minimax_m3_modelopt_mixed_names_experts_as_the_checkpoint_does() -> None:
    # quantized_layers names experts Mixtral-style (block_sparse_moe.experts.E.w1/w2/w3) and the
    # attention / dense MLP modules MXFP8; both must reach kvplan's virtual tensors
    c = cfg("nvidia--MiniMax-M3-NVFP4")
    w = weight_bytes_from_config(c, include_vision=False)
    assert not [x for x in w.warnings if "not modelled" in x]
    # NVFP4 expert weight 3072×6144 (or 6144×3072): 4-bit payload 9,437,184 B + fp8 scale per
    # 16 inputs 1,179,648 B + weight_scale_2/input_scale 8 B = 10,616,840 B; 3 per expert,
    # 128 experts, 57 MoE layers (21,888 NVFP4 entries / 384)
    experts = 57 * 128 * 3 * 10_616_840
    assert experts == 232_381_393_920
    pc = count_parameters(c, include_vision=False)
    # everything else is at most bfloat16
    assert experts <= w.total_bytes <= experts + 2 * (pc.total - pc.experts)


@pytest.mark.parametrize("name", ["nvidia--Qwen3.6-27B-NVFP4", "nvidia--MiniMax-M3-NVFP4"])
def test_every_module_quantized_layers_names_is_counted_quantized(name: str) -> None:
    # ModelOpt MIXED_PRECISION lists each quantized checkpoint module; kvplan's virtual tensors
    # may fuse them (Qwen3.5 GDN in_proj_qkv + in_proj_z → in_proj_qkvz) or name them otherwise
    # (MiniMax experts w1/w2/w3): none may fall back to bfloat16
    from kvplan.budget.weights import inventories, schemes

    c = cfg(name)
    qc = c.get("quantization_config") or c["text_config"]["quantization_config"]
    quantized_layers = {schemes.canonical_tail(k) for k in qc["quantized_layers"]}
    vts, _, _ = inventories.config_virtual_tensors(c, include_vision=False)
    plan = schemes.quant_plan(c, None, None)
    checked = 0
    for vt in vts:
        tail = schemes.canonical_tail(vt.module)
        parent, _, leaf = tail.rpartition(".")
        parts = [f"{parent}.{p}" for p in schemes.FUSED_PARTS.get(leaf, ())]
        in_checkpoint = tail in quantized_layers or (parts and all(
            p in quantized_layers for p in parts)) or (".experts." in tail and any(
                k.startswith(tail.rpartition(".experts.")[0] + ".experts.") for k in quantized_layers))
        if vt.role == "linear" and in_checkpoint:
            checked += 1
            assert schemes.scheme_for(vt, plan).kind != "none", vt.name
    assert checked > 100
