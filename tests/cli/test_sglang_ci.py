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


def _gib(num_bytes: float) -> str:
    return f"{round(num_bytes / 2**30, 2)}"


def test_sglang_rows_show_sglangs_own_figures(tmp_path: Path) -> None:
    """The needed / available / largest-fit / concurrency columns of an SGLang entry are SGLang's
    token pool (cell size × tokens), what the requests take of it (whole pages), the largest
    context that holds them and the requests the tokens hold within max_running_requests — in
    the table and in the markdown, with why a failing entry fails under them."""
    f = _file(tmp_path, f'''
[defaults]
gpu = "H100"

[[deployment]]
name = "llama"
engine = "sglang"
model = "{LLAMA}"
context-length = 32768
concurrency = 3

[[deployment]]
name = "qwen35"
engine = "sglang"
model = "{QWEN35}"
context-length = 4096
concurrency = 8

[[deployment]]
name = "refused"
engine = "sglang"
model = "{LLAMA}"
mem-fraction-static = 0.15
''')
    llama = kvplan.check(LLAMA, engine="sglang", gpu="H100", context_length=32768,
                         concurrency=3)
    s = llama.sglang
    assert s is not None and s.cell_size_bytes_per_token and s.max_total_num_tokens
    needed = _gib(3 * 32768 * s.cell_size_bytes_per_token)
    pool = _gib(s.max_total_num_tokens * s.cell_size_bytes_per_token)
    conc = f"{s.max_total_num_tokens / 32768:.2f}x"
    assert s.max_total_num_tokens // 3 >= 32768  # so the largest fit is the context length
    qwen = kvplan.check(QWEN35, engine="sglang", gpu="H100", context_length=4096,
                        concurrency=8)
    q = qwen.sglang
    assert q is not None and q.max_running_requests is not None and q.max_total_num_tokens
    assert q.max_running_requests < 8 < q.max_total_num_tokens // 4096  # the state cap binds

    table = runner.invoke(app, ["ci", f], env={"COLUMNS": "300"})
    assert table.exit_code == 1, table.output
    row = next(line for line in table.output.splitlines() if line.strip().startswith("llama"))
    assert row.split()[1:] == ["FITS", needed, pool, "32,768", conc]
    row = next(line for line in table.output.splitlines() if line.strip().startswith("qwen35"))
    # no context length holds 8 at once: max_running_requests caps them
    assert row.split()[-3:] == ["-", f"{q.max_running_requests:.2f}x", "(cap)"]
    assert f"max_running_requests is {q.max_running_requests}: fewer than the 8" in table.output
    row = next(line for line in table.output.splitlines() if line.strip().startswith("refused"))
    assert row.split()[-4:] == ["-", "-", "-", "-"]
    assert "refused: SGLang 0.5.23 stops at start-up: ValueError: Loaded weights leave" in \
        table.output

    md = runner.invoke(app, ["ci", f, "--format", "markdown"])
    assert md.exit_code == 1, md.output
    assert f"| llama | FITS | {needed} | {pool} | 32,768 | {conc} |" in md.stdout
    assert f"| {q.max_running_requests:.2f}x (cap) |" in md.stdout
    assert "vLLM None" not in md.stdout
    assert ("- **refused**: SGLang 0.5.23 stops at start-up: ValueError: Loaded weights leave no "
            "GPU memory") in md.stdout
    assert f"- **qwen35**: SGLang starts, but max_running_requests is {q.max_running_requests}" \
        in md.stdout
