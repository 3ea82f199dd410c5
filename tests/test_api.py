"""The public API as a user imports it: `kvplan.check` returns exactly what `kvplan check --json`
prints, for configs, spec files, drafts and estimated budgets; bad options are KvplanErrors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from tests.golden import BUNDLED

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "tests" / "data" / "hf-configs"
QWEN = str(CONFIGS / "Qwen--Qwen3.5-27B")
DFLASH = str(CONFIGS / "z-lab--Qwen3.8-27B-DFlash2")
LLAMA = str(CONFIGS / "meta-llama--Llama-3.1-8B")
SEED = BUNDLED / "cases" / "seed_dflash_qwen35_27b.json"
PR_ARGS = ["--kv-cache-dtype", "nvfp4", "--draft-kv-cache-dtype", "bfloat16",
           "--num-speculative-tokens", "7", "--max-model-len", "262144",
           "--max-num-batched-tokens", "16384", "--kv-cache-memory", "32GiB", "--gpu", "A100-80GB",
           "--vllm", "0.33.0", "--draft-block-size", "16"]
PR_OPTIONS: dict[str, Any] = dict(
    kv_cache_dtype="nvfp4", draft_kv_cache_dtype="bfloat16", num_speculative_tokens=7,
    max_model_len=262144, max_num_batched_tokens=16384, kv_cache_memory="32GiB", gpu="A100-80GB",
    vllm="0.33.0", draft_block_size=16)


def cli_json(args: list[str], code: int | None = None) -> dict[str, Any]:
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code in ((0, 1) if code is None else (code,)), res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_check_config_with_a_draft_equals_the_cli_json() -> None:
    plan = kvplan.check(QWEN, draft=DFLASH, **PR_OPTIONS)
    assert isinstance(plan, kvplan.Plan)
    assert plan.model_dump(mode="json") == cli_json(["check", QWEN, "--draft", DFLASH, *PR_ARGS], 1)
    # vLLM 0.33.0's own numbers for this deployment (golden seed case, README): 41.1 vs 31.98 GiB
    assert (plan.fits, plan.total_gib_needed, plan.check_gib) == (False, ["41.1"], ["31.98"])
    assert plan.estimated_max_model_len == [30592]


def test_check_estimated_budget_equals_the_cli_json() -> None:
    plan = kvplan.check(QWEN, gpu="H100", max_model_len="32k", kv_cache_dtype="fp8")
    cli = cli_json(["check", QWEN, "--gpu", "H100", "--max-model-len", "32k",
                    "--kv-cache-dtype", "fp8"])
    assert plan.model_dump(mode="json") == cli
    assert plan.budget_mode == "estimated" and plan.max_model_len == 32_000  # vLLM: k = 10^3


def test_check_explain_tp_and_speculative_config_equal_the_cli_json() -> None:
    spec = {"method": "eagle3", "num_speculative_tokens": 3}
    cli = cli_json(["check", LLAMA, "-tp", "2", "--kv-cache-memory", "20GiB", "--explain",
                    "--max-model-len", "auto", "--speculative-config", json.dumps(spec)])
    plan = kvplan.check(LLAMA, tensor_parallel_size=2, kv_cache_memory=20 * 2**30, explain=True,
                        max_model_len="auto", speculative_config=spec)
    assert plan.model_dump(mode="json") == cli
    assert plan.explanation is not None
    # the JSON string form of --speculative-config plans the same deployment
    assert kvplan.check(LLAMA, tensor_parallel_size=2, kv_cache_memory="20GiB", explain=True,
                        max_model_len=-1, speculative_config=json.dumps(spec)) == plan


def test_check_specs_path_and_dict_equal_the_cli_json() -> None:
    cli = cli_json(["check", "--specs", str(SEED), "--with-fix"], 0)
    by_path = kvplan.check_specs(SEED, with_fix=True)
    assert by_path.model_dump(mode="json") == cli
    assert kvplan.check_specs(json.loads(SEED.read_text()), with_fix=True) == by_path
    assert by_path.total_gib_needed == ["7.78"]  # vLLM 0.34.0 with PR #53499 (golden)
    relabelled = kvplan.check_specs(str(SEED), model="mine", kv_cache_memory="48GiB")
    assert relabelled.model == "mine" and relabelled.budget_mode == "explicit"
    # the CLI refuses MODEL beside --specs (two answers to "what to plan"); the API's model= labels
    cli_budget = cli_json(["check", "--specs", str(SEED), "--kv-cache-memory", "48GiB"])
    assert relabelled.model_dump(mode="json") == {**cli_budget, "model": "mine"}
    refused = CliRunner().invoke(app, ["check", "mine", "--specs", str(SEED)])
    assert refused.exit_code == 2 and "both say what to plan" in refused.stderr


def test_sweep_equals_the_cli_json() -> None:
    cli = cli_json(["sweep", LLAMA, "--gpu", "H100,B200", "--kv-cache-dtype", "auto,fp8",
                    "--max-model-len", "8K..128K"])
    sw = kvplan.sweep(LLAMA, gpu=["H100", "B200"], kv_cache_dtype="auto,fp8",
                      max_model_len="8K..128K")
    assert sw.model_dump(mode="json") == cli
    assert sw.lengths == [8192, 16384, 32768, 65536, 131072] and len(sw.rows) == 4
    assert kvplan.sweep(LLAMA, gpu="H100,B200", kv_cache_dtype=["auto", "fp8"],
                        max_model_len=[131072, 8192, 16384, 32768, 65536]) == sw


def test_sweep_is_callable_even_after_its_module_is_imported() -> None:
    import kvplan.pipeline.sweep as module  # lives in a subpackage: kvplan.sweep stays the API

    assert kvplan.sweep(LLAMA, max_model_len=8192).lengths == [8192]
    assert module.Sweep is kvplan.Sweep


@pytest.mark.parametrize(("call", "error", "text"), [
    (lambda: kvplan.check(LLAMA, tensor_parallel=2), kvplan.OptionError, "tensor_parallel_size"),
    (lambda: kvplan.check(LLAMA, tensor_parallel_size="2"), kvplan.OptionError, "must be int"),
    (lambda: kvplan.check(LLAMA, enforce_eager=1), kvplan.OptionError, "must be bool"),
    (lambda: kvplan.check(LLAMA, kv_cache_memory=[1]), kvplan.OptionError, "kv_cache_memory"),
    (lambda: kvplan.check(7), kvplan.OptionError, "model"),
    (lambda: kvplan.check(LLAMA, max_model_len="long", kv_cache_memory="1GiB"), kvplan.InputError,
     "--max-model-len"),
    (lambda: kvplan.check(LLAMA, gpu="H100", gpu_memory_utilization=1.5), kvplan.InputError,
     "(0, 1]"),
    (lambda: kvplan.check(LLAMA, kv_cache_memory="lots"), kvplan.InputError, "size"),
    (lambda: kvplan.check(LLAMA), kvplan.InputError, "no KV cache budget"),
    (lambda: kvplan.check_specs(3.5), kvplan.OptionError, "path or a dict"),
    (lambda: kvplan.check_specs(ROOT / "missing.json"), kvplan.InputError, "does not exist"),
    (lambda: kvplan.sweep(LLAMA, gpu=[]), kvplan.InputError, "at least one"),
    (lambda: kvplan.sweep(LLAMA, plot="x.png"), kvplan.OptionError, "unknown option"),
])
def test_bad_options_raise_kvplan_errors(call: Any, error: type[Exception], text: str) -> None:
    with pytest.raises(error) as exc:
        call()
    assert isinstance(exc.value, kvplan.KvplanError)
    assert text in exc.value.message + " " + (exc.value.hint or "")


def test_import_kvplan_is_cheap() -> None:
    probe = ("import sys, kvplan; heavy = [m for m in ('pydantic', 'typer', 'rich', 'kvplan.api', "
             "'kvplan.engines') if m in sys.modules]; print(heavy, kvplan.__version__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", kvplan.__version__]


def test_public_names() -> None:
    assert sorted(kvplan.__all__) == sorted({*kvplan._LAZY, "__version__"})
    assert kvplan.OptionError.__mro__[1] is kvplan.InputError
    with pytest.raises(AttributeError):
        kvplan.nope  # noqa: B018


def test_version_in_the_cli_and_in_python_m() -> None:
    res = CliRunner().invoke(app, ["--version"])
    assert (res.exit_code, res.stdout) == (0, f"kvplan {kvplan.__version__}\n")
    out = subprocess.run([sys.executable, "-m", "kvplan", "--version"], capture_output=True,
                         text=True, timeout=60)
    assert (out.returncode, out.stdout) == (0, f"kvplan {kvplan.__version__}\n")


def test_every_json_output_names_the_kvplan_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    batch = cli_json(["ci", "examples/deployments.toml"])
    sweep = cli_json(["sweep", LLAMA, "--max-model-len", "8k"])
    layers = cli_json(["layers", LLAMA])
    plan = cli_json(["check", LLAMA, "--kv-cache-memory", "20GiB"])
    fit = cli_json(["fit", LLAMA, "--max-model-len", "8k", "--concurrency", "1", "--gpu", "L4"])
    for obj in (batch, sweep, layers, plan, fit, *(e["plan"] for e in batch["entries"])):
        assert obj["kvplan_version"] == kvplan.__version__


def test_the_docs_example_runs(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                               ) -> None:
    text = (ROOT / "docs" / "api.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    exec(compile(code, "docs/api.md", "exec"), {})
    out = capsys.readouterr().out
    assert "DOES NOT FIT ['41.1'] ['31.98']" in out and "did you mean 'tensor_parallel_size'" in out


def test_fit_equals_the_cli_json() -> None:
    result = kvplan.api.fit(LLAMA, max_model_len="32k", concurrency=8, gpu=["L4", "H100"],
                            kv_cache_dtype="auto,fp8", price={"H100": 2.5}, top=3)
    cli = cli_json(["fit", LLAMA, "--max-model-len", "32k", "--concurrency", "8",
                    "--gpu", "L4,H100", "--kv-cache-dtype", "auto,fp8", "--price", "H100=2.5",
                    "--top", "3"], 0)
    assert result.model_dump(mode="json") == cli
    # ranked by USD/h: each candidate costs no less than the one before it
    costs = [c["usd_per_hour"] for c in cli["candidates"]]
    assert costs == sorted(costs) and cli["candidates"][0]["max_concurrency"] >= 8


def test_fit_rejects_what_the_cli_rejects() -> None:
    with pytest.raises(kvplan.InputError, match="concurrency"):
        kvplan.api.fit(LLAMA, max_model_len="32k", concurrency=0)
    with pytest.raises(kvplan.InputError, match="not auto"):
        kvplan.api.fit(LLAMA, max_model_len="auto", concurrency=1)
    with pytest.raises(kvplan.OptionError, match="unknown option 'max_gpu'") as err:
        kvplan.api.fit(LLAMA, max_model_len="32k", concurrency=1, max_gpu=4)  # type: ignore[call-arg]
    assert "max_gpus" in (err.value.hint or "")


def test_the_long_max_model_len_rule_and_negative_memory_through_the_api() -> None:
    qwen3_8b = str(CONFIGS / "Qwen--Qwen3-8B")  # max_position_embeddings 40960
    refused = kvplan.check(qwen3_8b, max_model_len=131072, kv_cache_memory="20GiB")
    # vLLM refuses at start-up: a plan that does not fit (a verdict, not bad input)
    assert not refused.fits and refused.refused_at_startup
    assert refused.failure_cause == "max_model_len" and refused.error_type == "ValueError"
    assert "derived max_model_len (max_position_embeddings=40960.0" in (refused.error_message or "")
    plan = kvplan.check(qwen3_8b, max_model_len=131072, kv_cache_memory="20GiB",
                        allow_long_max_model_len=True)
    assert plan.max_model_len == 131072
    # the CLI passes VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 as that option
    res = CliRunner().invoke(app, ["check", qwen3_8b, "--max-model-len", "131072",
                                   "--kv-cache-memory", "20GiB", "--json"],
                             env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"})
    assert json.loads(res.stdout) == plan.model_dump(mode="json")
    # a negative logged budget is planned into vLLM's own no-memory error
    neg = kvplan.check(qwen3_8b, max_model_len=8192, available_kv_gib=-2.14)
    assert not neg.fits and "No available memory for the cache blocks" in (neg.error_message or "")


def test_a_bad_max_model_len_names_the_forms_it_takes() -> None:
    with pytest.raises(kvplan.InputError) as err:
        kvplan.check(LLAMA, max_model_len="lots")
    assert "128k" in (err.value.hint or "")
    assert kvplan.api.parse_max_model_len("32k") == (32000, False)  # as vLLM reads it
    assert kvplan.api.parse_max_model_len("32K") == (32768, False)


# ---- engine="sglang" ------------------------------------------------------------------------------

def test_check_sglang_equals_the_engine_on_the_same_inputs() -> None:
    """The API's SGLang plan is the engine's result for the catalogue GPU (nvidia-smi total) and
    the estimated weights, under SGLang's names."""
    from kvplan.budget.sglang_memory import PRE_MODEL_LOAD_OVERHEAD_GIB
    from kvplan.engines.sglang import (
        Platform,
        ProfiledMemory,
        SglangDeployment,
        SglangGpu,
        plan_sglang,
    )
    from kvplan.models import describe_model

    plan = kvplan.check(LLAMA, engine="sglang", gpu="H100", tensor_parallel_size=2,
                        kv_cache_dtype="fp8_e4m3", max_running_requests=256)
    assert plan.engine == "sglang" and plan.vllm_version is None
    assert plan.sglang is not None and plan.sglang_version == "0.5.23"
    assert plan.budget is not None
    terms = {t.name: t.num_bytes for t in plan.budget.breakdown}
    weights_gib = -terms["weights per GPU"] / 2**30
    pre = 81559 / 1024 - PRE_MODEL_LOAD_OVERHEAD_GIB
    desc = describe_model(json.loads(Path(LLAMA, "config.json").read_text()), source=LLAMA)
    ref = plan_sglang(desc, SglangDeployment(tp_size=2, kv_cache_dtype="fp8_e4m3",
                                             max_running_requests=256),
                      gpu=SglangGpu(total_memory_mib=81559, platform=Platform.SM90),
                      memory=ProfiledMemory(pre_model_load_gib=pre,
                                            available_gib=(pre - weights_gib,)))
    assert plan.sglang.mem_fraction_static == ref.mem_fraction_static == 0.828
    assert abs((plan.sglang.max_total_num_tokens or 0) - (ref.max_total_num_tokens or 0)) <= 1
    assert terms["free before the weights"] == int(pre * 2**30)
    assert sum(terms.values()) == plan.budget.available_kv_bytes_per_gpu == ref.available_bytes
    assert plan.kv_cache_size_tokens == plan.sglang.max_total_num_tokens
    assert plan.max_model_len == 131072 and plan.sglang.max_running_requests == 256
    assert plan.capacity_log_line == (
        f"max_total_num_tokens={plan.sglang.max_total_num_tokens}, chunked_prefill_size=8192, "
        "max_running_requests=256, context_len=131072")
    data = json.loads(plan.to_json())
    assert data["engine"] == "sglang" and data["sglang"]["page_size"] == 1
    assert data["sglang"]["pools"][0]["bytes_per_token"] == 8 // 2 * 256 * 32


def test_check_sglang_takes_kv_cache_memory_as_the_pool_budget() -> None:
    plan = kvplan.check(LLAMA, engine="sglang", gpu="B200", kv_cache_memory="20GiB")
    assert plan.budget_mode == "explicit" and plan.sglang is not None
    assert plan.sglang.available_bytes == 20 * 2**30
    assert plan.sglang.page_size == 64  # trtllm_mha on Blackwell
    assert plan.kv_cache_size_tokens == 20 * 2**30 // 131072 // 64 * 64


def test_check_sglang_reports_sglang_errors_as_plans() -> None:
    plan = kvplan.check(LLAMA, engine="sglang", gpu="L4")
    assert not plan.fits and plan.failure_cause == "weights"
    assert plan.error_message is not None and plan.error_message.startswith(
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=")
    plan = kvplan.check(LLAMA, engine="sglang", gpu="H100", context_length=200000)
    assert not plan.fits and plan.error_type == "ValueError"


@pytest.mark.parametrize(("kwargs", "text"), [
    (dict(engine="sglang", gpu="H100", max_num_seqs=8), "max_num_seqs is a vLLM flag"),
    (dict(engine="vllm", gpu="H100", mem_fraction_static=0.8), "is an SGLang flag"),
    (dict(engine="tgi", gpu="H100"), "engine must be 'vllm' or 'sglang'"),
    (dict(engine="sglang", gpu="H100", mem_fraction_static=1.5), "mem_fraction_static"),
    (dict(engine="sglang", gpu="H100", tensor_parallel_size=2, tp_size=4), "both tp_size"),
])
def test_check_sglang_refuses_the_other_engines_flags(kwargs: dict[str, Any], text: str) -> None:
    with pytest.raises(kvplan.OptionError, match=text):
        kvplan.check(LLAMA, **kwargs)
