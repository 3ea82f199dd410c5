"""Import-time fixes for running vLLM's Python code from the oracle venvs on a CPU-only machine.

The e2e venv (`/tmp/kvplan-e2e/oracle/.venv-0.34.0`, the target of /work/oracle/.venv-0.34.0) has
the CUDA build of torchvision 0.28.0 installed, whose `_C.so` cannot load on a CPU torch;
torchvision then still registers fake kernels for `torchvision::nms` / `qnms`, which fails, and any
`import transformers` that reaches torchvision raises. Defining those two op schemas (no kernel)
first is what `shared/vllm-e2e/vllm_e2e.py` does (its PATCH 6); no vLLM code path used by the
tools here calls them.
"""

from __future__ import annotations

import importlib.util

_LIBS: list = []


def define_torchvision_schemas() -> None:
    if importlib.util.find_spec("torchvision") is None:
        return
    import torch

    lib = torch.library.Library("torchvision", "FRAGMENT")
    _LIBS.append(lib)
    for schema in ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                   "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"):
        try:
            lib.define(schema)
        except Exception:  # already defined: the real extension loaded
            return
