"""Extract where vLLM's multimodal wrappers build their language model: the module prefix every
decoder layer name of the wrapped model starts with (e.g. `language_model` →
`language_model.model.layers.3.self_attn.attn`).

    /work/oracle/.venv-0.34.0/bin/python tools/vllm_lm_prefix.py > kvplan/data/vllm_lm_prefixes_0.34.0.json

For every architecture of kvplan/data/vllm_registry_<v>.json that is SupportsMultiModal or builds
an inner language model (`init_vllm_registered_model`), the class hierarchy's sources are read
statically (ast; tools/vllm_registry.py's walk): the attribute `get_language_model()` returns
(default `language_model`), and the `prefix=` its constructor call gets in `__init__`:
`maybe_prefix(prefix, "X")` → "X", `f"{prefix}.X"` → "X", `""` / `prefix` → "" (the wrapper's own
level). A wrapper that builds a bare decoder stack instead (`language_targets=LlamaModel`) is
listed under `decoder_module` with the module its `get_mm_mapping()` names (Idefics3:
`model.text_model` → `model.text_model.layers.3.self_attn.attn`). Architectures where neither
is found are listed under `unresolved`. Never run by the
tests; the end-to-end goldens (tests/data/vllm-e2e-*) check the result on real configs.
"""

from __future__ import annotations

import ast
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_cpu_compat import define_torchvision_schemas  # noqa: E402

define_torchvision_schemas()
import vllm_registry as R  # noqa: E402  (imports vllm; its static MRO walk)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _class_nodes(module: str, cls: str) -> list[ast.ClassDef]:
    """The ClassDef of `cls` and of its bases (static MRO order, vLLM sources only)."""
    path = R._module_path(module)
    if path is None:
        return []
    names: set[str] = set()
    sources: set[str] = {path}
    R._walk(path, cls, set(), names, sources)
    wanted = {cls, *names}
    nodes = []
    for src in [path, *sorted(sources - {path})]:
        tree, _ = R._tree(src)
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name in wanted:
                nodes.append(node)
    nodes.sort(key=lambda n: n.name != cls)  # the class itself first
    return nodes


def _lm_attribute(nodes: list[ast.ClassDef]) -> str:
    for node in nodes:
        for fn in node.body:
            if isinstance(fn, ast.FunctionDef) and fn.name == "get_language_model":
                for sub in ast.walk(fn):
                    if (isinstance(sub, ast.Return) and isinstance(sub.value, ast.Attribute)
                            and isinstance(sub.value.value, ast.Name)
                            and sub.value.value.id == "self"):
                        return sub.value.attr
    return "language_model"


def _prefix_of(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg != "prefix":
            continue
        v = kw.value
        if (isinstance(v, ast.Call) and isinstance(v.func, ast.Name)
                and v.func.id == "maybe_prefix" and len(v.args) == 2
                and isinstance(v.args[1], ast.Constant)):
            return str(v.args[1].value)
        if isinstance(v, ast.JoinedStr):
            text = "".join(p.value if isinstance(p, ast.Constant) else "{}" for p in v.values)
            return text.removeprefix("{}.") if text.startswith("{}.") else None
        if isinstance(v, ast.Constant) and v.value == "":
            return ""
        if isinstance(v, ast.Name) and v.id == "prefix":
            return ""
    return None


def _lm_prefix(nodes: list[ast.ClassDef], attr: str) -> str | None:
    for node in nodes:
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Assign | ast.AnnAssign) or \
                    not isinstance(sub.value, ast.Call):
                continue
            targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
            if any(isinstance(t, ast.Attribute) and t.attr == attr
                   and isinstance(t.value, ast.Name) and t.value.id == "self"
                   for t in targets):
                prefix = _prefix_of(sub.value)
                if prefix is not None:
                    return prefix
    return None


def _decoder_module(nodes: list[ast.ClassDef]) -> str | None:
    """The module of a wrapper that builds its language model as a bare decoder stack (its
    `_mark_composite_model(language_targets=XModel)`, e.g. Idefics3's LlamaModel, whose layers are
    `<module>.layers.N`), as its `get_mm_mapping()` names it
    (`MultiModelKeys.from_string_field(language_model="model.text_model")`); None otherwise."""
    target = module = None
    for node in nodes:
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call):
                continue
            for kw in sub.keywords:
                if kw.arg == "language_targets" and isinstance(kw.value, ast.Name):
                    target = target or kw.value.id
                if (kw.arg == "language_model" and isinstance(kw.value, ast.Constant)
                        and isinstance(kw.value.value, str)
                        and isinstance(sub.func, ast.Attribute)
                        and sub.func.attr == "from_string_field"):
                    module = module or kw.value.value
    return module if target and target.endswith("Model") and module else None


def main() -> None:
    import vllm

    reg_path = os.path.join(ROOT, "kvplan", "data", f"vllm_registry_{vllm.__version__}.json")
    with open(reg_path, encoding="utf-8") as fh:
        registry = json.load(fh)["architectures"]
    prefixes: dict[str, str] = {}
    decoder_modules: dict[str, str] = {}
    unresolved: list[str] = []
    for arch, row in sorted(registry.items()):
        if "SupportsMultiModal" not in row["interfaces"] and \
                "inner_language_model" not in row["features"]:
            continue
        nodes = _class_nodes(row["module"], row["class"])
        prefix = _lm_prefix(nodes, _lm_attribute(nodes)) if nodes else None
        module = _decoder_module(nodes) if nodes and prefix is None else None
        if module is not None:
            decoder_modules[arch] = module
        elif prefix is None:
            unresolved.append(arch)
        else:
            prefixes[arch] = prefix
    json.dump({"vllm_version": vllm.__version__, "extracted_by": "tools/vllm_lm_prefix.py",
               "language_model_prefix": prefixes, "decoder_module": decoder_modules,
               "unresolved": unresolved}, sys.stdout,
              indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
