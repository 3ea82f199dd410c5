#!/usr/bin/env python3
"""Extract the names vLLM gives the KV-cache layers of each architecture kvplan plans through its
generic (transformers-resolved) path: vLLM's own model class, built on the meta device.

    /tmp/kvplan-e2e/oracle/.venv-0.34.0/bin/python tools/vllm_layer_names.py \\
        > kvplan/data/vllm_layer_names_0.34.0.json

For every architecture whose kvplan/data/coverage.csv path is `generic` and which is not a
multimodal wrapper (those are named by tools/vllm_lm_prefix.py), the configuration class
transformers registers for it is built with its defaults (`architectures` set to it, at most 4
layers), vLLM's serve parser turns it into a VllmConfig, and the model is built exactly as
shared/vllm-e2e/vllm_e2e.py builds one (its patches, H100, meta device). The names of the
attention layers vLLM registers (`get_layers_from_vllm_config(AttentionLayerBase)`) give the
pattern, the layer index as `{}`: `transformer.h.{}.self_attention.attn` (Falcon),
`model.layers.{}.self_attn.attn` (most). Architectures that cannot be built this way (no
transformers class, a constructor that needs fields the defaults lack) are listed with the
reason under `unresolved`. Never run by the tests.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import sys
import tempfile
import traceback

HARNESS_DIR = os.environ.get("VLLM_E2E_HARNESS_DIR", "/work/shared/vllm-e2e")
sys.path.insert(0, HARNESS_DIR)
import vllm_e2e as H  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LAYERS = 4


def generic_architectures() -> list[str]:
    with open(os.path.join(ROOT, "kvplan", "data", "coverage.csv"), encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [r["architecture"] for r in rows
            if r["path"] == "generic" and "multimodal" not in r["category"]]


def arch_to_model_type() -> dict[str, str]:
    """transformers' auto mappings, inverted: architecture class name → model_type."""
    from transformers.models.auto import modeling_auto as ma

    out: dict[str, str] = {}
    for name in dir(ma):
        table = getattr(ma, name)
        if name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES") and isinstance(table, dict):
            for model_type, cls in table.items():
                for c in (cls if isinstance(cls, tuple | list) else (cls,)):
                    out.setdefault(c, model_type)
    return out


def pattern(name: str) -> str:
    return re.sub(r"\.(\d+)\.", ".{}.", name, count=1)


def _per_layer_window(H, cls, arch, layers_of, base) -> bool | str:
    """Whether vLLM's model class gives `sliding_attention` layers their own window: the same
    architecture built with alternating layer_types (sliding, full, ...) and a 128-token window;
    True when exactly the sliding layers' Attention carries it, "offset +N" when they carry
    128 + N (Cohere2: the window + 1), False when the layers ignore layer_types."""
    try:
        n = 4
        types = ["sliding_attention", "full_attention"] * (n // 2)
        cfg = cls(num_hidden_layers=n, layer_types=types, sliding_window=128)
        data = cfg.to_dict()
        data["architectures"] = [arch]
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "config.json"), "w") as fh:
                json.dump(data, fh)
            vllm_config, _ = H.build_vllm_config(tmp, 256, 8192, None, [])
            H.instantiate_model(vllm_config)
            by_index = {}
            for name, layer in layers_of(vllm_config, base).items():
                m = re.search(r"\.(\d+)\.", name)
                if m:
                    by_index[int(m.group(1))] = getattr(layer, "sliding_window", None)
        sliding = {by_index.get(i) for i, t in enumerate(types) if t == "sliding_attention"}
        full = {by_index.get(i) for i, t in enumerate(types) if t != "sliding_attention"}
        if full == {None} and len(sliding) == 1 and None not in sliding:
            window = sliding.pop()
            return True if window == 128 else f"offset {window - 128:+d}"
        return False
    except BaseException as e:  # noqa: BLE001
        return f"not determined: {type(e).__name__}: {str(e)[:120]}"


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cuda")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    os.environ["VLLM_CACHE_ROOT"] = tempfile.mkdtemp(prefix="vllm_names_cache_")
    real_stdout = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(2), "wb"), write_through=True)

    H.stub_cuda_extensions()
    H.patch_torchvision_ops()
    H.patch_triton_driver()
    import vllm

    H.install_h100_platform()
    H.patch_torch_cuda()
    H.patch_registry_subprocess()
    from transformers import CONFIG_MAPPING
    from vllm.config import get_layers_from_vllm_config as layers_of
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase

    types = arch_to_model_type()
    names: dict[str, list[str]] = {}
    windows: dict[str, bool | str] = {}
    unresolved: dict[str, str] = {}
    dist_done = False
    only = sys.argv[1:]
    for arch in generic_architectures():
        if only and arch not in only:
            continue
        model_type = types.get(arch)
        if model_type is None or model_type not in CONFIG_MAPPING:
            unresolved[arch] = "no transformers configuration class for it"
            continue
        try:
            cls = CONFIG_MAPPING[model_type]
            cfg = cls()
            n = getattr(cfg, "num_hidden_layers", None)
            if isinstance(n, int) and n > MAX_LAYERS:
                with contextlib.suppress(Exception):
                    cfg = cls(num_hidden_layers=MAX_LAYERS)
            data = cfg.to_dict()
            data["architectures"] = [arch]
            with tempfile.TemporaryDirectory() as tmp:
                with open(os.path.join(tmp, "config.json"), "w") as fh:
                    json.dump(data, fh)
                vllm_config, _ = H.build_vllm_config(tmp, 256, 8192, None, [])
                with set_current_vllm_config(vllm_config, check_compile=False):
                    if not dist_done:
                        H.init_dist()
                        dist_done = True
                H.instantiate_model(vllm_config)
                layers = layers_of(vllm_config, AttentionLayerBase)
                names[arch] = sorted({pattern(k) for k in layers})
            if "layer_types" in data and "sliding_window" in data:
                windows[arch] = _per_layer_window(H, cls, arch, layers_of, AttentionLayerBase)
        except BaseException as e:  # noqa: BLE001
            tb = traceback.format_exc().strip().splitlines()
            message = re.sub(r"/tmp/tmp\w+", "<tmp>", str(e))  # deterministic output
            unresolved[arch] = f"{type(e).__name__}: {message[:200]} [{tb[-3].strip()[:160]}]"
    out = {"vllm_version": vllm.__version__, "extracted_by": "tools/vllm_layer_names.py",
           "layer_names": names, "per_layer_sliding_window": windows, "unresolved": unresolved}
    with os.fdopen(real_stdout, "w") as f:
        f.write(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
