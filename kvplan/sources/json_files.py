"""Reading a JSON config file (local, or in the Hugging Face cache): a size limit, UTF-8, JSON, an
object at the top level; every failure is one `ConfigError` line naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError

MAX_CONFIG_BYTES = 16 * 1024 * 1024  # no real config comes near; a bigger file is a mistake


def read_json_object(path: Path, *, label: str | None = None, hint: str | None = None) -> dict:
    """Read `path` as a JSON object; every failure is a one-line `ConfigError` naming the file."""
    name = label or str(path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise _too_big(name, size)
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read {name}: {e.strerror or e}", hint=hint) from e
    if len(data) > MAX_CONFIG_BYTES:  # stat can under-report (pipes, /proc)
        raise _too_big(name, len(data))
    return parse_json_object(data, name, hint=hint)


def _too_big(name: str, size: int) -> ConfigError:
    return ConfigError(
        f"{name} is {size / 2**20:.1f} MiB, over the {MAX_CONFIG_BYTES // 2**20} MiB limit for a "
        "config file; refusing to parse it",
        hint="pass the model's config.json (a few KiB), not a weights or data file",
    )


def parse_json_object(data: bytes, name: str, *, hint: str | None = None) -> dict:
    try:
        text = data.decode("utf-8-sig")  # tolerate a BOM, as editors on Windows write one
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{name} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
            hint=hint or "is this really a JSON config file? re-download or re-save it as UTF-8",
        ) from e
    if not text.strip():
        raise ConfigError(f"{name} is empty", hint=hint)
    try:
        # Python's json accepts Infinity/-Infinity/NaN (Nemotron-H's time_step_limit has Infinity).
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{name} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}",
            hint=hint or "fix the file, or re-download it",
        ) from e
    except (ValueError, RecursionError) as e:  # e.g. a 5000-digit integer, absurd nesting
        raise ConfigError(f"{name} is not usable JSON: {e}", hint=hint) from e
    if not isinstance(value, dict):
        raise ConfigError(
            f"{name} holds a JSON {_json_kind(value)}, expected an object {{...}} at the top level",
            hint=hint or "pass the model's config.json",
        )
    return value


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"
