"""`kvplan fit`: the cheapest deployment that serves a context length at a concurrency."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.common import Opt, command, console, handles_errors
from kvplan.cli.engine_options import check_engine_flags, sglang_options_dict, with_engine_options
from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_FITS

# fit's options only vLLM reads, and the SGLang flags fit takes
FIT_VLLM_ONLY = ("speculative_config", "speculative_method", "num_speculative_tokens",
                 "draft_kv_cache_dtype", "draft_tensor_parallel_size", "draft_block_size", "dtype",
                 "max_num_batched_tokens", "max_num_seqs", "block_size",
                 "decode_context_parallel_size", "enable_prefix_caching", "mamba_cache_dtype",
                 "mamba_ssm_cache_dtype", "attention_backend", "gpu_memory_utilization",
                 "enforce_eager", "hf_overrides", "vllm", "with_fix", "workload")
FIT_SGLANG = ("sglang", "mem_fraction_static", "page_size", "max_running_requests",
              "chunked_prefill_size", "cuda_graph_max_bs", "disable_cuda_graph",
              "swa_full_tokens_ratio", "disable_radix_cache", "disable_overlap_schedule",
              "mamba_full_memory_ratio", "max_mamba_cache_size", "speculative_algorithm",
              "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk",
              "speculative_num_draft_tokens", "speculative_draft_kv_cache_dtype",
              "json_model_override_args")


@command()
@handles_errors
@with_engine_options(FIT_SGLANG, engine_help="vllm (default), sglang, or vllm,sglang to rank "
                                             "both servers' deployments in one list")
def fit(
    model: Annotated[str, typer.Argument(help="hub id, local folder or config.json")],
    max_model_len: Annotated[str, Opt("--max-model-len", help="the context length to serve, "
                                      "as vLLM reads it: 128k = 128,000, 128K = 131,072")],
    concurrency: Annotated[int, Opt("--concurrency", help="concurrent requests of that length")],
    gpu: Annotated[str | None, Opt("--gpu", help="comma-separated catalogue names (default: "
                                   "every catalogue GPU with a price)")] = None,
    vendor: Annotated[str | None, Opt("--vendor", help="only these GPU vendors: nvidia, amd "
                                      "(comma-separated)")] = None,
    kv_cache_dtype: Annotated[str | None, Opt(
        "--kv-cache-dtype", "--kv-dtype", help="comma-separated (default auto,fp8,nvfp4 where "
        "the GPU runs them natively); named dtypes are also tried where vLLM serves them only "
        "dequantised (fp8 on Ampere), marked so")] = None,
    max_gpus: Annotated[int, Opt("--max-gpus", help="at most this many GPUs (TP×PP×DP)")] = 8,
    price: Annotated[list[str] | None, Opt("--price", help="GPU=USD per GPU-hour; repeatable")
                     ] = None,
    prices: Annotated[Path | None, Opt("--prices", help="file of GPU=USD lines or a JSON "
                                       "object")] = None,
    top: Annotated[int, Opt("--top", help="how many deployments to show")] = 5,
    draft: Annotated[str | None, Opt("--draft", help="draft head (also tried without it)")] = None,
    speculative_config: Annotated[str | None, Opt("--speculative-config")] = None,
    speculative_method: Annotated[str | None, Opt("--speculative-method")] = None,
    num_speculative_tokens: Annotated[int, Opt("--num-speculative-tokens")] = 0,
    draft_kv_cache_dtype: Annotated[str | None, Opt("--draft-kv-cache-dtype")] = None,
    draft_tensor_parallel_size: Annotated[int | None, Opt("--draft-tensor-parallel-size")] = None,
    draft_block_size: Annotated[int | None, Opt("--draft-block-size")] = None,
    dtype: Annotated[str, Opt("--dtype")] = "auto",
    max_num_batched_tokens: Annotated[str | None, Opt(
        "--max-num-batched-tokens", help="tokens per step, as vLLM reads it: 16k = 16,000, "
        "16K = 16,384")] = None,
    max_num_seqs: Annotated[int | None, Opt("--max-num-seqs")] = None,
    block_size: Annotated[int | None, Opt("--block-size")] = None,
    decode_context_parallel_size: Annotated[int, Opt("--decode-context-parallel-size",
                                                     "-dcp")] = 1,
    enable_prefix_caching: Annotated[bool | None, Opt(
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="default: vLLM's for the model (off for attention-free Mamba models)")] = None,
    mamba_cache_dtype: Annotated[str, Opt("--mamba-cache-dtype")] = "auto",
    mamba_ssm_cache_dtype: Annotated[str, Opt("--mamba-ssm-cache-dtype")] = "auto",
    attention_backend: Annotated[str | None, Opt("--attention-backend")] = None,
    gpu_memory_utilization: Annotated[float | None, Opt("--gpu-memory-utilization")] = None,
    enforce_eager: Annotated[bool, Opt("--enforce-eager")] = False,
    revision: Annotated[str | None, Opt("--revision")] = None,
    hf_overrides: Annotated[str | None, Opt(
        "--hf-overrides", help="vLLM's JSON applied to the model's config, e.g. "
        "'{\"rope_scaling\": {...}}'")] = None,
    vllm: Annotated[str | None, Opt("--vllm", help="vLLM release profile (default newest)")] = None,
    with_fix: Annotated[bool, Opt("--with-fix/--without-fix")] = False,
    as_json: Annotated[bool, Opt("--json", help="JSON on stdout")] = False,
    workload: Annotated[str | None, Opt(
        "--workload", help="PROMPT:OUTPUT (or a file of pairs): --concurrency counts such "
        "requests vLLM's scheduler runs at once without preemption")] = None,
    engine_values: dict[str, Any] | None = None,  # --engine and SGLang's flags (engine_options)
) -> None:
    """The cheapest deployment (GPU, count, TP×PP×DP, KV dtype) that serves --max-model-len at
    --concurrency; exit 0 when one is found, 1 when nothing fits (the nearest misses)."""
    from kvplan import api
    from kvplan.models.resolution.max_len import LONG_ENV, allow_long_from_env
    from kvplan.output.fit_report import render_fit
    from kvplan.output.progress import DelayedProgress

    ev = engine_values or {"engine": ("vllm",), "sglang": {}, "given": set()}
    engines = ev["engine"]
    check_engine_flags(engines, ev["given"], command="fit",
                       vllm_only=[n for n in FIT_VLLM_ONLY
                                  if not (n == "speculative_method" and len(engines) > 1)],
                       sglang_only=FIT_SGLANG)
    vllm_opts = dict(
        speculative_config=speculative_config, speculative_method=speculative_method,
        num_speculative_tokens=num_speculative_tokens, draft_kv_cache_dtype=draft_kv_cache_dtype,
        draft_tensor_parallel_size=draft_tensor_parallel_size, draft_block_size=draft_block_size,
        dtype=dtype, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        block_size=block_size, decode_context_parallel_size=decode_context_parallel_size,
        enable_prefix_caching=enable_prefix_caching, mamba_cache_dtype=mamba_cache_dtype,
        mamba_ssm_cache_dtype=mamba_ssm_cache_dtype, attention_backend=attention_backend,
        gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager, vllm=vllm,
        with_fix=with_fix, hf_overrides=hf_overrides, workload=workload)
    if "vllm" not in engines:
        vllm_opts = {}
    progress = DelayedProgress(console(stderr=True), "planning deployments")
    try:
        result = api.fit(
            model, max_model_len=max_model_len, concurrency=concurrency, draft=draft,
            progress=progress, engine=",".join(engines), gpu=gpu, vendor=vendor,
            kv_cache_dtype=kv_cache_dtype,
            max_gpus=max_gpus, price=price, prices=prices, top=top, revision=revision,
            allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)),
            **vllm_opts, **sglang_options_dict(ev["sglang"]))  # type: ignore[arg-type]
    finally:
        progress.close()
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        render_fit(result, console())
    raise typer.Exit(EXIT_FITS if result.candidates else EXIT_DOES_NOT_FIT)
