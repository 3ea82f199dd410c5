"""`kvplan ci`: plan several named deployments from a TOML (or YAML) file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.common import Opt, command, console, handles_errors
from kvplan.cli.engine_options import with_engine_options
from kvplan.errors import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS, InputError


@command()
@handles_errors
@with_engine_options((), engine_help="plan every entry with this server (vllm or sglang); "
                                     "default: each entry's `engine` key, else vLLM")
def ci(
    file: Annotated[Path, typer.Argument(help="deployments.toml (or .yaml) with [[deployment]]")],
    vllm: Annotated[str | None, Opt("--vllm", help="override every entry's release")] = None,
    as_json: Annotated[bool, Opt("--json")] = False,
    engine_values: dict[str, Any] | None = None,  # --engine (engine_options)
) -> None:
    """Plan several named deployments; exit 1 if any does not fit, 2 if an entry is invalid."""
    from kvplan.models.resolution.max_len import LONG_ENV, allow_long_from_env
    from kvplan.output import report
    from kvplan.pipeline.batch import run_batch

    ev = engine_values or {"engine": ("vllm",), "given": set()}
    forced = None
    if "engine" in ev["given"]:
        if len(ev["engine"]) > 1:
            raise InputError("ci plans each entry with one server",
                             hint='give --engine vllm or sglang, or set engine = "sglang" per '
                                  "entry")
        forced = ev["engine"][0]
    batch = run_batch(_read_deployments(file), vllm_version=vllm,
                      allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)),
                      engine=forced)
    if as_json:
        typer.echo(batch.model_dump_json(indent=2))
    else:
        report.render_batch(batch, console())
    if any(e.fits is None for e in batch.entries):
        raise typer.Exit(EXIT_BAD_INPUT)
    raise typer.Exit(EXIT_FITS if batch.all_fit else EXIT_DOES_NOT_FIT)


def _read_deployments(path: Path) -> Any:
    if not path.is_file():
        raise InputError(f"deployments file {path} does not exist")
    raw = path.read_bytes()
    if len(raw) > 4 * 2**20:
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
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path} is not valid TOML: {exc}") from None
