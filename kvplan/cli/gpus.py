"""`kvplan gpus`: the GPU catalogue."""

from __future__ import annotations

from typing import Annotated

import typer

from kvplan.cli.common import Opt, command, console, handles_errors


@command()
@handles_errors
def gpus(
    as_json: Annotated[bool, Opt("--json", help="JSON on stdout")] = False,
    vllm: Annotated[str | None, Opt("--vllm", help="the release whose FP8/NVFP4 KV support is "
                                    "shown (default newest)")] = None,
    vendor: Annotated[str | None, Opt("--vendor", help="only nvidia or amd")] = None,
) -> None:
    """List the GPU catalogue: runtime-reported memory, architecture, FP8/NVFP4 KV support in
    a vLLM release (the table check, fit and sweep read)."""
    from kvplan.budget import hardware
    from kvplan.budget.kv_dtype_support import modelled_release, support_summary

    release = modelled_release(vllm)
    vendors = hardware.parse_vendors(vendor)
    rows = [g for g in hardware.list_gpus() if not vendors or g.vendor.lower() in vendors]
    support = {g.name: support_summary(g, release) for g in rows}
    if as_json:
        import json

        typer.echo(json.dumps([{**g.model_dump(mode="json"),
                                "kv_cache_dtype_support": support[g.name]} for g in rows],
                              indent=2))
        return
    from kvplan.output import listings
    listings.render_gpus(rows, console(), support=support, vllm_version=release)
