"""`kvplan check --specs … --json` through typer's runner: the golden contract, exit codes, errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from tests.golden import BUNDLED, contract, golden_runs, load

runner = CliRunner()
RUNS = [r for r in golden_runs() if r[1] in ("0.31.0", "0.34.0")]


@pytest.mark.parametrize(("case", "version", "patched", "expected"), RUNS,
                         ids=[f"{c.stem}-{v}{'-fix' if p else ''}" for c, v, p, _ in RUNS])
def test_cli_json_matches_golden(case, version, patched, expected) -> None:
    args = ["check", "--specs", str(case), "--vllm", version, "--json",
            "--with-fix" if patched else "--without-fix"]
    res = runner.invoke(app, args)
    exp = load(expected)
    if "oracle_error" in exp:  # refused by vLLM / the oracle for this release: a clear error
        assert res.exit_code == 2 and res.stdout == "" and res.stderr.startswith("Error: ")
        return
    assert res.exit_code == (0 if exp["fits"] else 1), res.output
    out = json.loads(res.stdout)
    assert contract(out["vllm_contract"]) == contract(exp, extras=False)
    assert out["fits"] is exp["fits"]


SEED = BUNDLED / "cases" / "seed_dflash_qwen35_27b.json"


def test_seed_table_shows_the_draft_group_and_the_vllm_error() -> None:
    res = runner.invoke(app, ["check", "--specs", str(SEED), "--vllm", "0.33.0"],
                        env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert res.exit_code == 1
    assert "DOES NOT FIT" in res.stdout
    assert "swa·draft" in res.stdout and "2,177" in res.stdout
    assert "(41.1 GiB KV cache is needed" in res.stdout.replace("\n", " ")


def test_seed_with_fix_fits_and_prints_capacity_line() -> None:
    res = runner.invoke(app, ["check", "--specs", str(SEED), "--with-fix"],
                        env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert res.exit_code == 0
    assert "FITS" in res.stdout and "GPU KV cache size:" in res.stdout


def test_kv_cache_memory_flag_overrides_the_file() -> None:
    res = runner.invoke(app, ["check", "--specs", str(SEED), "--kv-cache-memory", "48GiB",
                              "--json"])
    out = json.loads(res.stdout)
    assert out["available_kv_bytes"] == [48 * 2**30]
    assert res.exit_code == 0  # 41.1 GiB needed < 48 GiB - one block


def test_markdown_format() -> None:
    res = runner.invoke(app, ["check", "--specs", str(SEED), "--format", "markdown"])
    assert res.exit_code == 1
    assert res.stdout.startswith("### kvplan:")
    assert "| 14 | sliding_window (draft)" in res.stdout


@pytest.mark.parametrize(("content", "needle"), [
    ("", "not valid JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"max_model_len": 10}', "layers"),
    ('{"max_model_len": 10, "max_num_batched_tokens": 8, "layers": [{"name": "a", "kind": "warp"}],'
     ' "available_kv_memory_bytes": 100}', "unknown kind"),
    ('{"max_model_len": 10, "max_num_batched_tokens": 8, "bogus": 1, "layers": []}', "unknown key"),
    ('{"max_model_len": -3, "max_num_batched_tokens": 8, "available_kv_memory_bytes": 100,'
     ' "layers": [{"name": "a", "num_kv_heads": 1, "head_size": 8}]}', "max_model_len"),
])
def test_bad_spec_files_give_one_error_line_and_exit_2(tmp_path, content, needle) -> None:
    f = tmp_path / "bad.json"
    f.write_text(content)
    res = runner.invoke(app, ["check", "--specs", str(f)])
    assert res.exit_code == 2
    assert res.stdout == ""
    assert res.stderr.startswith("Error: ")
    assert needle in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_file_and_bad_flags_exit_2(tmp_path) -> None:
    res = runner.invoke(app, ["check", "--specs", str(tmp_path / "nope.json")])
    assert res.exit_code == 2 and "does not exist" in res.stderr
    res = runner.invoke(app, ["check", "--specs", str(SEED), "--vllm", "0.29.0"])
    assert res.exit_code == 2 and "unknown vLLM release" in res.stderr
    res = runner.invoke(app, ["check", "--specs", str(SEED), "--kv-cache-memory", "lots"])
    assert res.exit_code == 2 and "cannot read size" in res.stderr
    res = runner.invoke(app, ["check", "--specs", str(SEED), "--max-model-len", "0"])
    assert res.exit_code == 2


def test_auto_max_model_len_fits_by_shrinking() -> None:
    res = runner.invoke(app, ["check", "--specs", str(SEED), "--max-model-len", "auto", "--json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 0
    # auto-fit picks vLLM's estimated length for the same memory
    assert out["max_model_len_after_planning"] == out["estimated_max_model_len"][0] == 30592
