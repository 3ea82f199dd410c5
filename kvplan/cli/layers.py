"""`kvplan layers`: what kvplan understood of a model, layer by layer."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from kvplan.cli.common import Opt, command, console, handles_errors


@command()
@handles_errors
def layers(
    model: Annotated[str, typer.Argument(help="hub id, local folder or config.json")],
    draft: Annotated[str | None, Opt("--draft", help="draft head (DFlash, EAGLE, EAGLE3): its layers too")] = None,
    speculative_method: Annotated[str | None, Opt("--speculative-method", help="eagle, eagle3, dflash, mtp, "
                                                                   "ngram")] = None,
    num_speculative_tokens: Annotated[int, Opt("--num-speculative-tokens", help="draft tokens per step")] = 0,
    kv_cache_dtype: Annotated[str, Opt("--kv-cache-dtype", "--kv-dtype",
                                       help="auto, bfloat16, fp8, nvfp4, ...")] = "auto",
    draft_kv_cache_dtype: Annotated[str | None, Opt("--draft-kv-cache-dtype",
                                                   help="default: inherit --kv-cache-dtype")] = None,
    tensor_parallel_size: Annotated[int, Opt("--tensor-parallel-size", "-tp",
                                                  help="heads and states are per TP rank")] = 1,
    max_model_len: Annotated[str | None, Opt(
        "--max-model-len", help="context length as vLLM reads it (128k = 128,000; windows and "
        "block sizes may depend on it)")] = None,
    gpu: Annotated[str | None, Opt("--gpu", help="catalogue name: picks the attention backends "
                                     "(and so the block sizes) as on that GPU")] = None,
    vllm: Annotated[str | None, Opt("--vllm", help="vLLM release profile: 0.31.0-0.34.0 (default "
                                       "newest)")] = None,
    revision: Annotated[str | None, Opt("--revision", help="hub revision (branch, tag or commit)")] = None,
    as_json: Annotated[bool, Opt("--json", help="one row per layer as JSON (the table merges "
                                          "identical layers)")] = False,
) -> None:
    """What kvplan understood, layer by layer: kind, heads × dim, window, dtype, block, bytes per
    token (identical layers share a row; --json lists each)."""
    from kvplan.api import parse_max_model_len
    from kvplan.engines.vllm.build import Deployment
    from kvplan.models.resolution.max_len import LONG_ENV, allow_long_from_env
    from kvplan.output import listings
    from kvplan.pipeline.deploy import Request, layer_rows

    mml, _ = parse_max_model_len(max_model_len)
    dep = Deployment(vllm_version=vllm, kv_cache_dtype=kv_cache_dtype,
                     draft_kv_cache_dtype=draft_kv_cache_dtype, max_model_len=mml,
                     allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)),
                     tensor_parallel_size=tensor_parallel_size,
                     speculative_method=speculative_method,
                     num_speculative_tokens=num_speculative_tokens, max_num_batched_tokens=8192)
    rows, notes = layer_rows(Request(model=model, deployment=dep, draft=draft, gpu=gpu,
                                     revision=revision, kv_cache_memory_bytes=1))
    if as_json:
        import json

        from kvplan import __version__
        typer.echo(json.dumps({"kvplan_version": __version__,
                               "layers": [r.model_dump(mode="json") for r in rows],
                               "warnings": list(notes)}, indent=2))
        return
    listings.render_layers(rows, notes, console())
