"""--workload values: PROMPT:OUTPUT in vLLM's number notation, or a file of (prompt, output)
pairs (a measured distribution). Text in, pairs out; the caller reads the file."""

from __future__ import annotations

import json
import re

from kvplan.errors import InputError

MAX_PAIRS = 100_000
_PAIR = re.compile(r"\s*([0-9][0-9.]*[kKmMgGtT]?)\s*:\s*([0-9][0-9.]*[kKmMgGtT]?)\s*")
_HINT = ("PROMPT:OUTPUT tokens in vLLM's notation (8192:1024, 8k:1k = 8000:1000, 8K:1K = "
         "8192:1024), or a file of pairs")


def looks_like_pair(text: str) -> bool:
    return _PAIR.fullmatch(text) is not None


def token_count(text: str, what: str) -> int:
    """vLLM's human_readable_int (vllm/utils/argparse_utils.py): k/m/g/t decimal, K/M/G/T
    binary; decimals only with a decimal suffix (25.6k = 25,600; 1.5K is an error)."""
    from kvplan.units import human_readable_int as _human_readable_int

    try:
        n = _human_readable_int(text.strip())
    except ValueError as exc:
        detail = str(exc) if "Decimals" in str(exc) else f"cannot read {text.strip()!r}"
        raise InputError(f"{what}: {detail}", hint=_HINT) from None
    if n < 1:
        raise InputError(f"{what}: a request needs ≥ 1 token, got {text.strip()!r}", hint=_HINT)
    return n


def parse_pair(text: str) -> tuple[int, int]:
    m = _PAIR.fullmatch(text)
    if m is None:
        raise InputError(f"--workload {text!r}: expected PROMPT:OUTPUT", hint=_HINT)
    return (token_count(m.group(1), f"--workload {text}: prompt"),
            token_count(m.group(2), f"--workload {text}: output"))


def parse_pairs_file(text: str, name: str) -> tuple[tuple[int, int], ...]:
    """A JSON list ([[P, D], ...] or [{"prompt": P, "output": D}, ...]; "prompt_tokens" /
    "output_tokens" too), JSON lines, or text: one pair per line as P:D, P,D or P D (a header
    line and # comments are skipped)."""
    body = text.strip()
    if not body:
        raise InputError(f"--workload {name}: the file is empty", hint=_HINT)
    if body[0] in "[{":
        pairs = _json_pairs(body, name)
    else:
        pairs = _text_pairs(body, name)
    if not pairs:
        raise InputError(f"--workload {name}: no (prompt, output) pair in the file", hint=_HINT)
    if len(pairs) > MAX_PAIRS:
        raise InputError(f"--workload {name}: {len(pairs):,} pairs, at most {MAX_PAIRS:,}")
    return tuple(pairs)


def _json_pairs(body: str, name: str) -> list[tuple[int, int]]:
    try:
        data = json.loads(body)
        items = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        try:  # JSON lines
            items = [json.loads(line) for line in body.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise InputError(f"--workload {name}: not JSON ({exc.msg}, line {exc.lineno})",
                             hint=_HINT) from None
    out = []
    for i, item in enumerate(items, 1):
        where = f"--workload {name}: entry {i}"
        if isinstance(item, dict):
            p = item.get("prompt", item.get("prompt_tokens"))
            d = item.get("output", item.get("output_tokens"))
        elif isinstance(item, list | tuple) and len(item) == 2:
            p, d = item
        else:
            raise InputError(f"{where} is not a pair", hint=_HINT)
        out.append((_json_count(p, f"{where} prompt"), _json_count(d, f"{where} output")))
    return out


def _json_count(value: object, what: str) -> int:
    if isinstance(value, bool) or value is None:
        raise InputError(f"{what}: not a token count", hint=_HINT)
    if isinstance(value, int):
        if value < 1:
            raise InputError(f"{what}: a request needs ≥ 1 token, got {value}", hint=_HINT)
        return value
    if isinstance(value, str):
        return token_count(value, what)
    raise InputError(f"{what}: not a token count ({value!r})", hint=_HINT)


def _text_pairs(body: str, name: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for lineno, raw in enumerate(body.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p for p in re.split(r"[\s,;:]+", line) if p]
        if len(parts) != 2:
            raise InputError(f"--workload {name}: line {lineno} is not a pair: {raw.strip()!r}",
                             hint=_HINT)
        if not out and not parts[0][:1].isdigit():
            continue  # a header (prompt_tokens,output_tokens)
        where = f"--workload {name}: line {lineno}"
        out.append((token_count(parts[0], f"{where} prompt"),
                    token_count(parts[1], f"{where} output")))
    return out
