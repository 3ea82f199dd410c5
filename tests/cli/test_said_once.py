"""Said once, and only when it says something: `sweep` prints each warning once with the cells
it applies to (not once per GPU × KV dtype), and what-ifs whose numbers are all the plan's are
not listed."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app

CONFIGS = Path(__file__).parents[1] / "data" / "hf-configs"
QWEN35 = str(CONFIGS / "Qwen--Qwen3.5-27B" / "config.json")
LLAMA = str(CONFIGS / "meta-llama--Llama-3.1-8B")
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def test_sweep_says_each_warning_once_with_the_cells_it_applies_to() -> None:
    args = ["sweep", QWEN35, "--gpu", "H100,A100-80GB,RTX PRO 6000", "--kv-cache-dtype",
            "auto,fp8,nvfp4", "--max-model-len", "64k..1M"]
    text = CliRunner().invoke(app, args, env=ENV).stdout
    data = json.loads(CliRunner().invoke(app, [*args, "--json"], env=ENV).stdout)
    assert len(data["rows"]) == 9
    long = [w for w in data["warnings"] if "max_position_embeddings" in w["text"]]
    assert len(long) == 1 and long[0]["every_row"] and len(long[0]["applies_to"]) == 9
    assert text.count("are refused by vLLM at start-up") == 1  # was 9 times
    # a warning of some cells names them: nvfp4 is dequantised on H100 and A100 only
    deq = [w for w in data["warnings"] if "nvfp4" in w["text"] and "dequantised" in w["text"]]
    assert {tuple(w["applies_to"]) for w in deq} == {("NVIDIA H100 SXM 80GB · nvfp4",),
                                                      ("NVIDIA A100 SXM 80GB · nvfp4",)}
    assert "(for H100 SXM 80GB · nvfp4)" in text
    for w in data["warnings"]:  # every row's own warnings are still in its row
        for label in w["applies_to"]:
            row = next(r for r in data["rows"] if f"{r['gpu']} · {r['kv_cache_dtype']}" == label)
            assert w["text"] in row["warnings"]


def _what_ifs(*args: str) -> tuple[dict, list[dict]]:  # type: ignore[type-arg]
    out = json.loads(CliRunner().invoke(app, ["explain", *args, "--json"], env=ENV).stdout)
    return out, out["explanation"]["what_ifs"]


def test_what_ifs_that_change_nothing_are_not_listed() -> None:
    # a plain-attention model with a fixed budget: fewer batched tokens change no number
    plan, ifs = _what_ifs(LLAMA, "--max-model-len", "131072", "--kv-cache-memory", "10GiB")
    assert ifs and not any(w["change"].startswith("--max-num-batched-tokens") for w in ifs)
    base = (plan["fits"], max(plan["total_gib_needed"]), min(plan["check_gib"]))
    for w in ifs:
        assert w["fits"] is None or (w["fits"], w["needed_gib"], w["available_gib"]) != base
    # the seed scenario: there they change the draft's blocks, so they stay
    seed = str(Path(__file__).parents[1] / "data" / "golden" / "cases"
               / "seed_dflash_qwen35_27b.json")
    _, ifs = _what_ifs("--specs", seed, "--vllm", "0.33.0")
    assert [w["change"] for w in ifs if w["change"].startswith("--max-num-batched")] == [
        "--max-num-batched-tokens 8192", "--max-num-batched-tokens 4096"]
