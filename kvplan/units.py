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


def parse_token_count(text: str, *, decimals: bool = False) -> int:
    """'131072', '128k', '1M' (k = 1024, M = 2^20 tokens) → an int; ValueError if unreadable.
    With `decimals`, '1.5k' is read too (truncated to whole tokens)."""
    t = str(text).strip().lower()
    mult = 1
    if t.endswith("k"):
        t, mult = t[:-1], 1024
    elif t.endswith("m"):
        t, mult = t[:-1], 1024 * 1024
    return int(float(t) * mult) if decimals else int(t) * mult


_SIZE_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
    "t": 10**12, "tb": 10**12,
    "ki": 1 << 10, "kib": 1 << 10, "mi": 1 << 20, "mib": 1 << 20,
    "gi": 1 << 30, "gib": 1 << 30, "ti": 1 << 40, "tib": 1 << 40,
}


def parse_kv_cache_memory_bytes(text: str | int) -> int:
    """--kv-cache-memory: a size as `parse_size_bytes`, or zero, or negative ('-2GiB'): vLLM runs
    its KV planner with any such value (and fails with no memory for the cache blocks)."""
    s = str(text).strip()
    sign = -1 if s.startswith("-") else 1
    body = s[1:].strip() if sign < 0 else s
    zero = re.fullmatch(r"0+(?:\.0*)?\s*([A-Za-z]*)", body)
    if zero and zero.group(1).lower() in _SIZE_UNITS:
        return 0
    return sign * parse_size_bytes(body)


def parse_size_bytes(text: str | int) -> int:
    """'20GiB', '20G', '1.5TiB', '21474836480' → bytes (vLLM's human-readable sizes)."""
    if isinstance(text, int):
        value = text
    else:
        s = str(text).strip().replace("_", "").replace(",", "")
        i = 0
        while i < len(s) and (s[i].isdigit() or s[i] in ".eE+") :
            if s[i] in "eE" and not s[i + 1:i + 2].lstrip("+-").isdigit():
                break
            i += 1
        num, unit = s[:i], s[i:].strip().lower()
        if not num or unit not in _SIZE_UNITS:
            raise InputError(f"cannot read size {text!r}",
                             hint="write bytes or a unit form such as 20GiB, 20G, 1.5TiB, 512MiB")
        try:
            value = int(float(num) * _SIZE_UNITS[unit]) if "." in num or "e" in num.lower() \
                else int(num) * _SIZE_UNITS[unit]
        except ValueError:
            raise InputError(f"cannot read size {text!r}",
                             hint="write bytes or a unit form such as 20GiB") from None
    if value <= 0:
        raise InputError(f"size must be positive, got {text!r}")
    return value
