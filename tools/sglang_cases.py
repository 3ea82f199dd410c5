#!/usr/bin/env python3
"""Writes the SGLang 0.5.23 golden cases (tests/data/sglang-0.5.23/cases/*.json).

    python3 tools/sglang_cases.py            # (re)write every case file
    python3 tools/sglang_cases.py --list     # names only

Each case is an input of tools/sglang_oracle_ext.py (the schema of the shared SGLang oracle, plus
``draft_model_dir`` / ``env``). Models are the real configs under tests/data/hf-configs (byte-exact
copies with PROVENANCE entries), referenced by relative path. GPU totals are what nvidia-smi reports
(``memory.total``, MiB; sources in kvplan/data/gpus.csv); the free memory before and after loading
the weights is an input chosen per case (a plausible figure, not a measurement).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "sglang-0.5.23" / "cases"
CFG = "../../hf-configs/"

# nvidia-smi memory.total (MiB) and the free memory SGLang would see before loading weights (GiB)
H100 = {"gpu_total_memory_mib": 81559, "pre_model_load_memory_gib": 78.6}
H200 = {"gpu_total_memory_mib": 143771, "pre_model_load_memory_gib": 139.2}
B200 = {"gpu_total_memory_mib": 183359, "pre_model_load_memory_gib": 177.4,
        "platform": "cuda_sm100"}
A100_40 = {"gpu_total_memory_mib": 40960, "pre_model_load_memory_gib": 39.0,
           "platform": "cuda_sm80"}
L4 = {"gpu_total_memory_mib": 23034, "pre_model_load_memory_gib": 21.9, "platform": "cuda_sm89"}
H20 = {"gpu_total_memory_mib": 97871, "pre_model_load_memory_gib": 94.6}

LLAMA8 = CFG + "meta-llama--Llama-3.1-8B"
LLAMA70 = CFG + "meta-llama--Llama-3.1-70B"
LLAMA70_FP8 = CFG + "nvidia--Llama-3.1-70B-Instruct-FP8"
QWEN3_8 = CFG + "Qwen--Qwen3-8B"
QWEN25_7 = CFG + "Qwen--Qwen2.5-7B"
QWEN3_30 = CFG + "Qwen--Qwen3-30B-A3B"
QWEN3_30_FP8 = CFG + "Qwen--Qwen3-30B-A3B-FP8"
QWEN25_VL = CFG + "Qwen--Qwen2.5-VL-7B-Instruct"
QWEN3_VL8 = CFG + "Qwen--Qwen3-VL-8B-Instruct"
MISTRAL7 = CFG + "mistralai--Mistral-7B-v0.1"
DSV3 = CFG + "deepseek-ai--DeepSeek-V3"
DSV31_NVFP4 = CFG + "nvidia--DeepSeek-V3.1-NVFP4"
DSV32 = CFG + "deepseek-ai--DeepSeek-V3.2"
DSV4_FLASH = CFG + "deepseek-ai--DeepSeek-V4-Flash"
DSV4_PRO = CFG + "deepseek-ai--DeepSeek-V4-Pro"
GLM51 = CFG + "zai-org--GLM-5.1"
KIMI_K2 = CFG + "moonshotai--Kimi-K2-Instruct"
GPT_OSS = CFG + "openai--gpt-oss-20b"
GEMMA4 = CFG + "google--gemma-4-26B-A4B"
MIMO_V2 = CFG + "XiaomiMiMo--MiMo-V2-Flash"
QWEN3_NEXT = CFG + "Qwen--Qwen3-Next-80B-A3B-Thinking"
QWEN35_27 = CFG + "Qwen--Qwen3.5-27B"
QWEN35_35 = CFG + "Qwen--Qwen3.5-35B-A3B"
QWEN35_397 = CFG + "Qwen--Qwen3.5-397B-A17B"
QWEN36_NVFP4 = CFG + "nvidia--Qwen3.6-27B-NVFP4"
NEMOTRON_H = CFG + "nvidia--Nemotron-H-56B-Base-8K"
NEMOTRON3_NANO = CFG + "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
NEMOTRON3_SUPER = CFG + "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8"
KIMI_LINEAR = CFG + "moonshotai--Kimi-Linear-48B-A3B-Instruct"
EAGLE3_LLAMA8 = CFG + "SafeAILab--EAGLE3-LLaMA3.1-8B-draft-training-config"
DFLASH2_QWEN = CFG + "z-lab--Qwen3.8-27B-DFlash2"

GIB = 1 << 30


def case(name, model, gpu=None, *, weights=None, avail=None, budget=None, notes="", draft=None,
         env=None, **server_args):
    c = {"name": name, "model_dir": model}
    if notes:
        c["notes"] = notes
    if gpu:
        c.update(gpu)
    if budget is not None:
        c.pop("pre_model_load_memory_gib", None)
        c["kv_budget_bytes"] = budget
    elif avail is not None:
        c["available_gpu_memory_gib"] = avail
    else:
        c["weights_gib"] = weights
    if draft:
        c["draft_model_dir"] = draft
    if env:
        c["env"] = env
    c["server_args"] = server_args
    return c


CASES = [
    # ---- DefaultPoolConfigurator, MHA / GQA ------------------------------------------------
    case("llama31_8b_bf16", LLAMA8, H100, weights=14.99),
    case("llama31_8b_fp8_e4m3", LLAMA8, H100, weights=14.99, kv_cache_dtype="fp8_e4m3"),
    case("llama31_8b_fp8_e5m2", LLAMA8, H100, weights=14.99, kv_cache_dtype="fp8_e5m2"),
    case("llama31_8b_kv_bf16_explicit", LLAMA8, H100, weights=14.99, kv_cache_dtype="bf16"),
    case("llama31_8b_page64_mrr64", LLAMA8, H100, weights=14.99, page_size=64,
         max_running_requests=64),
    case("llama31_8b_mfs090", LLAMA8, H100, weights=14.99, mem_fraction_static=0.9),
    case("llama31_8b_ctx8k", LLAMA8, H100, weights=14.99, context_length=8192),
    case("llama31_8b_max_total_tokens", LLAMA8, H100, weights=14.99, max_total_tokens=100000),
    case("llama31_8b_max_total_tokens_above", LLAMA8, H100, weights=14.99,
         max_total_tokens=10_000_000),
    case("llama31_8b_mrr_reduced", LLAMA8, H100, weights=14.99, max_running_requests=4096,
         context_length=2048, max_total_tokens=6000),
    case("llama31_8b_chunked4096", LLAMA8, H100, weights=14.99, chunked_prefill_size=4096),
    case("llama31_8b_cuda_graph_bs64", LLAMA8, H100, weights=14.99, cuda_graph_max_bs_decode=64),
    case("llama31_8b_a100_40g", LLAMA8, A100_40, weights=14.99),
    case("qwen25_7b_l4_tp2_fp8", QWEN25_7, L4, weights=7.6, tp_size=2, kv_cache_dtype="fp8_e4m3"),
    case("llama31_8b_h20", LLAMA8, H20, weights=14.99),
    case("llama31_8b_b200", LLAMA8, B200, weights=14.99),
    case("llama31_8b_b200_nvfp4", LLAMA8, B200, weights=14.99, kv_cache_dtype="nvfp4"),
    case("llama31_8b_b200_mxfp8", LLAMA8, B200, weights=14.99, kv_cache_dtype="mxfp8"),
    case("llama31_8b_budget20g", LLAMA8, H100, budget=20 * GIB),
    case("qwen3_8b_bf16", QWEN3_8, H100, weights=15.26),
    case("qwen3_8b_fp8", QWEN3_8, H100, weights=15.26, kv_cache_dtype="fp8_e4m3"),
    case("qwen25_7b_tp8", QWEN25_7, H100, weights=1.9, tp_size=8),
    case("llama31_70b_tp4", LLAMA70, H100, weights=32.9, tp_size=4),
    case("llama31_70b_tp8_h200", LLAMA70, H200, weights=16.4, tp_size=8),
    case("llama31_70b_fp8_ckpt_tp2", LLAMA70_FP8, H100, weights=34.0, tp_size=2,
         notes="ModelOpt checkpoint with kv_cache_quant_algo FP8: auto KV is fp8"),
    case("llama31_70b_tp2_pp2", LLAMA70, H100, weights=[32.9, 32.9], tp_size=2, pp_size=2),
    case("llama31_70b_pp3", LLAMA70, H200, weights=[43.1, 44.7, 45.6], pp_size=3),
    case("qwen3_30b_a3b_tp2", QWEN3_30, H100, weights=28.5, tp_size=2),
    case("qwen3_30b_a3b_fp8_ckpt", QWEN3_30_FP8, H100, weights=29.8),
    case("qwen3_30b_a3b_dp_attention", QWEN3_30, H100, weights=14.3, tp_size=4, dp_size=4,
         enable_dp_attention=True),
    case("qwen25_vl_7b", QWEN25_VL, H100, weights=15.5),
    case("qwen3_vl_8b", QWEN3_VL8, H100, weights=16.3),
    case("mistral_7b", MISTRAL7, H100, weights=13.5),
    # ---- MLA ---------------------------------------------------------------------------------
    case("deepseek_v3_tp8_budget40g_bf16", DSV3, H100, budget=40 * GIB, tp_size=8),
    case("deepseek_v3_tp8_budget40g_fp8", DSV3, H100, budget=40 * GIB, tp_size=8,
         kv_cache_dtype="fp8_e4m3"),
    case("deepseek_v3_tp8_h200", DSV3, H200, weights=83.5, tp_size=8),
    case("deepseek_v3_tp8_h200_fp8", DSV3, H200, weights=83.5, tp_size=8,
         kv_cache_dtype="fp8_e4m3"),
    case("deepseek_v3_tp8_dp8_dp_attention", DSV3, H200, weights=83.5, tp_size=8, dp_size=8,
         enable_dp_attention=True),
    case("deepseek_v3_tp8_mtp", DSV3, H200, weights=85.1, tp_size=8,
         speculative_algorithm="EAGLE", speculative_num_steps=3, speculative_eagle_topk=1,
         speculative_num_draft_tokens=4),
    case("deepseek_v3_b200_tp8", DSV3, B200, weights=83.5, tp_size=8),
    case("deepseek_v31_nvfp4_b200_tp4", DSV31_NVFP4, B200, weights=95.0, tp_size=4,
         notes="ModelOpt NVFP4 weights, kv_cache_quant_algo FP8"),
    case("err_deepseek_v3_b200_nvfp4_kv", DSV3, B200, weights=83.5, tp_size=8,
         kv_cache_dtype="nvfp4"),
    case("kimi_k2_tp8_h200", KIMI_K2, H200, weights=120.0, tp_size=8),
    case("deepseek_v32_tp8_h200", DSV32, H200, weights=83.5, tp_size=8),
    case("deepseek_v32_tp8_h200_fp8", DSV32, H200, weights=83.5, tp_size=8,
         kv_cache_dtype="fp8_e4m3"),
    case("glm51_tp8_h200", GLM51, H200, weights=92.0, tp_size=8),
    # ---- DeepSeek V4 -------------------------------------------------------------------------
    case("deepseek_v4_flash_tp4_h200", DSV4_FLASH, H200, weights=40.0, tp_size=4),
    case("deepseek_v4_flash_tp4_h200_mrr64", DSV4_FLASH, H200, weights=40.0, tp_size=4,
         max_running_requests=64),
    case("deepseek_v4_pro_tp8_b200", DSV4_PRO, B200, weights=110.0, tp_size=8),
    # ---- hybrid SWA --------------------------------------------------------------------------
    case("gpt_oss_20b_bf16", GPT_OSS, H100, weights=12.8),
    case("gpt_oss_20b_fp8", GPT_OSS, H100, weights=12.8, kv_cache_dtype="fp8_e4m3"),
    case("gpt_oss_20b_swa_ratio05", GPT_OSS, H100, weights=12.8, swa_full_tokens_ratio=0.5),
    case("gpt_oss_20b_request_cap", GPT_OSS, H100, weights=12.8, disable_radix_cache=True,
         max_running_requests=64),
    case("gpt_oss_20b_budget8g", GPT_OSS, H100, budget=8 * GIB),
    case("gemma4_26b_a4b", GEMMA4, H100, weights=48.5),
    case("gemma4_26b_a4b_fp8", GEMMA4, H100, weights=48.5, kv_cache_dtype="fp8_e4m3"),
    case("mimo_v2_flash_tp8_h200", MIMO_V2, H200, weights=38.5, tp_size=8),
    # ---- Mamba / linear attention hybrids -----------------------------------------------------
    case("qwen3_next_80b_tp4_bf16", QWEN3_NEXT, H100, weights=37.5, tp_size=4),
    case("qwen3_next_80b_tp4_fp8", QWEN3_NEXT, H100, weights=37.5, tp_size=4,
         kv_cache_dtype="fp8_e4m3"),
    case("qwen3_next_80b_tp4_mamba_ratio02", QWEN3_NEXT, H100, weights=37.5, tp_size=4,
         mamba_full_memory_ratio=0.2),
    case("qwen3_next_80b_tp4_max_mamba_300", QWEN3_NEXT, H100, weights=37.5, tp_size=4,
         max_mamba_cache_size=300),
    case("qwen3_next_80b_tp4_no_radix_mrr32", QWEN3_NEXT, H100, weights=37.5, tp_size=4,
         disable_radix_cache=True, max_running_requests=32),
    case("qwen3_next_80b_tp4_mtp", QWEN3_NEXT, H100, weights=38.2, tp_size=4,
         speculative_algorithm="NEXTN", speculative_num_steps=3, speculative_eagle_topk=1,
         speculative_num_draft_tokens=4),
    case("qwen3_next_80b_tp2_pp2", QWEN3_NEXT, H100, weights=[37.5, 37.5], tp_size=2,
         pp_size=2),
    case("qwen3_next_80b_budget", QWEN3_NEXT, H100, budget=10 * GIB, tp_size=4),
    case("qwen35_27b_bf16", QWEN35_27, H100, weights=50.1),
    case("qwen35_27b_fp8", QWEN35_27, H100, weights=50.1, kv_cache_dtype="fp8_e4m3"),
    case("qwen35_35b_a3b_tp2", QWEN35_35, H100, weights=33.6, tp_size=2),
    case("qwen35_397b_tp8_h200", QWEN35_397, H200, weights=93.0, tp_size=8),
    case("qwen36_27b_nvfp4", QWEN36_NVFP4, H100, weights=19.5),
    case("nemotron_h_56b_tp2", NEMOTRON_H, H100, weights=52.3, tp_size=2),
    case("nemotron3_nano_30b", NEMOTRON3_NANO, H100, weights=58.9),
    case("nemotron3_super_120b_fp8_tp2", NEMOTRON3_SUPER, H100, weights=59.0, tp_size=2),
    case("kimi_linear_48b_tp2", KIMI_LINEAR, H100, weights=45.5, tp_size=2),
    # ---- speculative decoding ------------------------------------------------------------------
    case("llama31_8b_eagle3", LLAMA8, H100, weights=15.8, draft=EAGLE3_LLAMA8,
         speculative_algorithm="EAGLE3", speculative_num_steps=3, speculative_eagle_topk=1,
         speculative_num_draft_tokens=4),
    case("llama31_8b_eagle3_topk4", LLAMA8, H100, weights=15.8, draft=EAGLE3_LLAMA8,
         speculative_algorithm="EAGLE3", speculative_num_steps=5, speculative_eagle_topk=4,
         speculative_num_draft_tokens=8, max_running_requests=32),
    case("llama31_70b_standalone_8b", LLAMA70, H100, weights=36.7, draft=LLAMA8, tp_size=4,
         speculative_algorithm="STANDALONE", speculative_num_steps=4, speculative_eagle_topk=1,
         speculative_num_draft_tokens=5),
    case("qwen36_27b_dflash2", QWEN36_NVFP4, H100, weights=21.0, draft=DFLASH2_QWEN,
         speculative_algorithm="DFLASH"),
    # ---- Blackwell defaults (trtllm backends, page 64) ----------------------------------------
    case("gpt_oss_20b_b200", GPT_OSS, B200, weights=12.8),
    case("gpt_oss_20b_b200_mxfp8", GPT_OSS, B200, weights=12.8, kv_cache_dtype="mxfp8"),
    case("gemma4_26b_a4b_b200", GEMMA4, B200, weights=48.5),
    case("qwen3_next_80b_b200_tp2", QWEN3_NEXT, B200, weights=74.6, tp_size=2),
    case("deepseek_v32_b200_tp8", DSV32, B200, weights=83.5, tp_size=8),
    case("mimo_v2_flash_mtp_tp8_h200", MIMO_V2, H200, weights=39.2, tp_size=8,
         speculative_algorithm="EAGLE", speculative_num_steps=1, speculative_eagle_topk=1,
         speculative_num_draft_tokens=2),
    # ---- start-up errors --------------------------------------------------------------------
    case("err_llama31_8b_mxfp8_h100", LLAMA8, H100, weights=14.99, kv_cache_dtype="mxfp8"),
    case("err_llama31_8b_nvfp4_h100", LLAMA8, H100, weights=14.99, kv_cache_dtype="nvfp4"),
    case("err_llama31_8b_kv_fp8", LLAMA8, H100, weights=14.99, kv_cache_dtype="fp8"),
    case("err_deepseek_v4_flash_swa_ratio", DSV4_FLASH, H200, weights=40.0, tp_size=4,
         swa_full_tokens_ratio=0.00001),
    case("err_llama31_8b_tiny_budget", LLAMA8, H100, budget=100000),
    case("err_llama31_8b_mfs015", LLAMA8, H100, weights=14.99, mem_fraction_static=0.15),
    case("err_llama31_8b_l4", LLAMA8, L4, weights=14.99, kv_cache_dtype="fp8_e4m3"),
    case("err_llama31_8b_ctx_too_long", LLAMA8, H100, weights=14.99, context_length=200000),
    case("err_gpt_oss_swa_ratio_tiny", GPT_OSS, H100, weights=12.8, mem_fraction_static=0.2,
         swa_full_tokens_ratio=0.00001),
    case("err_gpt_oss_request_cap_no_room", GPT_OSS, H100, budget=2 * GIB,
         disable_radix_cache=True, max_running_requests=4096),
    case("err_qwen3_next_no_mamba_room", QWEN3_NEXT, H100, avail=14.38, tp_size=4),
    case("err_qwen3_next_mamba_state", QWEN3_NEXT, H100, avail=14.0, tp_size=4),
]


def main(argv: list[str]) -> int:
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    if "--list" in argv:
        print("\n".join(names))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for c in CASES:
        (OUT / f"{c['name']}.json").write_text(json.dumps(c, indent=2) + "\n")
    print(f"{len(CASES)} cases in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
