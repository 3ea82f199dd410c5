"""`kvplan check` on a config only transformers resolves: plans, and transformers' own log lines
("PyTorch was not found", ...) stay off kvplan's stderr."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.golden import BUNDLED

PHI4 = BUNDLED.parent / "hf-configs" / "microsoft--phi-4"


def test_check_a_transformers_resolved_config() -> None:
    res = subprocess.run([sys.executable, "-m", "kvplan.cli", "check", str(PHI4), "--gpu", "H100",
                          "--max-model-len", "16384", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert "PyTorch" not in res.stderr and "transformers]" not in res.stderr
    # phi-4: 40 sliding-window layers (window 16384, no layer_types) in one group; page of 64
    # tokens × 10 KV heads × 128 × 2 (K, V) × 2 B = 327,680 B; one request at 16384 tokens holds
    # min(16384 - 1 + 8192, 16384) = 16384 tokens → 16384 / 64 + 1 = 257 blocks
    # (vLLM: SlidingWindowSpec.max_memory_usage_bytes)
    (group,) = plan["groups"]
    assert (group["kind"], group["num_layers"]) == ("sliding_window", 40)
    assert (group["page_size_bytes"], group["blocks_per_request"]) == (327_680, 257)
