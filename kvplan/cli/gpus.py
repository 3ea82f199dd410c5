"""`kvplan gpus`: the GPU catalogue."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.common import Opt, command, console, handles_errors


@command()
@handles_errors
def gpus(
    as_json: Annotated[bool, Opt("--json", help="JSON on stdout")] = False,
) -> None:
    """List the GPU catalogue: runtime-reported memory, architecture, FP8/NVFP4 support."""
    from kvplan.budget import hardware
    rows = hardware.list_gpus()
    if as_json:
        import json

        typer.echo(json.dumps([g.model_dump(mode="json") for g in rows], indent=2))
        return
    from kvplan.output import listings
    listings.render_gpus(rows, console())
