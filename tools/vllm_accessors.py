"""vLLM's own generic accessors on every real config in tests/data/hf-configs, as a golden file.

Run with the Python of a venv that has the vLLM wheel (never run by tests):

    /work/oracle/.venv-0.34.0/bin/python tools/vllm_accessors.py > tests/data/vllm_accessors_0.34.0.json

For each config: transformers' configuration class (vLLM's own registered class where vLLM has one),
vLLM's get_hf_text_config, then its ModelArchConfigConvertor (MODEL_ARCH_CONFIG_CONVERTORS) —
layer count, head size and KV heads per layer, derived max length and key, MLA flag, the text
config's sliding_window and layer_types, and get_torch_dtype when the config states a dtype.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import vllm  # noqa: E402
import vllm.config  # noqa: E402,F401  (imports the convertor module in the order vLLM does)
from transformers import CONFIG_MAPPING  # noqa: E402
from vllm.transformers_utils import config as vcfg  # noqa: E402
from vllm.transformers_utils.model_arch_config_convertor import (  # noqa: E402
    MODEL_ARCH_CONFIG_CONVERTORS,
    ModelArchConfigConvertorBase,
)

ROOT = Path(__file__).resolve().parent.parent / "tests" / "data" / "hf-configs"


def _config_class(model_type: str):
    registry = getattr(vcfg, "_CONFIG_REGISTRY", {})
    if model_type in registry:
        return registry[model_type]
    return CONFIG_MAPPING[model_type]


def one(folder: Path) -> dict:
    raw = json.loads((folder / "config.json").read_text())
    cls = _config_class(raw["model_type"])
    hf_config = cls.from_dict(dict(raw))
    text = vcfg.get_hf_text_config(hf_config)
    conv_cls = MODEL_ARCH_CONFIG_CONVERTORS.get(hf_config.model_type, ModelArchConfigConvertorBase)
    conv = conv_cls(hf_config, text)
    arch = conv.convert()
    n = arch.total_num_hidden_layers
    dtype = None
    if getattr(hf_config, "dtype", None) is not None or getattr(text, "dtype", None) is not None:
        dtype = str(conv_cls.get_torch_dtype(hf_config, str(folder), None, "hf")).removeprefix("torch.")
    window = getattr(text, "sliding_window", None)
    types = getattr(text, "layer_types", None)
    return {
        "config_class": type(hf_config).__name__,
        "num_hidden_layers": n,
        "head_size": [arch[i].head_size for i in range(n)],
        "total_num_kv_heads": [arch[i].total_num_kv_heads for i in range(n)],
        "derived_max_model_len": list(arch.derived_max_model_len_and_key),
        "is_deepseek_mla": arch.is_deepseek_mla,
        "sliding_window": window if isinstance(window, int) else None,
        "layer_types": list(types) if types is not None else None,
        "dtype": dtype,
    }


def main() -> None:
    out: dict = {"vllm_version": vllm.__version__, "extracted_by": "tools/vllm_accessors.py",
                 "configs": {}}
    for folder in sorted(p.parent for p in ROOT.glob("*/config.json")):
        try:
            out["configs"][folder.name] = one(folder)
        except Exception as exc:  # recorded, so the test can name configs vLLM cannot read
            out["configs"][folder.name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
