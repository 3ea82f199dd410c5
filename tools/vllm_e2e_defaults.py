#!/usr/bin/env python3
"""vLLM's own start-up on configs built from transformers' configuration-class defaults, many
architectures in one process (a quick differential sweep; the goldens use real configs).

    /tmp/kvplan-e2e/oracle/.venv-0.34.0/bin/python tools/vllm_e2e_defaults.py OUT_DIR [ARCH ...]

For each architecture (default: the `generic` rows of kvplan/data/coverage.csv that are not
multimodal) it writes OUT_DIR/<arch>/config.json (the transformers class defaults, at most 4
layers, `architectures` = [arch]) and OUT_DIR/<arch>.vllm.json: what shared/vllm-e2e/vllm_e2e.py
would print for it with `--max-model-len 2048 --max-num-batched-tokens 8192` and 40 GiB (the same
steps, patches and H100 platform; one process, so vLLM is imported once). Compare with
`python3 tools/vllm_e2e_defaults.py --compare OUT_DIR --kvplan .venv/bin/kvplan`. Never run by
the tests.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS_DIR = os.environ.get("VLLM_E2E_HARNESS_DIR", "/work/shared/vllm-e2e")
KV_MEMORY = 40 * 1024**3
MAX_MODEL_LEN = 2048


def run(out_dir: str, archs: list[str]) -> int:
    sys.path.insert(0, HARNESS_DIR)
    sys.path.insert(0, HERE)
    import vllm_e2e as H
    from vllm_layer_names import MAX_LAYERS, arch_to_model_type, generic_architectures

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cuda")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ["VLLM_CACHE_ROOT"] = tempfile.mkdtemp(prefix="vllm_defaults_cache_")
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(2), "wb"), write_through=True)
    H.stub_cuda_extensions()
    H.patch_torchvision_ops()
    H.patch_triton_driver()
    import vllm  # noqa: F401

    H.install_h100_platform()
    H.patch_torch_cuda()
    H.patch_registry_subprocess()
    from transformers import CONFIG_MAPPING
    from vllm.config import set_current_vllm_config

    types = arch_to_model_type()
    dist_done = False
    done = 0
    for arch in archs or generic_architectures():
        model_type = types.get(arch)
        if model_type is None or model_type not in CONFIG_MAPPING:
            continue
        folder = os.path.join(out_dir, arch)
        os.makedirs(folder, exist_ok=True)
        result: dict = {"harness": "tools/vllm_e2e_defaults.py", "architecture": arch}
        stage = "config"
        try:
            cls = CONFIG_MAPPING[model_type]
            cfg = cls()
            n = getattr(cfg, "num_hidden_layers", None)
            if isinstance(n, int) and n > MAX_LAYERS:
                try:
                    cfg = cls(num_hidden_layers=MAX_LAYERS)
                except Exception:
                    pass
            data = cfg.to_dict()
            data["architectures"] = [arch]
            with open(os.path.join(folder, "config.json"), "w") as fh:
                json.dump(data, fh, indent=1)
            vllm_config, _ = H.build_vllm_config(folder, MAX_MODEL_LEN, 8192, KV_MEMORY, [])
            stage = "model"
            with set_current_vllm_config(vllm_config, check_compile=False):
                if not dist_done:
                    H.init_dist()
                    dist_done = True
            H.instantiate_model(vllm_config)
            stage = "block_size"
            from vllm.platforms import current_platform

            current_platform.update_block_size_for_backend(vllm_config)
            stage = "plan"
            result.update(H.plan(vllm_config, KV_MEMORY))
            result["status"] = "ok"
        except BaseException as e:  # noqa: BLE001
            result.update(status="vllm_error", stage=stage,
                          exception={"type": type(e).__name__, "message": str(e)[:2000]},
                          traceback=traceback.format_exc()[-3000:])
        with open(os.path.join(out_dir, f"{arch}.vllm.json"), "w") as fh:
            json.dump(result, fh, indent=1, default=str)
        done += 1
    os.write(real_stdout, f"{done} architectures\n".encode())
    return 0


def compare(out_dir: str, kvplan: str) -> int:
    sys.path.insert(0, HARNESS_DIR)
    from compare import compare_one

    counts: dict[str, int] = {}
    for name in sorted(os.listdir(out_dir)):
        if not name.endswith(".vllm.json"):
            continue
        arch = name.removesuffix(".vllm.json")
        v = json.load(open(os.path.join(out_dir, name)))
        cmd = [kvplan, "check", os.path.join(out_dir, arch), "-tp", "1", "--max-model-len",
               str(MAX_MODEL_LEN), "--max-num-batched-tokens", "8192", "--kv-cache-memory",
               "40GiB", "--vllm", "0.34.0", "--gpu", "H100", "--json"]
        p = subprocess.run(cmd, capture_output=True, text=True,
                           env=dict(os.environ, HF_HUB_OFFLINE="1"))
        try:
            k = json.loads(p.stdout)
        except json.JSONDecodeError:
            k = {"_error": (p.stderr or p.stdout)[-2000:]}
        k["_rc"] = p.returncode
        verdict, diffs, row = compare_one(v, k)
        counts[verdict] = counts.get(verdict, 0) + 1
        detail = "; ".join(diffs) or (row.get("vllm_error") or "")[:200]
        if verdict != "MATCH":
            detail += f" | kvplan rc={k['_rc']} {str(k.get('_error') or k.get('error_message') or '')[:200]}"
        print(f"{verdict:<22} {arch}: {detail[:600]}")
    print(counts)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[4] if len(sys.argv) > 4 else ".venv/bin/kvplan"))
    sys.exit(run(sys.argv[1], sys.argv[2:]))
