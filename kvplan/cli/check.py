"""`kvplan check` (and `kvplan explain`): plan one deployment — a model, a layer-spec file, a
`vllm serve` line or a vLLM start-up log — and say whether it fits."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.common import Opt, command, emit, handles_errors, output_format
from kvplan.cli.engine_options import SGLANG_OPTIONS, with_engine_options
from kvplan.errors import ConfigError, HubError, InputError, StartupError


@command()
@handles_errors
@with_engine_options(SGLANG_OPTIONS)
def check(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Argument(
        help="Hugging Face model: hub id (org/name[@rev]), local folder or config.json")] = None,
    specs: Annotated[Path | None, Opt("--specs", help="plan a layer-spec JSON file instead")] = None,
    serve: Annotated[str | None, Opt(
        "--serve", help="plan exactly this `vllm serve ...` command line")] = None,
    from_log: Annotated[Path | None, Opt(
        "--from-log", help="explain a vLLM start-up log: plan with its logged KV memory")] = None,
    draft: Annotated[str | None, Opt("--draft", help="draft head (DFlash, EAGLE, EAGLE3)")] = None,
    speculative_config: Annotated[str | None, Opt(
        "--speculative-config", help="vLLM's JSON: {method, model, num_speculative_tokens, ...}")
    ] = None,
    speculative_method: Annotated[str | None, Opt(
        "--speculative-method", help="eagle, eagle3, dflash, mtp, ngram")] = None,
    num_speculative_tokens: Annotated[int, Opt("--num-speculative-tokens")] = 0,
    kv_cache_dtype: Annotated[str, Opt("--kv-cache-dtype", "--kv-dtype")] = "auto",
    draft_kv_cache_dtype: Annotated[str | None, Opt(
        "--draft-kv-cache-dtype", help="default: inherit --kv-cache-dtype, as vLLM does")] = None,
    dtype: Annotated[str, Opt("--dtype", help="model dtype (auto, bfloat16, float16)")] = "auto",
    max_model_len: Annotated[str | None, Opt(
        "--max-model-len", help="context length as vLLM reads it (128k = 128,000, 128K = 131,072), "
        "or auto / -1")] = None,
    max_num_batched_tokens: Annotated[str | None, Opt(
        "--max-num-batched-tokens", help="tokens per step, as vLLM reads it: 16k = 16,000, "
        "16K = 16,384")] = None,
    max_num_seqs: Annotated[int | None, Opt("--max-num-seqs")] = None,
    block_size: Annotated[int | None, Opt("--block-size")] = None,
    draft_block_size: Annotated[int | None, Opt(
        "--draft-block-size", help="force the draft layers' block (a drafter on its own backend)")
    ] = None,
    tensor_parallel_size: Annotated[int, Opt("--tensor-parallel-size", "-tp")] = 1,
    pipeline_parallel_size: Annotated[int, Opt("--pipeline-parallel-size", "-pp")] = 1,
    decode_context_parallel_size: Annotated[int, Opt("--decode-context-parallel-size",
                                                     "-dcp")] = 1,
    draft_tensor_parallel_size: Annotated[int | None, Opt("--draft-tensor-parallel-size")] = None,
    enable_prefix_caching: Annotated[bool | None, Opt(
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="default: vLLM's for the model (off for attention-free Mamba models)")] = None,
    mamba_cache_dtype: Annotated[str, Opt("--mamba-cache-dtype")] = "auto",
    mamba_ssm_cache_dtype: Annotated[str, Opt("--mamba-ssm-cache-dtype")] = "auto",
    attention_backend: Annotated[str | None, Opt("--attention-backend")] = None,
    num_gpu_blocks_override: Annotated[int | None, Opt("--num-gpu-blocks-override")] = None,
    runner: Annotated[str, Opt("--runner", help="auto, generate or pooling (embedding, reward, "
                               "classification models)")] = "auto",
    convert: Annotated[str, Opt("--convert", help="auto, none, embed or classify (a generation "
                                "model served as a pooling one)")] = "auto",
    kv_cache_memory: Annotated[str | None, Opt(
        "--kv-cache-memory", "--kv-cache-memory-bytes",
        help="KV cache memory per GPU: bytes or 20GiB, 20G, 1.5TiB")] = None,
    available_kv_gib: Annotated[float | None, Opt(
        "--available-kv-gib", help="copied from vLLM's 'Available KV cache memory: X GiB' line")
    ] = None,
    gpu: Annotated[str | None, Opt("--gpu", help="catalogue name (kvplan gpus), e.g. H100")] = None,
    gpu_memory: Annotated[str | None, Opt(
        "--gpu-memory", help="the GPU's runtime total memory (bytes or 79.1GiB)")] = None,
    gpu_memory_utilization: Annotated[float | None, Opt("--gpu-memory-utilization")] = None,
    data_parallel_size: Annotated[int, Opt("--data-parallel-size", "-dp")] = 1,
    enforce_eager: Annotated[bool, Opt("--enforce-eager", help="no CUDA graphs")] = False,
    revision: Annotated[str | None, Opt("--revision")] = None,
    hf_overrides: Annotated[str | None, Opt(
        "--hf-overrides", help="vLLM's JSON applied to the model's config, e.g. "
        "'{\"rope_scaling\": {...}}'")] = None,
    vllm: Annotated[str | None, Opt(
        "--vllm", help="vLLM release profile: 0.31.0, 0.32.0, 0.33.0, 0.34.0 (default newest)")
    ] = None,
    with_fix: Annotated[bool, Opt(
        "--with-fix/--without-fix", help="apply vLLM PR #53499 (scale block size before padding)")
    ] = False,
    fmt: Annotated[str, Opt("--format", help="table, json or markdown")] = "table",
    as_json: Annotated[bool, Opt("--json", help="JSON on stdout (same as --format json)")] = False,
    explain: Annotated[bool, Opt("--explain", help="why, ranked by effect, and what-ifs")] = False,
    trust_remote_code: Annotated[bool, Opt(
        "--trust-remote-code", help="as vLLM's: plan a config that needs the checkpoint's code")
    ] = False,
    allow_deprecated_quantization: Annotated[bool, Opt(
        "--allow-deprecated-quantization", help="as vLLM's: serve e.g. fbgemm_fp8")] = False,
    workload: Annotated[list[str] | None, Opt(
        "--workload", help="PROMPT:OUTPUT tokens (vLLM's notation: 8k:1k = 8000:1000, 8K = 8192; "
        "repeatable) or a file of pairs: how many such requests vLLM's scheduler runs at once")
    ] = None,
    async_scheduling: Annotated[bool | None, Opt(
        "--async-scheduling/--no-async-scheduling", help="default: vLLM's (on)")] = None,
    enable_chunked_prefill: Annotated[bool | None, Opt(
        "--enable-chunked-prefill/--no-enable-chunked-prefill", help="default: vLLM's (on)")
    ] = None,
    config_format: Annotated[str | None, Opt(
        "--config-format", help="vLLM's: auto (default: params.json when the folder / repo is "
        "Mistral format, else config.json), hf, mistral")] = None,
    performance_mode: Annotated[str | None, Opt(
        "--performance-mode", help="vLLM's: balanced (default), interactivity, throughput "
        "(doubles the default max_num_batched_tokens and max_num_seqs)")] = None,
    engine_values: dict[str, Any] | None = None,  # --engine and SGLang's flags (engine_options)
) -> None:
    """Plan one deployment and say whether it fits (exit 0 fits, 1 does not, 2 bad input)."""
    from kvplan import api
    from kvplan.cli.sglang_check import route
    from kvplan.models.resolution.max_len import LONG_ENV, allow_long_from_env

    fmt = output_format(fmt, as_json)
    as_json = fmt == "json"
    _refuse_conflicts(model=model, specs=specs, serve=serve, from_log=from_log,
                      kv_cache_memory=kv_cache_memory, available_kv_gib=available_kv_gib)
    route(dict(locals()))  # --engine sglang / vllm,sglang, SGLang lines and logs: plans, exits
    allow_long = allow_long_from_env(os.environ.get(LONG_ENV))
    if specs is not None:
        plan = api.check_specs(specs, model=model, vllm=vllm, with_fix=with_fix,
                               kv_cache_memory=kv_cache_memory, available_kv_gib=available_kv_gib,
                               max_model_len=max_model_len,
                               max_num_batched_tokens=max_num_batched_tokens, explain=explain,
                               workload=workload)
        raise typer.Exit(emit(plan, fmt, as_json))
    if serve is not None or from_log is not None:
        from kvplan.units import parse_kv_cache_memory_bytes

        given = _command_line_options(ctx, dict(locals()))
        if kv_cache_memory is not None:  # 0 or negative: vLLM's no-memory error
            given["kv_cache_memory"] = parse_kv_cache_memory_bytes(kv_cache_memory)
        _check_serve_or_log(serve, from_log, given, allow_long=allow_long, explain=explain,
                            fmt=fmt, as_json=as_json, workload=workload)
        return
    if model is None:
        raise InputError("nothing to plan", hint="give a MODEL (hub id, folder, config.json), "
                         "--specs FILE.json, --serve \"vllm serve ...\" or --from-log FILE")
    plan = api.check(
        model, draft=draft, speculative_config=speculative_config,
        speculative_method=speculative_method, num_speculative_tokens=num_speculative_tokens,
        kv_cache_dtype=kv_cache_dtype, draft_kv_cache_dtype=draft_kv_cache_dtype, dtype=dtype,
        max_model_len=max_model_len, max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs, block_size=block_size, draft_block_size=draft_block_size,
        allow_long_max_model_len=allow_long,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        decode_context_parallel_size=decode_context_parallel_size,
        draft_tensor_parallel_size=draft_tensor_parallel_size,
        pp_layer_partition=os.environ.get("VLLM_PP_LAYER_PARTITION") or None,
        enable_prefix_caching=enable_prefix_caching, mamba_cache_dtype=mamba_cache_dtype,
        mamba_ssm_cache_dtype=mamba_ssm_cache_dtype, attention_backend=attention_backend,
        num_gpu_blocks_override=num_gpu_blocks_override, kv_cache_memory=kv_cache_memory,
        available_kv_gib=available_kv_gib, gpu=gpu, gpu_memory=gpu_memory,
        gpu_memory_utilization=gpu_memory_utilization, data_parallel_size=data_parallel_size,
        enforce_eager=enforce_eager, revision=revision, vllm=vllm, with_fix=with_fix,
        explain=explain, hf_overrides=hf_overrides, runner=runner, convert=convert,
        trust_remote_code=trust_remote_code,
        allow_deprecated_quantization=allow_deprecated_quantization,
        async_scheduling=async_scheduling, enable_chunked_prefill=enable_chunked_prefill,
        performance_mode=performance_mode, config_format=config_format,
        workload=workload)
    raise typer.Exit(emit(plan, fmt, as_json))


@command("explain", help="Same as `kvplan check --explain`: why it does (not) fit, ranked, "
                         "and what-ifs each recomputed by the engine.")
@functools.wraps(check)
def explain_command(*args: Any, **kwargs: Any) -> None:
    """Same as `kvplan check --explain`: why it does not fit, and engine-computed what-ifs."""
    kwargs["explain"] = True
    check(*args, **kwargs)


def _refuse_conflicts(*, model: str | None, specs: Path | None, serve: str | None,
                      from_log: Path | None, kv_cache_memory: str | None,
                      available_kv_gib: float | None) -> None:
    """Flags that ask for two different things fail (exit 2) instead of one winning silently."""
    if specs is not None and model is not None:
        raise InputError(f"MODEL ({model}) and --specs both say what to plan",
                         hint="give one: a layer-spec file plans the layers it lists (its `name` "
                              "labels the plan)")
    if specs is not None and (serve is not None or from_log is not None):
        raise InputError("--specs with " + ("--serve" if serve is not None else "--from-log")
                         + ": a layer-spec file cannot take a serve line's or a log's model",
                         hint="plan one of them at a time")
    if kv_cache_memory is not None and available_kv_gib is not None:
        raise InputError("--kv-cache-memory and --available-kv-gib both set the KV cache budget",
                         hint="give one: --kv-cache-memory (vLLM's kv_cache_memory_bytes) or "
                              "--available-kv-gib (copied from a vLLM log)")


# check's options that describe the deployment (the others pick what to plan and how to show it)
_NOT_DEPLOYMENT = frozenset({"specs", "serve", "from_log", "fmt", "as_json", "explain",
                             "engine_values", "workload"})


def _command_line_options(ctx: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The deployment options typed on the command line (not left at their defaults)."""
    return {name: value for name, value in values.items()
            if name not in _NOT_DEPLOYMENT and name in ctx.params
            and getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"}


def _check_serve_or_log(serve: str | None, from_log: Path | None, given: dict[str, Any], *,
                        allow_long: bool, explain: bool, fmt: str, as_json: bool,
                        workload: list[str] | None = None) -> None:
    """Plan what a serve line and/or a start-up log describe: command line > serve line > log >
    defaults, key by key; the plan says where each value came from."""
    from dataclasses import replace

    from kvplan.models.resolution.max_len import LONG_ENV, allow_long_from_env
    from kvplan.pipeline.batch import layer_entries, log_entry, request_from_entry, serve_options
    from kvplan.pipeline.deploy import log_notes, refusal, resolve
    from kvplan.pipeline.log_check import evaluate_log, with_log_findings

    notes: list[str] = []
    layers: list[tuple[str, dict[str, Any]]] = []
    log = None
    log_keys: list[str] = []
    log_unmodelled: list[str] = []
    if from_log is not None:
        from kvplan.sources.vllm_log import parse_vllm_log

        if not from_log.is_file():
            raise InputError(f"log file {from_log} does not exist")
        log = parse_vllm_log(from_log.read_bytes())
        entry, log_unmodelled, log_notes_ = log_entry(log)
        log_keys = list(entry)
        layers.append(("log", entry))
        notes += log_notes_
    if serve is not None:
        from kvplan.sources.serve_line import parse_serve_command

        cmd = parse_serve_command(serve)
        entry, skipped = serve_options(cmd.options)
        entry["model"] = cmd.model
        notes += [f"serve line: {n}" for n in cmd.notes]
        if cmd.unknown:
            notes.append(f"serve line: flags vLLM does not have, ignored: {', '.join(cmd.unknown)}")
        if skipped:
            notes.append(f"serve line: not modelled by kvplan: {', '.join(skipped)}")
        if cmd.env.get("VLLM_PP_LAYER_PARTITION"):
            entry["pp_layer_partition"] = cmd.env["VLLM_PP_LAYER_PARTITION"]
        if allow_long_from_env(cmd.env.get(LONG_ENV)):
            entry["allow_long_max_model_len"] = True
        layers.append(("serve line", entry))
    layers.append(("command line", given))
    entry, source = layer_entries(layers)
    if allow_long:
        entry["allow_long_max_model_len"] = True
    if "model" not in entry:
        raise InputError(f"{from_log}: the log names no model",
                         hint="give the model next to the log: kvplan check MODEL --from-log LOG")
    logged_util = log.memory.gpu_memory_utilization if log is not None and log.memory else None
    logged_util = log.non_default_args.get("gpu_memory_utilization", logged_util) if log else None
    if source.get("available_kv_gib") == "log" and given.get("gpu_memory_utilization") not in (
            None, logged_util) and logged_util is not None:
        # the logged budget was measured at another utilization: estimate it anew
        entry.pop("available_kv_gib")
        source.pop("available_kv_gib")
        notes.append(f"the log's 'Available KV cache memory' was measured at gpu_memory_utilization "
                     f"{logged_util}: the budget is estimated anew for the command line's "
                     f"{given['gpu_memory_utilization']}")
    req = request_from_entry(entry, {}, "the serve line" if serve else str(from_log))
    req = replace(req, explain=explain, logged_memory=log.memory if log is not None else None)
    res = None
    try:
        res = resolve(req)
        ev = evaluate_log(req, log, source, res)
    except (ConfigError, HubError) as exc:
        if source.get("model") != "log":
            raise
        raise type(exc)(f"the model the log names, {req.model!r}, cannot be read here: "
                        f"{exc.message}", hint="give the model next to the log: kvplan check "
                        "MODEL --from-log LOG (a hub id, a folder or a config.json)") from None
    except StartupError as exc:  # vLLM refuses it before sizing the KV cache: a plan too
        plan, extra = refusal(req, exc, res), notes
    else:
        plan = _with_workload(ev, req, workload)
        extra = notes + (log_notes(log, ev) if log is not None else [])
    plan = plan.model_copy(update={"notes": [*plan.notes, *extra],
                                   "provenance": {k: source[k] for k in sorted(source)}})
    if log is not None:  # every figure the log states that the plan does not reproduce: loud
        plan = with_log_findings(plan, log, source=source, log_keys=log_keys,
                                 unmodelled=log_unmodelled)
    raise typer.Exit(emit(plan, fmt, as_json))


def _with_workload(ev: Any, req: Any, workload: list[str] | None) -> Any:
    """--workload on a serve line / log plan."""
    if not workload:
        return ev.plan
    from kvplan.api import parse_workloads
    from kvplan.pipeline.workload import for_evaluation, not_started, with_workload

    workloads = parse_workloads(workload)
    if not ev.plan.fits:
        return not_started(ev.plan)
    return with_workload(ev.plan, for_evaluation(ev, req, workloads))
