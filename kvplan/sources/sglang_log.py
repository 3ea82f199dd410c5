"""Read an SGLang server start-up log: the memory it had and the pools it sized.

The lines SGLang prints while it starts (wordings of 0.4 – 0.5.23; each regex names its source):

* `server_args=ServerArgs(model_path='…', mem_fraction_static=0.88, tp_size=1, …)`
  (`launch_server` / `Engine`: the repr of `ServerArgs`; `mem_fraction_static` is resolved there
  in 0.4 – 0.5.x, may be None in later logs of the raw arguments);
* `Load weight begin. avail mem=78.81 GB` (model_runner.load_model: the free memory before the
  weights, `get_available_gpu_memory`, GiB printed as "GB"); a second one per rank loads a draft;
* `Load weight end. [elapsed=… s, ]type=LlamaForCausalLM, dtype=…, avail mem=63.72 GB[, mem
  usage=15.11 GB].` (the free memory after the weights);
* `KV Cache is allocated. [dtype: torch.bfloat16, ]#tokens: 444500, K size: 27.13 GB, V size:
  27.13 GB` (memory_pool `_finalize_allocation_log`; 0.4.1 printed no `#tokens`; MLA pools
  print `KV size:`), `SWAKVPool mem usage: … GB, swa size: N, full size: M`,
  `Mamba Cache is allocated. max_mamba_cache_size: N, …`;
* `max_total_num_tokens=444500, [chunked_prefill_size=…, ]max_prefill_tokens=…,
  max_running_requests=…, context_len=…[, available_gpu_mem=… GB]` (scheduler.py);
* SGLang's start-up errors (`RuntimeError: Not enough memory. …`, `ValueError: …`) and the
  warning `KV pool holds N tokens, fewer than --context-length M. …` (tp_worker).

Lines carry a `[YYYY-MM-DD HH:MM:SS TPn]` prefix (also `DPn`, `PPn`, `EPn` tags; none for the
main process); a docker-compose or journald prefix before it is skipped. With several ranks the
free memory is the minimum over them, as SGLang's distributed `get_available_gpu_memory` takes it.
"""

from __future__ import annotations

import re
from typing import Any

from kvplan.errors import InputError
from kvplan.frozen import Frozen
from kvplan.sources.pyrepr import parse_kv_list, unbalanced

_PREFIX = re.compile(r"\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)"
                     r"(?P<tags>(?: [A-Z]{2,4}\d+)*)\] ")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\^\[\[[0-9;]*[A-Za-z]")
_GB = r"(-?\d+(?:\.\d+)?) ?GB"
_BEGIN = re.compile(r"Load weight begin\. avail mem=" + _GB)
_END = re.compile(r"Load weight end\..*?\bavail mem=" + _GB + r"(?:, mem usage=" + _GB + ")?")
_END_TYPE = re.compile(r"\btype=(\w+)")
_KV = re.compile(r"\bKV Cache is allocated\.(?: dtype: (?P<dtype>[\w.]+),)?"
                 r"(?: #tokens: (?P<tokens>\d+),)?"
                 r"(?: K size: (?P<k>[\d.]+) GB, V size: (?P<v>[\d.]+) GB| KV size: (?P<kv>[\d.]+) GB)?")
_SWA = re.compile(r"SWAKVPool mem usage: ([\d.]+) GB, swa size: (\d+), full size: (\d+)")
_MAMBA = re.compile(r"Mamba Cache is allocated\. max_mamba_cache_size: (\d+)")
_CAPACITY = re.compile(r"\bmax_total_num_tokens=(\d+)(?P<rest>(?:, \w+=[^,]+)*)")
_BELOW_CONTEXT = re.compile(r"KV pool holds (\d+) tokens, fewer than --context-length (\d+)\.")
_ERROR = re.compile(r"\b(RuntimeError|ValueError|torch\.OutOfMemoryError|"
                    r"torch\.cuda\.OutOfMemoryError): (.+)$")
_SERVER_ARGS = "server_args=ServerArgs("


class SglangLog(Frozen):
    """What an SGLang start-up log states (None: not in the log). Memory in GiB, as SGLang's
    "GB" is (`get_available_gpu_memory` divides by 2**30)."""

    model: str | None = None  # server_args' model_path
    server_args: dict[str, Any] = {}
    mem_fraction_static: float | None = None
    tp_size: int | None = None
    pp_size: int | None = None
    dp_size: int | None = None
    ranks: list[str] = []  # the rank tags seen (TP0, TP1, …)
    model_class: str | None = None  # "type=…" of the target's "Load weight end"
    pre_model_load_gib: float | None = None  # min over ranks, the target's "Load weight begin"
    post_load_gib: float | None = None  # min over ranks, free after the last weights loaded
    weights_gib: float | None = None  # the target's "mem usage" (max over ranks)
    draft_loaded: bool = False  # a second "Load weight begin" on a rank (a draft model)
    kv_tokens: int | None = None  # "KV Cache is allocated. #tokens: N" (the first pool)
    kv_dtype: str | None = None
    kv_size_gib: float | None = None  # K + V (or KV) of the first pool
    swa_tokens: int | None = None
    full_tokens: int | None = None
    max_mamba_cache_size: int | None = None
    max_total_num_tokens: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    max_running_requests: int | None = None
    context_len: int | None = None
    errors: list[str] = []  # SGLang's start-up errors, "Type: message"
    warnings: list[str] = []


def _decode(text: str | bytes) -> str:
    if isinstance(text, bytes | bytearray):
        if b"\x00" in text:
            raise InputError("the log is binary data, not text",
                             hint="pass the SGLang server's stdout/stderr as text")
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"the log is not UTF-8 text (byte {e.start})",
                             hint="pass the SGLang server's output as saved text") from None
    if "\x00" in text:
        raise InputError("the log is binary data, not text",
                         hint="pass the SGLang server's stdout/stderr as text")
    return text.lstrip("\ufeff")


def looks_like_sglang_log(text: str | bytes) -> bool:
    """Whether a log is SGLang's (its start-up lines), not vLLM's."""
    sample = text[:2_000_000]
    if isinstance(sample, bytes | bytearray):
        sample = bytes(sample).decode("utf-8", "replace")
    return any(s in sample for s in ("Load weight begin. avail mem=", "KV Cache is allocated.",
                                     "max_total_num_tokens=", _SERVER_ARGS, "SWAKVPool mem usage"))


def _split(raw: str) -> tuple[str, str]:
    """(rank tag, message) of one line: 'TP0', 'DP1 TP3' or '' for the main process."""
    line = _ANSI.sub("", raw).rstrip("\r")
    m = _PREFIX.search(line)
    if m:
        return m.group("tags").strip(), line[m.end():]
    return "", line


def _int(v: Any) -> int | None:
    try:
        return int(str(v).strip())
    except ValueError:
        return None


def parse_sglang_log(text: str | bytes) -> SglangLog:
    """Parse an SGLang start-up log. InputError if it is not text or has none of SGLang's
    start-up lines."""
    lines = _decode(text).splitlines()
    if not looks_like_sglang_log("\n".join(lines[:200_000])):
        raise InputError("no SGLang start-up lines in the log",
                         hint="expected SGLang's 'Load weight begin. avail mem=', 'KV Cache is "
                              "allocated.' or 'max_total_num_tokens=' lines")
    f: dict[str, Any] = {}
    begins: dict[str, list[float]] = {}  # rank → "Load weight begin" values in order
    ends: dict[str, list[tuple[float, float | None]]] = {}
    ends_before_kv: dict[str, int] = {}  # rank → how many load ends before its first KV pool
    errors: list[str] = []
    warnings: list[str] = []
    ranks: dict[str, None] = {}
    i = 0
    while i < len(lines):
        tag, msg = _split(lines[i])
        i += 1
        if tag:
            ranks[tag] = None
        if _SERVER_ARGS in msg and "server_args" not in f:
            body = msg[msg.index(_SERVER_ARGS) + len(_SERVER_ARGS):]
            joined = 0
            while unbalanced("(" + body) and i < len(lines) and joined < 50:
                body += _split(lines[i])[1]  # a terminal-wrapped repr
                i += 1
                joined += 1
            body = body.rstrip()
            if body.endswith(")"):
                body = body[:-1]
            f["server_args"] = parse_kv_list(body)
            continue
        if m := _BEGIN.search(msg):
            begins.setdefault(tag, []).append(float(m.group(1)))
            continue
        if m := _END.search(msg):
            ends.setdefault(tag, []).append(
                (float(m.group(1)), float(m.group(2)) if m.group(2) else None))
            if "model_class" not in f and (t := _END_TYPE.search(msg)):
                f["model_class"] = t.group(1)
            continue
        if (m := _KV.search(msg)) and "VA upper bound" not in msg:
            if tag not in ends_before_kv:
                ends_before_kv[tag] = len(ends.get(tag, []))
            if "kv_tokens" not in f and m.group("tokens"):
                f["kv_tokens"] = int(m.group("tokens"))
            if "kv_size_gib" not in f and (m.group("k") or m.group("kv")):
                f["kv_size_gib"] = (float(m.group("k")) + float(m.group("v")) if m.group("k")
                                    else float(m.group("kv")))
                if m.group("dtype"):
                    f["kv_dtype"] = m.group("dtype").removeprefix("torch.")
            continue
        if (m := _SWA.search(msg)) and "swa_tokens" not in f:
            f["swa_tokens"], f["full_tokens"] = int(m.group(2)), int(m.group(3))
            if tag not in ends_before_kv:
                ends_before_kv[tag] = len(ends.get(tag, []))
            continue
        if (m := _MAMBA.search(msg)) and "max_mamba_cache_size" not in f:
            f["max_mamba_cache_size"] = int(m.group(1))
            continue
        if (m := _CAPACITY.search(msg)) and "max_total_num_tokens" not in f:
            f["max_total_num_tokens"] = int(m.group(1))
            for part in m.group("rest").split(","):
                key, _, value = part.strip().partition("=")
                if key in ("chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
                           "context_len"):
                    f[key] = _int(value)
            continue
        if m := _BELOW_CONTEXT.search(msg):
            warnings.append(msg[m.start():].strip())
            continue
        if m := _ERROR.search(msg):
            text_ = f"{m.group(1)}: {m.group(2).strip()}"
            if text_ not in errors:
                errors.append(text_)
    sa = f.get("server_args", {})
    pre = [v[0] for v in begins.values() if v]
    if pre:
        f["pre_model_load_gib"] = min(pre)
    posts, weights = [], []
    for tag, values in ends.items():
        upto = ends_before_kv.get(tag, len(values)) or len(values)
        posts.append(values[:upto][-1][0])
        if values[0][1] is not None:
            weights.append(values[0][1])
    if posts:
        f["post_load_gib"] = min(posts)
    if weights:
        f["weights_gib"] = max(weights)
    mfs = sa.get("mem_fraction_static")
    return SglangLog(
        **{k: v for k, v in f.items() if k != "server_args"}, server_args=sa,
        model=sa.get("model_path") if isinstance(sa.get("model_path"), str) else None,
        mem_fraction_static=float(mfs) if isinstance(mfs, int | float) else None,
        tp_size=_int(sa["tp_size"]) if "tp_size" in sa else None,
        pp_size=_int(sa["pp_size"]) if "pp_size" in sa else None,
        dp_size=_int(sa["dp_size"]) if "dp_size" in sa else None,
        ranks=sorted(ranks), draft_loaded=any(len(v) > 1 for v in begins.values()),
        errors=errors, warnings=list(dict.fromkeys(warnings)))
