"""The fast adapters never import transformers: every real config whose architecture has a fast
adapter is described in one fresh process, which must end without transformers loaded."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from kvplan.models import fast_adapter_names
from tests.models.helpers import HF_CONFIGS, read_config, real
fast = fast_adapter_names()
done = []
for folder in sorted(HF_CONFIGS.glob("*/config.json")):
    config, _ = read_config(folder.parent.name)
    archs = config.get("architectures") or []
    if archs and archs[0] in fast:
        real(folder.parent.name)
        done.append(folder.parent.name)
print(len(done), "transformers" in sys.modules)
"""


def test_fast_adapter_configs_do_not_import_transformers() -> None:
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    count, imported = res.stdout.split()
    assert int(count) >= 20  # the fast-family fixtures (Llama, Qwen, DeepSeek, Gemma 4, ...)
    assert imported == "False"
