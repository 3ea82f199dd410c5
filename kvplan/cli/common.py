"""What every command shares: the registry each command module joins (`command`, read by
`kvplan.cli.app_for`), errors → `Error:`/`Hint:` and exit codes, the console, a plan's output."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_FITS, InputError, KvplanError

Opt = typer.Option
F = TypeVar("F", bound=Callable[..., Any])

# command name → (its function, typer's `command()` options), filled as the command modules load
COMMANDS: dict[str, tuple[Callable[..., Any], dict[str, Any]]] = {}


def command(name: str | None = None, **options: Any) -> Callable[[F], F]:
    """`@app.command(name, ...)` for an app built per run: registers the function under its
    command name (the function's, dashed, unless `name` says otherwise)."""

    def register(fn: F) -> F:
        COMMANDS[name or fn.__name__.lower().replace("_", "-")] = (fn, {"name": name, **options})
        return fn

    return register


def handles_errors(fn: Any) -> Any:
    """Turn a KvplanError into `Error:`/`Hint:` on stderr and its exit code (never a traceback)."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KvplanError as exc:
            if os.environ.get("KVPLAN_DEBUG") == "1":
                raise
            print_error(exc.message, exc.hint)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    width = None
    if os.environ.get("COLUMNS", "").isdigit():
        width = int(os.environ["COLUMNS"])
    return Console(stderr=stderr, width=width, no_color=bool(os.environ.get("NO_COLOR")),
                   highlight=False, soft_wrap=False)


FORMATS = ("table", "json", "markdown")


def output_format(fmt: str, as_json: bool) -> str:
    """--format and --json → one of table, json, markdown; two different asks are an error."""
    if fmt not in FORMATS:
        raise InputError(f"unknown --format {fmt!r}", hint="use table, json or markdown")
    if as_json and fmt not in ("json", "table"):
        raise InputError(f"--json and --format {fmt} ask for two different outputs",
                         hint="give one: --json (same as --format json) or --format " + fmt)
    return "json" if as_json else fmt


def emit(plan: Any, fmt: str, as_json: bool) -> int:
    if as_json or fmt == "json":
        typer.echo(plan.to_json())  # no rich for JSON
        return EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT
    if getattr(plan, "engine", "vllm") == "sglang":
        from kvplan.output import sglang_report

        if fmt == "markdown":
            typer.echo(sglang_report.render_sglang_markdown(plan), nl=False)
        else:
            sglang_report.render_sglang_table(plan, console())
        return EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT
    from kvplan.output import report
    if fmt == "markdown":
        typer.echo(report.render_markdown(plan), nl=False)
    else:
        report.render_table(plan, console())
    return EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT


def print_error(message: str, hint: str | None) -> None:
    one_line = " ".join(str(message).split())
    sys.stderr.write(f"Error: {one_line}\n")
    if hint:
        sys.stderr.write(f"Hint: {' '.join(str(hint).split())}\n")
