"""Lengths exactly as `vllm serve` reads them: vLLM's own human_readable_int[_or_auto] on 1,445
strings (tests/data/vllm-functions/human_readable_int.0.34.0.json, made by
tools/vllm_human_readable_int.py in the vLLM 0.34.0 virtualenv), its rules as properties, and
every place kvplan reads a length (flags, serve lines, ci files, spec files, the API)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.errors import InputError
from kvplan.pipeline.sweep import parse_lengths
from kvplan.sources.serve_line import parse_serve_command
from kvplan.units import MAX_TOKENS, read_human_int, read_tokens

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = json.loads((ROOT / "tests/data/vllm-functions/human_readable_int.0.34.0.json")
                    .read_text(encoding="utf-8"))
CONFIGS = ROOT / "tests" / "data" / "hf-configs"
LLAMA = str(CONFIGS / "meta-llama--Llama-3.1-8B")
runner = CliRunner()


def _kvplan(text: str, flag: str, auto: bool) -> dict:
    try:
        return {"value": read_human_int(text, flag, auto=auto)}
    except InputError as exc:
        return {"error": exc.message}


def test_golden_table_is_vllms_own() -> None:
    assert GOLDEN["vllm_version"] == "0.34.0" and len(GOLDEN["rows"]) > 1000
    picked = {r["input"]: r for r in GOLDEN["rows"]}
    assert picked["128k"]["max_model_len"] == {"value": 128_000}
    assert picked["128K"]["max_model_len"] == {"value": 131_072}
    assert picked["25.6k"]["max_model_len"] == {"value": 25_600}
    assert picked["4.1m"]["max_model_len"] == {"value": 4_099_999}  # float × 10^6, truncated
    assert "Decimals are not allowed" in picked["1.5K"]["max_model_len"]["error"]


@pytest.mark.parametrize(("flag", "auto"), [("--max-model-len", True),
                                            ("--max-num-batched-tokens", False)])
def test_every_golden_row_is_read_as_vllm_reads_it(flag: str, auto: bool) -> None:
    key = flag[2:].replace("-", "_")
    wrong = [(r["input"], r[key], got) for r in GOLDEN["rows"]
             if (got := _kvplan(r["input"], flag, auto)) != r[key]]
    assert wrong == []


# ---- vLLM's rules as properties (written from its docstring, not from kvplan's code) ----------

DIGITS = st.text("0123456789", min_size=1, max_size=9)


@given(DIGITS, st.sampled_from("kmgt"))
def test_lower_case_suffixes_are_decimal(number: str, suffix: str) -> None:
    # vLLM multiplies the float: exact for lengths, rounded past 2^53 (37000001t)
    assert read_human_int(number + suffix, "--x") == int(float(number) * 10 ** (3 * ("kmgt".index(suffix) + 1)))
    if int(number) < 10**6:
        assert read_human_int(number + suffix, "--x") == int(number) * 10 ** (3 * ("kmgt".index(suffix) + 1))


@given(DIGITS, st.sampled_from("KMGT"))
def test_upper_case_suffixes_are_binary(number: str, suffix: str) -> None:
    assert read_human_int(number + suffix, "--x") == int(number) * 2 ** (10 * ("KMGT".index(suffix) + 1))


@given(DIGITS, DIGITS, st.sampled_from("kmgt"))
def test_decimals_with_lower_case_multiply_then_truncate(whole: str, frac: str, suffix: str) -> None:
    text = f"{whole}.{frac}{suffix}"
    assert read_human_int(text, "--x") == int(float(f"{whole}.{frac}") * 10 ** (3 * ("kmgt".index(suffix) + 1)))


@given(DIGITS, DIGITS, st.sampled_from("KMGT"))
def test_decimals_with_upper_case_are_vllms_error(whole: str, frac: str, suffix: str) -> None:
    with pytest.raises(InputError) as e:
        read_human_int(f"{whole}.{frac}{suffix}", "--max-model-len", auto=True)
    assert e.value.message == (
        f"argument --max-model-len: Decimals are not allowed with binary suffixes like {suffix}. "
        f"Did you mean to use {whole}.{frac}{suffix.lower()} instead?")


@given(st.integers(min_value=-10**12, max_value=10**12), st.sampled_from(["", " ", "\t"]))
def test_plain_integers_pass_through(n: int, pad: str) -> None:
    assert read_human_int(f"{pad}{n}{pad}", "--x") == n


@settings(max_examples=300)
@given(st.text(alphabet="0123456789.kKmMgGtTeE+-_ ,xiB", max_size=8))
def test_anything_else_is_one_clear_error_or_vllms_value(text: str) -> None:
    try:
        n = read_human_int(text, "--max-num-batched-tokens")
    except InputError as exc:
        assert exc.message.startswith("argument --max-num-batched-tokens: ")
    else:
        assert isinstance(n, int)


def test_bounds_and_auto() -> None:
    assert read_tokens("auto", "--max-model-len", auto=True) == -1
    assert read_tokens(" -1 ", "--max-model-len", auto=True) == -1
    with pytest.raises(InputError, match="invalid human_readable_int value: 'auto'"):
        read_tokens("auto", "--max-num-batched-tokens")
    for bad in ("0", "-5", 0):
        with pytest.raises(InputError, match="must be ≥ 1"):
            read_tokens(bad, "--max-model-len", auto=True)
    with pytest.raises(InputError, match="out of range"):
        read_tokens("3G", "--max-model-len")
    assert read_tokens("2G", "--max-model-len") == MAX_TOKENS
    for bad in (True, 1.5, [1]):
        with pytest.raises(InputError):
            read_tokens(bad, "--max-model-len")  # type: ignore[arg-type]
    assert read_tokens(131072.0, "--max-model-len") == 131072  # JSON / TOML floats that are whole


# ---- every place a length is read -------------------------------------------------------------

def _json(args: list[str]) -> dict:
    res = runner.invoke(app, args)
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize(("text", "tokens"), [("128k", 128_000), ("128K", 131_072),
                                               ("25.6k", 25_600), ("131072", 131_072)])
def test_check_flag_api_and_serve_line_agree(text: str, tokens: int) -> None:
    base = ["check", LLAMA, "--kv-cache-memory", "40GiB", "--json"]
    flag = _json([*base, "--max-model-len", text, "--max-num-batched-tokens", "8k"])
    assert flag["max_model_len"] == tokens and flag["max_num_batched_tokens"] == 8000
    serve = _json(["check", "--serve", f"vllm serve {LLAMA} --max-model-len {text} "
                   "--max-num-batched-tokens 8k --kv-cache-memory-bytes 40G", "--json"])
    assert serve["max_model_len"] == tokens and serve["max_num_batched_tokens"] == 8000
    assert serve["available_kv_bytes"] == flag["available_kv_bytes"] == [40 * 2**30]
    api = kvplan.check(LLAMA, max_model_len=text, max_num_batched_tokens="8k",
                       kv_cache_memory="40G")
    assert api.max_model_len == tokens and api.max_num_batched_tokens == 8000


def test_binary_decimal_is_refused_with_vllms_words_everywhere(tmp_path: Path) -> None:
    want = ("argument --max-model-len: Decimals are not allowed with binary suffixes like K. "
            "Did you mean to use 1.5k instead?")
    res = runner.invoke(app, ["check", LLAMA, "--kv-cache-memory", "40GiB", "--max-model-len", "1.5K"])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.splitlines()[0] == f"Error: {want}"
    with pytest.raises(InputError, match="Decimals are not allowed"):
        parse_serve_command("vllm serve m --max-model-len 1.5K")
    with pytest.raises(InputError, match="Decimals are not allowed"):
        kvplan.check(LLAMA, max_model_len="1.5K", kv_cache_memory="40GiB")
    toml = tmp_path / "d.toml"
    toml.write_text(f'[[deployment]]\nname = "a"\nmodel = "{LLAMA}"\nmax-model-len = "1.5K"\n'
                    'kv-cache-memory = "40GiB"\n')
    res = runner.invoke(app, ["ci", str(toml)])
    assert res.exit_code == 2 and f"deployment 'a': {want}" in res.stderr
    for cmd in (["sweep", LLAMA, "--max-model-len", "1.5K..8K"],
                ["fit", LLAMA, "--max-model-len", "1.5K", "--concurrency", "1"]):
        res = runner.invoke(app, cmd)
        assert res.exit_code == 2 and "Decimals are not allowed" in res.stderr, cmd


def test_ci_file_and_spec_file_lengths(tmp_path: Path) -> None:
    toml = tmp_path / "d.toml"
    toml.write_text(f'[[deployment]]\nname = "a"\nmodel = "{LLAMA}"\nmax-model-len = "32k"\n'
                    'max-num-batched-tokens = "4K"\nkv-cache-memory = "40GiB"\n'
                    f'[[deployment]]\nname = "b"\nmodel = "{LLAMA}"\nmax-model-len = 32768\n'
                    'kv-cache-memory = "40GiB"\n')
    res = runner.invoke(app, ["ci", str(toml), "--json"])
    assert res.exit_code == 0, res.output
    plans = {e["name"]: e["plan"] for e in json.loads(res.stdout)["entries"]}
    assert plans["a"]["max_model_len"] == 32_000 and plans["a"]["max_num_batched_tokens"] == 4096
    assert plans["b"]["max_model_len"] == 32_768
    spec = json.loads((ROOT / "examples/pr53499-qwen35-27b-dflash.specs.json").read_text())
    spec["max_model_len"], spec["max_num_batched_tokens"] = "256K", "16k"
    plan = kvplan.check_specs(spec)
    assert plan.max_model_len == 262_144 and plan.max_num_batched_tokens == 16_000
    spec["max_model_len"] = "2.5K"
    with pytest.raises(InputError, match="spec file's max_model_len: argument --max-model-len: "
                                         "Decimals"):
        kvplan.check_specs(spec)


def test_sweep_lengths() -> None:
    assert parse_lengths("8K..64K") == [8192, 16384, 32768, 65536]
    assert parse_lengths("8K..1M")[-1] == 2**20
    assert parse_lengths("8k..32k") == [8000, 16000, 32000]  # vLLM's k: 10^3
    assert parse_lengths("4096,8k") == [4096, 8000]
    assert parse_lengths("10K..50K") == [10240, 20480, 40960, 51200]
    with pytest.raises(InputError, match="invalid human_readable_int value: 'x'"):
        parse_lengths("8k,x")
