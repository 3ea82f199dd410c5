"""Flags that ask for two different things fail with one line and exit 2; none wins silently."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
DATA = Path(__file__).resolve().parents[1] / "data"
LLAMA = str(DATA / "hf-configs" / "meta-llama--Llama-3.1-8B")
SPECS = str(Path(__file__).resolve().parents[2] / "examples" / "pr53499-qwen35-27b-dflash.specs.json")


@pytest.mark.parametrize(("args", "words"), [
    ([LLAMA, "--specs", SPECS], "and --specs both say what to plan"),
    (["--specs", SPECS, "--serve", f"vllm serve {LLAMA}"], "--specs with --serve"),
    ([LLAMA, "--gpu", "H100", "--kv-cache-memory", "10GiB", "--available-kv-gib", "9"],
     "both set the KV cache budget"),
    ([LLAMA, "--gpu", "H100", "-tp", "4", "-dcp", "3"],
     "tp_size=4 must be divisible by dcp_size=3"),
    ([LLAMA, "--gpu", "H100", "--num-speculative-tokens", "3"],
     "without a speculative method or a draft"),
    ([LLAMA, "--gpu", "H100", "--available-kv-gib", "1e30"], "out of range"),
])
def test_conflicting_or_nonsense_flags_exit_2(args: list[str], words: str) -> None:
    res = runner.invoke(app, ["check", *args])
    assert res.exit_code == 2, res.output
    assert words in res.stderr
    assert "Traceback" not in res.output


def test_dcp_dividing_tp_plans() -> None:
    res = runner.invoke(app, ["check", LLAMA, "--gpu", "H100", "-tp", "4", "-dcp", "2",
                              "--max-model-len", "32k"])
    assert res.exit_code == 0, res.output


def test_a_ci_entry_setting_the_budget_twice_is_refused(tmp_path: Path) -> None:
    toml = tmp_path / "d.toml"
    toml.write_text(f'[[deployment]]\nmodel = "{LLAMA}"\ngpu = "H100"\n'
                    'kv-cache-memory = "10GiB"\navailable-kv-gib = 9\n')
    res = runner.invoke(app, ["ci", str(toml)])
    assert "sets the KV cache budget twice" in res.output
    assert "Traceback" not in res.output


def test_an_entry_budget_replaces_the_defaults_one(tmp_path: Path) -> None:
    toml = tmp_path / "d.toml"
    toml.write_text(f'[defaults]\nkv-cache-memory = "10GiB"\n[[deployment]]\nmodel = "{LLAMA}"\n'
                    'gpu = "H100"\nmax-model-len = 32768\navailable-kv-gib = 30\n')
    res = runner.invoke(app, ["ci", str(toml), "--json"])
    assert res.exit_code == 0, res.output
    assert "twice" not in res.output
