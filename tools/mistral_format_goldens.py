#!/usr/bin/env python3
"""Goldens for Mistral-format checkpoints (issue #18): tests/data/mistral-format/<NAME>/vllm-0.34.0.json.

    python3 tools/mistral_format_goldens.py [--only SUBSTR] [--vllm-python PY]

For each folder of tests/data/mistral-format (params.json, consolidated.safetensors, config.json
when the checkpoint has one) it runs /work/shared/vllm-e2e/vllm_e2e.py (vLLM 0.34.0's start-up
code on a faked H100; vLLM detects the Mistral format from the folder's files, as
`get_config(config_format="auto")` does) with compare.py's flags, again at the derived maximum
length when vLLM refuses 32768 in its config checks, and stores the trimmed outputs (the shape
tools/confirm_coverage.py writes, replayed by tests/models/test_mistral_format.py). It also
stores `adapted`: the KV-relevant fields of the config vLLM built (`get_config(folder)`, i.e.
MistralConfigParser.parse → adapt_config_dict), which the adapter's unit test compares with
kvplan.models.resolution.mistral_format. A development tool, never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "mistral-format"
HARNESS = Path(os.environ.get("VLLM_E2E_HARNESS_DIR", "/work/shared/vllm-e2e")) / "vllm_e2e.py"
PY = os.environ.get("VLLM_E2E_PYTHON", "/tmp/kvplan-e2e/oracle/.venv-0.34.0/bin/python")
GOLDEN = "vllm-0.34.0.json"
sys.path.insert(0, str(ROOT / "tools"))
from confirm_coverage import trimmed_run as trimmed  # noqa: E402

# the fields of vLLM's adapted config that KV planning reads (top level and text_config)
KEYS = ("architectures", "model_type", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "hidden_size", "max_position_embeddings",
        "max_seq_len", "sliding_window", "layer_types", "rope_parameters", "llama_4_scaling",
        "quantization_config", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim",
        "qk_rope_head_dim", "v_head_dim", "n_routed_experts", "n_shared_experts",
        "first_k_dense_replace", "num_experts_per_tok", "moe", "dtype")

ADAPT = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
import vllm_e2e  # the harness's CPU patches (torchvision ops, CUDA extensions)
vllm_e2e.stub_cuda_extensions()
vllm_e2e.patch_torchvision_ops()
from vllm.transformers_utils.config import get_config
cfg = get_config(sys.argv[1], trust_remote_code=False)
KEYS = json.loads(sys.argv[2])
def pick(c):
    d = c.to_dict() if hasattr(c, "to_dict") else dict(c)
    out = {k: d[k] for k in KEYS if k in d}
    if "dtype" in out and out["dtype"] is not None:
        out["dtype"] = str(out["dtype"]).removeprefix("torch.")
    return out
res = pick(cfg)
text = getattr(cfg, "text_config", None)
if text is not None:
    res["text_config"] = pick(text)
print(json.dumps(res, default=str))
"""


def harness(folder: Path, mml: int) -> dict:
    out = subprocess.run([PY, str(HARNESS), str(folder), "--max-model-len", str(mml),
                          "--pass-kv-cache-memory-bytes"], capture_output=True, text=True,
                         timeout=900)
    return json.loads(out.stdout)




def derived_max(message: str) -> int | None:
    import re

    m = re.search(r"derived max_model_len \(\w+=([0-9.]+)", message)
    return int(float(m.group(1))) if m else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--adapted-only", action="store_true", help="keep the runs, redo `adapted`")
    a = ap.parse_args()
    for folder in sorted(p for p in DATA.iterdir() if p.is_dir() and a.only in p.name):
        old = folder / GOLDEN
        if a.adapted_only and old.is_file():
            runs = json.loads(old.read_text())["runs"]
        else:
            runs = [trimmed(harness(folder, 32768), 32768)]
        first = runs[0]
        if len(runs) == 1 and first["status"] != "ok" and first.get("stage") == "config":
            n = derived_max(first["error"])
            if n:
                runs.append(trimmed(harness(folder, n), n))
        with tempfile.TemporaryDirectory():
            adapted = subprocess.run([PY, "-c", ADAPT, str(folder), json.dumps(KEYS),
                                      str(HARNESS.parent)],
                                     capture_output=True, text=True, timeout=600,
                                     env={**os.environ, "HF_HUB_OFFLINE": "1"})
        golden = {
            "config": str(folder.relative_to(ROOT)), "vllm": "0.34.0",
            "made_by": "tools/mistral_format_goldens.py: /work/shared/vllm-e2e/vllm_e2e.py (vLLM "
                       "0.34.0's start-up code on a faked H100, CPU), trimmed; `adapted` from "
                       "vLLM's get_config on the folder",
            "flags": {"tensor_parallel_size": 1, "max_num_batched_tokens": 8192,
                      "kv_cache_memory": "40GiB", "vllm": "0.34.0", "gpu": "H100"},
            "adapted": json.loads(adapted.stdout) if adapted.returncode == 0 else
            {"error": adapted.stderr.strip().splitlines()[-1:]},
            "runs": runs,
        }
        (folder / GOLDEN).write_text(json.dumps(golden, indent=1) + "\n")
        print(folder.name, [(r["max_model_len"], r["status"]) for r in runs])
    return 0


if __name__ == "__main__":
    sys.exit(main())
