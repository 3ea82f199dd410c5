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
    vllm: Annotated[str | None, Opt(
        "--vllm", help="vLLM release profile: 0.31.0, 0.32.0, 0.33.0, 0.34.0 (default newest)")
    ] = None,
    with_fix: Annotated[bool, Opt(
        "--with-fix/--without-fix", help="apply vLLM PR #53499 (scale block size before padding)")
    ] = False,
    fmt: Annotated[str, Opt("--format", help="table, json or markdown")] = "table",
    as_json: Annotated[bool, Opt("--json", help="JSON on stdout (same as --format json)")] = False,
    explain: Annotated[bool, Opt("--explain", help="why, ranked by effect, and what-ifs")] = False,
) -> None:
    """Plan one deployment and say whether it fits (exit 0 fits, 1 does not, 2 bad input)."""
    import math

    from kvplan.max_len import LONG_ENV, allow_long_from_env
    from kvplan.units import GiB, parse_kv_cache_memory_bytes, parse_size_bytes

    if fmt not in ("table", "json", "markdown"):
        raise InputError(f"unknown --format {fmt!r}", hint="use table, json or markdown")
    if gpu_memory_utilization is not None and not 0 < gpu_memory_utilization <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}")
    mml, auto = _parse_max_model_len(max_model_len)
    allow_long = allow_long_from_env(os.environ.get(LONG_ENV))
    avail: int | None = None
    if kv_cache_memory is not None:
        avail = parse_kv_cache_memory_bytes(kv_cache_memory)  # 0 or negative: vLLM's no-memory error
    elif available_kv_gib is not None:
        if not math.isfinite(available_kv_gib):
            raise InputError(f"--available-kv-gib must be a number, got {available_kv_gib}")
        avail = int(round(available_kv_gib * GiB))
    if specs is not None:
        _check_specs(specs, model, vllm, with_fix, avail, mml, auto, max_num_batched_tokens,
                     fmt, as_json, explain)
        return
    if serve is not None or from_log is not None:
        given = _command_line_options(ctx, dict(locals()))
        if kv_cache_memory is not None:
            given["kv_cache_memory"] = avail
        _check_serve_or_log(serve, from_log, given, allow_long=allow_long, explain=explain,
                            fmt=fmt, as_json=as_json)
        return
    if model is None:
        raise InputError("nothing to plan", hint="give a MODEL (hub id, folder, config.json), "
                         "--specs FILE.json, --serve \"vllm serve ...\" or --from-log FILE")
    spec_cfg = _speculative_config(speculative_config)
    from kvplan.build import Deployment
    from kvplan.deploy import Request, evaluate

    dep = Deployment(
        vllm_version=vllm, with_fix=with_fix, kv_cache_dtype=kv_cache_dtype, dtype=dtype,
        block_size=block_size, max_model_len=mml, auto_fit_max_model_len=auto,
        allow_long_max_model_len=allow_long,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
        tensor_parallel_size=tensor_parallel_size, pipeline_parallel_size=pipeline_parallel_size,
        decode_context_parallel_size=decode_context_parallel_size,
        pp_layer_partition=os.environ.get("VLLM_PP_LAYER_PARTITION") or None,
        enable_prefix_caching=enable_prefix_caching, mamba_cache_dtype=mamba_cache_dtype,
        mamba_ssm_cache_dtype=mamba_ssm_cache_dtype, attention_backend=attention_backend,
        num_gpu_blocks_override=num_gpu_blocks_override,
        speculative_method=speculative_method or spec_cfg.get("method"),
        num_speculative_tokens=num_speculative_tokens
        or int(spec_cfg.get("num_speculative_tokens") or 0),
        draft_kv_cache_dtype=draft_kv_cache_dtype or spec_cfg.get("kv_cache_dtype"),
        draft_tensor_parallel_size=draft_tensor_parallel_size
        or spec_cfg.get("draft_tensor_parallel_size"),
        draft_attention_backend=spec_cfg.get("attention_backend"),
        draft_block_size=draft_block_size)
    req = Request(model=model, deployment=dep, revision=revision,
                  draft=draft or spec_cfg.get("model"), gpu=gpu,
                  gpu_memory_bytes=parse_size_bytes(gpu_memory) if gpu_memory else None,
                  gpu_memory_utilization=gpu_memory_utilization,
                  kv_cache_memory_bytes=avail if kv_cache_memory is not None else None,
                  available_kv_gib=available_kv_gib, data_parallel_size=data_parallel_size,
                  enforce_eager=enforce_eager, explain=explain)
    raise typer.Exit(_emit(evaluate(req).plan, fmt, as_json))


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
    from kvplan import hardware, report

    rows = hardware.list_gpus()
    if as_json:
        import json

        typer.echo(json.dumps([g.model_dump(mode="json") for g in rows], indent=2))
        return
    report.render_gpus(rows, _console())


@app.command()
@handles_errors
def layers(
    model: Annotated[str, typer.Argument(help="hub id, local folder or config.json")],
    draft: Annotated[str | None, Opt("--draft")] = None,
    speculative_method: Annotated[str | None, Opt("--speculative-method")] = None,
    num_speculative_tokens: Annotated[int, Opt("--num-speculative-tokens")] = 0,
    kv_cache_dtype: Annotated[str, Opt("--kv-cache-dtype", "--kv-dtype")] = "auto",
    draft_kv_cache_dtype: Annotated[str | None, Opt("--draft-kv-cache-dtype")] = None,
    tensor_parallel_size: Annotated[int, Opt("--tensor-parallel-size", "-tp")] = 1,
    max_model_len: Annotated[str | None, Opt("--max-model-len")] = None,
    gpu: Annotated[str | None, Opt("--gpu")] = None,
    vllm: Annotated[str | None, Opt("--vllm")] = None,
    revision: Annotated[str | None, Opt("--revision")] = None,
    as_json: Annotated[bool, Opt("--json")] = False,
) -> None:
    """Per-layer table of what kvplan understood: kind, heads × dim, window, dtype, bytes/token."""
    from kvplan import report
    from kvplan.build import Deployment
    from kvplan.deploy import Request, layer_rows
    from kvplan.max_len import LONG_ENV, allow_long_from_env

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

        typer.echo(json.dumps({"layers": [r.model_dump(mode="json") for r in rows],
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
    from kvplan import report
    from kvplan.build import Deployment
    from kvplan.deploy import Request
    from kvplan.sweep import parse_lengths, run_sweep
    from kvplan.units import parse_size_bytes

    lengths = parse_lengths(max_model_len)
    gpus = [g.strip() for g in gpu.split(",") if g.strip()]
    dtypes = [d.strip() for d in kv_cache_dtype.split(",") if d.strip()]
    if not gpus or not dtypes:
        raise InputError("--gpu and --kv-cache-dtype need at least one value")
    from kvplan.max_len import LONG_ENV, allow_long_from_env

    dep = Deployment(vllm_version=vllm, with_fix=with_fix, tensor_parallel_size=tensor_parallel_size,
                     allow_long_max_model_len=allow_long_from_env(os.environ.get(LONG_ENV)),
                     max_num_batched_tokens=max_num_batched_tokens,
                     speculative_method=speculative_method,
                     num_speculative_tokens=num_speculative_tokens,
                     draft_kv_cache_dtype=draft_kv_cache_dtype)
    base = Request(model=model, deployment=dep, draft=draft,
                   gpu_memory_utilization=gpu_memory_utilization,
                   kv_cache_memory_bytes=parse_size_bytes(kv_cache_memory) if kv_cache_memory else None)
    result = run_sweep(base, gpus=gpus, kv_dtypes=dtypes, lengths=lengths)
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
    from kvplan import report
    from kvplan.batch import run_batch
    from kvplan.max_len import LONG_ENV, allow_long_from_env

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
_NOT_DEPLOYMENT = frozenset({"specs", "serve", "from_log", "fmt", "as_json", "explain"})


def _command_line_options(ctx: Any, values: dict[str, Any]) -> dict[str, Any]:
    """The deployment options typed on the command line (not left at their defaults)."""
    return {name: value for name, value in values.items()
            if name not in _NOT_DEPLOYMENT and name in ctx.params
            and getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"}


def _check_serve_or_log(serve: str | None, from_log: Path | None, given: dict[str, Any], *,
                        allow_long: bool, explain: bool, fmt: str, as_json: bool) -> None:
    """Plan what a serve line and/or a start-up log describe: command line > serve line > log >
    defaults, key by key; the plan says where each value came from."""
    from dataclasses import replace

    from kvplan.batch import layer_entries, log_entry, request_from_entry, serve_options
    from kvplan.deploy import evaluate, log_notes
    from kvplan.max_len import LONG_ENV, allow_long_from_env

    notes: list[str] = []
    layers: list[tuple[str, dict[str, Any]]] = []
    log = None
    if from_log is not None:
        from kvplan.vllm_log import parse_vllm_log

        if not from_log.is_file():
            raise InputError(f"log file {from_log} does not exist")
        log = parse_vllm_log(from_log.read_bytes())
        entry, skipped, log_notes_ = log_entry(log)
        layers.append(("log", entry))
        notes += log_notes_
    if serve is not None:
        from kvplan.serve_line import parse_serve_command

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
    plan = ev.plan
    extra = notes + (log_notes(log, ev) if log is not None else [])
    plan = plan.model_copy(update={"notes": [*plan.notes, *extra],
                                   "provenance": {k: source[k] for k in sorted(source)}})
    raise typer.Exit(_emit(plan, fmt, as_json))


def _speculative_config(text: str | None) -> dict[str, Any]:
    import json

    if not text:
        return {}
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"--speculative-config is not valid JSON: {exc.msg} at column "
                         f"{exc.colno}") from None
    if not isinstance(cfg, dict):
        raise InputError("--speculative-config must be a JSON object")
    return cfg


def _check_specs(specs: Path, model: str | None, vllm: str | None, with_fix: bool,
                 avail: int | None, mml: int | None, auto: bool, mnbt: int | None, fmt: str,
                 as_json: bool, explain: bool = False) -> None:
    from dataclasses import replace

    from kvplan.engine.planner import plan as run_plan
    from kvplan.plan import build_plan
    from kvplan.specfile import load_spec_file

    sf = load_spec_file(_read_json(specs, "spec file"), vllm_version=vllm, with_fix=with_fix,
                        available_kv_bytes=avail, max_model_len=mml, max_num_batched_tokens=mnbt)
    inp = replace(sf.planner_input, auto_fit_max_model_len=True) if auto else sf.planner_input
    result = run_plan(inp)
    explanation = None
    if explain:
        from kvplan.explain import Explanation, causes, what_ifs_for_input

        explanation = Explanation(causes=causes(result), what_ifs=what_ifs_for_input(inp, result))
    plan = build_plan(result, model=sf.name if model is None else model,
                      budget_mode="explicit (spec file)" if avail is None else "explicit",
                      max_num_batched_tokens=inp.max_num_batched_tokens, explanation=explanation)
    raise typer.Exit(_emit(plan, fmt, as_json))


def _parse_max_model_len(value: str | None) -> tuple[int | None, bool]:
    from kvplan.units import parse_token_count

    if value is None:
        return None, False
    v = value.strip().lower()
    if v in ("auto", "-1"):
        return None, True
    try:
        n = parse_token_count(v)
    except ValueError:
        raise InputError(f"--max-model-len must be a number, 'auto' or -1, got {value!r}"
                         ) from None
    if n < 1:
        raise InputError(f"--max-model-len must be ≥ 1 (or auto), got {value!r}")
    if n > 2**31:
        raise InputError(f"--max-model-len {value} is out of range (at most {2**31:,})",
                         hint="or use --max-model-len auto")
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
