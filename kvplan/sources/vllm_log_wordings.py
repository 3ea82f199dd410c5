"""The vLLM log lines kvplan reads, as data: each pattern is the format string of a vLLM log call
or exception (file:line in vLLM 0.34.0 unless noted), with the older wordings beside it. The
parser (`kvplan.sources.vllm_log`) says what each one fills in."""

from __future__ import annotations

import re

# colour codes, also as pasted from a pager in caret notation ("^[[0;36m")
ANSI = re.compile(r"(?:\x1b|\^\[)\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                   r"|\x1b[@-Z\\-_]")
HEADER = re.compile(
    r"(?:\((?P<proc>[^()]*?)\s+pid=\d+[^()]*\)\s+)?"
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+"
    r"(?:\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\s+)?"  # no date with some VLLM_LOGGING_* settings
    r"\[?(?P<src>[^\]\s\[]+?):\d+\]\s?(?P<msg>.*)$"  # "file.py:12]" before 0.8
)
PREFIX_JSON = re.compile(r"^\s*(?:\((?P<proc>[^()]*?)\s+pid=\d+[^()]*\)\s*)?(?P<obj>\{.*\})\s*$")
PROC_ONLY = re.compile(r"^\s*\((?P<proc>[^()]*?)\s+pid=\d+[^()]*\)\s?(?P<msg>.*)$")

_NUM = r"(\d+(?:\.\d+)?)"
_INT = r"(\d[\d,]*)"

_V = r"v?(\d+\.\d+[\w.+\-]*?)"
VERSION_SERVER = re.compile(r"vLLM server version " + _V + r",? serving model (\S+)")  # startup.py:18
VERSION_API = re.compile(r"vLLM API server version " + _V + r"(?:\s|$)")  # vLLM <= 0.11
LOGO_VERSION = re.compile(r"█\s+version\s+" + _V + r"(?:\s|$)")  # startup.py:22 logo
LOGO_MODEL = re.compile(r"█\s+model\s+(\S+)")
ENGINE = re.compile(r"Initializing a V1 LLM engine \(v([^)\s]+)\) with config: (.*)$")  # core.py:153
NON_DEFAULT = re.compile(r"non-default args: (\{.*\})\s*$")  # startup.py:96
_SNUM = r"(-?\d+(?:\.\d+)?)"
AVAILABLE = re.compile(r"Available KV cache memory: " + _SNUM + r" GiB")  # gpu_worker.py:795
RESERVED = re.compile(r"reserved " + _NUM + r" GiB memory for KV Cache as specified by kv_cache_memory_bytes")
MODEL_LOADING = re.compile(r"Model loading took " + _NUM + r" GiB(?: memory)? and " + _NUM + r" s")  # model_runner:441
WEIGHTS_LOADING = re.compile(r"Loading model weights took " + _NUM + r" GB")  # before 0.8 ("GB" = GiB)
KV_SIZE = re.compile(r"\b(\w+(?: \+ host)?) KV cache size: " + _INT + r" tokens")  # kv_cache_utils.py:1168
CONCURRENCY = re.compile(r"Maximum concurrency for " + _INT + r" tokens per request: " + _NUM + r"x")
BLOCK = re.compile(r"Setting attention block size to (\d+) tokens")  # platforms/interface.py:1120, :934
MAMBA_PAD = re.compile(r"Padding mamba page size by " + _NUM + r"% to ensure")  # interface.py:1144
PAD_LAYERS = re.compile(r"Add (\d+) padding layers, may waste at most " + _NUM + r"% KV cache memory")
GRAPHS = re.compile(r"(?<!Encoder )(?<!encoder )Graph capturing finished in " + _NUM + r" secs, took "
                     + r"(-?\d+(?:\.\d+)?) GiB")  # gpu/model_runner.py:1216
GRAPH_POOL = re.compile(r"CUDA graph pool memory: " + _NUM + r" GiB \(actual\), " + _NUM
                         + r" GiB \(estimated\)")  # gpu_worker.py:1112
GRAPH_PROFILE = re.compile(r"The current --gpu-memory-utilization=" + _NUM + r" is equivalent to "
                            r"--gpu-memory-utilization=" + _NUM + r" without CUDA graph memory profiling\..*?"
                            r"increase --gpu-memory-utilization to " + _NUM)  # gpu_worker.py:809
# gpu_worker.py:1175 (0.2x–0.34): "Actual usage is C GiB for consumed memory (weights + non-torch),
# A GiB for peak activation, and G GiB for CUDAGraph memory."; before: "Actual usage is W GiB for
# weight, A GiB for peak activation, N GiB for non-torch memory, and G GiB for CUDAGraph memory."
SUMMARY = re.compile(
    r"Free memory on device \(" + _NUM + "/" + _NUM + r" GiB\) on startup\. Desired GPU memory "
    r"utilization is \(" + _NUM + ", " + _NUM + r" GiB\)\. Actual usage is "
    r"(?:" + _SNUM + r" GiB for consumed memory \(weights \+ non-torch\), " + _SNUM
    + r" GiB for peak activation, and "
    r"|" + _SNUM + r" GiB for weight, " + _SNUM + r" GiB for peak activation, " + _SNUM
    + r" GiB for non-torch memory, and )"
    + _SNUM + r" GiB for CUDAGraph memory\.(?: Replace gpu_memory_utilization config with "
    r"`--kv-cache-memory=(-?\d+)`(?:.*?`--kv-cache-memory=(-?\d+)`(?:.*?Current kv cache memory "
    r"in use is " + _SNUM + " GiB)?)?)?"  # the tail is often cut when pasted
)
AUTO_FIT = re.compile(r"(?:Auto-fit max_model_len: reduced from \d+ to (\d+)"
                       r"|--max-model-len auto reduced max_model_len from \d+ to (\d+)"
                       r"|Auto-fit max_model_len: (?:full model context length|using max_model_len=) ?(\d+))")
CAPACITY = re.compile(
    r"To serve at least one request with the models?'s max seq len \((\d+)\), \(" + _NUM
    + r" GiB KV cache is needed, which is larger than the available KV cache memory \(" + _SNUM
    + r" GiB\)\.(?:\s+Based on the available memory,\s+the estimated maximum model length is (\d+)\.)?"
)  # kv_cache_planning.py:124 (0.34), kv_cache_utils.py:926 (0.31); "models's" until ~0.10
CAPACITY_START = "To serve at least one request with the model"
# V0 engine (≤ 0.10 without VLLM_USE_V1): tokens, not GiB
CAPACITY_V0 = re.compile(r"The model's max seq len \((\d+)\) is larger than the maximum number of "
                          r"tokens that can be stored in KV cache \((\d+)\)")
GPU_BLOCKS = re.compile(r"# GPU blocks: (\d+)")  # V1 before 0.8 (kv_cache_utils.py)
NO_MEMORY = re.compile(r"No available memory for the cache blocks\.")  # kv_cache_planning.py:107
NO_AUTO_FIT = re.compile(r"Cannot auto-fit max_model_len: not enough GPU memory available")  # :1433
