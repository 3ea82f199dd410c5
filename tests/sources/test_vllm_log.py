"""vLLM startup logs → VllmLog. Fixtures in tests/data/logs/ are built line by line from vLLM's format
strings; each fixture's header comment cites the source file:line of every line type it reproduces."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import InputError
from kvplan.sources.vllm_log import CapacityError, CudaGraphProfile, PaddingLayers, VllmLog, parse_vllm_log

LOGS = Path(__file__).parent.parent / "data" / "logs"

# vLLM 0.34.0, v1/core/kv_cache_planning.py:124 (hint from :92), for the PR #53499 deployment.
PR53499_ERROR = (
    "To serve at least one request with the model's max seq len (262144), (41.1 GiB KV cache is needed, which is "
    "larger than the available KV cache memory (31.98 GiB). Based on the available memory, the estimated maximum "
    "model length is 30592. Try increasing `gpu_memory_utilization` when initializing the engine (this flag also "
    "controls CPU memory reservation on the CPU backend, despite its name). Decreasing `max_model_len` also reduces "
    "what is needed. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)


def _load(name: str) -> VllmLog:
    return parse_vllm_log((LOGS / name).read_text(encoding="utf-8"))


def test_pr53499_capacity_error_v034() -> None:
    log = _load("v0.34.0-qwen35-27b-dflash-capacity-error.log")
    assert log.version == "0.34.0"
    assert log.model == "Qwen/Qwen3.5-27B"
    assert log.capacity_error == CapacityError(kind="max_seq_len", message=PR53499_ERROR, max_model_len=262144,
                                               needed_gib=41.1, available_gib=31.98, estimated_max_model_len=30592)
    assert log.started is False
    # engine config line (config/vllm.py:2890)
    assert log.max_seq_len == 262144
    assert (log.tensor_parallel_size, log.pipeline_parallel_size, log.data_parallel_size,
            log.decode_context_parallel_size) == (1, 1, 1, 1)
    assert log.kv_cache_dtype == "nvfp4" and log.dtype == "bfloat16" and log.quantization is None
    assert log.enable_prefix_caching is True
    assert log.speculative_config == {"method": "dflash", "model": "z-lab/Qwen3.5-27B-DFlash",
                                      "num_speculative_tokens": 7}
    assert log.engine_config["tokenizer_mode"] == "auto"
    assert log.engine_config["compilation_config"].startswith("{'mode': <CompilationMode.VLLM_COMPILE: 3>")
    # non-default args (startup.py:96)
    assert log.non_default_args == {
        "model_tag": "Qwen/Qwen3.5-27B", "model": "Qwen/Qwen3.5-27B", "max_model_len": 262144,
        "gpu_memory_utilization": 0.92, "kv_cache_dtype": "nvfp4", "max_num_batched_tokens": 16384,
        "max_num_seqs": 64, "async_scheduling": True,
        "speculative_config": {"method": "dflash", "model": "z-lab/Qwen3.5-27B-DFlash", "num_speculative_tokens": 7},
    }
    # memory and hybrid alignment lines
    assert log.available_kv_cache_gib == [32.0]
    assert log.available_kv_cache_by_process == {"EngineCore": 32.0}
    assert log.limiting_available_kv_cache_gib == 32.0
    assert log.model_loading_gib == [51.27] and log.model_loading_seconds == [38.412345]
    assert log.attention_block_size == 2912
    assert log.mamba_padding_pct == 0.12
    assert log.padding_layers == [PaddingLayers(count=2, waste_pct=4.17), PaddingLayers(count=4, waste_pct=25.0)]
    assert log.cuda_graph_profile is not None
    assert log.cuda_graph_profile.equivalent_utilization == 0.9083
    assert log.kv_cache_size_tokens == [] and log.max_concurrency == []


def test_tp2_success_with_colours_and_logo_v034() -> None:
    log = _load("v0.34.0-qwen3-32b-tp2-ok.log")
    assert log.version == "0.34.0" and log.model == "Qwen/Qwen3-32B"
    assert log.started is True and log.capacity_error is None
    assert log.tensor_parallel_size == 2 and log.max_seq_len == 32768 and log.kv_cache_dtype == "auto"
    assert log.speculative_config is None
    assert log.available_kv_cache_gib == [33.81, 33.87]
    assert log.available_kv_cache_by_process == {"Worker_TP0": 33.81, "Worker_TP1": 33.87}
    assert log.limiting_available_kv_cache_gib == 33.81
    assert log.model_loading_by_process == {"Worker_TP0": 30.59, "Worker_TP1": 30.59}
    assert log.kv_cache_size_tokens == [276976]
    assert log.max_concurrency == [8.45] and log.max_concurrency_tokens == 32768
    assert log.cuda_graph_capture_gib == [0.87, 0.87] and log.cuda_graph_capture_seconds == [12.0, 12.0]
    assert log.cuda_graph_pool_actual_gib == [0.87, 0.87] and log.cuda_graph_pool_estimated_gib == [0.91, 0.91]
    (summary,) = log.memory_summaries
    assert (summary.free_gib, summary.total_gib, summary.gpu_memory_utilization, summary.requested_gib) == (
        78.69, 79.19, 0.9, 71.27)
    assert (summary.consumed_gib, summary.peak_activation_gib, summary.cudagraph_gib) == (31.72, 4.83, 0.87)
    assert summary.kv_cache_memory_to_requested_limit == 36185004646
    assert summary.kv_cache_memory_to_gpu_limit == 43706829414
    assert summary.kv_cache_in_use_gib == 33.81
    # Object reprs in the non-default args are read field by field, never evaluated.
    assert log.non_default_args["compilation_config"] == {
        "mode": None, "cudagraph_capture_sizes": [1, 2, 4, 8, 16, 32, 64, 128, 256], "max_cudagraph_capture_size": 256}
    assert log.non_default_args["api_key"] == "***"


def test_hybrid_tp4_docker_timestamps_v031() -> None:
    log = _load("v0.31.0-qwen3-next-80b-tp4-docker.log")
    assert log.version == "0.31.0"
    assert log.model == "Qwen/Qwen3-Next-80B-A3B-Instruct-FP8"
    assert log.quantization == "fp8" and log.enable_prefix_caching is False and log.tensor_parallel_size == 4
    assert log.attention_block_size == 272 and log.mamba_padding_pct == 1.47
    assert log.kv_cache_memory_reserved_gib == [20.0] * 4 and log.available_kv_cache_gib == []
    assert log.limiting_available_kv_cache_gib == 20.0
    assert log.model_loading_gib == [19.38, 19.39, 19.38, 19.39]
    assert set(log.model_loading_by_process) == {f"Worker_TP{r}_EP{r}" for r in range(4)}
    assert log.kv_cache_size_tokens == [1148928] and log.max_concurrency == [29.91]
    assert log.non_default_args["kv_cache_memory_bytes"] == 21474836480


def test_bare_lines_and_older_formats() -> None:
    text = "\n".join([
        "INFO 11-02 10:00:00 [api_server.py:1880] vLLM API server version 0.10.1.1",
        "INFO 11-02 10:00:09 [gpu_worker.py:298] Available KV cache memory: 12.5 GiB",
        "INFO 11-02 10:00:09 [kv_cache_utils.py:1013] GPU KV cache size: 102,400 tokens",
        "INFO 11-02 10:00:09 [kv_cache_utils.py:1017] Maximum concurrency for 8,192 tokens per request: 12.50x",
        "(VllmWorker rank=0 pid=4242) INFO 11-02 10:00:05 [gpu_model_runner.py:1770] Model loading took 14.99 GiB "
        "and 4.512 seconds",
        "some unrelated line",
    ])
    log = parse_vllm_log(text)
    assert log.version == "0.10.1.1"
    assert log.available_kv_cache_gib == [12.5]
    assert log.kv_cache_size_tokens == [102400]
    assert log.max_concurrency == [12.5] and log.max_concurrency_tokens == 8192
    assert log.model_loading_gib == [14.99] and log.model_loading_by_process == {"VllmWorker rank=0": 14.99}
    assert log.lines == 6 and log.matched_lines == 5


def test_other_capacity_failures_and_auto_fit() -> None:
    no_mem = parse_vllm_log(
        "(EngineCore pid=9) ERROR 11-02 10:00:00 [core.py:1757] ValueError: No available memory for the cache blocks. "
        "Try increasing `gpu_memory_utilization` when initializing the engine.")
    assert no_mem.capacity_error is not None and no_mem.capacity_error.kind == "no_memory"
    assert no_mem.capacity_error.needed_gib is None
    fit = parse_vllm_log(
        "(EngineCore pid=9) INFO 11-02 10:00:00 [kv_cache_planning.py:1494] --max-model-len auto reduced "
        "max_model_len from 262144 to 30592 (31.98 GiB GPU available for the KV cache).")
    assert fit.auto_fit_max_model_len == 30592
    assert parse_vllm_log(
        "(EngineCore pid=9) INFO 11-02 10:00:00 [kv_cache_planning.py:1458] Auto-fit max_model_len: full model "
        "context length 32768 fits in available KV cache memory (40.2 GiB GPU)").auto_fit_max_model_len == 32768


def test_bytes_input_and_crlf() -> None:
    raw = (LOGS / "v0.34.0-qwen35-27b-dflash-capacity-error.log").read_bytes()
    assert parse_vllm_log(raw.replace(b"\n", b"\r\n")).capacity_error is not None


def test_repr_values_are_never_evaluated() -> None:
    log = parse_vllm_log("INFO 11-02 10:00:00 [startup.py:96] non-default args: {'model': 'm', "
                         "'x': __import__('os').system('touch /tmp/kvplan_pwned'), 'y': Foo(a=1, b='c')}")
    assert log.non_default_args["model"] == "m"
    assert log.non_default_args["x"] == "__import__('os').system('touch /tmp/kvplan_pwned')"
    assert log.non_default_args["y"] == {"a": 1, "b": "c"}
    assert not Path("/tmp/kvplan_pwned").exists()


# (input, substring of the InputError message)
BAD: list[tuple[str | bytes, str]] = [
    ("", "does not look like a vLLM startup log"),
    ("   \n\n  ", "does not look like a vLLM startup log"),
    ("hello world\nthis is a log of something else\n", "does not look like a vLLM startup log"),
    ("INFO 11-02 10:00:00 [model.py:761] Resolved architecture: LlamaForCausalLM", "does not look like a vLLM"),
    ("vllm serve Qwen/Qwen3-8B --max-model-len 4096", "does not look like a vLLM startup log"),
    ('{"level": "info", "msg": "started"}', "does not look like a vLLM startup log"),
    ("# Available KV cache memory: 3 GiB", "does not look like a vLLM startup log"),
    ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: boom", "does not look like"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary"),
    (b"INFO 11-02 10:00:00 [x.py:1] Available KV cache memory: 3 GiB \xff\xfe", "not UTF-8"),
    ("Available KV cache memory: 3 GiB\x00\x00", "binary"),
    ("Available KV cache memory: 3 GiB \udcff", "not valid UTF-8"),
    ("".join(chr(i % 32) for i in range(2000)), "binary"),
]


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m + str(i) for i, (_, m) in enumerate(BAD)])
def test_bad_inputs(text: str | bytes, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_vllm_log(text)
    assert message in e.value.message
    assert "\n" not in e.value.message


def test_not_text_at_all() -> None:
    with pytest.raises(InputError):
        parse_vllm_log(12)  # type: ignore[arg-type]


_LINES = st.sampled_from([
    "(EngineCore pid=1) INFO 11-02 10:00:00 [gpu_worker.py:795] Available KV cache memory: ",
    "INFO 11-02 10:00:00 [core.py:153] Initializing a V1 LLM engine (v0.34.0) with config: model='",
    "non-default args: {'a': ", "To serve at least one request with the model's max seq len (", "GiB", "x",
    "GPU KV cache size: ", "tokens", "Maximum concurrency for ", "█ version ", "<", "(", "{", "'", ", ", "=",
    "\x1b[32m",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_LINES, st.text(max_size=20)), max_size=25))
def test_random_logs_raise_only_input_error(parts: list[str]) -> None:
    try:
        parse_vllm_log("".join(parts))
    except InputError:
        pass


# ---------------------------------------------------------------------------------------------
# Real excerpts from public issues (tests/data/logs/SOURCES.md): one per wording and format.
# Expected values are read off the excerpts themselves.


def test_real_negative_available_memory_with_engine_core_0_tags() -> None:
    log = _load("issue-vllm-23278-gpt-oss-120b-negative-kv.log")
    assert log.available_kv_cache_gib == [-2.14] and log.available_kv_cache_by_process == {"EngineCore_0": -2.14}
    assert log.limiting_available_kv_cache_gib == -2.14
    assert log.model_loading_gib == [65.9651] and log.model_loading_seconds == [12.799889]
    assert log.memory is not None and log.memory.weights_gib == 65.9651


def test_real_caret_notation_colours() -> None:
    log = _load("issue-vllm-33155-gpt-oss-120b-caret-ansi.log")  # "^[[0;36m" as a pager shows ESC
    assert log.model_loading_by_process == {"EngineCore_DP0": 64.38}


def test_real_terminal_wrapped_capacity_error() -> None:
    log = _load("issue-sergiiob-cookbook-4-terminal-wrapped.log")
    err = log.capacity_error
    # "... (4.26 GiB KV cach" + "e is needed, ... memory (4.25 GiB). Based on the avai": glued back
    assert err is not None and (err.kind, err.max_model_len, err.needed_gib, err.available_gib) == (
        "max_seq_len", 100000, 4.26, 4.25)
    assert err.estimated_max_model_len is None  # the excerpt ends before the number
    assert log.kv_cache_memory_reserved_gib == [4.25]
    assert log.padding_layers == [PaddingLayers(count=3, waste_pct=6.25)]


def test_real_older_models_s_wording() -> None:
    err = _load("issue-tpu-inference-223-models-s-wording.log").capacity_error
    assert err == CapacityError(
        kind="max_seq_len", max_model_len=131072, needed_gib=16.0, available_gib=0.71,
        estimated_max_model_len=5632,
        message="To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is "
                "needed, which is larger than the available KV cache memory (0.71 GiB). Based on the available "
                "memory, the estimated maximum model length is 5632. Try increasing `gpu_memory_utilization` or "
                "decreasing `max_model_len` when initializing the engine.")


def test_real_no_memory_error_is_kvplans_text_for_031() -> None:
    from kvplan.engines.vllm.planner import PlannerInput, no_memory_error_text
    from kvplan.engines.vllm.profiles import get_profile

    err = _load("issue-vllm-backport-15-no-memory.log").capacity_error
    assert err is not None and err.kind == "no_memory"
    inp = PlannerInput(worker_specs=({},), available_kv_bytes=(0,), max_model_len=1, max_num_batched_tokens=1)
    assert err.message == no_memory_error_text(get_profile("0.31.0"), inp)


def test_real_capacity_on_two_lines_and_on_one() -> None:
    two = _load("issue-vllm-pr20707-separate-capacity-lines.log")
    assert two.available_kv_cache_by_process == {"EngineCore_0": 112.61}
    assert two.kv_cache_size_tokens == [922496] and two.max_concurrency == [23.06]
    assert two.max_concurrency_tokens == 40000
    journald = _load("issue-1catai-237-journald-prefix.log")
    assert journald.available_kv_cache_by_process == {"Worker_TP0": 5.35}
    assert journald.kv_cache_size_tokens == [215401] and journald.max_concurrency == [26.29]


def test_real_pre_08_format() -> None:
    log = _load("issue-vllm-pr12569-v0.7-gpu-blocks.log")
    assert log.gpu_blocks == 1381 and log.max_concurrency == [10.79] and log.max_concurrency_tokens == 2048
    assert log.model_loading_gib == [67.7229]  # "Loading model weights took 67.7229 GB"


def test_real_worker_tags_and_cuda_graph_profile() -> None:
    log = _load("issue-gpustack-runner-251-v0.27-worker-tags.log")
    assert log.available_kv_cache_by_process == {"Worker_TP0": 6.87}
    assert log.cuda_graph_profile == CudaGraphProfile(current_utilization=0.82, equivalent_utilization=0.8048,
                                                      suggested_utilization=0.8352)


def test_real_wrapped_engine_config_lines() -> None:
    log = _load("issue-kvcached-29-v0.9.2-wrapped-engine-config.log")
    assert (log.version, log.model, log.max_seq_len) == ("0.9.2", "meta-llama/Llama-3.1-8B", 131072)
    assert log.enable_prefix_caching is False  # "enable_prefix_caching=" / "False, ..." glued
    assert "compilation_config" not in log.engine_config  # cut mid-value: dropped, not guessed
    old = _load("issue-vllm-16141-v0.8.3-wrapped-engine-config.log")
    assert old.engine_config["chunked_prefill_enabled"] is True  # "chunked_" / "prefill_enabled=True"
    assert (old.version, old.max_seq_len, old.quantization, old.dtype) == ("0.8.3", 512, "awq_marlin", "float16")


def test_real_first_free_memory_wording() -> None:
    (m,) = _load("issue-vllm-pr21489-free-memory-old-wording.log").memory_summaries
    assert (m.free_gib, m.total_gib, m.gpu_memory_utilization, m.requested_gib) == (177.66, 178.36, 0.9, 160.53)
    assert (m.weights_gib, m.peak_activation_gib, m.non_torch_gib, m.cudagraph_gib) == (8.58, 9.96, 0.07, 0.65)
    assert m.consumed_gib is None and m.kv_cache_memory_to_requested_limit == 151519866880
    assert m.kv_cache_memory_to_gpu_limit is None  # the excerpt is cut inside that number


def test_real_v0_token_wording() -> None:
    log = _load("issue-vllm-10517-v0-token-wording.log")
    err = log.capacity_error
    assert err is not None and (err.kind, err.max_model_len, err.kv_cache_tokens) == (
        "max_seq_len_tokens", 29000, 23648)
    assert log.gpu_blocks == 1478 and log.model_loading_gib == [14.9888]


def test_json_log_lines() -> None:
    log = _load("constructed-json-logging.log")
    assert log.available_kv_cache_by_process == {"EngineCore_DP0": 29.61}
    assert log.kv_cache_size_tokens == [431232] and log.max_concurrency == [13.16]
    assert log.model == "Qwen/Qwen3-8B" and log.tensor_parallel_size == 2


def test_elided_or_cut_engine_line_never_overrides_the_non_default_args() -> None:
    # hand-made on purpose: a pasted engine line elided with "..." and one cut mid-value
    log = parse_vllm_log("\n".join([
        "INFO 11-02 10:00:00 [startup.py:96] non-default args: {'model': '/root/.cache/huggingface/hub/m', "
        "'kv_cache_dtype': 'fp8', 'enable_prefix_caching': False}",
        "INFO 11-02 10:00:01 [core.py:153] Initializing a V1 LLM engine (v0.34.0) with config: "
        "model='~/.cache/huggin...', kv_cache_dtype=auto, ... enable_prefix_caching=True, max_seq_len=4096",
    ]))
    assert log.model == "/root/.cache/huggingface/hub/m"
    assert log.kv_cache_dtype == "fp8" and log.enable_prefix_caching is False
    assert log.max_seq_len == 4096  # only the engine line has it, complete
    cut = parse_vllm_log("INFO 11-02 10:00:01 [core.py:153] Initializing a V1 LLM engine (v0.34.0) with "
                         "config: max_seq_len=4096, model='~/.cache/huggin")
    assert cut.max_seq_len == 4096 and "model" not in cut.engine_config
