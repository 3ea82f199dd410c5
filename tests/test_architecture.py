"""The package's import direction: each stage imports only the stages below it (docs/architecture.md).

Every `import` of a kvplan module, at module level or inside a function, is checked; a new module
must belong to a stage, so a stray top-level module fails here too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kvplan"

# lowest first: a module may import its own stage and the stages listed before it
STAGES = ("core", "models", "engines", "sources", "budget", "analysis", "pipeline", "api", "output",
          "cli")
CORE = {"kvplan.errors", "kvplan.frozen", "kvplan.units"}
ENTRY = {"kvplan", "kvplan.__main__"}  # the package root re-exports the API lazily


def stage_of(module: str) -> str:
    if module in CORE:
        return "core"
    parts = module.split(".")
    if len(parts) >= 2 and parts[1] in STAGES:
        return parts[1]
    raise AssertionError(f"{module} belongs to no stage of {STAGES}")


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def kvplan_imports(path: Path) -> set[str]:
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "kvplan")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "kvplan" or node.module.startswith("kvplan."):
                for a in node.names:  # `from pkg import submodule` imports the submodule
                    sub = f"{node.module}.{a.name}"
                    is_module = (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").exists()
                    is_package = (PACKAGE.parent / Path(*sub.split(".")) / "__init__.py").exists()
                    found.add(sub if is_module or is_package else node.module)
    return found


MODULES = sorted(p for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down_the_stages(path: Path) -> None:
    name = module_name(path)
    if name in ENTRY:
        return
    own = STAGES.index(stage_of(name))
    for imported in kvplan_imports(path):
        if imported in ENTRY or imported == "kvplan.__version__":
            continue
        target = STAGES.index(stage_of(imported))
        assert target <= own, (f"{name} ({STAGES[own]}) imports {imported} ({STAGES[target]}): "
                               "imports must point down the stages")


def test_no_import_cycle_inside_a_stage() -> None:
    graph = {name: {m for m in kvplan_imports(p) if m.startswith("kvplan.") and m != name}
             for p in MODULES for name in [module_name(p)]}
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt):] + [nxt] if nxt in trail else [node, nxt]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


ENGINES = ("kvplan.engines.vllm", "kvplan.engines.sglang")
FAMILIES = "kvplan.models.families."


def _family(module: str) -> str | None:
    """The family module `module` is (or is inside), None for anything else; the helper modules
    (`_plain`, `_shared`: a leading underscore) are not families."""
    if not module.startswith(FAMILIES):
        return None
    leaf = module[len(FAMILIES):].split(".")[0]
    return None if leaf.startswith("_") else leaf


def _engine(module: str) -> str | None:
    return next((e for e in ENGINES if module == e or module.startswith(e + ".")), None)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_engines_never_import_each_other(path: Path) -> None:
    own = _engine(module_name(path))
    if own is None:
        return
    for imported in kvplan_imports(path):
        other = _engine(imported)
        assert other in (None, own), f"{module_name(path)} imports {imported}: engines are siblings"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_imports_a_family_by_name(path: Path) -> None:
    """Families never import each other, and nothing else imports one: the registry in
    `kvplan.models` loads an adapter by its module name (a string), lazily."""
    name = module_name(path)
    for imported in kvplan_imports(path):
        family = _family(imported)
        assert family is None, (f"{name} imports the family module {imported}: share through "
                                "models/families/_shared.py (or _plain.py), or go through the "
                                "adapter registry")


def test_the_registry_names_every_family_module() -> None:
    """Each module in models/families/ is an adapter the registry can load by name."""
    from kvplan.models import _BY_ARCH, _BY_MODEL_TYPE

    named = {ref.module for table in (_BY_ARCH, _BY_MODEL_TYPE) for ref in table.refs.values()}
    on_disk = {p.stem for p in (PACKAGE / "models" / "families").glob("*.py")
               if not p.stem.startswith("_")}
    assert named == on_disk
    for table in (_BY_ARCH, _BY_MODEL_TYPE):
        for ref in table.refs.values():
            assert callable(ref.load())
