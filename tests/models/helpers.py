"""Helpers for the config-adapter tests: the real configs in tests/data/hf-configs/."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from kvplan.models import describe_model
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription

HF_CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"


def read_config(name: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(config.json, hf_quant_config.json or None) of a fixture folder, parsed with Python's
    json (which accepts Nemotron-H's `Infinity`, as vLLM's loader does)."""
    folder = HF_CONFIGS / name
    config = json.loads((folder / "config.json").read_text())
    quant_path = folder / "hf_quant_config.json"
    quant = json.loads(quant_path.read_text()) if quant_path.exists() else None
    return config, quant


def real(name: str) -> ModelDescription:
    """Describe a fixture folder's model (with its hf_quant_config.json when it has one)."""
    config, quant = read_config(name)
    return describe_model(config, source=name, hf_quant_config=quant)


def edited(name: str, *path_and_value: Any) -> dict[str, Any]:
    """A deep copy of a fixture config with fields replaced: edited(name, ("a", "b"), 3, ...)."""
    config, _ = read_config(name)
    config = copy.deepcopy(config)
    pairs = list(path_and_value)
    for path, value in zip(pairs[::2], pairs[1::2], strict=True):
        target = config
        for key in path[:-1]:
            target = target[key]
        if value is DELETE:
            target.pop(path[-1], None)
        else:
            target[path[-1]] = value
    return config


DELETE = object()


def of_kind(desc: ModelDescription, kind: LayerKind) -> list[LayerDescription]:
    return [layer for layer in desc.layers if layer.kind is kind]


def indices(desc: ModelDescription, kind: LayerKind) -> list[int]:
    return [layer.index for layer in of_kind(desc, kind)]


def one(values: Any) -> Any:
    """The single distinct value of an iterable (asserts there is exactly one)."""
    distinct = set(values)
    assert len(distinct) == 1, distinct
    return distinct.pop()


# ---- the issue-10 deployment: H100 ×8, 262,144 tokens, 40 GiB of KV per GPU ------------------

H100_X8_FLAGS = ("--json", "--tensor-parallel-size", "8", "--gpu", "H100", "--max-model-len",
                 "262144", "--kv-cache-memory", "40GiB", "--max-num-batched-tokens", "8192")


def check_h100_x8(config_path: Path, *extra: str) -> dict[str, Any]:
    """`kvplan check CONFIG --json` on H100 ×8 at 262,144 tokens (CliRunner); the parsed JSON."""
    return check_json(config_path, *H100_X8_FLAGS[1:], *extra)


def h100_tp8(**changes: Any) -> Any:
    """The same deployment as a build.Deployment (SM90, 8192 batched tokens)."""
    from kvplan.engines.vllm.build import Deployment

    base: dict[str, Any] = dict(vllm_version="0.34.0", tensor_parallel_size=8, sm=90,
                                max_model_len=262144, max_num_batched_tokens=8192,
                                available_kv_bytes=40 * 2**30)
    base.update(changes)
    return Deployment(**base)


def check_json(config_path: Path, *flags: str) -> dict[str, Any]:
    """`kvplan check CONFIG --json FLAGS…` (CliRunner): the parsed JSON."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["check", str(config_path), "--json", *flags])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def assert_plan_equals_oracle(out: dict[str, Any], case: str, version: str = "0.34.0") -> None:
    """`kvplan check --json` output against vLLM's planner on a golden-oracle-2026 case."""
    from tests.golden import ORACLE_2026

    want = json.loads((ORACLE_2026 / "expected" / f"{case}.{version}.json").read_text())
    for key in ("num_blocks", "kv_cache_size_tokens", "total_blocks_per_request"):
        assert out[key] == want[key], key
    assert out["pool_bytes_per_block"] == [want["pool_bytes_per_block"]]
