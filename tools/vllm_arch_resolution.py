"""Extract, for one vLLM release, what decides whether its model registry resolves a config's
`architectures` at all (vLLM: model_executor/models/registry.py _ModelRegistry.inspect_model_cls,
_try_resolve_transformers and _raise_for_unsupported):

* `registry`: the architectures of its registry in the registry's own order (the order of the
  `dict_keys([...])` its "are not supported for now" refusal prints);
* `previously_supported` / `out_of_tree`: _PREVIOUSLY_SUPPORTED_MODELS / _OOT_SUPPORTED_MODELS;
* `transformers_backend`: the classes of the transformers release it pins that the Transformers
  modeling backend takes for an architecture vLLM has no class of its own for (a
  `transformers.PreTrainedModel` subclass exported by name whose `is_backend_compatible()` or
  `_can_set_attn_implementation()` holds), and `transformers_incompatible`: the exported model
  classes it refuses.

    for v in 0.34.0; do /work/oracle/.venv-$v/bin/python tools/vllm_arch_resolution.py; done \\
        | python3 tools/vllm_arch_resolution.py --merge > kvplan/data/vllm_arch_resolution.json

Never run by the tests (importing every transformers model class takes minutes).
"""

from __future__ import annotations

import json
import os
import re
import sys

_MODEL_NAME = re.compile(r"^[A-Z]\w*(Model|For[A-Z]\w*|LMHeadModel)$")


def extract() -> dict:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from vllm_cpu_compat import define_torchvision_schemas

    define_torchvision_schemas()
    import transformers
    import vllm
    from vllm.model_executor.models import registry as reg

    compatible, incompatible = [], []
    for name in sorted(n for n in dir(transformers) if _MODEL_NAME.match(n)):
        try:
            cls = getattr(transformers, name)
        except Exception:  # noqa: BLE001 — an optional dependency missing: not a backend class here
            continue
        if not isinstance(cls, type) or not issubclass(cls, transformers.PreTrainedModel):
            continue
        try:
            ok = bool(cls.is_backend_compatible() or cls._can_set_attn_implementation())
        except Exception:  # noqa: BLE001
            ok = False
        (compatible if ok else incompatible).append(name)
    return {vllm.__version__: {
        "transformers_version": transformers.__version__,
        "registry": list(reg.ModelRegistry.get_supported_archs()),
        "transformers_backend_models": sorted(reg._TRANSFORMERS_BACKEND_MODELS),
        "previously_supported": dict(reg._PREVIOUSLY_SUPPORTED_MODELS),
        "out_of_tree": dict(getattr(reg, "_OOT_SUPPORTED_MODELS", {})),
        "transformers_backend": compatible,
        "transformers_incompatible": incompatible,
    }}


def merge() -> dict:
    out: dict = {"extracted_by": "tools/vllm_arch_resolution.py", "releases": {}}
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
