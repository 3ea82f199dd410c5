"""`kvplan ci`: every entry planned and reported (refused ones and ones that cannot be planned
included), the worst exit code, relative paths from the TOML's folder, standard input,
`--format markdown` for PR comments."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "tests" / "data" / "hf-configs" / "meta-llama--Llama-3.1-8B"

GOOD_AND_REFUSED = f"""
[defaults]
kv-cache-memory = "40GiB"

[[deployment]]
name = "good"
model = "{LLAMA}"
max-model-len = "32k"

[[deployment]]
name = "refused"          # past max_position_embeddings (131,072): vLLM refuses at start-up
model = "{LLAMA}"
max-model-len = "256K"
"""


def _toml(tmp_path: Path, text: str, name: str = "d.toml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_refused_entry_and_a_good_one_are_both_reported(tmp_path: Path) -> None:
    path = _toml(tmp_path, GOOD_AND_REFUSED)
    res = runner.invoke(app, ["ci", str(path), "--json"])
    assert res.exit_code == 1 and res.stderr == ""
    entries = {e["name"]: e for e in json.loads(res.stdout)["entries"]}
    assert entries["good"]["fits"] is True and entries["good"]["exit_code"] == 0
    assert entries["good"]["plan"]["max_model_len"] == 32_000
    refused = entries["refused"]
    assert (refused["fits"], refused["exit_code"]) == (False, 1)
    plan = refused["plan"]
    assert plan["refused_at_startup"] and plan["failure_cause"] == "max_model_len"
    assert plan["error_message"].startswith("User-specified max_model_len (262144) is greater")
    table = runner.invoke(app, ["ci", str(path)], env={"COLUMNS": "300"})
    assert table.exit_code == 1 and table.stderr == ""
    rows = {line.split()[0]: line for line in table.stdout.splitlines()
            if line.strip().startswith(("good", "refused"))}
    assert "FITS" in rows["good"] and "DOES NOT FIT" in rows["refused"]
    assert "refused: vLLM 0.34.0 refuses it at start-up (max_model_len)" in table.stdout


def test_an_entry_that_cannot_be_planned_does_not_hide_the_others(tmp_path: Path) -> None:
    path = _toml(tmp_path, GOOD_AND_REFUSED + '\n[[deployment]]\nname = "bad dtype"\n'
                 f'model = "{LLAMA}"\nkv-cache-dtype = "fp6"\n')
    res = runner.invoke(app, ["ci", str(path), "--json"])
    assert res.exit_code == 2  # the worst: an entry that cannot be planned
    entries = {e["name"]: e for e in json.loads(res.stdout)["entries"]}
    assert entries["good"]["fits"] is True and entries["refused"]["fits"] is False
    bad = entries["bad dtype"]
    assert (bad["fits"], bad["plan"], bad["exit_code"]) == (None, None, 2)
    assert "unknown KV cache dtype 'fp6'" in bad["error"]
    assert res.stderr.startswith("Error: deployment 'bad dtype': unknown KV cache dtype 'fp6'")
    table = runner.invoke(app, ["ci", str(path)], env={"COLUMNS": "300"})
    assert table.exit_code == 2 and "ERROR" in table.stdout and "FITS" in table.stdout


def test_all_fit_exits_0(tmp_path: Path) -> None:
    path = _toml(tmp_path, GOOD_AND_REFUSED.split("[[deployment]]\nname = \"refused\"")[0])
    assert runner.invoke(app, ["ci", str(path)]).exit_code == 0


def test_markdown_for_a_pr_comment(tmp_path: Path) -> None:
    path = _toml(tmp_path, GOOD_AND_REFUSED.replace('name = "good"', 'name = "good | one"'))
    res = runner.invoke(app, ["ci", str(path), "--format", "markdown"])
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines[0] == "### kvplan ci: 1 of 2 deployments fit"
    assert lines[2].startswith("| deployment | verdict |") and lines[3].startswith("|---|")
    assert lines[4].startswith("| good \\| one | FITS | 3.91 | 39.99 | 32,000 |")
    assert lines[5] == "| refused | **DOES NOT FIT** (refused: max_model_len) | - | - | - | - |"
    assert any(line.startswith("- **refused**: vLLM 0.34.0 refuses it at start-up (max_model_len)")
               for line in lines)
    both = runner.invoke(app, ["ci", str(path), "--json", "--format", "markdown"])
    assert both.exit_code == 2 and both.stdout == ""
    assert both.stderr.startswith("Error: --json and --format markdown ask for two different outputs")


def test_relative_paths_are_read_from_the_files_folder(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    deploy = tmp_path / "repo" / "deploy"
    shutil.copytree(LLAMA, deploy / "models" / "llama")
    path = _toml(deploy, '[[deployment]]\nname = "local"\nmodel = "models/llama"\n'
                 'max-model-len = 8192\nkv-cache-memory = "20GiB"\n'
                 '[[deployment]]\nname = "dotted"\nmodel = "./models/llama/config.json"\n'
                 'max-model-len = 8192\nkv-cache-memory = "20GiB"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = runner.invoke(app, ["ci", str(path), "--json"])
    assert res.exit_code == 0, res.output
    plans = {e["name"]: e["plan"] for e in json.loads(res.stdout)["entries"]}
    assert plans["local"]["model"] == "local" and plans["dotted"]["fits"]
    # a path that exists only relative to the current directory is not read from there
    monkeypatch.chdir(deploy)
    shutil.copytree(LLAMA, deploy / "cwd-only")
    other = _toml(tmp_path, '[[deployment]]\nname = "cwd"\nmodel = "cwd-only"\n'
                  'kv-cache-memory = "20GiB"\n', "other/d.toml")
    res = runner.invoke(app, ["ci", str(other), "--json"])
    assert res.exit_code == 2
    error = json.loads(res.stdout)["entries"][0]["error"]
    assert f"no such file or folder: '{tmp_path / 'other' / 'cwd-only'}'" in error


def test_a_hub_id_stays_a_hub_id(tmp_path: Path) -> None:
    from kvplan.pipeline.batch import request_from_entry

    req = request_from_entry({"model": "meta-llama/Llama-3.1-8B", "draft": "a/b@main"}, {}, "x",
                             tmp_path)
    assert (req.model, req.draft) == ("meta-llama/Llama-3.1-8B", "a/b@main")
    (tmp_path / "meta-llama" / "Llama-3.1-8B").mkdir(parents=True)  # unless the folder has it
    req = request_from_entry({"model": "meta-llama/Llama-3.1-8B"}, {}, "x", tmp_path)
    assert req.model == str(tmp_path / "meta-llama" / "Llama-3.1-8B")


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_standard_input(name: str) -> None:
    res = runner.invoke(app, ["ci", name, "--json"], input=GOOD_AND_REFUSED)
    assert res.exit_code == 1, res.output
    assert [e["name"] for e in json.loads(res.stdout)["entries"]] == ["good", "refused"]


def test_missing_or_a_folder(tmp_path: Path) -> None:
    for arg, needle in ((tmp_path / "none.toml", "does not exist"), (tmp_path, "is a directory")):
        res = runner.invoke(app, ["ci", str(arg)])
        assert res.exit_code == 2 and res.stdout == "" and needle in res.stderr


def test_the_example_file_runs_from_any_directory(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["ci", str(ROOT / "examples" / "deployments.toml"), "--json"])
    assert res.exit_code == 1, res.output  # the PR #53499 entry and the refused one do not fit
    entries = {e["name"]: e for e in json.loads(res.stdout)["entries"]}
    assert entries["same, with the PR #53499 fix"]["fits"] is True
    assert entries["llama-3.1-8b-256k (refused at start-up)"]["plan"]["failure_cause"] == \
        "max_model_len"
    assert all(e["plan"] is not None for e in entries.values())


@pytest.mark.parametrize(("line", "said"), [
    ("tensor-parallel-size = 0", "--tensor-parallel-size must be ≥ 1, got 0"),
    ('performance-mode = "turbo"', "--performance-mode must be balanced, interactivity or "
                                   "throughput, got 'turbo'"),
])
def test_a_value_the_deployment_refuses_names_its_entry(tmp_path: Path, line: str,
                                                        said: str) -> None:
    text = GOOD_AND_REFUSED + f'\n[[deployment]]\nname = "bad"\nmodel = "{LLAMA}"\n{line}\n'
    res = runner.invoke(app, ["ci", str(_toml(tmp_path, text))])
    assert res.exit_code == 2 and res.stderr.startswith(f"Error: deployment 'bad': {said}")


def test_performance_mode_in_a_deployment_file(tmp_path: Path) -> None:
    text = GOOD_AND_REFUSED.replace('max-model-len = "32k"',
                                    'max-model-len = "32k"\nperformance-mode = "throughput"', 1)
    res = runner.invoke(app, ["ci", str(_toml(tmp_path, text)), "--json"])
    good = next(e for e in json.loads(res.stdout)["entries"] if e["name"] == "good")
    assert good["plan"]["max_num_seqs"] == 512  # 40 GiB, no GPU: the small tier's 256, doubled
