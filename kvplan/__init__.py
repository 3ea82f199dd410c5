"""kvplan: vLLM's KV-cache startup planner, reimplemented byte for byte, offline.

    import kvplan
    plan = kvplan.check("Qwen/Qwen3.5-27B", gpu="H100", max_model_len="128k")

The public names load on first use (PEP 562), so `import kvplan` stays cheap (docs/api.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kvplan.analysis.engine_comparison import EngineComparison
    from kvplan.analysis.plan import Plan
    from kvplan.api import check, check_specs, compare, fit, sweep
    from kvplan.errors import (
        ConfigError,
        HubError,
        InputError,
        KvplanError,
        OptionError,
        UnsupportedError,
    )
    from kvplan.pipeline.fit_result import FitResult
    from kvplan.pipeline.sweep import Sweep

# public name → the module that defines it
_LAZY = {"check": "kvplan.api", "check_specs": "kvplan.api", "sweep": "kvplan.api",
         "fit": "kvplan.api", "compare": "kvplan.api",
         "EngineComparison": "kvplan.analysis.engine_comparison", "Plan": "kvplan.analysis.plan",
         "Sweep": "kvplan.pipeline.sweep",
         "FitResult": "kvplan.pipeline.fit_result",
         **{e: "kvplan.errors" for e in ("KvplanError", "InputError", "OptionError", "ConfigError",
                                          "UnsupportedError", "HubError")}}

__all__ = ["ConfigError", "EngineComparison", "FitResult", "HubError", "InputError", "KvplanError",
           "OptionError", "Plan", "Sweep", "UnsupportedError", "__version__", "check", "check_specs",
           "compare", "fit", "sweep"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
