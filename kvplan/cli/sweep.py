"""`kvplan sweep`: the largest fitting context and the concurrency per GPU × KV dtype ×
max_model_len."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.common import Opt, command, console, handles_errors
from kvplan.cli.engine_options import check_engine_flags, sglang_options_dict, with_engine_options
from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_FITS, InputError

SWEEP_VLLM_ONLY = ("speculative_method", "num_speculative_tokens", "draft_kv_cache_dtype",
                   "max_num_batched_tokens", "gpu_memory_utilization", "vllm", "with_fix")
SWEEP_SGLANG = ("sglang", "tp_size", "mem_fraction_static", "page_size", "max_running_requests",
                "chunked_prefill_size", "disable_radix_cache", "swa_full_tokens_ratio",
                "mamba_full_memory_ratio", "speculative_algorithm",
                "speculative_draft_model_path", "speculative_num_steps",
                "speculative_eagle_topk", "speculative_num_draft_tokens")


@command()
@handles_errors
@with_engine_options(SWEEP_SGLANG, engine_help="vllm (default), sglang, or vllm,sglang for "
                                               "both engines' rows")
def sweep(
    model: Annotated[str, typer.Argument(help="hub id, local folder or config.json")],
    max_model_len: Annotated[str, Opt(
        "--max-model-len", help="8K..1M (doubling from 8,192) or a list 8k,32k,128k; each as "
        "vLLM reads it: k = 10^3, K = 2^10")] = "8K..1M",
    gpu: Annotated[str, Opt("--gpu", help="comma-separated catalogue names")] = "H100",
    kv_cache_dtype: Annotated[str, Opt("--kv-cache-dtype", "--kv-dtype",
                                       help="comma-separated")] = "auto",
    draft: Annotated[str | None, Opt("--draft")] = None,
    speculative_method: Annotated[str | None, Opt("--speculative-method")] = None,
    num_speculative_tokens: Annotated[int, Opt("--num-speculative-tokens")] = 0,
    draft_kv_cache_dtype: Annotated[str | None, Opt("--draft-kv-cache-dtype")] = None,
    tensor_parallel_size: Annotated[int, Opt("--tensor-parallel-size", "-tp")] = 1,
    max_num_batched_tokens: Annotated[str | None, Opt(
        "--max-num-batched-tokens", help="tokens per step, as vLLM reads it: 16k = 16,000, "
        "16K = 16,384")] = None,
    gpu_memory_utilization: Annotated[float | None, Opt("--gpu-memory-utilization")] = None,
    kv_cache_memory: Annotated[str | None, Opt("--kv-cache-memory")] = None,
    vllm: Annotated[str | None, Opt("--vllm")] = None,
    with_fix: Annotated[bool, Opt("--with-fix/--without-fix")] = False,
    plot: Annotated[Path | None, Opt("--plot", help="write a chart (out.png or out.svg)")] = None,
    as_json: Annotated[bool, Opt("--json")] = False,
    engine_values: dict[str, Any] | None = None,  # --engine and SGLang's flags (engine_options)
) -> None:
    """Largest fitting context and concurrency per GPU × KV dtype × max_model_len."""
    from kvplan import api
    from kvplan.models.resolution.max_len import LONG_ENV, allow_long_from_env
    from kvplan.output import sweep_report

    ev = engine_values or {"engine": ("vllm",), "sglang": {}, "given": set()}
    engines = ev["engine"]
    check_engine_flags(engines, ev["given"], command="sweep", vllm_only=SWEEP_VLLM_ONLY,
                       sglang_only=SWEEP_SGLANG)
    vllm_opts: dict[str, Any] = dict(
        speculative_method=speculative_method, num_speculative_tokens=num_speculative_tokens,
        draft_kv_cache_dtype=draft_kv_cache_dtype, max_num_batched_tokens=max_num_batched_tokens,
        gpu_memory_utilization=gpu_memory_utilization, vllm=vllm, with_fix=with_fix,
        allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)))
    if "vllm" not in engines:
        vllm_opts = {}
    result = api.sweep(model, draft=draft, engine=",".join(engines), max_model_len=max_model_len,
                       gpu=gpu, kv_cache_dtype=kv_cache_dtype,
                       tensor_parallel_size=tensor_parallel_size,
                       kv_cache_memory=kv_cache_memory, **vllm_opts,
                       **sglang_options_dict(ev["sglang"]))
    if plot is not None:
        if plot.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise InputError(f"--plot {plot}: use a .png, .svg or .pdf file name")
        sweep_report.plot_sweep(result, str(plot))
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        sweep_report.render_sweep(result, console())
    any_fit = any(r.largest_fitting_max_model_len for r in result.rows)
    raise typer.Exit(EXIT_FITS if any_fit else EXIT_DOES_NOT_FIT)
