"""`vllm serve` command lines → ServeCommand, as vLLM 0.34.0's FlexibleArgumentParser reads them."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kvplan.errors import InputError
from kvplan.sources.serve_line import KV_RELEVANT, ServeCommand, closest_flag, known_flags, parse_serve_command

# The PR #53499 deployment as a user would paste it from a shell script.
PR53499 = r"""
# Qwen3.5-27B + DFlash on one 96 GB card
export HF_HOME=/models/hf
CUDA_VISIBLE_DEVICES=0 VLLM_PP_LAYER_PARTITION=64 vllm serve Qwen/Qwen3.5-27B \
    --max-model-len 262144 \
    --kv-cache-dtype nvfp4 \
    --gpu-memory-utilization 0.92 \
    --max-num-batched-tokens 16k \
    --max-num-seqs 64 \
    --async-scheduling \
    --speculative-config '{"method": "dflash", "model": "z-lab/Qwen3.5-27B-DFlash", "num_speculative_tokens": 7}' \
    --served-model-name qwen --host 0.0.0.0 --port 8000 --trust-remote-code \
    2>&1 | tee vllm.log
"""


def test_pr53499_command() -> None:
    cmd = parse_serve_command(PR53499)
    assert isinstance(cmd, ServeCommand)
    assert cmd.model == "Qwen/Qwen3.5-27B"
    assert cmd.options == {
        "max_model_len": 262144,
        "kv_cache_dtype": "nvfp4",
        "gpu_memory_utilization": 0.92,
        "max_num_batched_tokens": 16000,  # human_readable_int: k = 1000
        "max_num_seqs": 64,
        "async_scheduling": True,
        "speculative_config": {"method": "dflash", "model": "z-lab/Qwen3.5-27B-DFlash", "num_speculative_tokens": 7},
        # vLLM reads the config (and may refuse it) by it: KV-relevant, not ignored
        "trust_remote_code": True,
    }
    assert cmd.env == {"HF_HOME": "/models/hf", "CUDA_VISIBLE_DEVICES": "0", "VLLM_PP_LAYER_PARTITION": "64"}
    assert cmd.ignored == ["--served-model-name", "--host", "--port"]
    assert cmd.unknown == [] and cmd.notes == []


def test_frozen() -> None:
    cmd = parse_serve_command("vllm serve m")
    with pytest.raises(ValidationError):
        cmd.model = "x"  # type: ignore[misc]


def test_api_server_entry_point() -> None:
    cmd = parse_serve_command("python3 -u -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B "
                              "--tensor-parallel-size 2 --dtype bfloat16 --disable-log-requests")
    assert cmd.model == "meta-llama/Llama-3.1-8B"
    assert cmd.options == {"tensor_parallel_size": 2, "dtype": "bfloat16"}
    assert cmd.ignored == ["--disable-log-requests"]  # EnableDisableAction's pair of --enable-log-requests


@pytest.mark.parametrize("text", [
    "vllm serve --model org/m -tp 2",  # FlexibleArgumentParser moves --model to the positional
    "vllm serve --model=org/m -tp 2",
    "/opt/venv/bin/vllm serve org/m -tp 2",
    "python -m vllm.entrypoints.cli.main serve org/m -tp 2",
    "uv run vllm serve org/m -tp 2",
    "$ vllm serve org/m -tp 2",
    "docker run --gpus all --ipc=host -p 8000:8000 vllm/vllm-openai:v0.34.0 --model org/m -tp 2",
    "docker run --rm docker.io/vllm/vllm-openai:latest org/m -tp=2",
])
def test_entry_points(text: str) -> None:
    cmd = parse_serve_command(text)
    assert cmd.model == "org/m"
    assert cmd.options == {"tensor_parallel_size": 2}


def test_short_aliases_and_forms() -> None:
    cmd = parse_serve_command("vllm serve m -tp 4 -pp=2 -dcp 2 -dp 2 -ep -q fp8 -sc '{\"method\": \"ngram\"}'")
    assert cmd.options == {"tensor_parallel_size": 4, "pipeline_parallel_size": 2, "decode_context_parallel_size": 2,
                           "data_parallel_size": 2, "enable_expert_parallel": True, "quantization": "fp8",
                           "speculative_config": {"method": "ngram"}}
    assert parse_serve_command("vllm serve m -qfp8").options == {"quantization": "fp8"}  # argparse glued short value


def test_booleans_no_and_enable_disable_pairs() -> None:
    opts = parse_serve_command("vllm serve m --no-enable-prefix-caching --enforce-eager "
                               "--disable-hybrid-kv-cache-manager --no-async-scheduling").options
    assert opts == {"enable_prefix_caching": False, "enforce_eager": True,
                    "disable_hybrid_kv_cache_manager": True, "async_scheduling": False}
    # EnableDisableAction (vllm/utils/argparse_utils.py:115): --disable-X is the inverse of --enable-X ...
    assert parse_serve_command("vllm serve m --disable-prefix-caching").options == {"enable_prefix_caching": False}
    # ... and --enable-X of --disable-X.
    assert parse_serve_command("vllm serve m --enable-hybrid-kv-cache-manager").options == {
        "disable_hybrid_kv_cache_manager": False}
    assert parse_serve_command("vllm serve m --no-disable-hybrid-kv-cache-manager").options == {
        "disable_hybrid_kv_cache_manager": False}


def test_underscores_equals_and_abbreviations() -> None:
    opts = parse_serve_command("vllm serve m --max_model_len=8192 --gpu_memory_utilization 0.5 "
                               "--max-num-seq 8 --block-size=32").options
    assert opts == {"max_model_len": 8192, "gpu_memory_utilization": 0.5, "max_num_seqs": 8, "block_size": 32}
    assert parse_serve_command("vllm serve m --device-memory-utilization 0.7").options == {
        "gpu_memory_utilization": 0.7}


@pytest.mark.parametrize(("value", "expected"), [
    ("32768", 32768), ("32k", 32000), ("32K", 32768), ("25.6k", 25600), ("1m", 1_000_000), ("1M", 1 << 20),
    ("auto", -1), ("AUTO", -1), ("-1", -1),
])
def test_max_model_len_human_readable(value: str, expected: int) -> None:
    assert parse_serve_command(f"vllm serve m --max-model-len {value}").options["max_model_len"] == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("21474836480", 21474836480), ("20G", 20 << 30), ("20g", 20 * 10**9), ("512M", 512 << 20),
    ("1.5g", 1_500_000_000),
])
def test_kv_cache_memory_bytes(value: str, expected: int) -> None:
    assert parse_serve_command(f"vllm serve m --kv-cache-memory-bytes {value}").options == {
        "kv_cache_memory_bytes": expected}


def test_kv_cache_memory_bytes_unit_vllm_rejects_gets_the_byte_count_hint() -> None:
    with pytest.raises(InputError) as e:
        parse_serve_command("vllm serve m --kv-cache-memory-bytes 20GiB")
    assert "--kv-cache-memory-bytes" in e.value.message and "'20GiB'" in e.value.message
    assert e.value.hint is not None and "21474836480" in e.value.hint


def test_dotted_json_keys_and_list_append() -> None:
    cmd = parse_serve_command("vllm serve m --speculative-config.method eagle3 "
                              "--speculative-config.model yuhuili/EAGLE3-LLaMA3.1-Instruct-8B "
                              "--speculative-config.num_speculative_tokens=3 -cc.cudagraph_capture_sizes+ 1,2,4 "
                              "-cc.max_cudagraph_capture_size 1K")
    assert cmd.options["speculative_config"] == {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B",
                                                 "num_speculative_tokens": 3}
    # '+' appends strings (json.dumps of the split), `1K` → human_readable_int
    assert cmd.options["compilation_config"] == {"cudagraph_capture_sizes": ["1", "2", "4"],
                                                 "max_cudagraph_capture_size": 1024}
    assert cmd.notes == []


def test_dotted_keys_under_two_spellings_keep_only_the_last_like_vllm() -> None:
    # argparse_utils.py groups dotted keys by the literal option (`--speculative-config` vs `-sc`) and
    # re-appends each as a JSON argument: argparse then keeps the last one.
    cmd = parse_serve_command("vllm serve m --speculative-config.method eagle3 -sc.num_speculative_tokens=3")
    assert cmd.options["speculative_config"] == {"num_speculative_tokens": 3}
    assert any("keeps only the last (-sc)" in n for n in cmd.notes)


def test_spec_shortcut_flags_fold_into_speculative_config() -> None:
    cmd = parse_serve_command("vllm serve m --spec-method mtp --spec-tokens 2")
    assert cmd.options == {"speculative_config": {"method": "mtp", "num_speculative_tokens": 2}}
    assert cmd.ignored == []


def test_json_flags() -> None:
    cmd = parse_serve_command("""vllm serve m --hf-overrides '{"max_position_embeddings": 4096}' """
                              """--compilation-config '{"cudagraph_mode": "FULL", "max_cudagraph_capture_size": 2k}' """
                              """--limit-mm-per-prompt '{"image": 0}' -O3""")
    assert cmd.options == {"hf_overrides": {"max_position_embeddings": 4096},
                           "compilation_config": {"cudagraph_mode": "FULL", "max_cudagraph_capture_size": 2000},
                           "limit_mm_per_prompt": {"image": 0}, "optimization_level": "3"}
    assert parse_serve_command("vllm serve m --hf-overrides /path/to/fn").options == {"hf_overrides": "/path/to/fn"}


def test_lists_and_types() -> None:
    cmd = parse_serve_command("vllm serve m --cudagraph-capture-sizes 1 2 4 8 --attention-backend FLASHINFER "
                              "--mamba-ssm-cache-dtype float32 --mamba-cache-dtype auto --revision abc123 "
                              "--num-gpu-blocks-override 1000 --data-parallel-size-local 1 --quantization None")
    assert cmd.options == {"cudagraph_capture_sizes": [1, 2, 4, 8], "attention_backend": "FLASHINFER",
                           "mamba_ssm_cache_dtype": "float32", "mamba_cache_dtype": "auto", "revision": "abc123",
                           "num_gpu_blocks_override": 1000, "data_parallel_size_local": 1, "quantization": None}


def test_unknown_and_ignored_flags_are_noted() -> None:
    cmd = parse_serve_command("vllm serve m --max-model-lenn 4096 --port 8001 --api-key k1 k2 --swap-space 4")
    assert cmd.unknown == ["--max-model-lenn", "--swap-space"]
    assert cmd.ignored == ["--port", "--api-key"]
    assert cmd.options == {}
    assert any("did you mean --max-model-len" in n for n in cmd.notes)
    assert closest_flag("--tensor-paralel-size") == "--tensor-parallel-size"


def test_last_value_wins_with_a_note() -> None:
    cmd = parse_serve_command("vllm serve m --max-model-len 4096 --max-model-len 8192")
    assert cmd.options == {"max_model_len": 8192}
    assert any("more than once" in n for n in cmd.notes)


def test_shell_noise() -> None:
    text = ("set -e\nsource .venv/bin/activate; export A=1 B=2\n"
            "nohup env C=3 vllm serve 'org/my model' --max-model-len 1024 > /tmp/log 2>&1 &\n"
            "echo started  # comment vllm serve x\n")
    cmd = parse_serve_command(text)
    assert cmd.model == "org/my model" and cmd.options == {"max_model_len": 1024}
    assert cmd.env == {"A": "1", "B": "2", "C": "3"}


def test_multiline_json_and_double_quotes() -> None:
    text = 'vllm serve m \\\n  --speculative-config "{\\"method\\": \\"mtp\\",\n  \\"num_speculative_tokens\\": 1}"'
    assert parse_serve_command(text).options == {"speculative_config": {"method": "mtp", "num_speculative_tokens": 1}}


def test_config_file_is_noted() -> None:
    cmd = parse_serve_command("vllm serve m --config serve.yaml")
    assert cmd.options == {"config": "serve.yaml"}
    assert any("YAML" in n for n in cmd.notes)


def test_negative_number_is_a_value() -> None:
    assert parse_serve_command("vllm serve m --max-model-len -1").options == {"max_model_len": -1}


def test_known_flags_cover_the_kv_flags() -> None:
    flags = set(known_flags())
    for f in ("--max-model-len", "--kv-cache-dtype", "--max-num-batched-tokens", "--max-num-seqs",
              "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp", "--decode-context-parallel-size",
              "-dcp", "--enable-prefix-caching", "--no-enable-prefix-caching", "--gpu-memory-utilization",
              "--kv-cache-memory-bytes", "--block-size", "--num-gpu-blocks-override", "--attention-backend",
              "--speculative-config", "-sc", "--dtype", "--mamba-cache-dtype", "--mamba-ssm-cache-dtype", "--revision",
              "--data-parallel-size", "--enforce-eager", "--async-scheduling", "--disable-hybrid-kv-cache-manager"):
        assert f in flags, f
    assert {"max_model_len", "kv_cache_dtype", "speculative_config", "tensor_parallel_size"} <= KV_RELEVANT
    assert "port" not in KV_RELEVANT


# (command, substring of the one-line error message)
BAD = [
    ("vllm serve m --speculative-config '{\"method\": \"dflash\" \"model\": \"x\"}'",
     "--speculative-config: invalid JSON at line 1 column 21"),
    ("vllm serve m --speculative-config \"{'method': 'eagle'}\"", "--speculative-config: invalid JSON"),
    ("vllm serve m -sc '[1, 2]'", "--speculative-config wants a JSON object"),
    ("vllm serve m --compilation-config '{\"level\": 3'", "--compilation-config: invalid JSON"),
    ("vllm serve m --max-num-seqs 64.5", "--max-num-seqs expects an integer, got '64.5'"),
    ("vllm serve m -tp two", "-tp (--tensor-parallel-size) expects an integer, got 'two'"),
    ("vllm serve m --max-model-len 128KB",
     "argument --max-model-len: invalid human_readable_int_or_auto value: '128KB'"),
    ("vllm serve m --max-model-len 1.5K", "argument --max-model-len: Decimals are not allowed with "
     "binary suffixes like K. Did you mean to use 1.5k instead?"),
    ("vllm serve m --gpu-memory-utilization high", "--gpu-memory-utilization expects a number"),
    ("vllm serve m --gpu-memory-utilization 1.2", "--gpu-memory-utilization 1.2 is out of range"),
    ("vllm serve m -tp 0", "--tensor-parallel-size 0 is out of range"),
    ("vllm serve m --max-model-len", "--max-model-len is missing its value"),
    ("vllm serve m --kv-cache-dtype --max-model-len 4096", "--kv-cache-dtype is missing its value (next is"),
    ("vllm serve m --enforce-eager=false", "--enforce-eager takes no value"),
    ("vllm serve m --dtype fp9", "--dtype: invalid choice 'fp9'"),
    ("vllm serve m --mamba-ssm-cache-dtype fp8", "--mamba-ssm-cache-dtype: invalid choice"),
    ("vllm serve 'Qwen/Qwen3-8B --max-model-len 4096", "unbalanced ' quote"),
    ('vllm serve m --hf-overrides "{\\"a\\": 1}', 'unbalanced " quote'),
    ("vllm serve", "missing model"),
    ("vllm serve --max-model-len 4096", "missing model"),
    ("vllm serve --served-model-name qwen Qwen/Qwen3-8B", "missing model: `vllm serve` takes the model"),
    ("vllm serve --config x.yaml", "the model is not on the command line"),
    ("vllm serve a b", "unexpected extra argument(s)"),
    ("vllm serve a --model b", "unexpected extra argument(s)"),
    ("python -m vllm.entrypoints.openai.api_server a --model b", "two models given"),
    ("ls -la /models", "not a vllm serve command"),
    ("pip install vllm", "not a vllm serve command"),
    ("vllm bench serve --model m", "`vllm bench` is not the vLLM server command"),
    ("vllm serve a; vllm serve b", "more than one vLLM server command"),
    ("", "empty command line"),
    ("vllm serve m --enable", "ambiguous option --enable"),
    ("vllm serve m --spec-tokens 3 -sc '{\"num_speculative_tokens\": 2}'", "mutually exclusive"),
    ("vllm serve m\x00 --x", "NUL"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_inputs(text: str, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_serve_command(text)
    assert message in e.value.message
    assert "\n" not in e.value.message
    assert e.value.hint is None or "\n" not in e.value.hint


def test_json_error_says_where() -> None:
    with pytest.raises(InputError) as e:
        parse_serve_command("vllm serve m --speculative-config "
                            "'{\"method\": \"dflash\", \"num_speculative_tokens\": 7,}'")
    assert "--speculative-config" in e.value.message and "column 50 (char 49)" in e.value.message
    assert "<HERE>" in e.value.message


_WORDS = st.sampled_from(["vllm", "serve", "m", "--max-model-len", "4k", "-tp", "2", "--speculative-config", "'{",
                          '"a"', ":", "}'", "--no-enable-prefix-caching", "=", "\\", "\n", "'", '"', "|", ">", "&",
                          "--kv-cache-memory-bytes", "-O3", "-sc.method", "--x", "--", "#", "A=1", "python", "-m",
                          "vllm.entrypoints.openai.api_server", "--model", "$", ";", "-1", "1.5K", "None", " "])


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_random_text_raises_only_input_error(text: str) -> None:
    try:
        parse_serve_command(text)
    except InputError:
        pass


@settings(max_examples=600, deadline=None)
@given(st.lists(_WORDS, max_size=30))
def test_random_commands_raise_only_input_error(words: list[str]) -> None:
    for text in (" ".join(words), "vllm serve m " + " ".join(words), "".join(words)):
        try:
            cmd = parse_serve_command(text)
        except InputError as e:
            assert "\n" not in e.message
        else:
            assert cmd.model


_VLLM_SRC = Path("/tmp/vllm/s34/vllm")


@pytest.mark.skipif(not _VLLM_SRC.exists(), reason="vLLM 0.34.0 source tree not available")
def test_every_flag_vllm_registers_is_known() -> None:
    """Cross-check the flag table against vLLM 0.34.0's own add_argument calls (when its source is around)."""
    import ast

    registered: set[str] = set()
    sources = [_VLLM_SRC / "engine" / "arg_utils.py", _VLLM_SRC / "entrypoints" / "common" / "cli_args.py"]
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
                registered |= {a.value for a in node.args
                               if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")}
            if isinstance(node, ast.ClassDef) and node.name in ("BaseFrontendArgs", "FrontendArgs"):
                registered |= {"--" + s.target.id.replace("_", "-") for s in node.body
                               if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    assert registered - set(known_flags()) == set()
