"""Load the SGLang 0.5.23 golden cases (tests/data/sglang-0.5.23) as engine inputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.engines.sglang import (
    KvBudget,
    Platform,
    ProfiledMemory,
    SglangDeployment,
    SglangGpu,
    SglangResult,
    plan_sglang,
)
from kvplan.models import describe_draft, describe_model
from kvplan.models.description import ModelDescription

ROOT = Path(__file__).resolve().parents[2] / "data" / "sglang-0.5.23"
CASES = ROOT / "cases"
EXPECTED = ROOT / "expected"
PLATFORMS = {"cuda_sm90": Platform.SM90, "cuda_sm100": Platform.SM100,
             "cuda_sm80": Platform.SM80, "cuda_sm89": Platform.SM89}
GIB = 1 << 30


def case_names() -> list[str]:
    return sorted(p.stem for p in CASES.glob("*.json"))


def load(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    case = json.loads((CASES / f"{name}.json").read_text())
    expected = json.loads((EXPECTED / f"{name}.out.json").read_text())
    return case, expected


def _describe(folder: Path, *, draft: bool = False, method: str | None = None
              ) -> ModelDescription:
    config = json.loads((folder / "config.json").read_text())
    quant_path = folder / "hf_quant_config.json"
    quant = json.loads(quant_path.read_text()) if quant_path.exists() else None
    if draft:
        try:
            return describe_draft(config, source=folder.name, method=method,
                                  hf_quant_config=quant)
        except Exception:  # a full model used as a draft (STANDALONE)
            return describe_model(config, source=folder.name, hf_quant_config=quant)
    return describe_model(config, source=folder.name, hf_quant_config=quant)


def run(case: dict[str, Any]) -> SglangResult:
    sa = dict(case["server_args"])
    sa.pop("device", None)
    dep = SglangDeployment(**sa)
    target = _describe((CASES / case["model_dir"]).resolve())
    draft = None
    if "draft_model_dir" in case:
        method = {"EAGLE3": "eagle3", "DFLASH": "dflash", "EAGLE": "eagle"}.get(
            (sa.get("speculative_algorithm") or "").upper())
        draft = _describe((CASES / case["draft_model_dir"]).resolve(), draft=True, method=method)
    gpu = SglangGpu(total_memory_mib=case["gpu_total_memory_mib"],
                    platform=PLATFORMS[case.get("platform", "cuda_sm90")])
    if "kv_budget_bytes" in case:
        b = case["kv_budget_bytes"]
        memory: ProfiledMemory | KvBudget = KvBudget(
            budget_bytes=tuple(b) if isinstance(b, list) else (b,))
    else:
        pre = case.get("pre_model_load_memory_gib", case["gpu_total_memory_mib"] / 1024)
        if "available_gpu_memory_gib" in case:
            a = case["available_gpu_memory_gib"]
            avail = tuple(a) if isinstance(a, list) else (a,)
        else:
            w = case["weights_gib"]
            ws = w if isinstance(w, list) else [w]
            avail = tuple(float(pre) - float(x) for x in ws)
        memory = ProfiledMemory(pre_model_load_gib=pre, available_gib=avail)
    return plan_sglang(target, dep, gpu=gpu, memory=memory, draft=draft)
