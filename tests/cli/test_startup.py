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
    assert _heavy(["gpus", "--json"], ("rich", "kvplan.output.report", "kvplan.engine")) == []
    assert _heavy(["gpus"], ("rich",)) == ["rich"]  # the probe sees rich when a table is drawn
