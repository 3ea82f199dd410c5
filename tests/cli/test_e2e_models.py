"""End to end from the real configs: `kvplan check MODEL --draft DRAFT ...` gives exactly the golden
numbers of vLLM's own planner, through local paths and through the real huggingface_hub code path
(a hub cache built in a temp folder, HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from tests.golden import BUNDLED, contract, load
from tests.hubcache import make_hub_cache

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
TARGET = CONFIGS / "Qwen--Qwen3.5-27B" / "config.json"
DRAFT = CONFIGS / "z-lab--Qwen3.8-27B-DFlash2" / "config.json"
FLAGS = ["--kv-cache-dtype", "nvfp4", "--max-model-len", "262144", "--max-num-batched-tokens",
         "16384", "--num-speculative-tokens", "7", "--draft-kv-cache-dtype", "bfloat16",
         "--kv-cache-memory", "32GiB", "--gpu", "A100-80GB", "--json"]
# (release, golden case, extra flags): the per-layer specs kvplan builds are the golden ones
SCENARIOS = [
    ("0.33.0", "seed_dflash_sw_block_equals_primary", []),  # FA SW draft takes the 2912 block
    ("0.34.0", "seed_dflash_v034_defaults", []),  # 64-token default block → 2944
    ("0.33.0", "seed_dflash_qwen35_27b", ["--draft-block-size", "16"]),  # the PR's report
]


def _same_up_to_draft_names(got: dict, exp: dict) -> dict:
    """vLLM names DFlash layers after the target (model.layers.64…); the golden cases call them
    drafter.layers.0…. Map ours onto theirs by order, then everything must be equal. (The cases
    name the target's layers as its text model's, model.layers.N; vLLM builds Qwen3.5's language
    model under its multimodal wrapper, language_model.model.layers.N: compared without it.)"""
    for g in got["groups"]:
        g["layer_names"] = [n.removeprefix("language_model.") for n in g["layer_names"]]
    ours = [n for g in got["groups"] for n in g["layer_names"]]
    theirs = {n for g in exp["groups"] for n in g["layer_names"]}
    extra = sorted((n for n in ours if n not in theirs), key=lambda n: int(n.split(".")[2]))
    missing = sorted((n for n in theirs if n not in set(ours)), key=lambda n: int(n.split(".")[2]))
    assert len(extra) == len(missing) == 5  # only the five draft layers are named differently
    rename = dict(zip(extra, missing, strict=True))
    for g in got["groups"]:
        g["layer_names"] = [rename.get(n, n) for n in g["layer_names"]]
    return got


@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize(("version", "case", "extra"), SCENARIOS)
def test_local_configs_reproduce_the_golden_cases(version, case, extra, fix) -> None:
    args = ["check", str(TARGET), "--draft", str(DRAFT), *FLAGS, "--vllm", version, *extra]
    res = CliRunner().invoke(app, args + (["--with-fix"] if fix else []))
    exp = contract(load(BUNDLED / "expected" / f"{case}.{version}{'.patched' if fix else ''}.json"))
    assert res.exit_code == (0 if exp["fits"] else 1), res.output
    out = json.loads(res.stdout)
    assert _same_up_to_draft_names(contract(out["vllm_contract"]), exp) == exp
    # nvfp4 KV on an A100: FlashInfer's FA2 path (0.32+) serves it dequantised, in both releases
    assert any("A100" in w and "only dequantised" in w and "FA2" in w for w in out["warnings"])


def test_the_pr_report_numbers(tmp_path) -> None:
    res = CliRunner().invoke(app, ["check", str(TARGET), "--draft", str(DRAFT), *FLAGS, "--vllm",
                                   "0.33.0", "--draft-block-size", "16"])
    out = json.loads(res.stdout)
    assert out["total_gib_needed"] == ["41.1"] and out["total_blocks_per_request"] == 2631
    assert out["groups"][-1]["blocks_per_request"] == 2177
    assert out["groups"][-1]["page_size_bytes"] == 3_354_624
    res = CliRunner().invoke(app, ["check", str(TARGET), "--draft", str(DRAFT), *FLAGS, "--vllm",
                                   "0.33.0", "--draft-block-size", "16", "--with-fix"])
    out = json.loads(res.stdout)
    assert out["groups"][-1]["block_size_tokens"] == 816
    assert out["groups"][-1]["blocks_per_request"] == 44 and out["total_gib_needed"] == ["7.78"]


def test_hub_ids_through_a_real_offline_cache(tmp_path) -> None:
    cache = tmp_path / "hub"
    make_hub_cache(cache, "Qwen/Qwen3.5-27B", {"config.json": TARGET})
    make_hub_cache(cache, "z-lab/Qwen3.8-27B-DFlash2", {"config.json": DRAFT})
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "home"))
    cmd = [sys.executable, "-m", "kvplan.cli", "check", "Qwen/Qwen3.5-27B", "--draft",
           "z-lab/Qwen3.8-27B-DFlash2", *FLAGS, "--vllm", "0.34.0"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    exp = contract(load(BUNDLED / "expected" / "seed_dflash_v034_defaults.0.34.0.json"))
    got = contract(json.loads(res.stdout)["vllm_contract"])
    assert _same_up_to_draft_names(got, exp) == exp
    # a repo that is not in the cache: one clear line, exit 2, nothing on stdout
    cmd[4] = "Qwen/Qwen3.5-9999B"
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 2 and res.stdout == ""
    assert res.stderr.startswith("Error: ") and "config.json" in res.stderr
    assert "Traceback" not in res.stderr


def _json(args: list[str]) -> tuple[int, dict]:
    res = CliRunner().invoke(app, ["check", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_llama_with_an_eagle3_head_is_one_uniform_group() -> None:
    # Llama-3.1-8B (32 layers) + SafeAILab EAGLE3 (1 layer), both 8 KV heads × 128, fp8:
    # 8·(128+128)·1 B = 2048 B/token/layer; 0.34 block 64 → 128 KiB pages; 33 layers in one group
    code, out = _json([str(CONFIGS / "meta-llama--Llama-3.1-8B"), "--draft",
                       str(CONFIGS / "SafeAILab--EAGLE3-LLaMA3.1-8B-draft-training-config"),
                       "--num-speculative-tokens", "3", "--kv-cache-dtype", "fp8",
                       "--kv-cache-memory", "12GiB", "--max-model-len", "131072"])
    assert code == 0
    (group,) = out["groups"]
    assert group["num_layers"] == 33 and group["draft_layers"] == 1
    assert out["pool_bytes_per_block"] == [33 * 64 * 2048]
    assert group["blocks_per_request"] == 131072 // 64
    assert out["total_bytes_needed"] == [2048 * 33 * 64 * 2048]


def test_deepseek_v3_mtp_layer_joins_the_mla_group() -> None:
    # 61 MLA layers + 1 MTP layer: latent 512 + rope 64 = 576 × 2 B = 1152 B/token, block 64
    code, out = _json([str(CONFIGS / "deepseek-ai--DeepSeek-V3"), "--speculative-method", "mtp",
                       "--num-speculative-tokens", "1", "--kv-cache-memory", "20GiB",
                       "--max-model-len", "163840", "-tp", "8"])
    assert code == 0
    (group,) = out["groups"]
    assert group["kind"] == "mla_attention" and group["num_layers"] == 62
    assert group["page_size_bytes"] == 64 * 1152
    assert out["total_bytes_needed"] == [62 * 64 * 1152 * (163840 // 64)]


def test_pipeline_parallel_halves_the_pool_stride() -> None:
    # Llama-3.1-8B at PP 2: layers 0-15 and 16-31 (get_pp_indices), 16 · 64 · 4096 B per block
    code, out = _json([str(CONFIGS / "meta-llama--Llama-3.1-8B"), "-pp", "2",
                       "--kv-cache-memory", "10GiB", "--max-model-len", "131072"])
    assert code == 0
    assert out["pool_bytes_per_block"] == [16 * 64 * 4096] * 2
    assert out["num_blocks"] == 10 * 2**30 // (16 * 64 * 4096)
    assert out["max_in_flight_tokens"] == 3 * out["max_num_batched_tokens"]  # async: pp + 1
