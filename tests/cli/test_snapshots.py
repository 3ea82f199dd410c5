"""Exact output of the PR #53499 scenario as a table, JSON and markdown (fixed width, no colour).

Regenerate after an intended change with KVPLAN_UPDATE_SNAPSHOTS=1 and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from tests.golden import BUNDLED

SNAP = Path(__file__).parent / "snapshots"
SEED = str(BUNDLED / "cases" / "seed_dflash_qwen35_27b.json")
SCENARIOS = {
    "seed-0.33-table.txt": (["check", "--specs", SEED, "--vllm", "0.33.0", "--explain"], 1),
    "seed-0.33-fix-table.txt": (["check", "--specs", SEED, "--vllm", "0.33.0", "--with-fix"], 0),
    "seed-0.34-markdown.md": (["check", "--specs", SEED, "--format", "markdown", "--explain"], 1),
    "seed-0.34-fix.json": (["check", "--specs", SEED, "--with-fix", "--json"], 0),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_snapshot(name: str) -> None:
    args, code = SCENARIOS[name]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert res.exit_code == code, res.output
    path = SNAP / name
    if os.environ.get("KVPLAN_UPDATE_SNAPSHOTS") == "1":
        path.write_text(res.stdout)
    assert res.stdout == path.read_text()
    if name.endswith(".json"):
        assert json.loads(res.stdout)["vllm_contract"]["total_gib_needed"] == "7.78"
