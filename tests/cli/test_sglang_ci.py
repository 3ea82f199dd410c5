"""`kvplan ci` with SGLang entries: `engine = "sglang"`, an SGLang serve line, `--engine
sglang`; each entry's plan is the engine's."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import kvplan
from kvplan.cli import app

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
LLAMA = str(CONFIGS / "meta-llama--Llama-3.1-8B")
QWEN35 = str(CONFIGS / "Qwen--Qwen3.5-27B")
runner = CliRunner()


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "deployments.toml"
    path.write_text(text)
    return str(path)


def test_sglang_entries_beside_vllm_ones(tmp_path: Path) -> None:
    f = _file(tmp_path, f'''
[defaults]
gpu = "H100"

[[deployment]]
name = "vllm"
model = "{LLAMA}"
max-model-len = 131072

[[deployment]]
name = "sglang"
engine = "sglang"
model = "{LLAMA}"
context-length = "32k"
mem-fraction-static = 0.85
tp = 2

[[deployment]]
name = "line"
serve = "python -m sglang.launch_server --model-path {QWEN35} --context-length 262144"
''')
    res = runner.invoke(app, ["ci", f, "--json"])
    assert res.exit_code == 1, res.output  # Qwen3.5 at 262,144 on one H100: does not hold it
    entries = {e["name"]: e for e in json.loads(res.stdout)["entries"]}
    assert entries["vllm"]["plan"]["engine"] == "vllm"
    s = entries["sglang"]["plan"]
    ref = kvplan.check(LLAMA, engine="sglang", gpu="H100", context_length=32000,
                       mem_fraction_static=0.85, tp_size=2)
    assert s["engine"] == "sglang" and s["kv_cache_size_tokens"] == ref.kv_cache_size_tokens
    line = entries["line"]
    assert line["plan"]["engine"] == "sglang" and line["fits"] is False
    assert line["plan"]["serving"]["reason"].startswith("1 request of 262,144 tokens need")


def test_engine_sglang_plans_every_entry_and_bad_keys_are_exit_2(tmp_path: Path) -> None:
    f = _file(tmp_path, f'[[deployment]]\nmodel = "{LLAMA}"\ngpu = "H100"\n'
                        "max-model-len = 65536\n")
    res = runner.invoke(app, ["ci", f, "--engine", "sglang", "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)["entries"][0]["plan"]
    assert plan["engine"] == "sglang" and plan["max_model_len"] == 65536
    bad = _file(tmp_path, f'[[deployment]]\nengine = "sglang"\nmodel = "{LLAMA}"\n'
                          "gpu-memory-utilization = 0.9\n")
    res = runner.invoke(app, ["ci", bad])
    assert res.exit_code == 2 and "unknown SGLang key(s) ['gpu_memory_utilization']" in res.stderr
    res = runner.invoke(app, ["ci", f, "--engine", "vllm,sglang"])
    assert res.exit_code == 2 and "one server" in res.stderr
