"""A typer app with one command whose parameters are exactly `kvplan check`'s and whose body does
nothing: what typer itself costs on kvplan's command line (bench.py's cold-start breakdown)."""

from __future__ import annotations

import inspect
import sys
import typing

import typer

from kvplan.cli.check import check

hints = typing.get_type_hints(inspect.unwrap(check), include_extras=True)
params = [p.replace(annotation=hints[p.name])
          for p in inspect.signature(inspect.unwrap(check)).parameters.values()]


def noop(**_: typing.Any) -> None:
    """does nothing"""


noop.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
noop.__annotations__ = {p.name: p.annotation for p in params}
app = typer.Typer(add_completion=True, pretty_exceptions_enable=False, rich_markup_mode=None)
app.callback()(lambda: None)
app.command("check")(noop)

if __name__ == "__main__":
    app(args=sys.argv[1:])
