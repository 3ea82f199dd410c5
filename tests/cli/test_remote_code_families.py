"""`kvplan check --json` on configs whose class transformers lacks (ChatGLM, Nemotron-NAS) and on an
architecture vLLM retired: through the CLI, with the KV bytes worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app
from tests.cli.test_startup import _heavy

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"


def _json(args: list[str]) -> tuple[int, dict]:
    res = CliRunner().invoke(app, ["check", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)


def test_chatglm3_6b_plans_from_its_own_config() -> None:
    # 28 layers × 2 KV heads × 128 × (K + V) × 2 B (float16) = 1,024 B/token/layer;
    # vLLM 0.34 full-attention block 64 → 64 KiB pages; max_model_len = seq_length 8192 →
    # 8192 / 64 = 128 blocks per request
    code, out = _json([str(CONFIGS / "THUDM--chatglm3-6b"), "--kv-cache-memory", "4GiB"])
    assert code == 0
    (group,) = out["groups"]
    assert group["num_layers"] == 28
    assert group["page_size_bytes"] == 64 * 1024
    assert out["max_model_len"] == 8192
    assert out["total_bytes_needed"] == [28 * 64 * 1024 * 128]


def test_nemotron_super_49b_skips_no_op_attention() -> None:
    # 49 of 80 blocks hold KV: 8 KV heads × 128 × 2 × 2 B = 4,096 B/token/layer; block 64 →
    # 256 KiB pages; 131072 / 64 = 2048 blocks per request
    code, out = _json([str(CONFIGS / "nvidia--Llama-3_3-Nemotron-Super-49B-v1"),
                       "--kv-cache-memory", "40GiB", "--max-model-len", "131072"])
    assert code == 0
    (group,) = out["groups"]
    assert group["num_layers"] == 49
    assert out["total_bytes_needed"] == [49 * 64 * 4096 * 2048]


def test_retired_architecture_is_one_error_line(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["Phi3SmallForCausalLM"],
                                  "model_type": "phi3small", "num_hidden_layers": 32}))
    res = CliRunner().invoke(app, ["check", str(config)])
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0].startswith("Error: ") and "until v0.9.2" in lines[0]
    assert lines[1].startswith("Hint: ")
    assert "Traceback" not in res.stderr


def test_fast_adapters_stay_off_transformers() -> None:
    # these families never need transformers: kvplan reads their config classes by hand
    for name in ("THUDM--chatglm3-6b", "nvidia--Llama-3_3-Nemotron-Super-49B-v1",
                 "deepseek-ai--deepseek-vl2"):
        assert _heavy(["check", str(CONFIGS / name), "--gpu", "H100", "--json"]) == [], name
