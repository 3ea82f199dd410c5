#!/usr/bin/env python3
"""Make the vLLM end-to-end golden files: tests/data/vllm-e2e-<version>/<config>[@<variant>].json.

    python3 tools/vllm_e2e_golden.py [--version 0.34.0] [--vllm-python PY] [--only SUBSTR]
                                     [--variants base|all|NAME,...] [--reuse DIR] [--jobs 1]

For each (config, variant) of the matrix below it runs `tools/vllm_e2e_ext.py` (vLLM's own start-up
code from config.json to the KV-cache plan, `shared/vllm-e2e/vllm_e2e.py` extended) with the
release's oracle venv, and writes what vLLM did, trimmed to the fields the golden test compares
and made deterministic (the config folder is `<model>`, a draft folder `<draft>`; no temp paths,
no timestamps, no logs). `--reuse DIR` takes the base variant of a config from `DIR/<config>.vllm
.json` (the output of `shared/vllm-e2e/compare.py --out DIR`, the same harness and flags) instead
of running vLLM again. The kvplan flags of each variant are stored in the golden file: the test
runs `kvplan.check` with exactly them. Never run by the tests (the goldens are committed).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HF = ROOT / "tests" / "data" / "hf-configs"
EXAMPLES = ROOT / "examples" / "configs"
EXT = ROOT / "tools" / "vllm_e2e_ext.py"
HARNESS_DIR = os.environ.get("VLLM_E2E_HARNESS_DIR", "/work/shared/vllm-e2e")
sys.path.insert(0, HARNESS_DIR)
from compare import classify_vllm_failure  # noqa: E402  (the shared verdicts, read-only)

KV_MEMORY_BYTES = 40 * 1024**3
BASE_FLAGS = {"tensor_parallel_size": 1, "max_model_len": 32768, "max_num_batched_tokens": 8192,
              "kv_cache_memory": "40GiB", "gpu": "H100"}
# kvplan's --gpu for each of the harness's GPUs (the catalogue entry whose name vLLM reports)
KVPLAN_GPU = {"H100": "H100", "A100": "A100-SXM4-80GB", "L40S": "L40S", "B200": "B200"}
# configs made by hand (not a published config.json): not golden material
HANDMADE = re.compile(r"^(handmade|kvplan-handmade)--")
EAGLE3_DRAFT = "SafeAILab--EAGLE3-LLaMA3.1-8B-draft-training-config"
DFLASH2_DRAFT = "z-lab--Qwen3.8-27B-DFlash2"


def _spec(method: str, draft: str | None, k: int) -> dict:
    d: dict = {"method": method, "num_speculative_tokens": k}
    if draft is not None:
        d["model"] = draft
    return d


# variant name → (configs, ext-harness changes); a sensible matrix: every dimension on a few
# representative real configs (plain GQA, MoE, MLA, sparse MLA, GDN / Mamba hybrids, sliding window
# with sinks, multimodal wrappers), not everything × everything
VARIANTS: dict[str, tuple[tuple[str, ...], dict]] = {
    "tp2": (("Qwen--Qwen3-8B", "Qwen--Qwen3-30B-A3B", "openai--gpt-oss-20b", "Qwen--Qwen3.5-27B",
             "google--gemma-4-26B-A4B", "nvidia--Nemotron-H-56B-Base-8K",
             "moonshotai--Kimi-Linear-48B-A3B-Instruct",
             # heldout-configs-2 (run with --configs tests/data/heldout-configs-2)
             "google--gemma-3-27b-it", "ibm-granite--granite-4-8b-dense-hybrid"), {"tp": 2}),
    "tp4": (("meta-llama--Llama-3.1-70B", "Qwen--Qwen3-Next-80B-A3B-Thinking",
             "nvidia--MiniMax-M2.5-NVFP4", "mistralai--Mistral-Small-3.1-24B-Instruct-2503",
             "openai--gpt-oss-120b", "mistralai--Mixtral-8x22B-v0.1"), {"tp": 4}),
    "tp8": (("deepseek-ai--DeepSeek-V3", "deepseek-ai--DeepSeek-V3.2", "Qwen--Qwen3.5-397B-A17B",
             "zai-org--GLM-5.1", "zai-org--GLM-4.5", "nvidia--Kimi-K2.7-Code-NVFP4",
             "nvidia--DeepSeek-V4-Pro-NVFP4", "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-NVFP4"),
            {"tp": 8}),
    "fp8": (("meta-llama--Llama-3.1-8B", "Qwen--Qwen3-Next-80B-A3B-Thinking", "openai--gpt-oss-20b",
             "deepseek-ai--DeepSeek-V3", "Qwen--Qwen3.5-27B", "google--gemma-4-26B-A4B",
             "XiaomiMiMo--MiMo-V2-Flash", "zai-org--GLM-4.5", "nvidia--Qwen3.5-122B-A10B-NVFP4",
             "Qwen--Qwen2.5-VL-3B-Instruct"), {"kv_cache_dtype": "fp8"}),
    # sparse MLA: `fp8` is FlashMLA sparse's alias (fp8_ds_mla, 656 B/token); `fp8_e4m3` (what a
    # ModelOpt FP8-KV checkpoint gives) goes to FlashInfer's SM90 sparse backend (576 B/token)
    "fp8-sparse": (("deepseek-ai--DeepSeek-V3.2", "zai-org--GLM-5.1"), {"kv_cache_dtype": "fp8"}),
    "fp8_e4m3": (("deepseek-ai--DeepSeek-V3.2", "zai-org--GLM-5.1", "meta-llama--Llama-3.1-8B"),
                 {"kv_cache_dtype": "fp8_e4m3"}),
    "a100": (("meta-llama--Llama-3.1-8B", "Qwen--Qwen3-Next-80B-A3B-Thinking", "openai--gpt-oss-20b",
              "deepseek-ai--DeepSeek-V3", "Qwen--Qwen3.5-27B", "google--gemma-4-26B-A4B",
              "mistralai--Mistral-7B-v0.1", "deepseek-ai--DeepSeek-V3.2",
              "deepseek-ai--DeepSeek-V2-Lite"), {"gpu": "A100"}),
    "l40s": (("meta-llama--Llama-3.1-8B", "openai--gpt-oss-20b", "Qwen--Qwen3-Next-80B-A3B-Thinking",
              "deepseek-ai--DeepSeek-V3"), {"gpu": "L40S"}),
    "b200": (("meta-llama--Llama-3.1-8B", "openai--gpt-oss-20b", "deepseek-ai--DeepSeek-V3",
              "deepseek-ai--DeepSeek-V3.2", "Qwen--Qwen3.5-27B", "google--gemma-4-26B-A4B",
              "zai-org--GLM-5.1", "openai--gpt-oss-120b", "nvidia--Gemma-4-26B-A4B-NVFP4"),
             {"gpu": "B200"}),
    "b200-fp8": (("meta-llama--Llama-3.1-8B", "deepseek-ai--DeepSeek-V3"),
                 {"gpu": "B200", "kv_cache_dtype": "fp8"}),
    "b200-nvfp4": (("meta-llama--Llama-3.1-8B", "Qwen--Qwen3-30B-A3B"),
                   {"gpu": "B200", "kv_cache_dtype": "nvfp4"}),
    "eagle3-k3": (("meta-llama--Llama-3.1-8B",),
                  {"speculative_config": _spec("eagle3", EAGLE3_DRAFT, 3)}),
    "mtp-k1": (("deepseek-ai--DeepSeek-V3", "Qwen--Qwen3.5-27B", "zai-org--GLM-5.1",
                "XiaomiMiMo--MiMo-V2-Flash", "zai-org--GLM-4.5"),
               {"speculative_config": _spec("mtp", None, 1)}),
    "mtp-k3": (("Qwen--Qwen3-Next-80B-A3B-Thinking",), {"speculative_config": _spec("mtp", None, 3)}),
    "dflash2-k8": (("Qwen--Qwen3.5-27B",),
                   {"speculative_config": _spec("dflash", DFLASH2_DRAFT, 8)}),
    # held-out configs whose derived length is below the base 32768 (vLLM refuses the base flags):
    # planned at a length they take (heldout-configs-2: encoder-only pooling models, Whisper
    # tiny, 2048/4096-position decoders)
    "len512": (("BAAI--bge-reranker-large", "ibm-granite--granite-embedding-125m-english",
                "ibm-granite--granite-embedding-278m-multilingual", "intfloat--multilingual-e5-large",
                "sentence-transformers--all-roberta-large-v1"), {"max_model_len": 512}),
    "len448": (("openai--whisper-tiny",), {"max_model_len": 448}),
    "len2048": (("meta-llama--Llama-2-7b-hf", "ALLaM-AI--ALLaM-7B-Instruct-preview"),
                {"max_model_len": 2048}),
}
# the base variant on older releases: representative configs whose model class each wheel builds
RELEASE_CONFIGS = ("Qwen--Qwen3-8B", "meta-llama--Llama-3.1-8B", "openai--gpt-oss-20b",
                   "Qwen--Qwen3-Next-80B-A3B-Thinking", "deepseek-ai--DeepSeek-V3",
                   "deepseek-ai--DeepSeek-V3.2", "Qwen--Qwen3.5-27B", "google--gemma-4-26B-A4B",
                   "nvidia--Nemotron-H-56B-Base-8K", "Qwen--Qwen2.5-VL-7B-Instruct",
                   "microsoft--phi-4", "mistralai--Mistral-Small-3.1-24B-Instruct-2503",
                   "XiaomiMiMo--MiMo-V2-Flash", "moonshotai--Kimi-Linear-48B-A3B-Instruct",
                   "aiconfigurator-stub--meta-llama--Llama-4-Scout-17B-16E-Instruct",
                   "FreedomIntelligence--openPangu-Embedded-7B", "THUDM--chatglm3-6b")


def real_configs() -> list[str]:
    return sorted(p.name for p in HF.iterdir()
                  if (p / "config.json").is_file() and not HANDMADE.match(p.name))


def matrix(version: str, which: str) -> list[tuple[str, str, dict]]:
    """(config, variant, ext changes)."""
    base = real_configs() if version == "0.34.0" else list(RELEASE_CONFIGS)
    runs = [(c, "base", {}) for c in base] if which in ("base", "all") or "base" in which else []
    if version == "0.34.0" and which != "base":
        names = VARIANTS if which == "all" else [v for v in which.split(",") if v in VARIANTS]
        # a variant's configs that are in the --configs folder (held-out sets name their own)
        runs += [(c, v, VARIANTS[v][1]) for v in names for c in VARIANTS[v][0]
                 if (HF / c / "config.json").is_file()]
    return runs


def ext_args(cfg_dir: Path, changes: dict) -> list[str]:
    args = [str(cfg_dir), "--pass-kv-cache-memory-bytes", "--kv-memory", str(KV_MEMORY_BYTES),
            "--max-model-len", str(changes.get("max_model_len", BASE_FLAGS["max_model_len"])),
            "--max-num-batched-tokens", str(BASE_FLAGS["max_num_batched_tokens"])]
    if changes.get("tp"):
        args += ["--tp", str(changes["tp"])]
    if changes.get("gpu"):
        args += ["--gpu", changes["gpu"]]
    if changes.get("kv_cache_dtype"):
        args += ["--kv-cache-dtype", changes["kv_cache_dtype"]]
    if changes.get("speculative_config"):
        spec = dict(changes["speculative_config"])
        if "model" in spec:
            spec["model"] = str(HF / spec["model"])
        args += ["--speculative-config", json.dumps(spec)]
    return args


def kvplan_flags(version: str, changes: dict) -> dict:
    flags = dict(BASE_FLAGS, vllm=version)
    if changes.get("max_model_len"):
        flags["max_model_len"] = changes["max_model_len"]
    if changes.get("tp"):
        flags["tensor_parallel_size"] = changes["tp"]
    if changes.get("gpu"):
        flags["gpu"] = KVPLAN_GPU[changes["gpu"]]
    if changes.get("kv_cache_dtype"):
        flags["kv_cache_dtype"] = changes["kv_cache_dtype"]
    if changes.get("speculative_config"):
        spec = dict(changes["speculative_config"])
        if "model" in spec:  # a path relative to the repository root
            spec["model"] = str((HF / spec["model"]).relative_to(ROOT))
        flags["speculative_config"] = spec
    return flags


def run_harness(py: str, cfg_dir: Path, changes: dict, timeout: int) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    try:
        p = subprocess.run([py, str(EXT), *ext_args(cfg_dir, changes)], capture_output=True,
                           text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "harness_timeout"}
    try:
        d: dict = json.loads(p.stdout)
    except json.JSONDecodeError:
        return {"status": "harness_crash", "stderr_tail": p.stderr[-3000:]}
    d["stderr_tail"] = p.stderr[-3000:]
    return d


def _clean(text: str, paths: dict[str, str]) -> str:
    for path, tag in sorted(paths.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(path, tag)
    return re.sub(r"/tmp/[A-Za-z0-9_./-]+", "<tmp>", text)


def _vllm_startup_error(v: dict) -> bool:
    """vLLM's own block-size / grouping / planning code raised (not the harness, not an import):
    the last frame is in vLLM's v1 core, its platform or a backend."""
    frames = re.findall(r'File "([^"]+)"', v.get("traceback", ""))
    return (v.get("stage") in ("model", "block_size", "plan", "draft_model") and bool(frames)
            and re.search(r"/vllm/(v1/core|platforms|v1/attention|config)/", frames[-1]) is not None
            and (v.get("exception") or {}).get("type") in ("ValueError", "AssertionError",
                                                            "NotImplementedError"))


def golden(config: str, variant: str, version: str, changes: dict, v: dict,
           cfg_dir: Path) -> dict:
    paths = {str(cfg_dir): "<model>", str(cfg_dir.resolve()): "<model>"}
    for other in ("/work/main/tests/data/hf-configs", str(HF)):  # --reuse outputs of main
        paths[f"{other}/{config}"] = "<model>"
    spec = changes.get("speculative_config") or {}
    if "model" in spec:
        paths[str(HF / spec["model"])] = "<draft>"
    out: dict = {
        "config": config,
        "config_paths": [str((HF / config).relative_to(ROOT))]
        + [str((EXAMPLES / config).relative_to(ROOT)) for _ in [0]
           if (EXAMPLES / config / "config.json").is_file()
           and (EXAMPLES / config / "config.json").read_bytes()
           == (HF / config / "config.json").read_bytes()],
        "variant": variant,
        "vllm_version": v.get("vllm_version", version),
        "harness": ("shared/vllm-e2e/vllm_e2e.py via tools/vllm_e2e_ext.py"
                    if "ext" in v else "shared/vllm-e2e/vllm_e2e.py (compare.py run, same flags)"),
        "kvplan_flags": kvplan_flags(version, changes),
        "vllm_serve_args": [_clean(a, paths) for a in v.get("serve_argv") or []],
    }
    if v.get("status") != "ok":
        verdict = classify_vllm_failure(v)
        if verdict in ("HARNESS_ERROR", "VLLM_MODEL_INIT_ERROR") and _vllm_startup_error(v):
            verdict = "VLLM_STARTUP_ERROR"
        exc = v.get("exception") or {}
        out["outcome"] = verdict
        out["vllm_error"] = {"stage": v.get("stage"), "type": exc.get("type"),
                             "message": _clean(str(exc.get("message", "")), paths)}
        return out
    out["outcome"] = "PLANNED"
    for k in ("architecture", "model_class", "draft_model_class", "model_dtype", "cache_dtype",
              "attention_backends", "cache_block_size_after_update", "mamba_page_size_padded",
              "kv_cache_layout", "fits", "num_blocks", "kv_cache_size_tokens", "max_concurrency",
              "capacity_log_line", "max_model_len_after_planning", "backend_import_rejects"):
        if k in v:
            out[k] = v[k]
    if not v.get("fits"):
        out["plan_error"] = v.get("error")
    out["groups"] = [{k: g.get(k) for k in ("spec_type", "block_size", "page_size_bytes",
                                            "num_layers", "layer_names", "layer_spec_types",
                                            "sliding_window", "attention_chunk_size",
                                            "is_eagle_group") if k in g}
                     for g in v.get("groups") or []]
    out["layer_specs"] = [{k: s.get(k) for k in ("class", "block_size", "num_kv_heads",
                                                 "head_size", "dtype", "page_size_bytes",
                                                 "num_layers", "first_layer", "is_draft")
                           if k in s} for s in v.get("layer_specs") or []]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--version", default="0.34.0")
    ap.add_argument("--vllm-python", default=None)
    ap.add_argument("--variants", default="all")
    ap.add_argument("--only", default=None, help="configs whose name contains this")
    ap.add_argument("--reuse", default=None)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--out", default=None)
    ap.add_argument("--configs", default=None,
                    help="the folder of config folders (default tests/data/hf-configs); e.g. "
                         "tests/data/heldout-configs with --variants base")
    ap.add_argument("--only-missing", action="store_true",
                    help="skip the (config, variant) runs whose golden file exists")
    a = ap.parse_args(argv)
    if a.configs:
        global HF
        HF = Path(a.configs).resolve()
    py = a.vllm_python or os.environ.get("VLLM_E2E_PYTHON") or \
        f"/work/oracle/.venv-{a.version}/bin/python"
    out_dir = Path(a.out or ROOT / "tests" / "data" / f"vllm-e2e-{a.version}")
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = [r for r in matrix(a.version, a.variants) if not a.only or a.only in r[0]]
    if a.only_missing:
        runs = [r for r in runs if not (out_dir / (
            f"{r[0]}.json" if r[1] == "base" else f"{r[0]}@{r[1]}.json")).is_file()]

    def work(run):
        config, variant, changes = run
        cfg_dir = HF / config
        reused = Path(a.reuse) / f"{config}.vllm.json" if a.reuse else None
        if variant == "base" and reused is not None and reused.is_file():
            v = json.loads(reused.read_text())
        else:
            v = run_harness(py, cfg_dir, changes, a.timeout)
        g = golden(config, variant, a.version, changes, v, cfg_dir)
        name = config if variant == "base" else f"{config}@{variant}"
        if g["outcome"] == "HARNESS_ERROR":
            return name, g["outcome"], (g.get("vllm_error") or {}).get("message", "")[:200]
        (out_dir / f"{name}.json").write_text(json.dumps(g, indent=1, sort_keys=False) + "\n")
        return name, g["outcome"], ""

    with cf.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        for name, outcome, note in ex.map(work, runs):
            print(f"{outcome:<22} {name} {note}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
