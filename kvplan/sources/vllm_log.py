"""Read a vLLM server startup log (v0.31–0.34 formats) and pull out the KV-cache numbers.

Every pattern it matches is the format string of a vLLM log call or exception, kept as data in
`vllm_log_wordings` (file:line in vLLM 0.34.0 unless noted). Lines look like

    (EngineCore pid=123) INFO 11-02 10:00:00 [gpu_worker.py:795] Available KV cache memory: 32.0 GiB
    INFO 11-02 10:00:00 [gpu_worker.py:795] Available KV cache memory: 32.0 GiB

(vllm/logger.py:28 `_FORMAT`, optional `VLLM_LOGGING_PREFIX`, colour codes from
vllm/logging_utils/formatter.py `ColoredFormatter`), possibly behind `docker logs -t` / journald
prefixes. Unrecognised lines are skipped. Values are never `eval`ed: Python reprs go through
`ast.literal_eval`, one value at a time.
"""

from __future__ import annotations

import json
import re
from typing import Any

from kvplan.errors import InputError
from kvplan.frozen import Frozen
from kvplan.sources.pyrepr import parse_dict_repr, parse_kv_list, split_top, unbalanced
from kvplan.sources.vllm_log_wordings import (
    ANSI,
    AUTO_FIT,
    AVAILABLE,
    BLOCK,
    CAPACITY,
    CAPACITY_START,
    CAPACITY_V0,
    CONCURRENCY,
    ENGINE,
    GPU_BLOCKS,
    GRAPH_POOL,
    GRAPH_PROFILE,
    GRAPHS,
    HEADER,
    KV_SIZE,
    LOGO_MODEL,
    LOGO_VERSION,
    MAMBA_PAD,
    MODEL_LOADING,
    NO_AUTO_FIT,
    NO_MEMORY,
    NON_DEFAULT,
    PAD_LAYERS,
    PREFIX_JSON,
    PROC_ONLY,
    RESERVED,
    SUMMARY,
    VERSION_API,
    VERSION_SERVER,
    WEIGHTS_LOADING,
)

__all__ = ["CapacityError", "CudaGraphProfile", "MemorySummary", "PaddingLayers", "VllmLog", "parse_vllm_log"]


class LoggedMemory(Frozen):
    """What a vLLM start-up log says about one worker's memory, GiB as logged (2 decimals).
    `consumed_gib` is the 0.2x+ wording (weights + non-torch); older logs split the two."""

    total_gib: float | None = None
    gpu_memory_utilization: float | None = None
    requested_gib: float | None = None
    weights_gib: float | None = None
    consumed_gib: float | None = None
    non_torch_gib: float | None = None
    peak_activation_gib: float | None = None
    cudagraph_gib: float | None = None
    available_kv_gib: float | None = None


class CapacityError(Frozen):
    """The KV-cache startup failure (v1/core/kv_cache_planning.py:99 `_check_enough_kv_cache_memory`,
    :1433 auto-fit). `kind`: "max_seq_len" (To serve at least one request ...), "no_memory"
    (No available memory for the cache blocks ...), "auto_fit" (Cannot auto-fit max_model_len ...),
    "max_seq_len_tokens" (V0: The model's max seq len (N) is larger than the maximum number of
    tokens that can be stored in KV cache (M))."""

    kind: str
    message: str
    max_model_len: int | None = None
    needed_gib: float | None = None
    available_gib: float | None = None
    estimated_max_model_len: int | None = None
    kv_cache_tokens: int | None = None  # "max_seq_len_tokens" (V0 wording): the cache's capacity


class PaddingLayers(Frozen):
    """`Add N padding layers, may waste at most P% KV cache memory` (kv_cache_planning.py:583)."""

    count: int
    waste_pct: float


class CudaGraphProfile(Frozen):
    """gpu_worker.py:809: `The current --gpu-memory-utilization=A is equivalent to
    --gpu-memory-utilization=B without CUDA graph memory profiling ... increase ... to C`."""

    current_utilization: float
    equivalent_utilization: float
    suggested_utilization: float


class MemorySummary(Frozen):
    """gpu_worker.py:1175 `Free memory on device (F/T GiB) on startup. Desired GPU memory
    utilization is (U, R GiB). Actual usage is W GiB for consumed memory (weights + non-torch), A GiB
    for peak activation, and G GiB for CUDAGraph memory. Replace gpu_memory_utilization config with
    `--kv-cache-memory=N` ... `--kv-cache-memory=M` ... Current kv cache memory in use is K GiB.`"""

    free_gib: float
    total_gib: float
    gpu_memory_utilization: float
    requested_gib: float
    consumed_gib: float | None  # "for consumed memory (weights + non-torch)" (0.2x+)
    peak_activation_gib: float
    cudagraph_gib: float
    weights_gib: float | None = None  # older wording: "for weight, ... for non-torch memory"
    non_torch_gib: float | None = None
    kv_cache_memory_to_requested_limit: int | None  # None: the pasted line was cut before it
    kv_cache_memory_to_gpu_limit: int | None
    kv_cache_in_use_gib: float | None


class VllmLog(Frozen):
    """What a vLLM startup log says about the deployment and its KV cache.

    Lists hold one entry per matching line in log order (one per worker for the per-worker lines:
    `Available KV cache memory`, `Model loading took`); `*_by_process` key them by the log's process
    name (`Worker_TP0`, `EngineCore`, ...) when the lines carry one.
    """

    version: str | None = None
    model: str | None = None
    non_default_args: dict[str, Any] = {}
    engine_config: dict[str, Any] = {}
    # Fields of the `Initializing a V1 LLM engine (vX) with config:` line (config/vllm.py:2890).
    max_seq_len: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    decode_context_parallel_size: int | None = None
    kv_cache_dtype: str | None = None
    quantization: str | None = None
    dtype: str | None = None
    enable_prefix_caching: bool | None = None
    block_size: int | None = None  # --block-size from the non-default args (the config line has none)
    speculative_config: dict[str, Any] | None = None
    # Memory and capacity lines.
    available_kv_cache_gib: list[float] = []
    available_kv_cache_by_process: dict[str, float] = {}
    kv_cache_memory_reserved_gib: list[float] = []  # gpu_worker.py:708 (--kv-cache-memory-bytes)
    model_loading_gib: list[float] = []
    model_loading_seconds: list[float] = []
    model_loading_by_process: dict[str, float] = {}
    kv_cache_size_tokens: list[int] = []
    gpu_blocks: int | None = None  # "# GPU blocks: N" (V1 before 0.8)
    max_concurrency: list[float] = []
    max_concurrency_tokens: int | None = None
    attention_block_size: int | None = None
    mamba_padding_pct: float | None = None
    padding_layers: list[PaddingLayers] = []
    auto_fit_max_model_len: int | None = None
    capacity_error: CapacityError | None = None
    cuda_graph_capture_gib: list[float] = []
    cuda_graph_capture_seconds: list[float] = []
    cuda_graph_pool_actual_gib: list[float] = []
    cuda_graph_pool_estimated_gib: list[float] = []
    cuda_graph_profile: CudaGraphProfile | None = None
    memory_summaries: list[MemorySummary] = []
    lines: int = 0
    matched_lines: int = 0

    @property
    def limiting_available_kv_cache_gib(self) -> float | None:
        """The smallest per-worker KV budget (vLLM sizes every worker to the limiting one)."""
        pool = self.available_kv_cache_gib or self.kv_cache_memory_reserved_gib
        return min(pool) if pool else None

    @property
    def memory(self) -> LoggedMemory | None:
        """The memory terms of the limiting worker as logged (the one with the least KV memory),
        or None if the log has none of the memory lines."""
        summary = min(self.memory_summaries, default=None,
                      key=lambda m: m.kv_cache_in_use_gib if m.kv_cache_in_use_gib is not None else 0)
        weights = max(self.model_loading_gib, default=None)
        available = self.limiting_available_kv_cache_gib
        if summary is None and weights is None and available is None:
            return None
        if summary is None:
            return LoggedMemory(weights_gib=weights, available_kv_gib=available)
        return LoggedMemory(
            total_gib=summary.total_gib, gpu_memory_utilization=summary.gpu_memory_utilization,
            requested_gib=summary.requested_gib, weights_gib=summary.weights_gib or weights,
            consumed_gib=summary.consumed_gib, non_torch_gib=summary.non_torch_gib,
            peak_activation_gib=summary.peak_activation_gib, cudagraph_gib=summary.cudagraph_gib,
            available_kv_gib=available if available is not None else summary.kv_cache_in_use_gib)

    @property
    def started(self) -> bool | None:
        """True if the KV cache was sized (capacity line seen), False on a capacity error, else None."""
        if self.capacity_error is not None:
            return False
        return True if self.kv_cache_size_tokens else None


# ---------------------------------------------------------------------------------------------
# Line layer (the wordings are data: vllm_log_wordings)


def _decode(text: str | bytes) -> str:
    if isinstance(text, bytes | bytearray):
        if b"\x00" in text:
            raise InputError("the log is binary data, not text", hint="pass the vLLM server's stdout/stderr as text")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            bad = e.object[e.start:e.start + 1]
            raise InputError(f"the log is not UTF-8 text (byte {e.start}: {bad!r})",
                             hint="pass the vLLM server's stdout/stderr as saved text (e.g. `... 2>&1 | tee x.log`)"
                             ) from None
    if not isinstance(text, str):
        raise InputError(f"expected the log as text, got {type(text).__name__}")
    if "\x00" in text:
        raise InputError("the log is binary data, not text", hint="pass the vLLM server's stdout/stderr as text")
    if re.search(r"[\ud800-\udfff]", text):
        raise InputError("the log is not valid UTF-8 text (undecodable bytes)",
                         hint="pass the vLLM server's stdout/stderr as saved text")
    sample = text[:65536]
    control = sum(1 for c in sample if (ord(c) < 32 and c not in "\t\n\r\x1b\x0c\x0b") or c == "\ufffd")
    if sample and control > max(8, len(sample) // 20):
        raise InputError("the log looks like binary data, not text",
                         hint="pass the vLLM server's stdout/stderr as text")
    return text.lstrip("\ufeff")


def _split_line(raw: str) -> tuple[str | None, str]:
    """(process name or None, message) of one log line; JSON lines (VLLM_LOGGING_CONFIG_PATH
    with a JSON formatter, e.g. python-json-logger) give their "message"."""
    if "{" in raw and (j := PREFIX_JSON.match(raw)):
        try:
            obj = json.loads(j.group("obj"))
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            msg = obj.get("message", obj.get("msg"))
            if isinstance(msg, str):
                proc = j.group("proc") or obj.get("vllm_process_name") or obj.get("processName")
                inner = _split_line(msg) if "\n" not in msg else (None, msg)
                return (inner[0] or (proc if isinstance(proc, str) else None)), inner[1]
    m = HEADER.search(raw)
    if m:
        return m.group("proc"), m.group("msg")
    m = PROC_ONLY.match(raw)
    if m:
        return m.group("proc"), m.group("msg")
    return None, raw



def _num(s: str) -> float:
    return float(s)


def _int(s: str) -> int:
    return int(s.replace(",", ""))


# ---------------------------------------------------------------------------------------------


def parse_vllm_log(text: str | bytes) -> VllmLog:
    """Parse a vLLM server startup log. InputError if it is binary / not UTF-8, or has none of the
    startup lines (version, engine config, non-default args, KV memory, KV cache size, capacity
    error, model loading, block-size / padding, CUDA graph capture)."""
    text = _decode(text)
    f: dict[str, Any] = {
        "non_default_args": {}, "engine_config": {}, "available_kv_cache_gib": [],
        "available_kv_cache_by_process": {}, "kv_cache_memory_reserved_gib": [], "model_loading_gib": [],
        "model_loading_seconds": [], "model_loading_by_process": {}, "kv_cache_size_tokens": [],
        "max_concurrency": [], "padding_layers": [], "cuda_graph_capture_gib": [],
        "cuda_graph_capture_seconds": [], "cuda_graph_pool_actual_gib": [], "cuda_graph_pool_estimated_gib": [],
        "memory_summaries": [],
    }
    models: dict[str, str] = {}
    lines = ANSI.sub("", text).splitlines()
    matched = 0
    for proc, msg in _records(lines):
        if _parse_message(proc, msg, f, models):
            matched += 1

    if not matched:
        raise InputError("this does not look like a vLLM startup log",
                         hint="pass the server's full stdout/stderr from `vllm serve ...` (INFO level), "
                              "e.g. `vllm serve MODEL ... 2>&1 | tee vllm.log`")

    cfg = f["engine_config"]
    nda = f["non_default_args"]

    def cfg_int(key: str) -> int | None:
        v = cfg.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    def cfg_str(key: str) -> str | None:
        v = cfg.get(key)
        return None if v is None else str(v)

    from_cfg: dict[str, Any] = {}
    if cfg:
        from_cfg["max_seq_len"] = cfg_int("max_seq_len")
        for key in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                    "decode_context_parallel_size"):
            from_cfg[key] = cfg_int(key)
        from_cfg["kv_cache_dtype"] = cfg_str("kv_cache_dtype") or cfg_str("cache_dtype")
        from_cfg["quantization"] = cfg_str("quantization")
        dtype = cfg_str("dtype")
        from_cfg["dtype"] = dtype.removeprefix("torch.") if dtype else None
        epc = cfg.get("enable_prefix_caching")
        from_cfg["enable_prefix_caching"] = epc if isinstance(epc, bool) else None
        spec = cfg.get("speculative_config")
        if isinstance(spec, dict):
            spec = dict(spec)
            if "num_spec_tokens" in spec:
                spec["num_speculative_tokens"] = spec.pop("num_spec_tokens")
            from_cfg["speculative_config"] = spec
        from_cfg["model"] = cfg.get("model") if isinstance(cfg.get("model"), str) else None
    # The non-default args line is one complete dict repr: what the user set wins over the
    # engine-config line (long, often cut or elided when pasted); "auto" values do not.
    args = {"max_seq_len": "max_model_len", "tensor_parallel_size": "tensor_parallel_size",
            "pipeline_parallel_size": "pipeline_parallel_size", "data_parallel_size": "data_parallel_size",
            "decode_context_parallel_size": "decode_context_parallel_size", "kv_cache_dtype": "kv_cache_dtype",
            "quantization": "quantization", "dtype": "dtype", "enable_prefix_caching": "enable_prefix_caching",
            "speculative_config": "speculative_config", "block_size": "block_size", "model": "model"}
    ints = ("max_seq_len", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
            "decode_context_parallel_size", "block_size")
    for field, arg in args.items():
        v = nda.get(arg)
        if field == "model" and not isinstance(v, str):
            v = nda.get("model_tag")
        usable = v is not None and v not in ("auto", -1) and (
            (field != "speculative_config" or isinstance(v, dict))
            and (field not in ints or (isinstance(v, int) and not isinstance(v, bool)))
            and (field != "model" or isinstance(v, str)))
        f[field] = v if usable else from_cfg.get(field)
    f["model"] = f.get("model") or models.get("version")
    f["lines"] = len(lines)
    f["matched_lines"] = matched
    return VllmLog(**f)


def _records(lines: list[str]) -> Any:
    """(process, message) per log record. A key message that a terminal wrapped onto several
    lines (the continuation lines carry no header) is glued back together, without a separator:
    a terminal cuts at a fixed column, mid-word."""
    i, n = 0, len(lines)
    while i < n:
        raw = lines[i][:1_000_000]
        i += 1
        if raw.lstrip().startswith("#") and not raw.lstrip().startswith("# GPU blocks"):
            continue  # comments (vLLM starts no line with '#' but its old "# GPU blocks: N")
        proc, msg = _split_line(raw)
        glued = 0
        while _is_cut(msg) and i < n and glued < 400 and lines[i].strip() \
                and not _has_header(lines[i]):
            msg += lines[i][:1_000_000]
            i += 1
            glued += 1
        yield proc, msg


def _has_header(line: str) -> bool:
    return bool(HEADER.search(line) or PROC_ONLY.match(line) or line.lstrip().startswith("{"))


def _is_cut(msg: str) -> bool:
    """A key message whose end is missing (so the next header-less line continues it)."""
    if CAPACITY_START in msg:
        return not re.search(r"(?:for more details|when initializing the engine)\.?\s*$", msg)
    if "non-default args: {" in msg:
        return not NON_DEFAULT.search(msg)
    if "Free memory on device (" in msg:
        return "Current kv cache memory in use is" not in msg or not msg.rstrip().endswith(".")
    if "Initializing a V1 LLM engine" in msg and " with config: " in msg:
        body = msg.split(" with config: ", 1)[1].rstrip()
        return not body or body[-1] in "=," or unbalanced(body) or "=" not in split_top(body)[-1]
    return False


def _parse_message(proc: str | None, msg: str, f: dict[str, Any], models: dict[str, str]) -> bool:
    """Update `f` from one log message; True if the message was recognised."""
    if "version" in msg:
        m = VERSION_SERVER.search(msg)
        if m:
            f.setdefault("version", m.group(1))
            models.setdefault("version", m.group(2))
            return True
        m = VERSION_API.search(msg) or LOGO_VERSION.search(msg)
        if m:
            f.setdefault("version", m.group(1))
            return True
    if "█" in msg:
        m = LOGO_MODEL.search(msg)
        if m:
            models.setdefault("version", m.group(1))
            return True
    if "LLM engine" in msg:
        m = ENGINE.search(msg)
        if m:
            f.setdefault("version", m.group(1).removeprefix("v"))
            if not f["engine_config"]:
                f["engine_config"] = parse_kv_list(m.group(2))
            return True
    if "non-default args" in msg:
        m = NON_DEFAULT.search(msg)
        if m:
            if not f["non_default_args"]:
                f["non_default_args"] = parse_dict_repr(m.group(1))
            return True
    if "GiB" in msg or "GB" in msg:
        if m := AVAILABLE.search(msg):
            gib = _num(m.group(1))
            f["available_kv_cache_gib"].append(gib)
            if proc:
                f["available_kv_cache_by_process"][proc] = gib
            return True
        if m := RESERVED.search(msg):
            f["kv_cache_memory_reserved_gib"].append(_num(m.group(1)))
            return True
        if m := MODEL_LOADING.search(msg):
            f["model_loading_gib"].append(_num(m.group(1)))
            f["model_loading_seconds"].append(_num(m.group(2)))
            if proc:
                f["model_loading_by_process"][proc] = _num(m.group(1))
            return True
        if m := WEIGHTS_LOADING.search(msg):
            f["model_loading_gib"].append(_num(m.group(1)))
            if proc:
                f["model_loading_by_process"][proc] = _num(m.group(1))
            return True
        if m := GRAPHS.search(msg):
            f["cuda_graph_capture_seconds"].append(_num(m.group(1)))
            f["cuda_graph_capture_gib"].append(float(m.group(2)))
            return True
        if m := GRAPH_POOL.search(msg):
            f["cuda_graph_pool_actual_gib"].append(_num(m.group(1)))
            f["cuda_graph_pool_estimated_gib"].append(_num(m.group(2)))
            return True
        if m := SUMMARY.search(msg):
            g: list[str | None] = list(m.groups())

            def opt(i: int) -> float | None:
                v = g[i]
                return None if v is None else float(v)

            def num(i: int) -> float:  # a group every wording has
                return float(g[i] or "nan")

            new_wording = g[4] is not None
            f["memory_summaries"].append(MemorySummary(
                free_gib=num(0), total_gib=num(1), gpu_memory_utilization=num(2),
                requested_gib=num(3), consumed_gib=opt(4),
                peak_activation_gib=num(5 if new_wording else 7),
                weights_gib=opt(6), non_torch_gib=opt(8), cudagraph_gib=num(9),
                kv_cache_memory_to_requested_limit=None if g[10] is None else int(g[10]),
                kv_cache_memory_to_gpu_limit=None if g[11] is None else int(g[11]),
                kv_cache_in_use_gib=opt(12)))
            return True
    if "The model's max seq len (" in msg and (m := CAPACITY_V0.search(msg)):
        if f.get("capacity_error") is None:
            f["capacity_error"] = CapacityError(
                kind="max_seq_len_tokens", message=msg[m.start():].rstrip(),
                max_model_len=int(m.group(1)), kv_cache_tokens=int(m.group(2)))
        return True
    if "To serve at least one request" in msg:
        if f.get("capacity_error") is None:
            start = msg.index("To serve at least one request")
            message = msg[start:].rstrip()
            m = CAPACITY.search(message)
            f["capacity_error"] = CapacityError(
                kind="max_seq_len", message=message,
                max_model_len=int(m.group(1)) if m else None,
                needed_gib=float(m.group(2)) if m else None,
                available_gib=float(m.group(3)) if m else None,
                estimated_max_model_len=int(m.group(4)) if m and m.group(4) else None)
        return True
    for pattern, kind in ((NO_MEMORY, "no_memory"), (NO_AUTO_FIT, "auto_fit")):
        m = pattern.search(msg)
        if m:
            if f.get("capacity_error") is None:
                f["capacity_error"] = CapacityError(kind=kind, message=msg[m.start():].rstrip())
            return True
    matched = False
    if "KV cache size" in msg and (m := KV_SIZE.search(msg)):
        f["kv_cache_size_tokens"].append(_int(m.group(2)))
        matched = True
    if "# GPU blocks" in msg and (m := GPU_BLOCKS.search(msg)):
        f["gpu_blocks"] = int(m.group(1))
        matched = True
    if "Maximum concurrency" in msg and (m := CONCURRENCY.search(msg)):
        f["max_concurrency_tokens"] = _int(m.group(1))
        f["max_concurrency"].append(_num(m.group(2)))
        matched = True
    if matched:
        return True
    if m := BLOCK.search(msg):
        f["attention_block_size"] = int(m.group(1))
        return True
    if m := MAMBA_PAD.search(msg):
        f["mamba_padding_pct"] = _num(m.group(1))
        return True
    if m := PAD_LAYERS.search(msg):
        f["padding_layers"].append(PaddingLayers(count=int(m.group(1)), waste_pct=_num(m.group(2))))
        return True
    if "max_model_len" in msg or "max-model-len" in msg:
        m = AUTO_FIT.search(msg)
        if m:
            f["auto_fit_max_model_len"] = int(next(g for g in m.groups() if g))
            return True
    if m := GRAPH_PROFILE.search(msg):
        f["cuda_graph_profile"] = CudaGraphProfile(current_utilization=_num(m.group(1)),
                                                   equivalent_utilization=_num(m.group(2)),
                                                   suggested_utilization=_num(m.group(3)))
        return True
    return False
