"""Golden cases: vLLM's own planner outputs (shared/golden), plus any folder in KVPLAN_GOLDEN_DIR."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

BUNDLED = Path(__file__).parent / "data" / "golden"
# More cases, produced by the kvplan developers with shared/oracle (vLLM's own planner code)
ORACLE_EXTRA = Path(__file__).parent / "data" / "golden-oracle"
# The frontier spec kinds (RSWA, rings, hidden states, HiSparse, indexers, ...), made with
# tools/oracle_ext.py (shared/oracle plus those layer kinds)
ORACLE_2026 = Path(__file__).parent / "data" / "golden-oracle-2026"
VERSIONS = ("0.31.0", "0.32.0", "0.33.0", "0.34.0")
# The contract of shared/golden/README.md; other output fields are informational.
CONTRACT_KEYS = ("pool_bytes_per_block", "total_blocks_per_request", "total_bytes_needed",
                 "total_gib_needed", "check_memory_bytes", "fits", "error", "grouping_error",
                 "estimated_max_model_len", "max_model_len_after_planning", "num_blocks",
                 "max_concurrency", "kv_cache_size_tokens", "capacity_log_line")
GROUP_KEYS = ("layer_names", "spec_type", "kind", "block_size", "page_size_bytes",
              "page_size_padded", "padded", "blocks_per_request", "layer_specs",
              "max_memory_usage_bytes", "max_num_blocks_per_req")
# Spec fields only tools/oracle_ext.py reports (also inside layer_specs); compared when present.
EXTRA_SPEC_KEYS = ("prefix_cacheable", "cache_role", "rswa_window")


def golden_dirs() -> list[Path]:
    dirs = [BUNDLED, ORACLE_EXTRA, ORACLE_2026]
    extra = os.environ.get("KVPLAN_GOLDEN_DIR")
    if extra:
        dirs += [Path(p) for p in extra.split(os.pathsep) if p]
    return dirs


def golden_runs() -> list[tuple[Path, str, bool, Path]]:
    """(case file, version, patched, expected file) for every expected file present."""
    runs = []
    for root in golden_dirs():
        for case in sorted((root / "cases").glob("*.json")):
            if case.name.endswith(".out.json"):
                continue
            for version in VERSIONS:
                for patched in (False, True):
                    exp = root / "expected" / f"{case.stem}.{version}{'.patched' if patched else ''}.json"
                    if exp.exists():
                        runs.append((case, version, patched, exp))
    return runs


def contract(d: dict[str, Any], extras: bool = True) -> dict[str, Any]:
    """The contract subset of an expected (or kvplan-produced) output (`extras`: with the
    EXTRA_SPEC_KEYS a group carries)."""
    out: dict[str, Any] = {}
    for key in CONTRACT_KEYS:
        if key in ("error", "grouping_error"):
            err = d.get(key)
            out[key] = None if not err else {"type": err["type"], "message": err["message"]}
        else:
            out[key] = d.get(key)
    if d.get("grouping_error"):
        # vLLM stops before any of the numbers exist
        return {"fits": False, "grouping_error": out["grouping_error"], "error": out["error"]}
    out["groups"] = [{k: g.get(k) for k in GROUP_KEYS}
                     | {k: g[k] for k in EXTRA_SPEC_KEYS if extras and k in g}
                     for g in d.get("groups", [])]
    if not extras:
        for g in out["groups"]:
            if g["layer_specs"] is not None:
                # as kvplan's spec_info lists them: distinct, sorted by their JSON
                uniq = {json.dumps({k: v for k, v in s.items() if k not in EXTRA_SPEC_KEYS},
                                   sort_keys=True) for s in g["layer_specs"]}
                g["layer_specs"] = [json.loads(u) for u in sorted(uniq)]
    return out


def has_extra_spec_keys(d: dict[str, Any]) -> bool:
    """Whether an expected file comes from tools/oracle_ext.py (its specs carry the extras)."""
    return any("prefix_cacheable" in s for s in d.get("input_specs", []))


def load(path: Path) -> dict[str, Any]:
    with open(path) as f:
        return json.load(f)  # type: ignore[no-any-return]
