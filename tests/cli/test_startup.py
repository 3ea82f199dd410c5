"""Cold start stays lean: no transformers/torch (or huggingface_hub) on the --specs path."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.golden import BUNDLED

SEED = BUNDLED / "cases" / "seed_dflash_qwen35_27b.json"
PROBE = """
import sys, runpy
sys.argv = {argv!r}
try:
    runpy.run_module("kvplan.cli", run_name="__main__")
except SystemExit:
    pass
import json
heavy = [m for m in {names!r} if m in sys.modules]
sys.stderr.write("HEAVY=" + json.dumps(heavy) + "\\n")
"""


def _heavy(argv: list[str],
           names: tuple[str, ...] = ("torch", "transformers", "huggingface_hub", "numpy")) -> list[str]:
    res = subprocess.run([sys.executable, "-c", PROBE.format(argv=["kvplan", *argv], names=names)],
                         capture_output=True, text=True, timeout=60)
    line = [ln for ln in res.stderr.splitlines() if ln.startswith("HEAVY=")][-1]
    return json.loads(line[len("HEAVY="):])  # type: ignore[no-any-return]


def test_help_imports_nothing_heavy() -> None:
    assert _heavy(["--help"]) == []


def test_check_specs_imports_nothing_heavy() -> None:
    assert _heavy(["check", "--specs", str(SEED), "--json"]) == []


def test_check_local_config_imports_nothing_heavy() -> None:
    llama = BUNDLED.parent / "hf-configs" / "meta-llama--Llama-3.1-8B"
    assert _heavy(["check", str(llama), "--gpu", "H100", "--json"]) == []


def test_json_output_needs_no_rich() -> None:
    llama = BUNDLED.parent / "hf-configs" / "meta-llama--Llama-3.1-8B"
    assert _heavy(["check", str(llama), "--kv-cache-memory", "20GiB", "--json"],
                  ("rich", "kvplan.output.report")) == []
    assert _heavy(["gpus", "--json"], ("rich", "kvplan.output.report", "kvplan.engines")) == []
    assert _heavy(["gpus"], ("rich",)) == ["rich"]  # the probe sees rich when a table is drawn


def test_check_imports_only_the_adapter_its_config_needs() -> None:
    llama = BUNDLED.parent / "hf-configs" / "meta-llama--Llama-3.1-8B"
    others = ("kvplan.models.families.deepseek", "kvplan.models.families.deepseek_v4", "kvplan.models.families.qwen",
              "kvplan.models.families.mamba", "kvplan.models.families.gemma", "kvplan.models.coverage",
              "kvplan.models.retired", "kvplan.models.resolution.resolved", "kvplan.sources.vllm_log",
              "kvplan.models.families.llama")
    assert _heavy(["check", str(llama), "--gpu", "H100", "--json"], others) == [
        "kvplan.models.families.llama"]


def test_one_command_app_parses_and_helps_as_the_whole_app() -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app, app_for

    runner = CliRunner()
    names = [info.name or info.callback.__name__ for info in app.registered_commands
             if info.callback is not None]
    assert {"check", "explain", "fit", "gpus", "layers", "sweep", "ci"} <= set(names)
    for name in names:
        one = app_for([name, "--help"])
        assert one is not app and len(one.registered_commands) == 1
        whole = runner.invoke(app, [name, "--help"], prog_name="kvplan")
        alone = runner.invoke(one, [name, "--help"], prog_name="kvplan")
        assert alone.exit_code == whole.exit_code == 0
        assert alone.output == whole.output
    bad = ["gpus", "--no-such-option"]
    assert runner.invoke(app_for(bad), bad).output == runner.invoke(app, bad).output
    for other in (["--help"], ["chek"], []):
        assert app_for(other) is app
