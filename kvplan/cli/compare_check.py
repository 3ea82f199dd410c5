"""`kvplan check --engine vllm,sglang`: both servers' plans for the same model, GPU and context
length, side by side (`kvplan.compare`). Exit 0 when every engine holds the requests, 1 when
one does not, 2 on bad input."""

from __future__ import annotations

from typing import Any

import typer

from kvplan.cli.common import console
from kvplan.cli.engine_options import sglang_options_dict
from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_FITS, InputError

# check's vLLM options → kvplan.check keys (the names are the same)
_VLLM_KEYS = ("speculative_config", "speculative_method", "num_speculative_tokens",
              "draft_kv_cache_dtype", "dtype", "max_num_batched_tokens", "max_num_seqs",
              "block_size", "draft_block_size", "decode_context_parallel_size",
              "draft_tensor_parallel_size", "enable_prefix_caching", "mamba_cache_dtype",
              "mamba_ssm_cache_dtype", "attention_backend", "num_gpu_blocks_override",
              "runner", "convert", "available_kv_gib", "gpu_memory_utilization",
              "enforce_eager", "hf_overrides", "vllm", "with_fix", "kv_cache_dtype",
              "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
              "revision", "gpu_memory", "kv_cache_memory", "max_model_len", "config_format")


def run_side_by_side(values: dict[str, Any], sg: dict[str, Any], given: set[str],
                     engines: tuple[str, ...]) -> None:
    from kvplan import api

    if values.get("serve") is not None or values.get("from_log") is not None:
        raise InputError("--serve and --from-log plan the one server they name",
                         hint="drop --engine vllm,sglang (kvplan reads the line's or the "
                              "log's server)")
    model = values.get("model")
    if model is None:
        raise InputError("nothing to plan", hint="give a MODEL: kvplan check MODEL --gpu H100 "
                         "--engine vllm,sglang")
    opts: dict[str, Any] = {k: values[k] for k in _VLLM_KEYS if k in given}
    if values.get("explain"):  # each engine's what-ifs, in its own flags
        opts["explain"] = True
    if values.get("gpu") is not None:
        opts["gpu"] = values["gpu"]
    sopts = sglang_options_dict(sg)
    concurrency = sopts.pop("concurrency", 1)
    opts.update(sopts)
    result = api.compare(model, draft=values.get("draft"), concurrency=concurrency, **opts)
    if values.get("as_json") or values.get("fmt") == "json":
        typer.echo(result.to_json())
    elif values.get("fmt") == "markdown":
        from kvplan.output.compare_report import render_comparison_markdown

        typer.echo(render_comparison_markdown(result), nl=False)
    else:
        from kvplan.output.compare_report import render_comparison

        render_comparison(result, console())
    raise typer.Exit(EXIT_FITS if result.all_fit else EXIT_DOES_NOT_FIT)
