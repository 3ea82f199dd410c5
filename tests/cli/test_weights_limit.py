"""Weights larger than the GPU: `check` names the weights as the cause (not the KV blocks), says
how many GPUs hold them and points to `kvplan fit`; the JSON carries `failure_cause`."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
GLM = str(Path(__file__).resolve().parent.parent / "data" / "hf-configs" / "zai-org--GLM-5.2")
LLAMA = str(Path(__file__).resolve().parent.parent / "data" / "hf-configs"
            / "meta-llama--Llama-3.1-8B")
ENV = {"COLUMNS": "100", "NO_COLOR": "1"}
GIB = 2**30


def _check(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["check", *args], env=ENV)
    return res.exit_code, res.stdout


def test_json_names_the_weights_as_the_cause_and_the_fewest_gpus() -> None:
    code, out = _check(GLM, "--gpu", "H100", "-tp", "8", "--json")
    assert code == 1
    plan = json.loads(out)
    assert plan["failure_cause"] == "weights"
    w = plan["weights_limit"]
    # bf16 GLM-5.2 ≈ 1,413 GiB of weights: 1/8 ≈ 176.6 GiB per rank, more than the whole H100
    # (79.2 GiB) and than what is usable of it (79.2 GiB requested − ~11 GiB of vLLM's other
    # start-up memory ≈ 68 GiB)
    assert 170 * GIB < w["weight_bytes_per_gpu"] < 180 * GIB
    assert 60 * GIB < w["usable_bytes_per_gpu"] < 70 * GIB
    assert w["exceeds_gpu_memory"] is True
    # 16 GPUs: 1,413 / 16 ≈ 88 GiB > 68; 32 GPUs: ≈ 44 GiB < 68 → 32 at least (TP 8 kept, PP 4)
    assert (w["min_num_gpus"], w["min_tensor_parallel_size"], w["min_pipeline_parallel_size"]) \
        == (32, 8, 4)
    # bigger GPUs: only ones whose share at TP 8 leaves KV memory (more than ~177 GiB + ~11 GiB)
    assert w["bigger_gpus"] and "NVIDIA H100 NVL 94GB" not in w["bigger_gpus"]
    tips = " ".join(w["suggestions"])
    assert "--max-gpus 32" in tips and "kvplan fit" in tips and "fp8" in tips
    # vLLM's own error text stays as vLLM prints it
    assert plan["error_message"].startswith("No available memory for the cache blocks.")
    # one warning about the missing KV memory, not two
    assert sum("no memory for the KV cache" in x or "no max_model_len fits" in x
               for x in plan["warnings"]) == 1


def test_table_says_the_weights_not_a_largest_max_model_len_of_0() -> None:
    code, out = _check(GLM, "--gpu", "H100", "-tp", "8")
    assert code == 1
    assert "largest max_model_len that fits: 0" not in out
    assert "cause: the weights 176.64 GiB per GPU at TP 8 × PP 1 > 68.23 GiB usable" in out
    assert "vLLM runs out of memory while loading them" in out
    assert "--max-gpus 32" in out
    assert "No available memory for the cache blocks" in out  # vLLM's error, kept


def test_explain_blames_the_weights_and_tries_what_acts_on_them() -> None:
    code, out = _check(GLM, "--gpu", "H100", "-tp", "8", "--explain")
    assert code == 1
    assert "Why: the weights leave no memory for the KV cache" in out
    assert "what takes the blocks of one request" not in out
    assert "-tp 8 -pp 4 (32 GPUs" in out
    # KV-dtype / batching what-ifs cannot help when nothing is left for the KV cache
    assert "--kv-cache-dtype fp8" not in out and "--max-num-batched-tokens" not in out
    # nor a GPU of the same size
    assert "A100 SXM 80GB" not in out
    code, md = _check(GLM, "--gpu", "H100", "-tp", "8", "--explain", "--format", "markdown")
    assert "cause: the weights" in md and "largest max_model_len that fits" not in md


def test_a_kv_shortfall_is_not_blamed_on_the_weights() -> None:
    # Llama-3.1-8B on an H100: ~15 GiB of weights, the 128k-token request's KV is what is short
    # at a tiny given KV budget
    code, out = _check(LLAMA, "--kv-cache-memory", "1GiB", "--max-model-len", "128k", "--json")
    assert code == 1
    plan = json.loads(out)
    assert plan["failure_cause"] == "kv_cache" and plan["weights_limit"] is None
    code, out = _check(LLAMA, "--gpu", "H100", "--json")
    assert code == 0 and json.loads(out)["failure_cause"] is None


def test_ci_names_the_weights_for_an_entry_they_do_not_fit(tmp_path: Path) -> None:
    deployments = tmp_path / "d.toml"
    deployments.write_text(f'[[deployment]]\nname = "glm"\nmodel = "{GLM}"\ngpu = "H100"\n'
                           "tensor-parallel-size = 8\n")
    res = runner.invoke(app, ["ci", str(deployments)], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert res.exit_code == 1, res.output
    assert "glm: the weights alone need 176.64 GiB per GPU" in res.stdout
