"""Extract vLLM's model registry into kvplan/data/vllm_registry_<version>.json.

Run with the Python of a venv that has the vLLM wheel (never run by tests):

    /work/oracle/.venv-0.34.0/bin/python tools/vllm_registry.py > kvplan/data/vllm_registry_0.34.0.json

For every architecture of vllm/model_executor/models/registry.py it writes the module and class,
the registry tables that name it (the categories), the vLLM interface classes its class hierarchy
inherits (IsAttentionFree, IsHybrid, HasNoOps, SupportsMultiModal, ...) and which attention
building blocks the sources of that hierarchy use. Both are found statically (ast + regex):
importing every model class would need every model's optional dependencies.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import vllm  # noqa: E402
from vllm.model_executor.models import registry as reg  # noqa: E402

TABLES = {
    "text_generation": "_TEXT_GENERATION_MODELS",
    "embedding": "_EMBEDDING_MODELS",
    "late_interaction": "_LATE_INTERACTION_MODELS",
    "reward": "_REWARD_MODELS",
    "token_classification": "_TOKEN_CLASSIFICATION_MODELS",
    "sequence_classification": "_SEQUENCE_CLASSIFICATION_MODELS",
    "cross_encoder": "_CROSS_ENCODER_MODELS",
    "multimodal": "_MULTIMODAL_MODELS",
    "speculative_decoding": "_SPECULATIVE_DECODING_MODELS",
    "transformers_supported": "_TRANSFORMERS_SUPPORTED_MODELS",
    "transformers_backend": "_TRANSFORMERS_BACKEND_MODELS",
}

# Attention building blocks a model's sources may use (regex).
FEATURES = {
    "per_layer_sliding_window": r"per_layer_sliding_window",
    "kv_sharing": r"kv_sharing_target_layer_name",
    "mla": r"MLAAttention|MultiHeadLatentAttention",
    "chunked_local": r"ChunkedLocalAttention|attention_chunk_size",
    "cross_attention": r"CrossAttention|AttentionType\.ENCODER_DECODER",
    "encoder_only": r"EncoderOnlyAttention|AttentionType\.ENCODER_ONLY",
    "state_space": r"MambaMixer|Mamba2Mixer|MambaBase|ShortConv|GatedDeltaNet|LinearAttention",
    "sink": r"SinkFullAttention|sink_len",
    "inner_language_model": r"init_vllm_registered_model",
}

# vLLM's interface classes (model_executor/models/interfaces*.py) a model class may inherit.
INTERFACES = ("IsAttentionFree", "IsHybrid", "HasNoOps", "SupportsMultiModal",
              "SupportsTranscription", "VllmModelForPooling", "HasInnerState")

MODELS_DIR = os.path.dirname(reg.__file__)
_TREES: dict[str, tuple[ast.Module, str]] = {}


def _module_path(module: str) -> str | None:
    if "." not in module:
        module = f"vllm.model_executor.models.{module}"
    try:
        spec = importlib.util.find_spec(module.rsplit(".", 1)[0])
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    base = os.path.join(list(spec.submodule_search_locations)[0], module.rsplit(".", 1)[1])
    for cand in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.exists(cand):
            return cand
    return None


def _tree(path: str) -> tuple[ast.Module, str]:
    if path not in _TREES:
        with open(path, encoding="utf-8") as fh:
            src = fh.read()
        _TREES[path] = (ast.parse(src), src)
    return _TREES[path]


def _resolve_import(path: str, module: str | None, level: int) -> str | None:
    if level == 0:
        return _module_path(module) if module and module.startswith("vllm.") else None
    base = os.path.dirname(path)
    for _ in range(level - 1):
        base = os.path.dirname(base)
    target = os.path.join(base, *module.split(".")) if module else base
    for cand in (target + ".py", os.path.join(target, "__init__.py")):
        if os.path.exists(cand):
            return cand
    return None


def _walk(path: str, name: str, seen: set, names: set[str], sources: set[str]) -> None:
    """Static MRO walk: every base-class name of `name` (defined in or imported by `path`)."""
    if (path, name) in seen:
        return
    seen.add((path, name))
    tree, _ = _tree(path)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            sources.add(path)
            for base in node.bases:
                base_name = base.id if isinstance(base, ast.Name) else (
                    base.attr if isinstance(base, ast.Attribute) else None)
                if base_name is not None:
                    names.add(base_name)
                    _walk(path, base_name, seen, names, sources)
            return
    for node in ast.walk(tree):  # imports under `if current_platform.is_cuda():` too; first wins
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    target = _resolve_import(path, node.module, node.level)
                    if target is not None:
                        _walk(target, alias.name, seen, names, sources)
                    return


# classes a model builds by composition rather than inheritance (GraniteMoeSharedModel uses
# granitemoe's GraniteMoeAttention, DiffusionGemma holds gemma4's Gemma4Model): their modules'
# sources count too
_COMPOSED = re.compile(r"(Attention|DecoderLayer|Model)$")


def _composed_sources(path: str) -> set[str]:
    """Sibling model modules from which `path` imports an attention, decoder-layer or model
    class."""
    out: set[str] = set()
    tree = _tree(path)[0]
    # a model class imported by a module that defines its own attention / decoder layer is built
    # with those (glm4.py: LlamaModel with Glm4DecoderLayer), not with the imported module's
    own_layers = any(isinstance(n, ast.ClassDef) and re.search(r"(Attention|DecoderLayer)$", n.name)
                     for n in tree.body)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(
                _COMPOSED.search(a.name) and not (own_layers and a.name.endswith("Model"))
                for a in node.names):
            if node.level:
                target = _resolve_import(path, node.module, node.level)
            elif (node.module or "").startswith("vllm.model_executor.models."):
                # located, not imported (importing some model packages raises on CPU)
                target = os.path.join(MODELS_DIR, *node.module.split(".")[3:]) + ".py"
            else:
                continue
            if target and os.path.exists(target) and os.path.dirname(target) == os.path.dirname(path):
                out.add(target)
    return out


def _inspect(module: str, cls: str) -> tuple[list[str], list[str]]:
    """(interfaces the class inherits, features of the sources of its class hierarchy; the
    per-layer sliding window also from the model modules whose attention / decoder-layer /
    model classes it composes)."""
    path = _module_path(module)
    if path is None:
        return [], []
    names: set[str] = set()
    sources: set[str] = {path}
    _walk(path, cls, set(), names, sources)
    text = "\n".join(_tree(p)[1] for p in sorted(sources))
    features = {k for k, rx in FEATURES.items() if re.search(rx, text)}
    # the per-layer window is a property of the attention the model builds, wherever its class
    # is defined (the other features stay those of the class hierarchy: a composed vision tower
    # would add encoder-only attention to every multimodal model)
    composed = {c for p in sources for c in _composed_sources(p)} - sources
    if any(re.search(FEATURES["per_layer_sliding_window"], _tree(p)[1]) for p in composed):
        features.add("per_layer_sliding_window")
    features = sorted(features)
    return sorted(i for i in INTERFACES if i in names), features


def main() -> None:
    archs: dict[str, dict] = {}
    for category, table_name in TABLES.items():
        table = getattr(reg, table_name, None)
        if table is None:
            continue
        for arch, (module, cls) in table.items():
            row = archs.setdefault(arch, {"module": module, "class": cls, "categories": []})
            row["categories"].append(category)
            row["module"], row["class"] = module, cls  # later tables win, as in _VLLM_MODELS
    for row in archs.values():
        row["interfaces"], row["features"] = _inspect(row["module"], row["class"])
    out = {
        "vllm_version": vllm.__version__,
        "extracted_by": "tools/vllm_registry.py",
        "previously_supported": dict(sorted(reg._PREVIOUSLY_SUPPORTED_MODELS.items())),
        "out_of_tree": dict(sorted(getattr(reg, "_OOT_SUPPORTED_MODELS", {}).items())),
        "architectures": dict(sorted(archs.items())),
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
