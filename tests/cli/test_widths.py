"""Tables that never lie at any width ≥ 60: check, explain, layers, fit, sweep and ci at COLUMNS
60, 80, 100 and 160 — exact snapshots (tests/cli/snapshots/widths/) plus the properties a
snapshot cannot show by itself: no line of a table wider than the terminal, no ellipsis, every
number of the JSON present whole (or its column named as left out), the identifying columns
(GPU, count, group) always there, flags never split.

Regenerate after an intended change with KVPLAN_UPDATE_SNAPSHOTS=1 and review the diff.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from tests.golden import BUNDLED

SNAP = Path(__file__).parent / "snapshots" / "widths"
ROOT = Path(__file__).parents[2]
# relative to the repository root (the tests run there): the snapshots name these paths
QWEN35 = "tests/data/hf-configs/Qwen--Qwen3.5-27B/config.json"
DFLASH = "tests/data/hf-configs/z-lab--Qwen3.8-27B-DFlash2/config.json"
QWEN3 = "tests/data/hf-configs/Qwen--Qwen3-8B"
LLAMA = "tests/data/hf-configs/meta-llama--Llama-3.1-8B"
SEED = str(BUNDLED / "cases" / "seed_dflash_qwen35_27b.json")
# lines printed whole on purpose (the terminal wraps them; copy-paste keeps working)
SOFT_WRAPPED = re.compile(r"^\d+\. \$ vllm serve |^   check: kvplan check |would raise |"
                          r"^[^ ][^:]*: (To serve|User-specified|the weights)")
WIDTHS = (60, 80, 100, 160)
FIT_GPUS = "H100,RTX PRO 6000,MI325X,A100-80GB,L40S"

SCENARIOS: dict[str, tuple[list[str], int]] = {
    "check": (["check", QWEN3, "--gpu", "H100", "--max-model-len", "32768"], 0),
    "explain": (["explain", "--specs", SEED, "--vllm", "0.33.0"], 1),
    "layers": (["layers", QWEN35, "--draft", DFLASH, "--num-speculative-tokens", "7"], 0),
    "fit": (["fit", QWEN35, "--max-model-len", "131072", "--concurrency", "8", "--gpu",
             FIT_GPUS], 0),
    "sweep": (["sweep", QWEN35, "--gpu", "H100,RTX PRO 6000,L40S", "--kv-cache-dtype",
               "auto,fp8", "--max-model-len", "8192..1048576"], 0),
    "ci": (["ci", "{toml}"], 1),
}


def _ci_file(tmp_path: Path) -> str:
    """A ci file with absolute paths (the table shows names, not paths)."""
    path = tmp_path / "deployments.toml"
    path.write_text(f"""[defaults]
vllm = "0.34.0"
gpu = "H100"

[[deployment]]
name = "llama-3.1-8b-128k"
model = "{ROOT / LLAMA}"
max-model-len = 131072

[[deployment]]
name = "qwen3.5-27b-dflash-nvfp4 (PR #53499 on vLLM 0.33)"
model = "{ROOT / QWEN35}"
draft = "{ROOT / DFLASH}"
vllm = "0.33.0"
gpu = "A100-80GB"
kv-cache-dtype = "nvfp4"
draft-kv-cache-dtype = "bfloat16"
max-model-len = 262144
max-num-batched-tokens = 16384
num-speculative-tokens = 7
draft-block-size = 16
kv-cache-memory = "32GiB"

[[deployment]]
name = "same, with the PR #53499 fix"
model = "{ROOT / QWEN35}"
draft = "{ROOT / DFLASH}"
vllm = "0.33.0"
with-fix = true
gpu = "A100-80GB"
kv-cache-dtype = "nvfp4"
draft-kv-cache-dtype = "bfloat16"
max-model-len = 262144
max-num-batched-tokens = 16384
num-speculative-tokens = 7
draft-block-size = 16
kv-cache-memory = "32GiB"
""")
    return str(path)


def _run(name: str, width: int, tmp_path: Path, json_out: bool = False) -> tuple[str, int]:
    args, _ = SCENARIOS[name]
    args = [a.replace("{toml}", _ci_file(tmp_path)) if a == "{toml}" else a for a in args]
    if json_out:
        args = [*args, "--json"]
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        res = CliRunner().invoke(app, args, env={"COLUMNS": str(width), "NO_COLOR": "1"})
    finally:
        os.chdir(cwd)
    return res.stdout, res.exit_code


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_snapshot_at_width(name: str, width: int, tmp_path: Path) -> None:
    out, code = _run(name, width, tmp_path)
    assert code == SCENARIOS[name][1], out
    path = SNAP / f"{name}-{width}.txt"
    if os.environ.get("KVPLAN_UPDATE_SNAPSHOTS") == "1":
        SNAP.mkdir(exist_ok=True)
        path.write_text(out)
    assert out == path.read_text()
    # nothing is cut with an ellipsis (a layer range {0,1,…,62} is not a cut)
    assert "…" not in re.sub(r"\{[^}]*\}", "", out)
    too_wide = [ln for ln in out.splitlines() if len(ln) > width and not SOFT_WRAPPED.search(ln)]
    assert not too_wide


def _left_out(out: str) -> str:
    m = re.search(r"\(left out at \d+ columns: ([^;]+);", out.replace("\n", " "))
    return m.group(1) if m else ""


def _words_in_order(text: str, name: str) -> bool:
    """Every word of `name` appears whole, in order (a wrapped name is still the name)."""
    pos = 0
    for word in name.split():
        found = re.search(r"(?<![\w,.])" + re.escape(word) + r"(?![\w,])", text[pos:])
        if not found:
            return False
        pos += found.end()
    return True


@pytest.mark.parametrize("width", WIDTHS)
def test_fit_numbers_and_identity_never_cut(width: int, tmp_path: Path) -> None:
    out, _ = _run("fit", width, tmp_path)
    data = json.loads(_run("fit", width, tmp_path, json_out=True)[0])
    table = out.split("\n1. $")[0]
    left_out = _left_out(out)
    assert "GPU" not in left_out and "n," not in left_out  # identifying columns stay
    for c in data["candidates"]:
        short = c["gpu"].removeprefix("NVIDIA ").removeprefix("AMD Instinct ")
        assert _words_in_order(table, short), (short, table)
        if "KV tokens" not in left_out:
            assert re.search(rf"(?<![\d,]){c['kv_cache_size_tokens']:,}(?![\d,])", table), (
                c["kv_cache_size_tokens"], table)
        assert f"{c['max_concurrency']:.1f}" in table


@pytest.mark.parametrize("width", WIDTHS)
def test_sweep_numbers_never_cut(width: int, tmp_path: Path) -> None:
    out, _ = _run("sweep", width, tmp_path)
    data = json.loads(_run("sweep", width, tmp_path, json_out=True)[0])
    left_out = _left_out(out)
    for row in data["rows"]:
        short = row["gpu"].removeprefix("NVIDIA ")
        assert _words_in_order(out, short)
        for p in row["points"]:
            if p["fits"]:
                assert f"{p['max_concurrency']:.1f}x" in out
        if "largest fit" not in left_out:
            assert f"{row['largest_fitting_max_model_len']:,}" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_explain_flags_never_split(width: int, tmp_path: Path) -> None:
    out, _ = _run("explain", width, tmp_path)
    for flag in ("--with-fix", "--max-model-len", "--max-num-batched-tokens"):
        assert flag in out
    assert not re.search(r"--[a-z-]*[a-z]\s*\n\s*[a-z-]+\b", out.split("What if")[1]) or all(
        f in out for f in ("--max-num-batched-tokens",))
    # the broken form the issue saw: a flag split inside a word
    assert "--max-num-batched-t\n" not in out and "okens" not in out.replace("tokens", "")


@pytest.mark.parametrize("width", WIDTHS)
def test_check_groups_keep_identity(width: int, tmp_path: Path) -> None:
    out, _ = _run("explain", width, tmp_path)
    left_out = _left_out(out)
    assert "grp" not in left_out and "kind" not in left_out
    for ids in ("0-9", "10-13", "14"):
        assert re.search(rf"^\s*{ids}\s", out, re.M), ids
    for blocks in ("2,177", "364", "90"):
        assert blocks in out


def test_table_layout_steps() -> None:
    """The layout's order: natural → wrapped → compact → drop (highest first) → vertical."""
    from kvplan.output.tables import Column, plan_layout

    cols = [Column("name", wrap=True, key=True), Column("big number", "right"),
            Column("extra", "right", drop=1), Column("more", "right", drop=2)]
    rows = [["alpha beta gamma", "1,234,567", "12.5", "7"]]

    def overhead(n: int, compact: bool) -> int:
        return (n + 1) if compact else (2 * n + 2)

    wide = plan_layout(cols, rows, 60, overhead)
    assert wide.kept == (0, 1, 2, 3) and wide.widths == (16, 10, 5, 4)
    wrapped = plan_layout(cols, rows, 40, overhead)
    assert wrapped.kept == (0, 1, 2, 3) and not wrapped.compact and sum(wrapped.widths) == 30
    assert wrapped.widths[1] == 10  # the number keeps its width; the name wraps
    dropped = plan_layout(cols, rows, 22, overhead)
    assert 1 in dropped.kept and 0 in dropped.kept and 3 not in dropped.kept
    tiny = plan_layout(cols, rows, 12, overhead)
    assert tiny.vertical
    with pytest.raises(ValueError):
        Column("GPU", key=True, drop=1)
