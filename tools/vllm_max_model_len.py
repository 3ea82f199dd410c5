"""Run vLLM's own `_get_and_verify_max_len` on the bundled configs (and a few hand-made variants
that reach its other branches) and print the results as JSON (kvplan's tests compare to them).

    /work/oracle/.venv-0.34.0/bin/python tools/vllm_max_model_len.py 0.34.0 \\
        > tests/data/vllm-functions/max_model_len.0.34.0.json

Each case: a config (a bundled folder name, or a hand-made dict), max_model_len (None: the
default) and VLLM_ALLOW_LONG_MAX_MODEL_LEN; `result` is the length vLLM returned, or `error` what it raised.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_cpu_compat import define_torchvision_schemas  # noqa: E402

define_torchvision_schemas()

import vllm.config.model as vcm  # noqa: E402,F401  (import order: breaks a circular import)
from transformers import AutoConfig  # noqa: E402
from vllm.transformers_utils.config import patch_rope_parameters  # noqa: E402
from vllm.transformers_utils.model_arch_config_convertor import (  # noqa: E402
    MODEL_ARCH_CONFIG_CONVERTORS,
    ModelArchConfigConvertorBase,
)

CONFIGS = Path(__file__).resolve().parents[1] / "tests" / "data" / "hf-configs"
BUNDLED = ["Qwen--Qwen3-8B", "meta-llama--Llama-3.1-8B", "mistralai--Mistral-7B-v0.1",
           "openai--gpt-oss-20b", "nvidia--Nemotron-H-56B-Base-8K", "Qwen--Qwen2.5-7B",
           "deepseek-ai--DeepSeek-V3", "Qwen--Qwen3.5-27B"]
_LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
          "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 2,
          "intermediate_size": 14336, "vocab_size": 32000, "torch_dtype": "bfloat16",
          "rope_theta": 10000.0}
HAND_MADE = {
    # linear RoPE scaling with an int factor: vLLM multiplies (int × int stays int)
    "llama-linear-int-factor": {**_LLAMA, "max_position_embeddings": 4096,
                                "rope_scaling": {"type": "linear", "factor": 2}},
    # dynamic NTK with a float factor
    "llama-dynamic-float-factor": {**_LLAMA, "max_position_embeddings": 4096,
                                   "rope_scaling": {"rope_type": "dynamic", "factor": 2.5}},
    # two length keys: the smaller wins, unless model_max_length is set (it always wins)
    "llama-two-keys": {**_LLAMA, "max_position_embeddings": 8192, "seq_length": 4096},
    "llama-model-max-length": {**_LLAMA, "max_position_embeddings": 8192,
                               "model_max_length": 16384},
}


def run(cfg, max_model_len, allow_long):
    os.environ["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1" if allow_long else "0"
    text = cfg.get_text_config()
    patch_rope_parameters(text)
    conv_cls = MODEL_ARCH_CONFIG_CONVERTORS.get(cfg.model_type, ModelArchConfigConvertorBase)
    conv = conv_cls(cfg, text)
    # the ModelArchitectureConfig vLLM builds (a pydantic dataclass: its
    # `derived_max_model_len_and_key: tuple[float, str | None]` stores the length as a float, which
    # vLLM's error message prints, e.g. 8192.0)
    arch = conv.convert()
    try:
        return {"result": vcm._get_and_verify_max_len(text, arch, None, max_model_len,
                                                      False, None)}
    except ValueError as e:
        return {"error": f"ValueError: {e}"}


def main() -> None:
    version = sys.argv[1]
    out = []
    configs = [(name, AutoConfig.from_pretrained(CONFIGS / name)) for name in BUNDLED]
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in HAND_MADE.items():
            (Path(tmp) / name).mkdir()
            (Path(tmp) / name / "config.json").write_text(json.dumps(data))
            configs.append((name, AutoConfig.from_pretrained(Path(tmp) / name)))
        for name, cfg in configs:
            for mml in (None, 4096, 40960, 131072, 1048576):
                for allow_long in (False, True):
                    case = {"config": name, "max_model_len": mml, "allow_long": allow_long}
                    if name in HAND_MADE:
                        case["config_json"] = HAND_MADE[name]
                    out.append({**case, **run(cfg, mml, allow_long)})
    json.dump({"vllm_version": version, "cases": out}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
