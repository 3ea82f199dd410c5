"""vLLM's model registry and how kvplan plans each architecture, as committed data.

* `kvplan/data/vllm_registry_0.34.0.json` — vLLM 0.34.0's registry (tools/vllm_registry.py):
  architecture → module, class, registry tables, interfaces, attention building blocks.
* `kvplan/data/coverage.csv` — one row per registry architecture: the kvplan path that plans it
  (`adapter:<name>`, `generic`, `draft:<method>`) or `refused:<reason>` with the reason in words,
  and `pending` naming the branch that brings the path when it is not in this one yet; for every
  `adapter:*` and `generic` row, `confirmed`: the config on which vLLM 0.34.0's own start-up code
  (the e2e harness) and kvplan agree — `real:<folder>` (a published config.json) or
  `defaults:<folder>` (built from the defaults of the configuration class vLLM uses) — or
  `no: <reason>` (tools/confirm_coverage.py; tests/models/test_coverage_confirmed.py replays
  each confirming plan against vLLM's output, kept as a golden beside the config).

Reading them is cheap (no transformers); both are loaded once, on first use.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

REGISTRY_FILE = "vllm_registry_0.34.0.json"
COVERAGE_FILE = "coverage.csv"
COVERAGE_COLUMNS = ("architecture", "category", "path", "pending", "reason", "confirmed")


@dataclass(frozen=True)
class CoverageRow:
    architecture: str
    category: str  # vLLM registry table(s), e.g. text_generation, multimodal, embedding
    path: str  # adapter:<name> | generic | draft:<method> | refused:<code>
    pending: str  # "" when this branch plans it as `path` says, else the owner of that path
    reason: str  # why it is refused, or a note on how it is planned
    confirmed: str  # real:<folder> | defaults:<folder> | no: <reason> | "" (draft/refused rows)

    @property
    def refused(self) -> bool:
        return self.path.startswith("refused:")

    @property
    def confirmed_by(self) -> str | None:
        """"real" / "defaults": the kind of config vLLM's own code confirmed this row on."""
        kind, sep, _ = self.confirmed.partition(":")
        return kind if sep and kind in ("real", "defaults") else None


def _data(name: str) -> Any:
    return resources.files("kvplan").joinpath("data", name)


@cache
def registry() -> dict[str, Any]:
    with _data(REGISTRY_FILE).open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


@cache
def coverage() -> dict[str, CoverageRow]:
    with _data(COVERAGE_FILE).open(encoding="utf-8", newline="") as fh:
        rows = [CoverageRow(**{k: (r.get(k) or "") for k in COVERAGE_COLUMNS})
                for r in csv.DictReader(fh)]
    return {r.architecture: r for r in rows}


def row_for(archs: tuple[str, ...]) -> CoverageRow | None:
    """The coverage row of the first architecture vLLM would pick (the first it registers)."""
    table = coverage()
    for arch in archs:
        if arch in table:
            return table[arch]
    return None


def registry_entry(arch: str) -> dict[str, Any] | None:
    entry: dict[str, Any] | None = registry()["architectures"].get(arch)
    return entry


def previously_supported(arch: str) -> str | None:
    """The last vLLM release that served `arch`, for architectures vLLM 0.34 dropped."""
    value: str | None = registry()["previously_supported"].get(arch)
    return value


def is_multimodal(arch: str) -> bool:
    entry = registry_entry(arch)
    return entry is not None and "SupportsMultiModal" in entry["interfaces"]


ENCODER_CACHE_NOTE = (
    "multimodal model: only the language model is planned; vLLM's encoder cache (vision/audio "
    "embeddings kept between scheduling steps, sized by --max-num-batched-tokens and the largest "
    "item's token count) is a separate buffer, not part of the KV cache, and is not modelled")


def encoder_cache_note(archs: tuple[str, ...]) -> str | None:
    """The note a multimodal architecture's plan carries (vLLM: SupportsMultiModal models)."""
    return ENCODER_CACHE_NOTE if any(is_multimodal(a) for a in archs) else None


def uses_per_layer_window(arch: str | None) -> bool:
    """Whether vLLM's model code gives "sliding_attention" layers their own window
    (Attention(per_layer_sliding_window=...)); else every layer gets CacheConfig.sliding_window.
    Architectures vLLM does not register run on its Transformers backend, which does
    (models/transformers/base.py)."""
    entry = registry_entry(arch) if arch else None
    if entry is None or "inner_language_model" in entry["features"]:
        return True
    return "per_layer_sliding_window" in entry["features"]
