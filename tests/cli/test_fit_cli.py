"""`kvplan fit` through typer's runner: re-planned with `check`, exit codes, errors, prices."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.pipeline.fit_result import FitResult

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
QWEN = str(CONFIGS / "Qwen--Qwen3.5-27B")
DRAFT = str(CONFIGS / "z-lab--Qwen3.8-27B-DFlash2")
LLAMA = str(CONFIGS / "meta-llama--Llama-3.1-8B")
ENV = {"COLUMNS": "160", "NO_COLOR": "1"}


def _fit_json(*args: str) -> dict:  # type: ignore[type-arg]
    res = runner.invoke(app, ["fit", *args, "--json"], env=ENV)
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("model", "extra", "conc"), [
    (QWEN, ["--draft", DRAFT, "--num-speculative-tokens", "7"], 16),
    (LLAMA, ["--gpu", "L4,A10,L40S"], 24),  # DP > 1 on the cheap GPUs
])
def test_cheapest_candidate_replanned_with_check_fits_at_the_concurrency(
        model: str, extra: list[str], conc: int) -> None:
    out = _fit_json(model, "--max-model-len", "128k", "--concurrency", str(conc), *extra)
    best = out["candidates"][0]
    assert best["max_concurrency"] >= conc
    if model == LLAMA:  # the cheap GPUs reach 24 only with several replicas
        assert best["data_parallel_size"] > 1 and "--data-parallel-size" in best["vllm_serve"]
    words = shlex.split(best["kvplan_check"])
    assert words[:2] == ["kvplan", "check"]
    res = runner.invoke(app, [*words[1:], "--json"], env=ENV)
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["fits"] and plan["max_model_len"] == 128_000  # vLLM reads 128k as 128,000
    assert plan["total_max_concurrency"] >= conc
    assert plan["total_max_concurrency"] == pytest.approx(best["max_concurrency"], abs=1e-3)
    assert plan["kv_cache_size_tokens"] == best["kv_cache_size_tokens"]
    # the copy-paste `vllm serve` line plans the same
    served = runner.invoke(app, ["check", "--serve", best["vllm_serve"], "--gpu", best["gpu"],
                                 "--json"], env=ENV)
    assert served.exit_code == 0, served.output
    assert json.loads(served.stdout)["kv_cache_size_tokens"] == best["kv_cache_size_tokens"]


def test_table_output_and_exit_code_0() -> None:
    res = runner.invoke(app, ["fit", LLAMA, "--max-model-len", "32k", "--concurrency", "8",
                              "--gpu", "H100,L4", "--top", "2"], env=ENV)
    assert res.exit_code == 0, res.output
    for word in ("cheapest first", "TP×PP×DP", "USD/h", "vllm serve", "kvplan check",
                 "not tried: nvfp4 KV"):
        assert word in res.stdout


def test_nothing_fits_exit_1_with_nearest_misses() -> None:
    res = runner.invoke(app, ["fit", str(CONFIGS / "deepseek-ai--DeepSeek-V3"),
                              "--max-model-len", "8k", "--concurrency", "1", "--gpu", "L4,T4",
                              "--max-gpus", "4"], env=ENV)
    assert res.exit_code == 1
    assert "NOTHING FITS" in res.stdout and "the weights alone need" in res.stdout
    # ≈ 640 GiB of FP8 weights: 32 L4 hold 20 GiB each (> ~15 GiB usable), 64 hold 10 GiB
    assert "the weights need more GPUs than --max-gpus 4: 64 × L4, 128 × T4" in res.stdout
    assert "rerun with --max-gpus 64" in res.stdout
    out = _fit_json(str(CONFIGS / "deepseek-ai--DeepSeek-V3"), "--max-model-len", "8k",
                    "--concurrency", "1", "--gpu", "L4,T4", "--max-gpus", "4")
    assert out["candidates"] == [] and out["misses"]
    FitResult.model_validate(out)  # the JSON is the schema's
    # only nvfp4 on Hopper in vLLM 0.31 (no FA2 path yet): nothing to plan, said so
    res = runner.invoke(app, ["fit", LLAMA, "--max-model-len", "8k", "--concurrency", "1",
                              "--gpu", "H100", "--kv-cache-dtype", "nvfp4", "--vllm", "0.31.0"],
                        env=ENV)
    assert res.exit_code == 1 and "no shape could be planned" in res.stdout
    assert "not tried: nvfp4 KV on 1 GPU type(s) where vLLM 0.31.0 has no attention backend" \
        in res.stdout


def test_prices_flag_and_file_override_the_catalogue(tmp_path: Path) -> None:
    base = [LLAMA, "--max-model-len", "32k", "--concurrency", "8", "--gpu", "H100,L40S"]
    out = _fit_json(*base, "--price", "H100=0.5")
    assert out["candidates"][0]["gpu"] == "NVIDIA H100 SXM 80GB"
    assert out["candidates"][0]["usd_per_hour"] == pytest.approx(
        0.5 * out["candidates"][0]["num_gpus"])
    f = tmp_path / "prices.txt"
    f.write_text("# our contract\nL40S=0.25\n")
    out = _fit_json(*base, "--prices", str(f))
    assert out["candidates"][0]["gpu"] == "NVIDIA L40S"
    # a --price wins over the file
    out = _fit_json(*base, "--prices", str(f), "--price", "l40s=9")
    assert out["candidates"][0]["gpu"] == "NVIDIA H100 SXM 80GB"


def test_unpriced_gpus_rank_after_priced_ones() -> None:
    # the B300 has no catalogue price: asked for by name, it is planned and ranked last
    out = _fit_json(LLAMA, "--max-model-len", "32k", "--concurrency", "4", "--gpu", "B300,L40S",
                    "--top", "50")
    prices = [c["usd_per_hour"] for c in out["candidates"]]
    assert None in prices and prices.index(None) > 0
    assert all(p is None for p in prices[prices.index(None):])
    b300 = next(c for c in out["candidates"] if c["gpu"] == "NVIDIA B300")
    assert b300["total_memory_nominal"] and b300["usd_per_gpu_hour"] is None
    res = runner.invoke(app, ["fit", LLAMA, "--max-model-len", "32k", "--concurrency", "4",
                              "--gpu", "B300"], env=ENV)
    assert res.exit_code == 0 and "no price, ranked last" in res.stdout and "B300*" in res.stdout


def _bad(args: list[str], word: str) -> None:
    res = runner.invoke(app, args, env=ENV)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error:") and lines[1].startswith("Hint:")
    assert word in lines[0]
    assert res.stdout == ""


def test_bad_inputs_exit_2_with_one_error_and_one_hint(tmp_path: Path) -> None:
    base = ["fit", LLAMA, "--max-model-len", "32k", "--gpu", "H100"]
    _bad([*base, "--concurrency", "0"], "--concurrency")
    _bad([*base, "--concurrency", "-3"], "--concurrency")
    _bad([*base, "--concurrency", "2", "--price", "FOO=1"], "FOO")
    _bad([*base, "--concurrency", "2", "--price", "H100=cheap"], "cheap")
    bad = tmp_path / "prices.txt"
    bad.write_text("H100 costs 2 dollars\n")
    _bad([*base, "--concurrency", "2", "--prices", str(bad)], "prices file")
    bad.write_text('{"H100": 2')
    _bad([*base, "--concurrency", "2", "--prices", str(bad)], "not valid JSON")
    _bad([*base, "--concurrency", "2", "--prices", str(tmp_path / "none.txt")], "does not exist")
    _bad(["fit", LLAMA, "--max-model-len", "auto", "--concurrency", "2"], "auto")
    _bad([*base, "--concurrency", "2", "--kv-cache-dtype", "fp9"], "fp9")


def test_gpus_shows_prices_and_nominal_totals() -> None:
    res = runner.invoke(app, ["gpus"], env=ENV)
    assert res.exit_code == 0 and "USD/h" in res.stdout and "nominal" in res.stdout
    rows = {r["name"]: r for r in json.loads(runner.invoke(app, ["gpus", "--json"]).stdout)}
    assert rows["NVIDIA H100 SXM 80GB"]["usd_per_hour"] == 2.95
    assert "aimultiple" in rows["NVIDIA H100 SXM 80GB"]["usd_per_hour_source"]
    a10g = rows["NVIDIA A10G"]
    # 24 GB × 15/16 (ECC on GDDR6) × 0.983 = 22.1175 GiB = 22,648.32 MiB → 22,648 MiB
    assert a10g["total_memory_nominal"] and a10g["total_memory_bytes"] == 22648 * 2**20
    assert not rows["NVIDIA L40S"]["total_memory_nominal"]


def test_check_says_when_the_total_is_nominal() -> None:
    res = runner.invoke(app, ["check", LLAMA, "--gpu", "a10g", "--max-model-len", "8k",
                              "--json"], env=ENV)
    plan = json.loads(res.stdout)
    assert any("nominal total" in w and "--gpu-memory" in w for w in plan["warnings"])
    res = runner.invoke(app, ["check", LLAMA, "--gpu", "a10g", "--gpu-memory", "22GiB",
                              "--max-model-len", "8k", "--json"], env=ENV)
    assert not any("nominal" in w for w in json.loads(res.stdout)["warnings"])
    res = runner.invoke(app, ["check", LLAMA, "--gpu", "l40s", "--max-model-len", "8k",
                              "--json"], env=ENV)
    assert not any("nominal" in w for w in json.loads(res.stdout)["warnings"])


def test_readme_fit_example_is_the_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parents[2]
    text = (root / "README.md").read_text()
    cmd_start = text.index(".venv/bin/kvplan fit ")
    cmd = text[cmd_start:text.index("```", cmd_start)].replace("\\\n", " ")
    out_start = text.index("```\n", text.index("```", cmd_start) + 3) + 4
    shown = text[out_start:text.index("```", out_start)]
    monkeypatch.chdir(root)
    res = runner.invoke(app, shlex.split(cmd)[1:], env={"COLUMNS": "100", "NO_COLOR": "1"})
    assert res.exit_code == 0, res.output
    assert res.stdout == shown
