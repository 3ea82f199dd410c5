"""`kvplan check` / `kvplan explain` under `--engine sglang` and `--engine vllm,sglang`: SGLang's
flags, an SGLang launch line (`--serve "python -m sglang.launch_server …"`, found without
`--engine`), an SGLang start-up log (`--from-log`, found without `--engine`), and both plans
side by side. Parses and renders; every number comes from the engines (`kvplan.api`,
`kvplan.pipeline`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kvplan.cli.common import emit
from kvplan.cli.engine_options import SGLANG_OPTIONS, check_engine_flags, sglang_options_dict
from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_FITS, InputError

# check's options that only vLLM reads (the rest are shared, or pick what to plan / show)
VLLM_ONLY = ("specs", "speculative_config", "speculative_method", "num_speculative_tokens",
             "draft_kv_cache_dtype", "dtype", "max_model_len", "max_num_batched_tokens",
             "max_num_seqs", "block_size", "draft_block_size", "decode_context_parallel_size",
             "draft_tensor_parallel_size", "enable_prefix_caching", "mamba_cache_dtype",
             "mamba_ssm_cache_dtype", "num_gpu_blocks_override", "runner", "convert",
             "available_kv_gib", "gpu_memory_utilization", "enforce_eager", "hf_overrides",
             "vllm", "with_fix", "workload", "async_scheduling", "enable_chunked_prefill",
             "performance_mode", "config_format")
SGLANG_ONLY = tuple(SGLANG_OPTIONS)
# check's options both engines read, under the names kvplan.check takes for SGLang
SHARED = {"tensor_parallel_size": "tp_size", "pipeline_parallel_size": "pp_size",
          "data_parallel_size": "dp_size", "kv_cache_dtype": "kv_cache_dtype",
          "attention_backend": "attention_backend", "revision": "revision", "gpu": "gpu",
          "gpu_memory": "gpu_memory", "kv_cache_memory": "kv_cache_memory", "draft": "draft",
          "explain": "explain"}


def route(values: dict[str, Any]) -> None:
    """Called first by `check`: plan SGLang (or both) and exit; return for vLLM alone."""
    ev = values.pop("engine_values", None) or {"engine": ("vllm",), "sglang": {}, "given": set()}
    engines, given, sg = ev["engine"], ev["given"], ev["sglang"]
    serve, from_log = values.get("serve"), values.get("from_log")
    explicit = "engine" in given
    if engines == ("vllm",) and not (explicit and given & set(SGLANG_ONLY)):
        if serve is not None:
            from kvplan.sources.sglang_serve import is_sglang_line

            if is_sglang_line(serve):
                if explicit:
                    raise InputError("--serve starts SGLang, but --engine is vllm",
                                     hint="drop --engine (kvplan reads the line's server)")
                engines = ("sglang",)
        if from_log is not None and serve is None and Path(from_log).is_file():
            from kvplan.sources.sglang_log import looks_like_sglang_log

            if looks_like_sglang_log(Path(from_log).read_bytes()[:4_000_000]):
                if explicit:
                    raise InputError(f"{from_log} is an SGLang log, but --engine is vllm",
                                     hint="drop --engine (kvplan reads the log's server)")
                engines = ("sglang",)
    if concurrency_misused(engines, given):
        raise InputError("--concurrency on check is read by SGLang plans and the side-by-side "
                         "view (--engine sglang or --engine vllm,sglang)",
                         hint="for vLLM, `kvplan fit --concurrency N` searches deployments")
    check_engine_flags(engines, given, command="check",
                       vllm_only=[n for n in VLLM_ONLY
                                  if not (n == "max_model_len" and len(engines) > 1)],
                       sglang_only=[n for n in SGLANG_ONLY if n != "concurrency"])
    if engines == ("vllm",):
        return
    if values.get("specs") is not None:
        raise InputError("--specs is a vLLM layer-spec file; --engine sglang plans a model")
    if len(engines) > 1:
        from kvplan.cli.compare_check import run_side_by_side

        run_side_by_side(values, sg, given, engines)
        return
    opts = _sglang_options(values, sg, given)
    if serve is not None or from_log is not None:
        _serve_or_log(serve, from_log, opts, values)
        return
    model = values.get("model")
    if model is None:
        raise InputError("nothing to plan", hint="give a MODEL, or --serve \"python -m "
                         "sglang.launch_server ...\" or --from-log an SGLang log")
    from kvplan import api

    plan = api.check(model, engine="sglang", **opts)
    raise typer.Exit(emit(plan, values["fmt"], values["as_json"]))


def concurrency_misused(engines: tuple[str, ...], given: set[str]) -> bool:
    return "concurrency" in given and engines == ("vllm",)


def _sglang_options(values: dict[str, Any], sg: dict[str, Any], given: set[str]
                    ) -> dict[str, Any]:
    """kvplan.check options for SGLang: the shared flags typed (or non-default) and SGLang's."""
    opts: dict[str, Any] = {}
    for name, key in SHARED.items():
        v = values.get(name)
        if name in given or (v is not None and name in ("gpu", "gpu_memory", "kv_cache_memory",
                                                        "draft", "revision")):
            if v is not None and v is not False:
                opts[key] = v
    if values.get("explain"):
        opts["explain"] = True
    own = sglang_options_dict(sg)
    for key in ("tp_size", "pp_size", "dp_size"):
        if key in own and key in opts and own[key] != opts[key]:
            long = {"tp_size": "--tensor-parallel-size", "pp_size": "--pipeline-parallel-size",
                    "dp_size": "--data-parallel-size"}[key]
            raise InputError(f"--{key.replace('_', '-')} {own[key]} and {long} {opts[key]} "
                             "disagree", hint="give the size once")
    opts.update(own)
    return opts


# serve-line / log dests → kvplan.check's SGLang option names
_DEST = {"cuda_graph_max_bs_decode": "cuda_graph_max_bs",
         "speculative_draft_model_path": "speculative_draft_model_path",
         "json_model_override_args": "json_model_override_args"}


def _serve_or_log(serve: str | None, from_log: Path | None, opts: dict[str, Any],
                  values: dict[str, Any]) -> None:
    """Layers, key by key: the log < the serve line < the command line; the plan says where
    each value came from, and sets the log's numbers beside kvplan's."""
    from dataclasses import replace

    from kvplan import api
    from kvplan.errors import ConfigError, HubError
    from kvplan.pipeline.sglang import evaluate_sglang

    layers: list[tuple[str, dict[str, Any]]] = []
    notes: list[str] = []
    log = None
    if from_log is not None:
        from kvplan.pipeline.sglang_logs import log_entry
        from kvplan.sources.sglang_log import parse_sglang_log

        path = Path(from_log)
        if not path.is_file():
            raise InputError(f"log file {path} does not exist")
        log = parse_sglang_log(path.read_bytes())
        entry, log_notes = log_entry(log)
        notes += log_notes
        layers.append(("log", {_DEST.get(k, k): v for k, v in entry.items()}))
    if serve is not None:
        from kvplan.sources.sglang_serve import parse_sglang_command

        cmd = parse_sglang_command(serve)
        entry = {_DEST.get(k, k): v for k, v in cmd.options.items()}
        entry["model"] = cmd.model
        notes += [f"serve line: {n}" for n in cmd.notes]
        if cmd.unknown:
            notes.append(f"serve line: words SGLang would reject, ignored: {' '.join(cmd.unknown)}")
        if cmd.not_modelled:
            notes.append(f"serve line: not modelled by kvplan: {', '.join(cmd.not_modelled)}")
        layers.append(("serve line", entry))
    cmdline = dict(opts)
    if values.get("model") is not None:
        cmdline["model"] = values["model"]
    if "kv_cache_memory" in cmdline:  # a given pool budget replaces a log's memory
        for _, layer in layers:
            layer.pop("pre_model_load_gib", None)
            layer.pop("post_load_gib", None)
    layers.append(("command line", cmdline))
    merged: dict[str, Any] = {}
    source: dict[str, str] = {}
    for where, layer in layers:
        for k, v in layer.items():
            if v is None:
                continue
            if k == "json_model_override_args" and v in ("{}", {}):
                continue
            merged[k] = v
            source[k] = where
    model = merged.pop("model", None)
    if model is None:
        raise InputError(f"{from_log}: the log names no model",
                         hint="give the model next to the log: kvplan check MODEL --engine "
                              "sglang --from-log LOG")
    explain = bool(merged.pop("explain", False))
    draft = merged.pop("draft", None)
    dep = api.sglang_deployment(merged)
    o = dict(merged)
    req = replace(api.sglang_request(model, draft, o, dep), explain=explain, log=log)
    try:
        plan = evaluate_sglang(req)
    except (ConfigError, HubError) as exc:
        if source.get("model") != "log":
            raise
        raise type(exc)(f"the model the log names, {model!r}, cannot be read here: "
                        f"{exc.message}", hint="give the model next to the log: kvplan check "
                        "MODEL --from-log LOG (a hub id, a folder or a config.json)") from None
    source.pop("explain", None)
    plan = plan.model_copy(update={"notes": [*plan.notes, *notes],
                                   "provenance": {k: source[k] for k in sorted(source)}})
    raise typer.Exit(emit(plan, values["fmt"], values["as_json"]))


def exit_code(fits: bool) -> int:
    return EXIT_FITS if fits else EXIT_DOES_NOT_FIT
