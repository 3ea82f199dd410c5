"""`kvplan fit --engine sglang` and `--engine vllm,sglang`: brute force agrees, both engines in
one ranking, each candidate's own check line fits, the other engine's flags refused."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app

CONFIGS = Path(__file__).resolve().parent.parent / "data" / "hf-configs"
LLAMA_8B = str(CONFIGS / "meta-llama--Llama-3.1-8B")
runner = CliRunner()


def _brute_force(gpus: list[str], length: int, conc: int, max_gpus: int
                 ) -> list[tuple[float, int, str, int, int, int]]:
    """Every GPU × TP × PP, planned one by one through kvplan.check(engine='sglang'), DP the
    fewest whole replicas that reach `conc`."""
    from kvplan.budget import hardware

    out = []
    for name in gpus:
        g = hardware.lookup_gpu(name)
        for tp in (1, 2, 4, 8):
            for pp in (1, 2, 4, 8):
                if tp * pp > max_gpus:
                    continue
                plan = kvplan.check(LLAMA_8B, engine="sglang", gpu=name, tp_size=tp,
                                    pp_size=pp, context_length=length)
                if plan.serving is None or plan.serving.requests_at_length < 1:
                    continue
                dp = math.ceil(conc / plan.serving.requests_at_length)
                if dp * tp * pp <= max_gpus:
                    usd = (g.usd_per_hour or 0) * dp * tp * pp
                    out.append((round(usd, 4), dp * tp * pp, g.name, tp, pp, dp))
    return sorted(out)


def test_the_sglang_search_finds_what_brute_force_finds() -> None:
    gpus = ["L40S", "H100"]
    result = kvplan.fit(LLAMA_8B, max_model_len=131072, concurrency=12, engine="sglang",
                        gpu=gpus, kv_cache_dtype="auto", max_gpus=4, top=50)
    brute = _brute_force(gpus, 131072, 12, 4)
    got = sorted((c.usd_per_hour, c.num_gpus, c.gpu, c.tensor_parallel_size,
                  c.pipeline_parallel_size, c.data_parallel_size) for c in result.candidates)
    assert got == brute and result.num_fitting == len(brute) > 0
    assert result.target.engines == ["sglang"] and result.target.vllm_version is None
    assert result.target.sglang_version == "0.5.23"
    for c in result.candidates:
        assert c.engine == "sglang" and c.vllm_serve is None
        assert c.sglang_launch is not None
        assert c.sglang_launch.startswith(f"python -m sglang.launch_server --model-path "
                                          f"{LLAMA_8B} --context-length 131072")


def test_both_engines_in_one_ranking_with_their_command_lines() -> None:
    result = kvplan.fit(LLAMA_8B, max_model_len=131072, concurrency=24, engine="vllm,sglang",
                        gpu="H100", kv_cache_dtype="auto,fp8", top=40)
    assert result.target.engines == ["vllm", "sglang"]
    engines = {c.engine for c in result.candidates}
    assert engines == {"vllm", "sglang"}
    keys = [(c.usd_per_hour, c.num_gpus) for c in result.candidates]
    assert keys == sorted(keys)  # cheapest first across both servers
    for c in result.candidates:
        if c.engine == "vllm":
            assert c.vllm_serve and c.vllm_serve.startswith("vllm serve ")
            assert c.sglang_launch is None and "--engine" not in c.kvplan_check
        else:
            assert c.sglang_launch and c.vllm_serve is None
            assert "--kv-cache-dtype fp8_e4m3" in c.sglang_launch or c.kv_cache_dtype == "auto"
            assert " --engine sglang " in c.kvplan_check
    # the same search per engine gives the same rows
    v = kvplan.fit(LLAMA_8B, max_model_len=131072, concurrency=24, gpu="H100",
                   kv_cache_dtype="auto,fp8", top=40)
    assert [c for c in result.candidates if c.engine == "vllm"] == v.candidates[:len(
        [c for c in result.candidates if c.engine == "vllm"])]


def test_an_sglang_candidates_check_line_fits() -> None:
    result = kvplan.fit(LLAMA_8B, max_model_len=65536, concurrency=16, engine="sglang",
                        gpu="L40S,H100", top=1)
    (best,) = result.candidates
    args = shlex.split(best.kvplan_check)[1:]  # drop "kvplan"
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["engine"] == "sglang"
    assert plan["kv_cache_size_tokens"] == best.kv_cache_size_tokens
    assert plan["serving"]["requests_at_length"] == best.requests_per_replica


def test_fit_cli_json_and_table() -> None:
    res = runner.invoke(app, ["fit", LLAMA_8B, "--max-model-len", "131072", "--concurrency", "8",
                              "--engine", "vllm,sglang", "--gpu", "H100", "--top", "12",
                              "--json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert got["target"]["engines"] == ["vllm", "sglang"]
    assert {c["engine"] for c in got["candidates"]} == {"vllm", "sglang"}
    res = runner.invoke(app, ["fit", LLAMA_8B, "--max-model-len", "131072", "--concurrency", "8",
                              "--engine", "vllm,sglang", "--gpu", "H100", "--top", "12"],
                        env={"COLUMNS": "140"})
    assert res.exit_code == 0
    assert "vLLM 0.34.0  SGLang 0.5.23" in res.stdout
    assert "$ python -m sglang.launch_server" in res.stdout and "$ vllm serve" in res.stdout


@pytest.mark.parametrize(("args", "text"), [
    (["--engine", "sglang", "--max-num-seqs", "8"], "--max-num-seqs is a vLLM flag"),
    (["--mem-fraction-static", "0.9"], "--mem-fraction-static is an SGLang flag"),
    (["--engine", "sglang", "--draft", "x/y"], "a draft under SGLang needs "
                                               "--speculative-algorithm"),
])
def test_fit_refuses_the_other_engines_flags(args: list[str], text: str) -> None:
    res = runner.invoke(app, ["fit", LLAMA_8B, "--max-model-len", "131072", "--concurrency", "8",
                              "--gpu", "H100", *args])
    assert res.exit_code == 2 and res.stdout == ""
    assert text in res.stderr.splitlines()[0]


GPT_OSS = str(CONFIGS / "openai--gpt-oss-20b")


def test_fp8_on_ampere_as_sglang_serves_it() -> None:
    """FP8 KV on an A100: by default not tried (dequantised, like vLLM's search), named with
    --kv-cache-dtype it is planned as SGLang plans it (FlashInfer, one byte a value), its rows
    marked; a Triton-backend model cannot read FP8 E4M3 there and is skipped with Triton's
    words, while its FP8 E5M2 is planned."""
    default = kvplan.fit(LLAMA_8B, engine="sglang", gpu="A100", max_model_len=32000,
                         concurrency=8)
    skip = next(s for s in default.skipped if s.kv_cache_dtype == "fp8_e4m3")
    assert skip.support == "dequantised" and "only when --kv-cache-dtype names it" in skip.reason
    assert all(c.kv_cache_dtype != "fp8_e4m3" for c in default.candidates)
    named = kvplan.fit(LLAMA_8B, engine="sglang", gpu="A100", max_model_len=32000,
                       concurrency=8, kv_cache_dtype="fp8")
    assert named.candidates and not named.skipped
    c = named.candidates[0]
    assert c.kv_cache_dtype == "fp8_e4m3" and c.kv_cache_dequantised
    ref = kvplan.check(LLAMA_8B, engine="sglang", gpu="A100", context_length=32000,
                       kv_cache_dtype="fp8_e4m3", tp_size=c.tensor_parallel_size,
                       pp_size=c.pipeline_parallel_size)
    assert c.kv_cache_size_tokens == ref.kv_cache_size_tokens and ref.fits
    res = runner.invoke(app, ["fit", LLAMA_8B, "--engine", "sglang", "--gpu", "A100",
                              "--max-model-len", "32000", "--concurrency", "8",
                              "--kv-cache-dtype", "fp8"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "fp8_e4m3 (deq.)" in res.output and "SGLang serves it dequantised" in res.output
    assert "vLLM serves" not in res.output

    oss = kvplan.fit(GPT_OSS, engine="sglang", gpu="A100", max_model_len=32000, concurrency=8,
                     kv_cache_dtype="fp8_e4m3,fp8_e5m2")
    skip = next(s for s in oss.skipped if s.kv_cache_dtype == "fp8_e4m3")
    assert skip.reason.startswith("type fp8e4nv not supported in this architecture")
    assert oss.candidates and {c.kv_cache_dtype for c in oss.candidates} == {"fp8_e5m2"}
