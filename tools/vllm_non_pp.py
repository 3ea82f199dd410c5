"""List the architectures of vLLM's model registry whose class is not SupportsPP.

vLLM refuses `--pipeline-parallel-size > 1` for them (ModelConfig.verify_with_parallel_config:
"Pipeline parallelism is not supported for this model. Supported models implement the
`SupportsPP` interface."); kvplan says so through `ModelDescription.supports_pipeline_parallel`,
set by the adapters. Run it with the Python of the vLLM e2e venv (importing the model modules
needs torch and the models' dependencies; a development tool, never run by tests):

    /tmp/kvplan-e2e/oracle/.venv-0.34.0/bin/python tools/vllm_non_pp.py [--e2e-dir DIR] [--json]

It applies the e2e harness's own import patches (/work/shared/vllm-e2e/vllm_e2e.py: CUDA
extension stubs, torchvision ops, Triton driver, the H100 platform; through
tools/vllm_e2e_forkserver.py's `prepare`), imports every registered
class as `ModelRegistry` does (`_LazyRegisteredModel.load_model_cls`) and asks vLLM's own
`vllm.model_executor.models.interfaces.supports_pp`. Output: one line per architecture that is
not SupportsPP (`Arch  module.Class`), then the ones whose module did not import (a missing
optional dependency: torchaudio, timm, ...) with the error and what the class statement's own
bases say (`static: SupportsPP` when it names SupportsPP; `static: not SupportsPP` when every
base is nn.Module or an interface mix-in of interfaces*.py; else `static: unknown`).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import json
import logging
import os
import sys

# mix-ins of vllm/model_executor/models/interfaces*.py (none of them is SupportsPP)
_MIXIN_PREFIXES = ("Supports", "Has", "Is", "VllmModel")


def static_verdict(module_name: str, class_name: str) -> str:
    """What the class statement's own bases say, read without importing the module."""
    try:
        spec = importlib.util.find_spec(module_name)
        source = open(spec.origin, encoding="utf-8").read() if spec and spec.origin else ""
    except Exception:
        return "static: unknown (no source)"
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.split(".")[-1] == "SupportsPP" for b in bases):
                return "static: SupportsPP"
            if all(b == "nn.Module" or b.split(".")[-1].startswith(_MIXIN_PREFIXES) for b in bases):
                return "static: not SupportsPP"
            return f"static: unknown (bases {', '.join(bases)})"
    return "static: unknown (class not found)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--e2e-dir", default="/work/shared/vllm-e2e")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    a = ap.parse_args()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from vllm_e2e_forkserver import prepare

    prepare(a.e2e_dir)
    logging.disable(logging.WARNING)
    import vllm
    from vllm.model_executor.models.interfaces import supports_pp
    from vllm.model_executor.models.registry import ModelRegistry

    not_pp: dict[str, str] = {}
    failed: dict[str, str] = {}
    pp = 0
    for arch, entry in sorted(ModelRegistry.models.items()):
        where = f"{getattr(entry, 'module_name', '?')}.{getattr(entry, 'class_name', '?')}"
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                cls = entry.load_model_cls()
        except Exception as exc:  # a model's optional dependency is missing
            verdict = static_verdict(getattr(entry, "module_name", ""), getattr(entry, "class_name", ""))
            failed[arch] = (f"{where}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}; "
                            f"{verdict}")
            continue
        if supports_pp(cls):
            pp += 1
        else:
            not_pp[arch] = f"{cls.__module__}.{cls.__qualname__}"
    if a.json:
        print(json.dumps({"vllm_version": vllm.__version__, "supports_pp": pp,
                          "not_supports_pp": not_pp, "import_failed": failed}, indent=1))
        return 0
    print(f"# vLLM {vllm.__version__}: {len(not_pp)} architectures not SupportsPP, {pp} SupportsPP,"
          f" {len(failed)} not imported")
    width = max(map(len, not_pp), default=0)
    for arch, where in not_pp.items():
        print(f"{arch:<{width}}  {where}")
    for arch, why in failed.items():
        print(f"# not imported: {arch}  {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
