"""`vllm serve`'s options as vLLM 0.34.0's argparse parser holds them, built from the flag table
(`kvplan.sources.vllm_flags`): every option string (with the `--no-X` and `--enable-X`/`--disable-X`
forms of `EnableDisableAction`), and the type each flag gives its value as `_compute_kwargs`
(vllm/engine/arg_utils.py:323) derives it from the config dataclass field: `int()`, `float()`,
`human_readable_int` (`1k` = 1000, `1K` = 1024), `human_readable_int_or_auto` for
`--max-model-len`, JSON for config flags, choices."""

from __future__ import annotations

import json
import re
from difflib import get_close_matches
from typing import Any

from kvplan.errors import InputError
from kvplan.sources.vllm_flags import FLAG_TABLE
from kvplan.units import human_readable_int, parse_size_bytes, read_human_int


class Flag:
    """One option string as the parser holds it: the dest it sets, its value kind and choices,
    the flag's canonical spelling, and for a bool flag the value this spelling sets."""

    __slots__ = ("dest", "kind", "optional", "choices", "value", "canonical")

    def __init__(self, dest: str, kind: str, choices: tuple[Any, ...] | None, canonical: str,
                 value: bool | None = None) -> None:
        self.dest = dest
        self.optional = kind.endswith("?")
        self.kind = kind.rstrip("?")
        self.choices = choices
        self.canonical = canonical
        self.value = value  # for bool flags: what this spelling sets

    @property
    def takes_value(self) -> bool:
        return self.kind not in ("bool", "true", "optstr")


def _build_flags() -> dict[str, Flag]:
    out: dict[str, Flag] = {}
    for names, kind, choices in FLAG_TABLE:
        opts = names.split()
        longs = [o for o in opts if o.startswith("--")]
        dest = longs[0][2:].replace("-", "_")
        canonical = longs[0]
        for o in opts:
            out[o] = Flag(dest, kind, choices, canonical, True if kind == "bool" else None)
        if kind == "bool":
            # argparse.BooleanOptionalAction adds --no-X for every --X; vLLM registers
            # EnableDisableAction in its place, which also pairs --enable-X with --disable-X.
            for o in longs:
                out["--no-" + o[2:]] = Flag(dest, kind, choices, canonical, False)
                for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
                    if o.startswith(prefix):
                        out[inverse + o[len(prefix):]] = Flag(dest, kind, choices, canonical, False)
    return out


FLAGS = _build_flags()
LONG_FLAGS = sorted(o for o in FLAGS if o.startswith("--"))
# Single-character short options whose value may be glued on (argparse: `-qfp8`).
GLUED_SHORT = {o for o, f in FLAGS.items() if len(o) == 2 and f.takes_value}


def known_flags() -> list[str]:
    """Every option string vLLM 0.34.0's `vllm serve` accepts (incl. --no-/--disable- forms)."""
    return sorted(FLAGS)


def closest_flag(flag: str) -> str | None:
    """The known flag nearest to a misspelt one (for hints), or None."""
    key = flag.split("=", 1)[0]
    key = "--" + key.lstrip("-").replace("_", "-") if key.startswith("-") else key
    match = get_close_matches(key, LONG_FLAGS, n=1, cutoff=0.75)
    return match[0] if match else None



# ---------------------------------------------------------------------------------------------
# Values: argparse's `type=` per flag kind


def _expand_json_numbers(val: str) -> str:
    """arg_utils.py:300 _expand_json_human_readable_numbers: bare 80m / 1K outside JSON strings."""
    parts = re.split(r'("(?:[^"\\]|\\.)*")', val)
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"\b\d+(?:\.\d+)?[kKmMgGtT]\b", lambda m: str(human_readable_int(m.group())), parts[i])
    return "".join(parts)


def _json_error(flag: str, raw: str, e: json.JSONDecodeError) -> InputError:
    lo, hi = max(0, e.pos - 24), min(len(raw), e.pos + 24)
    near = ("…" if lo else "") + raw[lo:e.pos] + " <HERE> " + raw[e.pos:hi] + ("…" if hi < len(raw) else "")
    near = " ".join(near.split())
    hint = "JSON wants double-quoted keys and strings and true/false/null; wrap the whole value in single quotes"
    if "'" in raw and '"' not in raw:
        hint = 'that is a Python dict, not JSON: use double quotes inside, e.g. \'{"method": "eagle3"}\''
    return InputError(f"{flag}: invalid JSON at line {e.lineno} column {e.colno} (char {e.pos}): {e.msg}, "
                      f"near: {near}", hint=hint)


def convert(flag: str, spec: Flag, raw: str, name: str | None = None) -> Any:
    """Apply the argparse `type=` vLLM uses for this flag; InputError on failure."""
    if spec.optional and raw in ("", "None"):
        return None
    kind = spec.kind
    try:
        if kind == "int" or kind == "list_int":
            value: Any = int(raw)
        elif kind == "float":
            value = float(raw)
        elif kind in ("hrint", "hrint_auto"):
            try:
                value = read_human_int(raw, flag, auto=kind == "hrint_auto")
            except InputError as exc:
                raise _hrint_error(name or flag, spec, raw, exc) from None
        elif kind == "lower":
            value = raw.lower().replace("-", "_")
        elif kind in ("json", "dataclass", "dict_or_str"):
            if kind == "dict_or_str" and not re.match(r"(?s)^\s*{.*}\s*$", raw):
                return raw
            text = _expand_json_numbers(raw) if kind == "dataclass" else raw
            try:
                value = json.loads(text)
            except json.JSONDecodeError as e:
                raise _json_error(flag, text, e) from None
            except RecursionError:
                raise InputError(f"{flag}: JSON value nested too deeply") from None
            if kind == "dataclass" and not isinstance(value, dict):
                raise InputError(f"{flag} wants a JSON object, got {raw!r}",
                                 hint=f"write it as {flag} '{{\"key\": value}}' or {flag}.key value")
        else:
            value = raw
    except ValueError as e:
        raise _type_error(flag, name or flag, spec, raw, e) from None
    if spec.choices is not None and value not in spec.choices:
        shown = ", ".join(str(c) for c in spec.choices if c is not None)
        raise InputError(f"{flag}: invalid choice {raw!r}", hint=f"vLLM 0.34.0 accepts: {shown}")
    return value


def _type_error(flag: str, name: str, spec: Flag, raw: str, e: ValueError) -> InputError:
    kind = spec.kind
    if kind in ("int", "list_int"):
        return InputError(f"{flag} expects an integer, got {raw!r}",
                          hint=f"vLLM parses {name} with int(); write e.g. {name} 4")
    if kind == "float":
        return InputError(f"{flag} expects a number, got {raw!r}",
                          hint=f"vLLM parses {name} with float(); write e.g. {name} 0.9")
    raise AssertionError(f"no type error for flag kind {kind}")  # pragma: no cover


def _hrint_error(name: str, spec: Flag, raw: str, exc: InputError) -> InputError:
    """vLLM's argparse error for a human_readable_int flag, with a hint for sizes."""
    if spec.dest == "kv_cache_memory_bytes" and "Decimals" not in exc.message:
        try:
            meant = parse_size_bytes(raw)
        except InputError:
            pass
        else:
            return InputError(exc.message, hint=(
                f"vLLM 0.34.0 rejects {raw!r} here; write plain bytes, e.g. {name} {meant}, or "
                "G/M/K (binary) / g/m/k (decimal) suffixes: 40G = 40 GiB"))
    return exc
