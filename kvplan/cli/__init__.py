"""kvplan command line: vLLM-named options, one translation of errors to exit codes.

Exit codes: 0 fits · 1 does not fit (vLLM would refuse to start) · 2 bad input or usage.
The CLI parses and renders; every number comes from the engine.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer

from kvplan.cli.common import COMMANDS, print_error
from kvplan.errors import EXIT_BAD_INPUT, EXIT_FITS, KvplanError

HELP = """Will this model, draft head, KV dtype and context length start on that GPU under vLLM?

kvplan reproduces vLLM's KV-cache startup planner byte for byte (releases 0.31-0.34), offline.

Exit codes: 0 = fits, 1 = does not fit (vLLM would refuse to start), 2 = bad input or usage.
"""

# command → the module of kvplan.cli that defines it, in the order `kvplan --help` lists them;
# a run imports only its command's module (cold start)
COMMAND_MODULES = {"check": "check", "explain": "check", "gpus": "gpus", "layers": "layers",
                   "sweep": "sweep", "ci": "ci", "fit": "fit"}

_APP_SETTINGS: dict[str, Any] = dict(help=HELP, no_args_is_help=True, add_completion=True,
                                     pretty_exceptions_enable=False, rich_markup_mode=None)


def _print_version(value: bool) -> None:
    if value:
        from kvplan import __version__
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit(EXIT_FITS)


def _root(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="print kvplan's version and exit")] = False,
) -> None:
    """kvplan: vLLM KV-cache planning, byte-exact and offline."""


def _typer_app(names: list[str]) -> typer.Typer:
    """A typer app with the root callback and the commands `names` (their modules imported)."""
    for module in dict.fromkeys(COMMAND_MODULES[name] for name in names):
        importlib.import_module(f"kvplan.cli.{module}")
    one = typer.Typer(**_APP_SETTINGS)
    one.callback()(_root)
    for name in names:
        fn, options = COMMANDS[name]
        one.command(**options)(fn)
    return one


_WHOLE: list[typer.Typer] = []


def _whole_app() -> typer.Typer:
    """Every command (built once): `kvplan --help`, an unknown command, the tests' `app`."""
    if not _WHOLE:
        _WHOLE.append(_typer_app(list(COMMAND_MODULES)))
    return _WHOLE[0]


def __getattr__(name: str) -> Any:
    if name == "app":  # `from kvplan.cli import app`: the whole app, built on first use
        return _whole_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def app_for(args: list[str]) -> typer.Typer:
    """The app that runs `kvplan <command> ...`: the root callback and that command only, since
    typer reads the signature of every registered command when it builds the whole group (cold
    start), and only that command's module is imported. Anything else (no command, an option
    first, an unknown name) gets the whole app."""
    if args and not args[0].startswith("-") and args[0] in COMMAND_MODULES:
        return _typer_app([args[0]])
    return _whole_app()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run typer, turn kvplan errors into `Error:`/`Hint:` and exit 2."""
    debug = os.environ.get("KVPLAN_DEBUG") == "1"
    # cold start: no scan of every installed distribution for pydantic plugins (a CLI has none)
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    args = sys.argv[1:] if argv is None else argv
    try:
        rc = app_for(args)(args=args, standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else EXIT_FITS)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KvplanError as exc:
        if debug:
            raise
        print_error(exc.message, exc.hint)
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors and anything unexpected
        import click

        if isinstance(exc, click.exceptions.Abort):
            sys.exit(130)
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare `kvplan`: the help, as click prints it
            sys.stderr.write(exc.format_message() + "\n")  # type: ignore[attr-defined]
            sys.exit(EXIT_BAD_INPUT)
        if isinstance(exc, click.ClickException) or hasattr(exc, "format_message"):
            hint = "run `kvplan --help` for the commands and their options"
            ctx = getattr(exc, "ctx", None)
            if ctx is not None and ctx.command_path:
                hint = f"run `{ctx.command_path} --help` for its options"
            print_error(exc.format_message(), hint)  # type: ignore[attr-defined]
            sys.exit(EXIT_BAD_INPUT)
        if debug:
            raise
        print_error(f"internal error: {type(exc).__name__}: {exc}",
                    "this is a kvplan bug; rerun with KVPLAN_DEBUG=1 for a traceback")
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":  # pragma: no cover
    main()
