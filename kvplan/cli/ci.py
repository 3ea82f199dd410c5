"""`kvplan ci`: plan several named deployments from a TOML (or YAML) file."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.common import Opt, command, console, handles_errors, output_format, print_error
from kvplan.cli.engine_options import with_engine_options
from kvplan.errors import InputError

MAX_FILE_BYTES = 4 * 2**20
STDIN_NAMES = ("-", "/dev/stdin")


@command()
@handles_errors
@with_engine_options((), engine_help="plan every entry with this server (vllm or sglang); "
                                     "default: each entry's `engine` key, else vLLM")
def ci(
    file: Annotated[str, typer.Argument(
        help="deployments.toml (or .yaml) with [[deployment]]; - or /dev/stdin reads TOML from "
             "standard input. Relative model and draft paths are read from the file's folder.")],
    vllm: Annotated[str | None, Opt("--vllm", help="override every entry's release")] = None,
    fmt: Annotated[str, Opt("--format", help="table, json or markdown (for a PR comment)")
                   ] = "table",
    as_json: Annotated[bool, Opt("--json", help="JSON on stdout (same as --format json)")] = False,
    engine_values: dict[str, Any] | None = None,  # --engine (engine_options)
) -> None:
    """Plan several named deployments and report each; exit with the worst: 0 all fit, 1 one
    does not fit (or vLLM refuses it at start-up), 2 an entry cannot be planned."""
    from kvplan.models.resolution.max_len import LONG_ENV, allow_long_from_env
    from kvplan.pipeline.batch import run_batch

    ev = engine_values or {"engine": ("vllm",), "given": set()}
    forced = None
    if "engine" in ev["given"]:
        if len(ev["engine"]) > 1:
            raise InputError("ci plans each entry with one server",
                             hint='give --engine vllm or sglang, or set engine = "sglang" per '
                                  "entry")
        forced = ev["engine"][0]
    fmt = output_format(fmt, as_json)
    data, base_dir = _read_deployments(file)
    batch = run_batch(data, vllm_version=vllm, base_dir=base_dir, engine=forced,
                      allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)))
    if fmt == "json":
        typer.echo(batch.model_dump_json(indent=2))
    elif fmt == "markdown":
        from kvplan.output.ci_markdown import render_batch_markdown

        typer.echo(render_batch_markdown(batch), nl=False)
    else:
        from kvplan.output import report

        report.render_batch(batch, console())
    for e in batch.entries:  # the entries that could not be planned, as errors too
        if e.error is not None:
            print_error(f"deployment {e.name!r}: {e.error}", e.hint)
    raise typer.Exit(batch.exit_code)


def _read_deployments(name: str) -> tuple[Any, Path]:
    """The parsed file and the folder its relative paths are read from (standard input: the
    current directory)."""
    if name in STDIN_NAMES:
        raw = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        path, base = Path("<stdin>"), Path.cwd()
    else:
        path = Path(name)
        if not path.exists():
            raise InputError(f"deployments file {path} does not exist")
        if path.is_dir():
            raise InputError(f"deployments file {path} is a directory",
                             hint="give the TOML file, e.g. deploy/deployments.toml")
        try:
            with path.open("rb") as f:  # a FIFO or /dev/fd/N too, not only a regular file
                raw = f.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise InputError(f"cannot read deployments file {path}: {exc.strerror}") from None
        # a pipe (/dev/fd/N, <(...)) has no folder of its own: the current directory
        base = path.resolve().parent if path.is_file() else Path.cwd()
    if len(raw) > MAX_FILE_BYTES:
        raise InputError(f"deployments file {path} is over 4 MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise InputError("YAML deployment files need PyYAML",
                             hint="pip install pyyaml, or write the file as TOML") from None
        try:
            return yaml.safe_load(text), base
        except yaml.YAMLError as exc:
            raise InputError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None
    import tomllib

    try:
        return tomllib.loads(text), base
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path} is not valid TOML: {exc}") from None
