"""SGLang launch lines parsed as SGLang 0.5.23's argparse parser reads them. The expected values
of the argparse cases were checked against the real parser (`ServerArgs.add_cli_args` in the
SGLang 0.5.23 venv) when the tests were written."""

from __future__ import annotations

import pytest

from kvplan.errors import InputError
from kvplan.sources.sglang_flags import FLAG_TABLE, SGLANG_FLAGS_VERSION
from kvplan.sources.sglang_serve import (
    human_readable_int,
    is_sglang_line,
    parse_sglang_command,
)


def test_the_flag_table_is_sglang_0_5_23s() -> None:
    assert SGLANG_FLAGS_VERSION == "0.5.23"
    by_name = {n: (dest, kind) for names, dest, kind, _ in FLAG_TABLE for n in names.split()}
    assert len(FLAG_TABLE) == 531
    assert "--tp" not in by_name  # an abbreviation argparse resolves, not an alias
    assert by_name["--tensor-parallel-size"] == ("tp_size", "int")
    assert by_name["--model"] == ("model_path", "str")
    assert by_name["--context-length"] == ("context_length", "hrint")
    assert by_name["--cuda-graph-max-bs-decode"] == ("cuda_graph_max_bs_decode", "int")
    assert "--cuda-graph-max-bs" not in by_name  # renamed before 0.5.23
    assert by_name["--no-enable-tf32-matmul"] == ("enable_tf32_matmul", "bool")


def test_a_real_launch_line_from_vllm_issue_21348() -> None:
    # https://github.com/vllm-project/vllm/issues/21348: SGLang's side of the comparison
    cmd = parse_sglang_command(
        " python3 -m sglang.launch_server --model /path/to/Qwen3-235B-A22B-FP8 --tp 4 "
        "--trust-remote-code --host 0.0.0.0 --port 8000 --mem-fraction-static 0.93")
    assert cmd.model == "/path/to/Qwen3-235B-A22B-FP8"
    assert cmd.entry == "python -m sglang.launch_server"
    assert cmd.options == {"tp_size": 4, "mem_fraction_static": 0.93}  # --tp: a unique prefix
    assert cmd.ignored == ["--trust-remote-code", "--host", "--port"]
    assert cmd.unknown == [] and cmd.not_modelled == []


def test_argparse_abbreviations_and_sglang_value_types() -> None:
    # the real parser: tp_size 4, mem_fraction_static 0.9, context_length 32000,
    # max_total_tokens 1024
    cmd = parse_sglang_command("python -m sglang.launch_server --model-path m --tp 4 --mem 0.9 "
                               "--context-length 32k --max-total-tokens 1Ki")
    assert cmd.options == {"tp_size": 4, "mem_fraction_static": 0.9, "context_length": 32000,
                           "max_total_tokens": 1024}


def test_an_ambiguous_prefix_is_sglangs_own_error() -> None:
    with pytest.raises(InputError) as e:
        parse_sglang_command("python -m sglang.launch_server --model-path m --pp 2")
    # word for word what the real parser prints
    assert ("ambiguous option: --pp could match --pp-size, --pp-max-micro-batch-size, "
            "--pp-async-batch-depth") in e.value.message


def test_an_invalid_choice_is_sglangs_own_error() -> None:
    with pytest.raises(InputError) as e:
        parse_sglang_command("python -m sglang.launch_server --model-path m --kv-cache-dtype fp8")
    assert "argument --kv-cache-dtype: invalid choice: 'fp8'" in e.value.message
    with pytest.raises(InputError, match="expected one argument"):
        parse_sglang_command("python -m sglang.launch_server --model-path m --tp-size")
    with pytest.raises(InputError, match="invalid int value"):
        parse_sglang_command("python -m sglang.launch_server --model-path m --tp-size two")


def test_sglang_serve_with_a_positional_model_and_the_shell_around_it() -> None:
    cmd = parse_sglang_command(
        "export HF_HOME=/data\nCUDA_VISIBLE_DEVICES=0,1 sglang serve Qwen/Qwen3-8B \\\n"
        "  --model-type llm --context-length=32k --kv-cache-dtype fp8_e4m3 --disable-radix-cache "
        "--cuda-graph-bs-decode 1 2 4 --no-enable-tf32-matmul --port=3000 --made-up x "
        "> server.log 2>&1 &")
    assert cmd.model == "Qwen/Qwen3-8B" and cmd.entry == "sglang serve"
    assert cmd.env == {"HF_HOME": "/data", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert cmd.options == {"context_length": 32000, "kv_cache_dtype": "fp8_e4m3",
                           "disable_radix_cache": True}
    assert cmd.not_modelled == ["--cuda-graph-bs-decode"]
    assert cmd.ignored == ["--enable-tf32-matmul", "--port"]
    assert cmd.unknown == ["--made-up", "x"]


def test_older_sglangs_cuda_graph_flag_is_read_with_a_note() -> None:
    cmd = parse_sglang_command("python -m sglang.launch_server --model-path m "
                               "--cuda-graph-max-bs 64 --enable-dp-attention --dp-size 2")
    assert cmd.options == {"cuda_graph_max_bs_decode": 64, "enable_dp_attention": True,
                           "dp_size": 2}
    assert "would exit (ambiguous option: --cuda-graph-max-bs could match" in cmd.notes[0]
    assert any("--enable-dp-attention is deprecated" in n for n in cmd.notes)


def test_docker_and_python_module_spellings() -> None:
    cmd = parse_sglang_command(
        "docker run --gpus all --shm-size 32g -p 30000:30000 lmsysorg/sglang:latest "
        "python3 -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
        "--speculative-algorithm EAGLE --speculative-num-steps 3 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4")
    assert cmd.model == "deepseek-ai/DeepSeek-V3"
    assert cmd.options == {"tp_size": 8, "speculative_algorithm": "EAGLE",
                           "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                           "speculative_num_draft_tokens": 4}
    cmd = parse_sglang_command("python -m sglang.cli.main serve --model-path m --page-size 64")
    assert cmd.entry == "sglang serve" and cmd.options == {"page_size": 64}


def test_which_server_a_line_starts() -> None:
    assert is_sglang_line("python3 -m sglang.launch_server --model-path m")
    assert is_sglang_line("sglang serve m --tp 2")
    assert not is_sglang_line("vllm serve m --tensor-parallel-size 2")
    assert not is_sglang_line("pip install sglang")
    for bad in ("ls -la", "sglang serve", "python -m sglang.launch_server --port 1"):
        with pytest.raises(InputError):
            parse_sglang_command(bad)


def test_human_readable_int_is_sglangs() -> None:
    assert human_readable_int("25.6k") == 25600
    assert human_readable_int("1Ki") == 1024 and human_readable_int("2M") == 2_000_000
    assert human_readable_int(" 131072 ") == 131072
    for bad in ("1.5Ki", "1m", "12x"):
        with pytest.raises(ValueError):
            human_readable_int(bad)
