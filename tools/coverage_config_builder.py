"""Pick, for each architecture, the configuration class vLLM 0.34.0 would use and build a
config.json from that class's defaults (a development tool for tools/confirm_coverage.py; never
run by tests). Run it with the Python of the vLLM e2e venv (vllm 0.34.0 + its transformers):

    /tmp/kvplan-e2e/oracle/.venv-0.34.0/bin/python tools/coverage_config_builder.py \\
        ARCH [ARCH ...] > choices.json

For each ARCH it prints {arch: {"model_type", "config_class", "how", "config" | "error"}}:

* the model type: (1) the transformers auto-model tables (modeling_auto.*_MAPPING_NAMES) that
  name a class `ARCH` (case-insensitively when no exact name: transformers' `PhimoeForCausalLM` is
  vLLM's `PhiMoEForCausalLM`); (2) vLLM's `_ARCHITECTURE_TO_MODEL_TYPE`; (3) a configuration class
  the vLLM model module imports (from transformers or vllm.transformers_utils.configs) whose model
  type names the architecture (normalised: `step3_text` for `Step3TextForCausalLM`); (4) a model
  type of transformers' CONFIG_MAPPING or vLLM's `_CONFIG_REGISTRY` whose normalised name is the
  architecture's prefix. None found: the checkpoints of ARCH carry their own (remote) config class,
  which vLLM loads only with --trust-remote-code.
* the class: vLLM's `_CONFIG_REGISTRY` first (vLLM registers those over transformers' own,
  transformers_utils/config.py), else transformers' CONFIG_MAPPING.
* the config: `cls().to_dict()` with `architectures: [ARCH]` (the class defaults, nothing shrunk).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

from transformers.models.auto import configuration_auto, modeling_auto  # noqa: E402

# the e2e harness's fake for the CPU torchvision wheel (vLLM's config modules import it)
E2E_DIR = os.environ.get("VLLM_E2E_DIR", "/work/shared/vllm-e2e")
sys.path.insert(0, E2E_DIR)
import vllm_e2e  # noqa: E402

vllm_e2e.patch_torchvision_ops()

REGISTRY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kvplan", "data",
                        "vllm_registry_0.34.0.json")
_SUFFIX = re.compile(r"(ForCausalLM|ForConditionalGeneration|ForSequenceClassification|Model|"
                     r"ForRewardModel|ForProcessRewardModel|ForMaskedLM|ForTokenClassification|"
                     r"ForEmbedding|ForActionPrediction|Generation|ForCausalLMV)$")

# vLLM's Transformers-backend classes (models/transformers/): a config of a model type vLLM has
# no own class for is served by them; built here from that model type's defaults with the
# backend class named in `architectures` (which vLLM's registry resolves as given)
TRANSFORMERS_BACKEND = {
    "TransformersForCausalLM": "llama",
    "TransformersForSequenceClassification": "llama",
    "TransformersEmbeddingModel": "llama",
    "TransformersForMTP": "llama",
    "TransformersMoEForCausalLM": "qwen3_moe",
    "TransformersMoEForSequenceClassification": "qwen3_moe",
    "TransformersMoEEmbeddingModel": "qwen3_moe",
    "TransformersMoEForMTP": "qwen3_moe",
    "TransformersMultiModalForCausalLM": "llava",
    "TransformersMultiModalForSequenceClassification": "llava",
    "TransformersMultiModalEmbeddingModel": "llava",
    "TransformersMultiModalMoEForCausalLM": "qwen3_vl_moe",
}


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _class_table() -> dict[str, list[str]]:
    """transformers class name -> model types whose auto tables name it."""
    out: dict[str, list[str]] = {}
    for name in sorted(dir(modeling_auto)):
        table = getattr(modeling_auto, name)
        if not name.endswith("_MAPPING_NAMES") or not isinstance(table, dict):
            continue
        for mt, cls in table.items():
            for c in cls if isinstance(cls, (tuple, list)) else (cls,):
                if mt not in out.setdefault(c, []):
                    out[c].append(mt)
    return out


def _vllm_registry() -> dict:
    from vllm.transformers_utils import config as vcfg
    return vcfg


def _config_classes_of_module(module: str) -> list[str]:
    """Names of configuration classes the vLLM model module imports (not vllm.config's)."""
    if "." not in module:
        module = f"vllm.model_executor.models.{module}"
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return []
    tree = ast.parse(open(spec.origin, encoding="utf-8").read())
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith("transformers") or
                node.module.startswith("vllm.transformers_utils.configs")):
            for a in node.names:
                if a.name.endswith("Config") and a.name not in (
                        "PretrainedConfig", "PreTrainedConfig", "GenerationConfig"):
                    names.append(a.name)
    return names


def _class_by_name(name: str):
    import transformers
    from vllm.transformers_utils import configs as vconfigs
    for mod in (vconfigs, transformers):
        try:
            return getattr(mod, name)
        except (AttributeError, ImportError):
            continue
    return None


def model_type_for(arch: str, module: str, classes: dict[str, list[str]]) -> tuple[str | None, str]:
    vcfg = _vllm_registry()
    known = set(configuration_auto.CONFIG_MAPPING_NAMES) | set(vcfg._CONFIG_REGISTRY)
    prefix = _norm(_SUFFIX.sub("", arch))

    def best(mts: list[str]) -> str:
        # several model types share a class name: the one the architecture's name says
        return sorted(mts, key=lambda m: (not prefix.startswith(_norm(m)), -len(_norm(m))))[0]

    if arch in classes:
        return best(classes[arch]), "transformers auto table names the class"
    ci = [mt for c, mts in classes.items() if c.lower() == arch.lower() for mt in mts]
    if ci:
        return best(ci), "transformers auto table names the class (case differs)"
    if arch in TRANSFORMERS_BACKEND:
        return TRANSFORMERS_BACKEND[arch], "vLLM Transformers backend class on this model type"
    if arch in vcfg._ARCHITECTURE_TO_MODEL_TYPE:
        return vcfg._ARCHITECTURE_TO_MODEL_TYPE[arch], "vLLM _ARCHITECTURE_TO_MODEL_TYPE"
    for cname in _config_classes_of_module(module):
        cls = _class_by_name(cname)
        mt = getattr(cls, "model_type", "") if cls is not None else ""
        if mt and prefix.startswith(_norm(mt)):
            return mt, f"the vLLM model module imports {cname}"
    # the one configuration class of vLLM's own registry the module imports (GLM4VForCausalLM:
    # ChatGLMConfig, the glm-4v-9b checkpoints' model type chatglm)
    import transformers
    own = {c: mt for mt, c in dict.items(vcfg._CONFIG_REGISTRY)
           if isinstance(c, str) and not hasattr(transformers, c)}
    mine = sorted({own[c] for c in _config_classes_of_module(module) if c in own})
    if len(mine) == 1:
        return mine[0], "the vLLM model module imports this vLLM configuration class"
    named = [mt for mt in known if _norm(mt) == prefix]
    if named:
        return sorted(named)[0], "a registered model type is the architecture's name"
    return None, ""


def config_class(model_type: str):
    vcfg = _vllm_registry()
    if model_type in vcfg._CONFIG_REGISTRY:
        return vcfg._CONFIG_REGISTRY[model_type], "vllm"
    if model_type in configuration_auto.CONFIG_MAPPING_NAMES:
        return configuration_auto.CONFIG_MAPPING[model_type], "transformers"
    return None, ""


def build(arch: str, module: str, classes: dict[str, list[str]]) -> dict:
    mt, how = model_type_for(arch, module, classes)
    if mt is None:
        return {"model_type": None, "error": "no configuration class for it in transformers "
                "or vLLM (its checkpoints ship their own: remote code)"}
    cls, where = config_class(mt)
    if cls is None:
        return {"model_type": mt, "how": how,
                "error": f"model type {mt!r} has no configuration class in transformers or vLLM"}
    out = {"model_type": mt, "how": how, "config_class": f"{where}:{cls.__module__}.{cls.__name__}"}
    try:
        cfg = cls()
        d = cfg.to_dict()
    except Exception as e:  # noqa: BLE001 - recorded, not raised
        out["error"] = f"{cls.__name__}() raised {type(e).__name__}: {str(e)[:300]}"
        return out
    d.pop("transformers_version", None)
    d["architectures"] = [arch]
    d.setdefault("model_type", mt)
    out["config"] = d
    return out


def main(argv: list[str]) -> int:
    reg = json.load(open(REGISTRY, encoding="utf-8"))["architectures"]
    classes = _class_table()
    res = {}
    for arch in argv:
        try:
            res[arch] = build(arch, reg.get(arch, {}).get("module", ""), classes)
        except Exception as e:  # noqa: BLE001
            res[arch] = {"model_type": None, "error": f"builder: {type(e).__name__}: {e}"[:300]}
    json.dump(res, sys.stdout, indent=1, sort_keys=True, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
