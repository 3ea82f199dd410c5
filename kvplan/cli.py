"""kvplan command line: vLLM-named options, one translation of errors to exit codes.

Exit codes: 0 fits · 1 does not fit (vLLM would refuse to start) · 2 bad input or usage.
The CLI parses and renders; every number comes from the engine.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.errors import EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT, EXIT_FITS, InputError, KvplanError

HELP = """Will this model, draft head, KV dtype and context length start on that GPU under vLLM?

kvplan reproduces vLLM's KV-cache startup planner byte for byte (releases 0.31-0.34), offline.

Exit codes: 0 = fits, 1 = does not fit (vLLM would refuse to start), 2 = bad input or usage.
"""

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
            _print_error(exc.message, exc.hint)
            raise typer.Exit(exc.exit_code) from None

    return wrapper


app = typer.Typer(help=HELP, no_args_is_help=True, add_completion=False,
                  pretty_exceptions_enable=False, rich_markup_mode=None)


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    width = None
    if os.environ.get("COLUMNS", "").isdigit():
        width = int(os.environ["COLUMNS"])
    return Console(stderr=stderr, width=width, no_color=bool(os.environ.get("NO_COLOR")),
                   highlight=False, soft_wrap=False)


def _read_json(path: Path, what: str) -> Any:
    import json

    if not path.exists():
        raise InputError(f"{what} {path} does not exist")
    if path.is_dir():
        raise InputError(f"{what} {path} is a directory, not a JSON file")
    size = path.stat().st_size
    if size > 16 * 2**20:
        raise InputError(f"{what} {path} is {size / 2**20:.0f} MiB; refusing to parse it",
                         hint="a layer-spec or config file is a few KiB")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} {path} is not valid JSON: {exc.msg} at line {exc.lineno} "
                         f"column {exc.colno}") from None


def _emit(plan: Any, fmt: str, as_json: bool) -> int:
    from kvplan import report

    if as_json or fmt == "json":
        typer.echo(report.render_json(plan))
    elif fmt == "markdown":
        typer.echo(report.render_markdown(plan), nl=False)
    else:
        report.render_table(plan, _console())
    return EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT


@app.callback()
def _root() -> None:
    """kvplan: vLLM KV-cache planning, byte-exact and offline."""


@app.command()
@handles_errors
def check(
    model: Annotated[str | None, typer.Argument(
        help="Hugging Face model: hub id (org/name[@rev]), local folder or config.json")] = None,
    specs: Annotated[Path | None, typer.Option(
        "--specs", help="plan a layer-spec JSON file (golden-case schema) instead of a model")
    ] = None,
    vllm: Annotated[str | None, typer.Option(
        "--vllm", help="vLLM release profile: 0.31.0, 0.32.0, 0.33.0, 0.34.0 (default newest)")
    ] = None,
    with_fix: Annotated[bool, typer.Option(
        "--with-fix/--without-fix", help="apply vLLM PR #53499 (scale block size before padding)")
    ] = False,
    kv_cache_memory: Annotated[str | None, typer.Option(
        "--kv-cache-memory", "--kv-cache-memory-bytes",
        help="KV cache memory per GPU: bytes or 20GiB, 20G, 1.5TiB")] = None,
    max_model_len: Annotated[str | None, typer.Option(
        "--max-model-len", help="context length (also 'auto' / -1)")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(
        "--max-num-batched-tokens", help="scheduler token budget per step")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, json or markdown")] = "table",
    as_json: Annotated[bool, typer.Option("--json", help="JSON on stdout (same as --format json)")
                       ] = False,
) -> None:
    """Plan one deployment and say whether it fits."""
    from kvplan.units import parse_size_bytes

    if fmt not in ("table", "json", "markdown"):
        raise InputError(f"unknown --format {fmt!r}", hint="use table, json or markdown")
    mml, auto = _parse_max_model_len(max_model_len)
    if specs is None:
        if model is None:
            raise InputError("nothing to plan", hint="give a MODEL or --specs FILE.json")
        raise InputError("planning a model config needs the config adapters (issue #3)",
                         hint="describe the model with --specs FILE.json for now")
    from kvplan.engine.planner import plan as run_plan
    from kvplan.plan import build_plan
    from kvplan.specfile import load_spec_file

    avail = parse_size_bytes(kv_cache_memory) if kv_cache_memory is not None else None
    sf = load_spec_file(_read_json(specs, "spec file"), vllm_version=vllm, with_fix=with_fix,
                        available_kv_bytes=avail, max_model_len=mml,
                        max_num_batched_tokens=max_num_batched_tokens)
    inp = sf.planner_input
    if auto:
        from dataclasses import replace

        inp = replace(inp, auto_fit_max_model_len=True)
    result = run_plan(inp)
    plan = build_plan(result, model=sf.name if model is None else model,
                      budget_mode="explicit (spec file)" if avail is None else "explicit",
                      max_num_batched_tokens=inp.max_num_batched_tokens)
    raise typer.Exit(_emit(plan, fmt, as_json))


def _parse_max_model_len(value: str | None) -> tuple[int | None, bool]:
    if value is None:
        return None, False
    v = value.strip().lower()
    if v in ("auto", "-1"):
        return None, True
    mult = 1
    if v.endswith("k"):
        v, mult = v[:-1], 1024
    elif v.endswith("m"):
        v, mult = v[:-1], 1024 * 1024
    try:
        n = int(v) * mult
    except ValueError:
        raise InputError(f"--max-model-len must be a number, 'auto' or -1, got {value!r}"
                         ) from None
    if n < 1:
        raise InputError(f"--max-model-len must be ≥ 1 (or auto), got {value!r}")
    if n > 2**40:
        raise InputError(f"--max-model-len {value} is absurdly large")
    return n, False


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run typer, turn kvplan errors into `Error:`/`Hint:` and exit 2."""
    debug = os.environ.get("KVPLAN_DEBUG") == "1"
    try:
        rc = app(args=argv, standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else EXIT_FITS)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except KvplanError as exc:
        if debug:
            raise
        _print_error(exc.message, exc.hint)
        sys.exit(exc.exit_code)
    except Exception as exc:  # click usage errors and anything unexpected
        import click

        if isinstance(exc, click.exceptions.Abort):
            sys.exit(130)
        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(EXIT_BAD_INPUT)
        if debug:
            raise
        _print_error(f"internal error: {type(exc).__name__}: {exc}",
                     "this is a kvplan bug; rerun with KVPLAN_DEBUG=1 for a traceback")
        sys.exit(EXIT_BAD_INPUT)


def _print_error(message: str, hint: str | None) -> None:
    one_line = " ".join(str(message).split())
    sys.stderr.write(f"Error: {one_line}\n")
    if hint:
        sys.stderr.write(f"Hint: {' '.join(str(hint).split())}\n")


if __name__ == "__main__":  # pragma: no cover
    main()
