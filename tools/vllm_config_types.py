"""Extract, for one vLLM release, what decides whether vLLM can read a config.json without
`--trust-remote-code`, and which quantization methods need `--allow-deprecated-quantization`.

    for v in 0.31.0 0.32.0 0.33.0 0.34.0; do
        /work/oracle/.venv-$v/bin/python tools/vllm_config_types.py; done \\
        | python3 tools/vllm_config_types.py --merge > kvplan/data/vllm_config_types.json

vLLM: transformers_utils/config.py HFConfigParser.parse — a model type in `_CONFIG_REGISTRY`
(vLLM's own configuration classes), `_ARCHITECTURE_TO_MODEL_TYPE` or
`_SPECULATIVE_DECODING_CONFIGS` never needs remote code; any other goes through
transformers' `AutoConfig.from_pretrained`, which needs the checkpoint's code when `auto_map` names
an AutoConfig and the model type is not in transformers' `CONFIG_MAPPING` (of the transformers
release the vLLM release pins: its oracle lock file). model_executor/layers/quantization
DEPRECATED_QUANTIZATION_METHODS. Never run by the tests.
"""

from __future__ import annotations

import json
import os
import sys


def extract() -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from vllm_cpu_compat import define_torchvision_schemas

    define_torchvision_schemas()
    import transformers
    import vllm
    from transformers import CONFIG_MAPPING
    from vllm.model_executor.layers import quantization as q
    from vllm.transformers_utils import config as c

    return {vllm.__version__: {
        "transformers_version": transformers.__version__,
        "transformers_model_types": sorted(CONFIG_MAPPING.keys()),
        "vllm_config_registry": sorted(c._CONFIG_REGISTRY.keys()),
        "speculative_decoding_configs": sorted(getattr(c, "_SPECULATIVE_DECODING_CONFIGS", ())),
        "architecture_to_model_type": dict(sorted(
            getattr(c, "_ARCHITECTURE_TO_MODEL_TYPE", {}).items())),
        "deprecated_quantization_methods": list(q.DEPRECATED_QUANTIZATION_METHODS),
    }}


def merge() -> dict:
    out: dict = {"extracted_by": "tools/vllm_config_types.py", "releases": {}}
    for line in sys.stdin:
        if line.strip():
            out["releases"].update(json.loads(line))
    out["releases"] = dict(sorted(out["releases"].items()))
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--merge"]:
        json.dump(merge(), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(json.dumps(extract()))
