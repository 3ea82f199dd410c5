"""Dtype sizes, integer helpers and vLLM's GiB rounding. No guessing: unknown → error."""

from __future__ import annotations

import math
import re
from enum import StrEnum

from kvplan.errors import InputError

GiB = 1 << 30
MiB = 1 << 20


def cdiv(a: int, b: int) -> int:
    """vLLM: utils.math_utils.cdiv (ceil division)."""
    return -(a // -b)


def round_up(x: int, multiple: int) -> int:
    """vLLM: utils.math_utils.round_up."""
    return cdiv(x, multiple) * multiple


def lcm(*xs: int) -> int:
    return math.lcm(*xs) if xs else 1


def format_gib(num_bytes: int) -> str:
    """vLLM: utils.mem_utils.format_gib — f"{round(b / GiB, 2)}" (prints 41.1, not 41.10)."""
    return f"{round(num_bytes / GiB, 2)}"


class KVQuantMode(StrEnum):
    """vLLM: kv_cache_interface.KVQuantMode (the members kvplan can size)."""

    NONE = "NONE"
    FP8_PER_TENSOR = "FP8_PER_TENSOR"
    INT8_PER_TOKEN_HEAD = "INT8_PER_TOKEN_HEAD"
    FP8_PER_TOKEN_HEAD = "FP8_PER_TOKEN_HEAD"
    INT4_PER_TOKEN_HEAD = "INT4_PER_TOKEN_HEAD"
    NVFP4 = "NVFP4"
    NVFP4_DS_MLA = "NVFP4_DS_MLA"

    @property
    def is_per_token_head(self) -> bool:
        return self in (
            KVQuantMode.INT8_PER_TOKEN_HEAD,
            KVQuantMode.FP8_PER_TOKEN_HEAD,
            KVQuantMode.INT4_PER_TOKEN_HEAD,
        )

    @property
    def is_nvfp4(self) -> bool:
        return self is KVQuantMode.NVFP4


# Storage dtype of each torch dtype name kvplan knows: bytes per element.
TORCH_DTYPE_BYTES: dict[str, int] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "uint8": 1,
    "int8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}
_TORCH_ALIASES = {"float": "float32", "half": "float16", "fp32": "float32",
                  "fp16": "float16", "bf16": "bfloat16"}

# vLLM: utils.torch_utils.STR_DTYPE_TO_TORCH_DTYPE, for kv_cache_dtype strings.
KV_CACHE_DTYPE_STORAGE: dict[str, str] = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "fp8": "uint8",
    "fp8_e4m3": "uint8",
    "fp8_e5m2": "uint8",
    "fp8_inc": "float8_e4m3fn",
    "int8": "int8",
    "int4_per_token_head": "uint8",
    "int8_per_token_head": "int8",
    "fp8_per_token_head": "uint8",
    "fp8_ds_mla": "uint8",
    "nvfp4_ds_mla": "uint8",
    "nvfp4": "uint8",
    "nvfp4_4over6": "uint8",
}
# What users type → vLLM's spelling.
KV_CACHE_DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16",
                          "fp32": "float32", "float": "float32"}
# Backend-packed dtypes whose layout kvplan does not know: refuse, never guess.
_UNSIZED_PREFIXES = ("turboquant_", "octave_", "ultraquant_")

MODEL_DTYPES = ("bfloat16", "float16", "float32")


def normalize_torch_dtype(name: str) -> str:
    """A torch dtype name ('torch.bfloat16', 'bf16', 'half') → canonical name."""
    n = str(name).strip()
    n = n[len("torch."):] if n.startswith("torch.") else n
    n = _TORCH_ALIASES.get(n, n)
    if n not in TORCH_DTYPE_BYTES:
        raise InputError(f"unknown dtype {name!r}",
                         hint=f"known dtypes: {', '.join(sorted(TORCH_DTYPE_BYTES))}")
    return n


def dtype_size_bytes(torch_dtype: str) -> int:
    """vLLM: utils.torch_utils.get_dtype_size."""
    size = TORCH_DTYPE_BYTES.get(torch_dtype)
    return size if size is not None else TORCH_DTYPE_BYTES[normalize_torch_dtype(torch_dtype)]


def normalize_kv_cache_dtype(kv_cache_dtype: str) -> str:
    """'bf16' → 'bfloat16'; validates against the dtypes vLLM accepts and kvplan can size."""
    d = str(kv_cache_dtype).strip()
    d = KV_CACHE_DTYPE_ALIASES.get(d.lower(), d)
    if d == "auto" or d in KV_CACHE_DTYPE_STORAGE:
        return d
    if d.startswith(_UNSIZED_PREFIXES):
        raise InputError(f"KV cache dtype {d!r} uses a backend-specific packing kvplan does not model",
                         hint="use auto, bfloat16, float16, fp8, fp8_e5m2, int8, nvfp4 or a per-token-head dtype")
    raise InputError(f"unknown KV cache dtype {kv_cache_dtype!r}",
                     hint="valid: auto, " + ", ".join(KV_CACHE_DTYPE_STORAGE))


def kv_cache_storage_dtype(kv_cache_dtype: str, model_dtype: str) -> str:
    """vLLM: utils.torch_utils.get_kv_cache_torch_dtype — 'auto' takes the model dtype."""
    d = normalize_kv_cache_dtype(kv_cache_dtype)
    if d == "auto":
        return normalize_torch_dtype(model_dtype)
    return KV_CACHE_DTYPE_STORAGE[d]


def kv_quant_mode(kv_cache_dtype: str) -> KVQuantMode:
    """vLLM: kv_cache_interface.get_kv_quant_mode."""
    d = normalize_kv_cache_dtype(kv_cache_dtype)
    if d in ("int4_per_token_head", "int8_per_token_head", "fp8_per_token_head"):
        return KVQuantMode(d.removesuffix("_per_token_head").upper() + "_PER_TOKEN_HEAD")
    if d == "nvfp4_ds_mla":
        return KVQuantMode.NVFP4_DS_MLA
    if d.startswith("nvfp4"):
        return KVQuantMode.NVFP4
    if d.startswith("fp8"):
        return KVQuantMode.FP8_PER_TENSOR
    return KVQuantMode.NONE


def nvfp4_kv_cache_full_dim(head_size: int) -> int:
    """vLLM: utils.torch_utils.nvfp4_kv_cache_full_dim — fp4 data + fp8 block scales."""
    return head_size // 2 + head_size // 16


# ---- lengths and sizes as `vllm serve` reads them -------------------------------------------

# vLLM: utils/argparse_utils.py human_readable_int (identical in 0.31-0.34); arg_utils.py
# _compute_kwargs gives it to --max-num-batched-tokens, --max-num-scheduled-tokens,
# --kv-cache-memory-bytes, --max-num-queued-tokens and (with -1 / auto) --max-model-len
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY_SUFFIX = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
LENGTH_FORMS = ("k/m/g/t = 10^3/10^6/10^9/10^12 and K/M/G/T = 2^10/2^20/2^30/2^40 (128k = 128,000, "
                "128K = 131,072); decimals only with a lower-case suffix (25.6k = 25,600)")
MAX_TOKENS = 2**31  # kvplan's bound on any length (tokens)
# kvplan's bound on a memory size per GPU: 16 TiB, ~60x the largest GPU memory in the catalogue
# (B300, 288 GB). Past it a size is a typo (1e30), and the planner's block counts stop meaning
# anything (vLLM would try to allocate it).
MAX_MEMORY_BYTES = 2**44


class BinaryDecimalError(ValueError):
    """vLLM's argparse.ArgumentTypeError for a decimal with a binary suffix ('1.5K')."""


def human_readable_int(value: str) -> int:
    """vLLM: utils.argparse_utils.human_readable_int — '128k' → 128,000, '128K' → 131,072,
    '25.6k' → 25,600 (float × 10^3, truncated); '1.5K' → BinaryDecimalError; anything else
    through int() (ValueError)."""
    value = value.strip()
    match = _HUMAN_INT.fullmatch(value)
    if match:
        number, suffix = match.groups()
        if suffix in _DECIMAL_SUFFIX:
            return int(float(number) * _DECIMAL_SUFFIX[suffix])
        try:
            return int(number) * _BINARY_SUFFIX[suffix]
        except ValueError:
            raise BinaryDecimalError(
                f"Decimals are not allowed with binary suffixes like {suffix}. Did you mean to "
                f"use {number}{suffix.lower()} instead?") from None
    return int(value)


def human_readable_int_or_auto(value: str) -> int:
    """vLLM: utils.argparse_utils.human_readable_int_or_auto — '-1' / 'auto' → -1."""
    value = value.strip()
    if value == "-1" or value.lower() == "auto":
        return -1
    return human_readable_int(value)


def read_human_int(value: int | float | str, flag: str, *, auto: bool = False) -> int:
    """A length (or --kv-cache-memory-bytes) exactly as `vllm serve` parses `flag`; -1 means auto
    when `auto` (--max-model-len). Ints pass through (TOML, JSON, the API); a text is read by
    vLLM's own rule, and refused with argparse's words for it ("argument --max-model-len:
    invalid human_readable_int_or_auto value: '1.5'"). The one parser of every length kvplan
    reads: flags, serve lines, ci files, spec files, the API."""
    if isinstance(value, bool):
        raise InputError(f"argument {flag}: expected a number, got {value!r}",
                         hint=f"lengths are read as vLLM reads them: {LENGTH_FORMS}")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise InputError(f"argument {flag}: {value!r} is not a whole number",
                         hint=f"lengths are read as vLLM reads them: {LENGTH_FORMS}")
    if not isinstance(value, str):
        raise InputError(f"argument {flag}: expected a number or a text such as 128k, "
                         f"got {type(value).__name__}")
    fn = human_readable_int_or_auto if auto else human_readable_int
    try:
        return fn(value)
    except BinaryDecimalError as exc:
        raise InputError(f"argument {flag}: {exc}",
                         hint=f"vLLM reads it with {fn.__name__}: {LENGTH_FORMS}") from None
    except ValueError:
        raise InputError(f"argument {flag}: invalid {fn.__name__} value: {value!r}",
                         hint=f"vLLM reads it with {fn.__name__}: {LENGTH_FORMS}"
                              + ("; or -1 / auto" if auto else "")) from None


def read_tokens(value: int | float | str, flag: str, *, auto: bool = False,
                minimum: int = 1) -> int:
    """`read_human_int`, then bounded: `minimum` ≤ n ≤ 2^31 (or -1 = auto when `auto`)."""
    n = read_human_int(value, flag, auto=auto)
    if auto and n == -1:
        return n
    if n < minimum:
        raise InputError(f"{flag} must be ≥ {minimum}{' (or auto / -1)' if auto else ''}, "
                         f"got {value!r}")
    if n > MAX_TOKENS:
        raise InputError(f"{flag} {value} is out of range (at most {MAX_TOKENS:,} tokens)",
                         hint="or use --max-model-len auto" if auto else None)
    return n


# kvplan's spelled-out size units (case-insensitive), beside vLLM's one-letter suffixes
_SIZE_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20,
    "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
}
SIZE_FORMS = ("bytes, 20GiB / 512MiB / 1.5TiB, 20GB (10^9), or vLLM's one-letter suffixes: "
              "20G = 20 GiB, 20g = 20 x 10^9")


def parse_kv_cache_memory_bytes(text: str | int, what: str = "--kv-cache-memory") -> int:
    """--kv-cache-memory: a size as `parse_size_bytes`, or zero, or negative ('-2GiB'): vLLM runs
    its KV planner with any such value (and fails with no memory for the cache blocks)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text if text <= 0 else parse_size_bytes(text, what)
    s = str(text).strip()
    sign = -1 if s.startswith("-") else 1
    body = s[1:].strip() if sign < 0 else s
    zero = re.fullmatch(r"0+(?:\.0*)?\s*([A-Za-z]*)", body)
    if zero and (zero.group(1) == "" or zero.group(1).lower() in _SIZE_UNITS
                 or zero.group(1) in _DECIMAL_SUFFIX or zero.group(1) in _BINARY_SUFFIX):
        return 0
    return sign * parse_size_bytes(body, what)


def parse_size_bytes(text: str | int, what: str = "") -> int:
    """A memory size per GPU → bytes, 1 ≤ bytes ≤ 16 TiB. A plain number or a number with one
    suffix letter is read as vLLM reads --kv-cache-memory-bytes (human_readable_int: 40G =
    40 GiB, 40g = 40 x 10^9, 1.5G refused with vLLM's words); kvplan also reads spelled-out
    units ('20GiB', '1.5TiB', '20GB', '512MiB') and '2e10'."""
    where = f" for {what}" if what else ""
    if isinstance(text, bool):
        raise InputError(f"cannot read size {text!r}{where}", hint=f"write {SIZE_FORMS}")
    if isinstance(text, int):
        value = text
    else:
        s = str(text).strip()
        if _HUMAN_INT.fullmatch(s) or s.isdecimal():
            value = read_human_int(s, what or "--kv-cache-memory-bytes")
        else:
            body = s.replace("_", "")
            m = re.fullmatch(r"(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"
                             r"\s*([A-Za-z]*)", body)
            if m is None or m.group(2).lower() not in (_SIZE_UNITS | {"": 1}):
                raise InputError(f"cannot read size {text!r}{where}", hint=f"write {SIZE_FORMS}")
            num, unit = m.group(1), m.group(2).lower()
            mult = _SIZE_UNITS.get(unit, 1)
            value = (int(num) * mult if num.isdecimal()
                     else int(float(num) * mult))
    if value <= 0:
        raise InputError(f"size must be positive, got {text!r}{where}")
    if value > MAX_MEMORY_BYTES:
        raise InputError(f"size {text}{where} is out of range: at most {MAX_MEMORY_BYTES:,} B "
                         "(16 TiB) per GPU",
                         hint="no GPU has more than a few hundred GiB (kvplan gpus); a larger "
                              "value is a typo, and the planner's block counts would mean nothing")
    return value
