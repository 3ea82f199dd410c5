"""kvplan command line: vLLM-named options, one translation of errors to exit codes.

Exit codes: 0 fits · 1 does not fit (vLLM would refuse to start) · 2 bad input or usage.
The CLI parses and renders; every number comes from the engine.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.errors import (
    EXIT_BAD_INPUT,
    EXIT_DOES_NOT_FIT,
    EXIT_FITS,
    ConfigError,
    HubError,
    InputError,
    KvplanError,
)

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


_APP_SETTINGS: dict[str, Any] = dict(help=HELP, no_args_is_help=True, add_completion=True,
                                     pretty_exceptions_enable=False, rich_markup_mode=None)
app = typer.Typer(**_APP_SETTINGS)


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    width = None
    if os.environ.get("COLUMNS", "").isdigit():
        width = int(os.environ["COLUMNS"])
    return Console(stderr=stderr, width=width, no_color=bool(os.environ.get("NO_COLOR")),
                   highlight=False, soft_wrap=False)


def _emit(plan: Any, fmt: str, as_json: bool) -> int:
    if as_json or fmt == "json":
        typer.echo(plan.to_json())  # no rich for JSON
        return EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT
    from kvplan.output import report
    if fmt == "markdown":
        typer.echo(report.render_markdown(plan), nl=False)
    else:
        report.render_table(plan, _console())
    return EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT


def _print_version(value: bool) -> None:
    if value:
        from kvplan import __version__
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit(EXIT_FITS)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="print kvplan's version and exit")] = False,
) -> None:
    """kvplan: vLLM KV-cache planning, byte-exact and offline."""


Opt = typer.Option


@app.command()
@handles_errors
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
        "--max-model-len", help="context length, 128k style, or auto / -1")] = None,
    max_num_batched_tokens: Annotated[int | None, Opt("--max-num-batched-tokens")] = None,
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
    enable_prefix_caching: Annotated[bool, Opt(
        "--enable-prefix-caching/--no-enable-prefix-caching")] = True,
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
    workload: Annotated[list[str] | None, Opt(
        "--workload", help="PROMPT:OUTPUT tokens (vLLM's notation: 8k:1k = 8000:1000, 8K = 8192; "
        "repeatable) or a file of pairs: how many such requests vLLM's scheduler runs at once")
    ] = None,
    async_scheduling: Annotated[bool | None, Opt(
        "--async-scheduling/--no-async-scheduling", help="default: vLLM's (on)")] = None,
    enable_chunked_prefill: Annotated[bool | None, Opt(
        "--enable-chunked-prefill/--no-enable-chunked-prefill", help="default: vLLM's (on)")
    ] = None,
) -> None:
    """Plan one deployment and say whether it fits (exit 0 fits, 1 does not, 2 bad input)."""
    from kvplan import api
    from kvplan.models.max_len import LONG_ENV, allow_long_from_env

    if fmt not in ("table", "json", "markdown"):
        raise InputError(f"unknown --format {fmt!r}", hint="use table, json or markdown")
    allow_long = allow_long_from_env(os.environ.get(LONG_ENV))
    if specs is not None:
        plan = api.check_specs(specs, model=model, vllm=vllm, with_fix=with_fix,
                               kv_cache_memory=kv_cache_memory, available_kv_gib=available_kv_gib,
                               max_model_len=max_model_len,
                               max_num_batched_tokens=max_num_batched_tokens, explain=explain,
                               workload=workload)
        raise typer.Exit(_emit(plan, fmt, as_json))
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
        async_scheduling=async_scheduling, enable_chunked_prefill=enable_chunked_prefill,
        workload=workload)
    raise typer.Exit(_emit(plan, fmt, as_json))


@app.command("explain", help="Same as `kvplan check --explain`: why it does (not) fit, ranked, "
                             "and what-ifs each recomputed by the engine.")
@functools.wraps(check)
def explain_command(*args: Any, **kwargs: Any) -> None:
    """Same as `kvplan check --explain`: why it does not fit, and engine-computed what-ifs."""
    kwargs["explain"] = True
    check(*args, **kwargs)


@app.command()
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
    from kvplan.output import report
    report.render_gpus(rows, _console())


@app.command()
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
    max_model_len: Annotated[str | None, Opt("--max-model-len", help="context length, 128k style (windows "
                                                     "and block sizes may depend on it)")] = None,
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
    from kvplan.models.build import Deployment
    from kvplan.models.max_len import LONG_ENV, allow_long_from_env
    from kvplan.output import report
    from kvplan.pipeline.deploy import Request, layer_rows

    mml, _ = _parse_max_model_len(max_model_len)
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
    report.render_layers(rows, notes, _console())


@app.command()
@handles_errors
def sweep(
    model: Annotated[str, typer.Argument(help="hub id, local folder or config.json")],
    max_model_len: Annotated[str, Opt("--max-model-len", help="8k..1M or 8k,32k,128k")] = "8k..1M",
    gpu: Annotated[str, Opt("--gpu", help="comma-separated catalogue names")] = "H100",
    kv_cache_dtype: Annotated[str, Opt("--kv-cache-dtype", "--kv-dtype",
                                       help="comma-separated")] = "auto",
    draft: Annotated[str | None, Opt("--draft")] = None,
    speculative_method: Annotated[str | None, Opt("--speculative-method")] = None,
    num_speculative_tokens: Annotated[int, Opt("--num-speculative-tokens")] = 0,
    draft_kv_cache_dtype: Annotated[str | None, Opt("--draft-kv-cache-dtype")] = None,
    tensor_parallel_size: Annotated[int, Opt("--tensor-parallel-size", "-tp")] = 1,
    max_num_batched_tokens: Annotated[int | None, Opt("--max-num-batched-tokens")] = None,
    gpu_memory_utilization: Annotated[float | None, Opt("--gpu-memory-utilization")] = None,
    kv_cache_memory: Annotated[str | None, Opt("--kv-cache-memory")] = None,
    vllm: Annotated[str | None, Opt("--vllm")] = None,
    with_fix: Annotated[bool, Opt("--with-fix/--without-fix")] = False,
    plot: Annotated[Path | None, Opt("--plot", help="write a chart (out.png or out.svg)")] = None,
    as_json: Annotated[bool, Opt("--json")] = False,
) -> None:
    """Largest fitting context and concurrency per GPU × KV dtype × max_model_len."""
    from kvplan import api
    from kvplan.models.max_len import LONG_ENV, allow_long_from_env
    from kvplan.output import report

    result = api.sweep(model, draft=draft, max_model_len=max_model_len, gpu=gpu,
                       kv_cache_dtype=kv_cache_dtype, speculative_method=speculative_method,
                       num_speculative_tokens=num_speculative_tokens,
                       draft_kv_cache_dtype=draft_kv_cache_dtype,
                       tensor_parallel_size=tensor_parallel_size,
                       max_num_batched_tokens=max_num_batched_tokens,
                       gpu_memory_utilization=gpu_memory_utilization,
                       kv_cache_memory=kv_cache_memory, vllm=vllm, with_fix=with_fix,
                       allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)))
    if plot is not None:
        if plot.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise InputError(f"--plot {plot}: use a .png, .svg or .pdf file name")
        report.plot_sweep(result, str(plot))
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        report.render_sweep(result, _console())
    any_fit = any(r.largest_fitting_max_model_len for r in result.rows)
    raise typer.Exit(EXIT_FITS if any_fit else EXIT_DOES_NOT_FIT)


@app.command()
@handles_errors
def ci(
    file: Annotated[Path, typer.Argument(help="deployments.toml (or .yaml) with [[deployment]]")],
    vllm: Annotated[str | None, Opt("--vllm", help="override every entry's release")] = None,
    as_json: Annotated[bool, Opt("--json")] = False,
) -> None:
    """Plan several named deployments; exit 1 if any does not fit, 2 if an entry is invalid."""
    from kvplan.models.max_len import LONG_ENV, allow_long_from_env
    from kvplan.output import report
    from kvplan.pipeline.batch import run_batch

    batch = run_batch(_read_deployments(file), vllm_version=vllm,
                      allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)))
    if as_json:
        typer.echo(batch.model_dump_json(indent=2))
    else:
        report.render_batch(batch, _console())
    if any(e.fits is None for e in batch.entries):
        raise typer.Exit(EXIT_BAD_INPUT)
    raise typer.Exit(EXIT_FITS if batch.all_fit else EXIT_DOES_NOT_FIT)


def _read_deployments(path: Path) -> Any:
    if not path.is_file():
        raise InputError(f"deployments file {path} does not exist")
    raw = path.read_bytes()
    if len(raw) > 4 * 2**20:
        raise InputError(f"deployments file {path} is over 4 MiB")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml  # type: ignore[import-untyped]
        except ImportError:
            raise InputError("YAML deployment files need PyYAML",
                             hint="pip install pyyaml, or write the file as TOML") from None
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path} is not valid TOML: {exc}") from None


# check's options that describe the deployment (the others pick what to plan and how to show it)
_NOT_DEPLOYMENT = frozenset({"specs", "serve", "from_log", "fmt", "as_json", "explain",
                             "workload"})


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

    from kvplan.models.max_len import LONG_ENV, allow_long_from_env
    from kvplan.pipeline.batch import layer_entries, log_entry, request_from_entry, serve_options
    from kvplan.pipeline.deploy import evaluate, log_notes

    notes: list[str] = []
    layers: list[tuple[str, dict[str, Any]]] = []
    log = None
    if from_log is not None:
        from kvplan.sources.vllm_log import parse_vllm_log

        if not from_log.is_file():
            raise InputError(f"log file {from_log} does not exist")
        log = parse_vllm_log(from_log.read_bytes())
        entry, skipped, log_notes_ = log_entry(log)
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
    try:
        ev = evaluate(req)
    except (ConfigError, HubError) as exc:
        if source.get("model") != "log":
            raise
        raise type(exc)(f"the model the log names, {req.model!r}, cannot be read here: "
                        f"{exc.message}", hint="give the model next to the log: kvplan check "
                        "MODEL --from-log LOG (a hub id, a folder or a config.json)") from None
    plan = _with_workload(ev, req, workload)
    extra = notes + (log_notes(log, ev) if log is not None else [])
    plan = plan.model_copy(update={"notes": [*plan.notes, *extra],
                                   "provenance": {k: source[k] for k in sorted(source)}})
    raise typer.Exit(_emit(plan, fmt, as_json))


def _parse_max_model_len(value: str | None) -> tuple[int | None, bool]:
    from kvplan.api import parse_max_model_len

    return parse_max_model_len(value)


@app.command()
@handles_errors
def fit(
    model: Annotated[str, typer.Argument(help="hub id, local folder or config.json")],
    max_model_len: Annotated[str, Opt("--max-model-len", help="the context length to serve, "
                                      "128k style")],
    concurrency: Annotated[int, Opt("--concurrency", help="concurrent requests of that length")],
    gpu: Annotated[str | None, Opt("--gpu", help="comma-separated catalogue names (default: "
                                   "every catalogue GPU with a price)")] = None,
    kv_cache_dtype: Annotated[str, Opt("--kv-cache-dtype", "--kv-dtype",
                                       help="comma-separated; only those the GPU runs natively "
                                            "are tried")] = "auto,fp8,nvfp4",
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
    max_num_batched_tokens: Annotated[int | None, Opt("--max-num-batched-tokens")] = None,
    max_num_seqs: Annotated[int | None, Opt("--max-num-seqs")] = None,
    block_size: Annotated[int | None, Opt("--block-size")] = None,
    decode_context_parallel_size: Annotated[int, Opt("--decode-context-parallel-size",
                                                     "-dcp")] = 1,
    enable_prefix_caching: Annotated[bool, Opt(
        "--enable-prefix-caching/--no-enable-prefix-caching")] = True,
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
) -> None:
    """The cheapest deployment (GPU, count, TP×PP×DP, KV dtype) that serves --max-model-len at
    --concurrency; exit 0 when one is found, 1 when nothing fits (the nearest misses)."""
    from kvplan import api
    from kvplan.models.max_len import LONG_ENV, allow_long_from_env
    from kvplan.output import report

    progress = report.DelayedProgress(_console(stderr=True), "planning deployments")
    try:
        result = api.fit(
            model, max_model_len=max_model_len, concurrency=concurrency, draft=draft,
            progress=progress, gpu=gpu, kv_cache_dtype=kv_cache_dtype, max_gpus=max_gpus,
            price=price, prices=prices, top=top, speculative_config=speculative_config,
            speculative_method=speculative_method, num_speculative_tokens=num_speculative_tokens,
            draft_kv_cache_dtype=draft_kv_cache_dtype,
            draft_tensor_parallel_size=draft_tensor_parallel_size,
            draft_block_size=draft_block_size, dtype=dtype,
            max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
            block_size=block_size, decode_context_parallel_size=decode_context_parallel_size,
            enable_prefix_caching=enable_prefix_caching, mamba_cache_dtype=mamba_cache_dtype,
            mamba_ssm_cache_dtype=mamba_ssm_cache_dtype, attention_backend=attention_backend,
            gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager,
            revision=revision, vllm=vllm, with_fix=with_fix, hf_overrides=hf_overrides,
            allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)),
            workload=workload)
    finally:
        progress.close()
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        report.render_fit(result, _console())
    raise typer.Exit(EXIT_FITS if result.candidates else EXIT_DOES_NOT_FIT)


def app_for(args: list[str]) -> typer.Typer:
    """The app that runs `kvplan <command> ...`: the root callback and that command only, since
    typer reads the signature of every registered command when it builds the whole group (cold
    start). Anything else (no command, an option first, an unknown name) gets the whole app."""
    if args and not args[0].startswith("-"):
        for info in app.registered_commands:
            name = info.name or (info.callback.__name__.lower().replace("_", "-")
                                 if info.callback else None)
            if name == args[0]:
                one = typer.Typer(**_APP_SETTINGS)
                one.registered_callback = app.registered_callback
                one.registered_commands = [info]
                return one
    return app


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
        _print_error(exc.message, exc.hint)
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
            _print_error(exc.format_message(), hint)  # type: ignore[attr-defined]
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
