"""The coverage table's `confirmed` column, replayed: for every `adapter:*` / `generic` row that
vLLM 0.34.0's own start-up code confirmed (tools/confirm_coverage.py, the e2e harness of
/work/shared/vllm-e2e), kvplan's plan of that config still equals vLLM's output, kept as a golden
(tests/data/coverage-configs/<ARCH>/vllm-0.34.0.json) with the flags of the e2e harness's
compare.py (TP 1, H100, 40 GiB of KV memory, 8192 batched tokens, 32768 tokens or, when vLLM
refuses that, the length it derives). Only kvplan runs here; the vLLM side is the golden.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from kvplan.models.coverage import coverage

ROOT = Path(__file__).resolve().parents[2]
BUILT = ROOT / "tests" / "data" / "coverage-configs"
GOLDENS = sorted(BUILT.glob("*/vllm-0.34.0.json"))


def _kvplan(config: Path, flags: dict[str, Any]) -> tuple[int, dict[str, Any], str]:
    """`kvplan check CONFIG --json` with the golden's flags: (exit code, JSON, stderr)."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, [
        "check", str(config), "-tp", str(flags["tensor_parallel_size"]),
        "--max-model-len", str(flags["max_model_len"]),
        "--max-num-batched-tokens", str(flags["max_num_batched_tokens"]),
        "--kv-cache-memory", flags["kv_cache_memory"], "--vllm", flags["vllm"],
        "--gpu", flags["gpu"], "--json"], env={"HF_HUB_OFFLINE": "1"})
    out = json.loads(res.stdout) if res.stdout.strip() else {}
    return res.exit_code, out, res.stderr


def _refusal(stderr: str) -> str:
    """kvplan's 'Error: vLLM would raise ValueError: <message>' → <message>."""
    line = next((ln for ln in stderr.splitlines() if ln.startswith("Error: ")), "")
    return re.sub(r"^[A-Za-z]+Error: ", "", line.split("would raise ", 1)[-1]).strip()


def replay(golden: Path) -> None:
    """kvplan on the golden's config with its flags, run by run, equal to vLLM's output: the
    groups, blocks, concurrency and length, or vLLM's refusal text."""
    want = json.loads(golden.read_text())
    config = ROOT / want["config"]
    for run in want["runs"]:
        flags = {**want["flags"], "max_model_len": run["max_model_len"]}
        code, out, stderr = _kvplan(config, flags)
        if run["status"] != "ok":  # vLLM refused the flags: kvplan refuses with its message
            assert code in (1, 2), (run["max_model_len"], out.get("verdict"))
            # a start-up refusal is a plan (exit 1, vLLM's text in the JSON); bad input is exit 2
            assert (out.get("error_message") if code == 1 else _refusal(stderr)) == run["error"]
            continue
        assert code in (0, 1), stderr
        got = out["vllm_contract"]
        assert got["fits"] == run["fits"]
        assert [{k: g[k] for k in ("spec_type", "block_size", "num_layers", "page_size_bytes",
                                   "layer_names")} for g in got["groups"]] == run["groups"]
        if run["fits"]:
            assert got["num_blocks"] == run["num_blocks"]
            if run["max_concurrency"] is None:  # no KV cache at all (encoder-only)
                assert got["max_concurrency"] is None
            else:
                assert got["max_concurrency"] == pytest.approx(run["max_concurrency"], rel=1e-9)
            assert got["max_model_len_after_planning"] == run["max_model_len_after_planning"]
        else:
            assert (got.get("error") or {}).get("message") == run["error"]


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.parent.name for g in GOLDENS])
def test_kvplan_equals_vllm_on_the_confirming_config(golden: Path) -> None:
    replay(golden)


def test_every_adapter_and_generic_row_says_whether_vllm_confirmed_it() -> None:
    goldens = {g.parent.name: json.loads(g.read_text()) for g in GOLDENS}
    for arch, row in coverage().items():
        if not (row.path.startswith("adapter:") or row.path == "generic"):
            assert row.confirmed == "", arch  # drafts and refusals are not confirmed here
            continue
        assert row.confirmed_by or re.match(r"^no: \S", row.confirmed), (arch, row.confirmed)
        if row.confirmed_by:  # its golden names the same config, and the config exists
            kind, folder = row.confirmed.split(":", 1)
            assert goldens[arch]["kind"] == kind and goldens[arch]["config"] == folder, arch
            assert (ROOT / folder / "config.json").is_file(), arch
            if kind == "real":
                assert folder.startswith(("tests/data/hf-configs/", "examples/configs/",
                                          "tests/data/coverage-real-configs/",
                                          "tests/data/heldout-configs/")), arch
    confirmed = {a for a, r in coverage().items() if r.confirmed_by}
    assert set(goldens) == confirmed  # no golden without its row, no row without its golden


def test_built_configs_are_the_class_defaults_with_the_architecture() -> None:
    """Each built config names its architecture first and is recorded in PROVENANCE.md."""
    provenance = (BUILT / "PROVENANCE.md").read_text()
    for cfg in sorted(BUILT.glob("*/config.json")):
        arch = cfg.parent.name
        assert json.loads(cfg.read_text())["architectures"] == [arch]
        assert f"### {arch}\n" in provenance, arch
        assert coverage()[arch].confirmed == f"defaults:tests/data/coverage-configs/{arch}"
