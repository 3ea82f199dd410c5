#!/usr/bin/env python3
"""Regenerate tests/data/workload-oracle: the cases (kvplan's layer specs for a deployment, as a
layer-spec file with a `workload`) and vLLM's own scheduler's answers for them.

    .venv/bin/python tools/make_workload_goldens.py cases [NAME ...]       # write cases/*.json
    python3 tools/make_workload_goldens.py expected [NAME ...] [--jobs 1]  # run the oracle

`expected` runs tools/vllm_scheduler_oracle.py in the release's virtualenv: 0.34.0 with
KVPLAN_ORACLE=/tmp/kvplan-e2e/oracle/oracle.py (the end-to-end environment), 0.31.0 with
/work/oracle/oracle.py; override with KVPLAN_ORACLE_<MAJOR>_<MINOR> (e.g. KVPLAN_ORACLE_0_34).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "workload-oracle"
HF = "tests/data/hf-configs"
RELEASES = ("0.31.0", "0.34.0")
ORACLES = {"0.31.0": "/work/oracle/oracle.py", "0.34.0": "/tmp/kvplan-e2e/oracle/oracle.py"}

COMMON = ["--max-model-len", "32768", "--max-num-batched-tokens", "8192"]
LLAMA = [f"{HF}/meta-llama--Llama-3.1-8B", "--kv-cache-memory", "16GiB"]
QWEN35 = [f"{HF}/Qwen--Qwen3.5-27B", "--kv-cache-memory", "16GiB"]

# name: (kvplan check arguments, workload, extra case keys, notes)
CASES: dict[str, tuple[list[str], str, dict, str]] = {
    "llama31-8b": ([*LLAMA, *COMMON], "8192:1024", {},
                   "full attention; the issue's example (8k:1k on 16 GiB)"),
    "llama31-8b-sync": ([*LLAMA, *COMMON], "8192:1024", {"async_scheduling": False},
                        "full attention, async scheduling off (one batch in flight)"),
    "llama31-8b-nochunk": ([*LLAMA, "--max-model-len", "16384", "--max-num-batched-tokens",
                            "16384"], "8192:1024", {"enable_chunked_prefill": False},
                           "full attention, chunked prefill off (whole prompts per step)"),
    "llama31-8b-short": ([*LLAMA, *COMMON], "256:64", {},
                         "full attention, short requests: max_num_seqs (256) caps"),
    "llama31-8b-eagle3": ([*LLAMA, *COMMON, "--draft",
                           f"{HF}/SafeAILab--EAGLE3-LLaMA3.1-8B-draft-training-config",
                           "--speculative-method", "eagle3", "--num-speculative-tokens", "3"],
                          "8192:1024", {}, "EAGLE-3 draft, 3 speculative tokens (lookahead)"),
    "gpt-oss-20b": ([f"{HF}/openai--gpt-oss-20b", "--kv-cache-memory", "8GiB", *COMMON],
                    "8192:1024", {}, "sliding window 128 + full attention"),
    "gemma-4-26b": ([f"{HF}/google--gemma-4-26B-A4B", "--kv-cache-memory", "16GiB", *COMMON],
                    "8192:1024", {}, "Gemma 4: sliding window 1024 + full attention"),
    "qwen35-27b": ([*QWEN35, *COMMON], "8192:1024", {},
                   "GDN hybrid, prefix caching on (Mamba 'align')"),
    "qwen35-27b-nopc": ([*QWEN35, *COMMON, "--no-enable-prefix-caching"], "8192:1024",
                        {"enable_prefix_caching": False},
                        "GDN hybrid, prefix caching off (Mamba 'none')"),
    "qwen35-27b-dflash": ([*QWEN35, *COMMON, "--draft", f"{HF}/z-lab--Qwen3.8-27B-DFlash2",
                           "--num-speculative-tokens", "7", "--kv-cache-memory", "32GiB"],
                          "8192:1024", {}, "GDN hybrid + DFlash draft (sliding window), 7 "
                          "speculative tokens, prefix caching on"),
    "nemotron-3-nano": ([f"{HF}/nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "--kv-cache-memory",
                         "8GiB", *COMMON], "8192:1024", {},
                        "Mamba-2 hybrid (Nemotron-H), prefix caching on"),
    "nemotron-3-nano-nopc": ([f"{HF}/nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
                              "--kv-cache-memory", "8GiB", *COMMON,
                              "--no-enable-prefix-caching"], "8192:1024",
                             {"enable_prefix_caching": False},
                             "Mamba-2 hybrid (Nemotron-H), prefix caching off"),
    "deepseek-v3": ([f"{HF}/deepseek-ai--DeepSeek-V3", "--kv-cache-memory", "24GiB", *COMMON],
                    "8192:1024", {}, "MLA (576-element latent per token)"),
}
HANDMADE = {
    "gemma3-27b-like": "hand-made layer specs of Gemma-3-27B's published architecture",
}


def write_cases(names: list[str]) -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    from kvplan_specs_case import compact_json  # needs kvplan (its venv)

    (OUT / "cases").mkdir(parents=True, exist_ok=True)
    for name in names:
        if name in HANDMADE:
            continue
        args, workload, extra, notes = CASES[name]
        for ver in RELEASES:
            path = OUT / "cases" / f"{name}-{ver}.json"
            kv_args = [*args, "--vllm", ver]
            if extra.get("async_scheduling") is False:
                kv_args.append("--no-async-scheduling")
            if extra.get("enable_chunked_prefill") is False:
                kv_args.append("--no-enable-chunked-prefill")
            subprocess.run([sys.executable, str(ROOT / "tools" / "kvplan_specs_case.py"),
                            "--workload", workload, "--name", f"{name} (vLLM {ver})",
                            "-o", str(path), *kv_args], check=True, cwd=ROOT,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"})
            case = json.loads(path.read_text())
            case.update(extra)
            case["notes"] = [notes, *case["notes"]]
            path.write_text(compact_json(case))


def run_expected(names: list[str]) -> None:
    (OUT / "expected").mkdir(parents=True, exist_ok=True)
    for ver in RELEASES:
        oracle = os.environ.get(f"KVPLAN_ORACLE_{ver.replace('.', '_')[:4]}", ORACLES[ver])
        for name in names:
            case = OUT / "cases" / f"{name}-{ver}.json"
            if not case.exists():
                continue
            out = OUT / "expected" / f"{name}-{ver}.json"
            print(f"{name} {ver}", file=sys.stderr, flush=True)
            subprocess.run([sys.executable, str(ROOT / "tools" / "vllm_scheduler_oracle.py"),
                            str(case), "--vllm", ver, "-o", str(out)], check=True,
                           env={**os.environ, "KVPLAN_ORACLE": oracle},
                           stdout=subprocess.DEVNULL)


def main() -> int:
    what, *names = sys.argv[1:]
    names = names or [*CASES, *HANDMADE]
    if what == "cases":
        write_cases(names)
    else:
        run_expected(names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
