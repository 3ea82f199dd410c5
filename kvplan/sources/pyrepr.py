"""Python reprs as vLLM logs them (`VllmConfig.__str__`, a dict of non-default args), read without
`eval`: `ast.literal_eval` one value at a time, `Name(k=v, ...)` as a dict, anything else as text."""

from __future__ import annotations

import ast
import re
import warnings
from typing import Any

_OPEN = {"(": ")", "[": "]", "{": "}"}


def split_top(s: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside quotes and brackets; `<Enum.X: 3>` reprs count as brackets."""
    return _scan(s, sep)[0]


def _scan(s: str, sep: str = ",") -> tuple[list[str], bool]:
    """(`s` split at `sep` outside quotes and brackets, whether a quote or bracket is left open)."""
    parts: list[str] = []
    stack: list[str] = []
    quote: str | None = None
    start = i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            stack.append(_OPEN[c])
        elif c == "<" and i + 1 < n and (s[i + 1].isalpha() or s[i + 1] == "_"):
            stack.append(">")
        elif stack and c == stack[-1]:
            stack.pop()
        elif c == sep and not stack:
            parts.append(s[start:i])
            start = i + 1
        i += 1
    parts.append(s[start:])
    return parts, bool(quote or stack)


def _literal_eval(text: str) -> Any:
    """ast.literal_eval, quiet about invalid escape sequences in log text."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.literal_eval(text)


def _literal(text: str, depth: int = 0) -> Any:
    """A Python repr → value (literal_eval), `Name(k=v, ...)` → dict, anything else → the text."""
    text = text.strip()
    if len(text) > 200_000 or depth > 20:
        return text
    try:
        return _literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    call = re.match(r"^([A-Za-z_]\w*)\((.*)\)$", text, re.S)
    if call:
        out: dict[str, Any] = {}
        for part in split_top(call.group(2)):
            key, eq, value = part.partition("=")
            if not eq or not re.fullmatch(r"\s*[A-Za-z_]\w*\s*", key):
                return text
            out[key.strip()] = _literal(value, depth + 1)
        return out
    return text


_ELLIPSIS = re.compile(r"^\s*(?:\.\.\.|…)\s*")


def unbalanced(text: str) -> bool:
    """An open quote or bracket at the end: the text was cut."""
    return _scan(text)[1]


def parse_kv_list(body: str) -> dict[str, Any]:
    """`model='x', max_seq_len=262144, ...` (VllmConfig.__str__) → dict. A pasted line may be
    elided (`kv_cache_dtype=auto, ... enable_prefix_caching=False`) or cut: an elided stretch is
    skipped, a value holding an ellipsis and the last value of a cut line are dropped."""
    out: dict[str, Any] = {}
    last: str | None = None
    for part in split_top(body):
        elided = _ELLIPSIS.match(part)
        part = part[elided.end():] if elided else part
        m = re.match(r"^\s*([A-Za-z_]\w*)=(.*)$", part, re.S)
        if m:
            last = m.group(1)
            out[last] = m.group(2)
        elif last is not None and not elided:  # a comma that belonged to the previous value
            out[last] += "," + part
    if last is not None and (unbalanced(body) or not body.rstrip() or body.rstrip()[-1] in "=,"):
        out.pop(last)
    return {k: v for k, v in ((k, _literal(v)) for k, v in out.items())
            if not (isinstance(v, str) and ("..." in v or "…" in v))}


def parse_dict_repr(text: str) -> dict[str, Any]:
    """`{'model': 'x', 'compilation_config': {'mode': <CompilationMode.VLLM_COMPILE: 3>}}` → dict;
    values that are not literals (object reprs) are kept as their text."""
    try:
        value = _literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        return {}
    out: dict[str, Any] = {}
    for part in split_top(body[1:-1]):
        if not part.strip():
            continue
        key_value = split_top(part, ":")
        if len(key_value) < 2:
            continue
        key = _literal(key_value[0])
        out[str(key)] = _literal(":".join(key_value[1:]))
    return out
