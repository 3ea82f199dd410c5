"""kvplan's public Python API — the one path the CLI uses too (docs/api.md).

    import kvplan
    plan = kvplan.check("Qwen/Qwen3.5-27B", gpu="H100", max_model_len="128k")
    plan.fits, plan.margin_bytes, plan.model_dump_json()

Options are the CLI's flags in snake_case (`--kv-cache-dtype` → `kv_cache_dtype`); sizes are
bytes or strings such as "20GiB"; lengths are tokens or "128k". A wrong name, type or value
raises `OptionError` (an `InputError`, a `KvplanError`), never a bare TypeError.

Imports stay inside the functions: `import kvplan` must not load the engine, pydantic or typer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from kvplan.errors import InputError, OptionError

if TYPE_CHECKING:
    from kvplan.analysis.plan import Plan
    from kvplan.models.build import Deployment
    from kvplan.pipeline.fit import FitResult
    from kvplan.pipeline.sweep import Sweep

__all__ = ["CheckOptions", "FitOptions", "SpecsOptions", "SweepOptions", "check", "check_specs", "fit",
           "sweep"]


class CheckOptions(TypedDict, total=False):
    """`kvplan.check` options: `kvplan check` flags in snake_case (defaults as the CLI's)."""

    speculative_config: dict[str, Any] | str | None  # vLLM's JSON, as a dict or a JSON string
    speculative_method: str | None
    num_speculative_tokens: int
    kv_cache_dtype: str
    draft_kv_cache_dtype: str | None
    dtype: str
    max_model_len: int | str | None  # 131072, "128k", "auto" or -1
    allow_long_max_model_len: bool  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (the CLI reads the variable)
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    block_size: int | None
    draft_block_size: int | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    decode_context_parallel_size: int
    draft_tensor_parallel_size: int | None
    pp_layer_partition: str | None  # the CLI reads it from VLLM_PP_LAYER_PARTITION
    enable_prefix_caching: bool
    mamba_cache_dtype: str
    mamba_ssm_cache_dtype: str
    attention_backend: str | None
    num_gpu_blocks_override: int | None
    runner: str  # vLLM's --runner: auto, generate, pooling
    convert: str  # vLLM's --convert: auto, none, embed, classify
    kv_cache_memory: int | str | None  # per GPU: bytes or "20GiB"
    available_kv_gib: float | None
    gpu: str | None
    gpu_memory: int | str | None
    gpu_memory_utilization: float | None
    data_parallel_size: int
    enforce_eager: bool
    revision: str | None
    hf_overrides: dict[str, Any] | str | None  # vLLM's JSON, as a dict or a JSON string
    vllm: str | None
    with_fix: bool
    explain: bool
    async_scheduling: bool | None  # --async-scheduling/--no-async-scheduling (None: vLLM's)
    enable_chunked_prefill: bool | None  # None: vLLM's default for the model
    # --workload: "8k:1k" (vLLM's notation), a list of them, or a file of (prompt, output) pairs
    workload: str | Path | Sequence[str | Path] | None


class SpecsOptions(TypedDict, total=False):
    """`kvplan.check_specs` options: the flags that override a layer-spec file."""

    model: str | None  # the name shown in the plan (default: the file's `name`)
    vllm: str | None
    with_fix: bool
    kv_cache_memory: int | str | None
    available_kv_gib: float | None
    max_model_len: int | str | None
    max_num_batched_tokens: int | None
    explain: bool
    workload: str | Path | Sequence[str | Path] | None  # default: the file's `workload`


class SweepOptions(TypedDict, total=False):
    """`kvplan.pipeline.sweep` options: `kvplan sweep` flags; lists given as lists or comma strings."""

    max_model_len: str | int | list[int]  # "8k..1M", "8k,32k,128k", 131072 or [8192, 32768]
    allow_long_max_model_len: bool
    gpu: str | list[str]
    kv_cache_dtype: str | list[str]
    speculative_method: str | None
    num_speculative_tokens: int
    draft_kv_cache_dtype: str | None
    tensor_parallel_size: int
    max_num_batched_tokens: int | None
    gpu_memory_utilization: float | None
    kv_cache_memory: int | str | None
    vllm: str | None
    with_fix: bool


class FitOptions(TypedDict, total=False):
    """`kvplan.pipeline.fit` options: `kvplan fit` flags (the model, draft and scheduler flags of check;
    the GPU, KV dtype and parallel layout are searched)."""

    gpu: str | list[str] | None  # default: every catalogue GPU with a price
    kv_cache_dtype: str | list[str]
    max_gpus: int
    price: dict[str, float] | list[str] | None  # {"H100": 2.1} or ["H100=2.1"]
    prices: str | Path | None  # a file of GPU=USD lines or a JSON object
    top: int
    allow_long_max_model_len: bool
    speculative_config: dict[str, Any] | str | None
    speculative_method: str | None
    num_speculative_tokens: int
    draft_kv_cache_dtype: str | None
    draft_tensor_parallel_size: int | None
    draft_block_size: int | None
    dtype: str
    max_num_batched_tokens: int | None
    max_num_seqs: int | None
    block_size: int | None
    decode_context_parallel_size: int
    enable_prefix_caching: bool
    mamba_cache_dtype: str
    mamba_ssm_cache_dtype: str
    attention_backend: str | None
    gpu_memory_utilization: float | None
    enforce_eager: bool
    revision: str | None
    hf_overrides: dict[str, Any] | str | None
    vllm: str | None
    with_fix: bool
    workload: str | Path | None  # rank by how many requests of it run without preemption

def check(model: str, *, draft: str | None = None, **options: Unpack[CheckOptions]) -> Plan:
    """Plan one deployment of `model` (hub id org/name[@rev], local folder or config.json).

    Returns the `Plan` that `kvplan check --json` prints. Raises a `KvplanError` subclass on bad
    input; a deployment that does not fit is a plan with `fits=False`, not an exception.
    """
    o = _options(options, CheckOptions, "check")
    _need_str(model, "model")
    if draft is not None:
        _need_str(draft, "draft")
    from kvplan.pipeline.deploy import Request, evaluate
    from kvplan.units import parse_kv_cache_memory_bytes, parse_size_bytes

    util = o.get("gpu_memory_utilization")
    if util is not None and not 0 < util <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    gib = _available_kv_gib(o)
    kv_mem = o.get("kv_cache_memory")
    gpu_mem = o.get("gpu_memory")
    mml, auto = parse_max_model_len(o.get("max_model_len"))
    spec = speculative_config(o.get("speculative_config"))
    dep = _deployment(o, spec, mml, auto)
    req = Request(model=model, deployment=dep, revision=o.get("revision"),
                  draft=draft or spec.get("model"), gpu=o.get("gpu"),
                  draft_hf_config=(spec.get("draft_model_config") or {}).get("hf_config"),
                  gpu_memory_bytes=parse_size_bytes(gpu_mem) if gpu_mem else None,
                  gpu_memory_utilization=util,
                  kv_cache_memory_bytes=(parse_kv_cache_memory_bytes(kv_mem)
                                         if kv_mem is not None else None),
                  available_kv_gib=gib, data_parallel_size=o.get("data_parallel_size", 1),
                  enforce_eager=o.get("enforce_eager", False), explain=o.get("explain", False),
                  hf_overrides=_hf_overrides(o))
    workloads = parse_workloads(o.get("workload"))  # bad --workload fails before planning
    ev = evaluate(req)
    if not workloads:
        return ev.plan
    from kvplan.pipeline.workload import for_evaluation, not_started, with_workload

    if not ev.plan.fits:
        return not_started(ev.plan)
    return with_workload(ev.plan, for_evaluation(ev, req, workloads))


def _hf_overrides(o: Mapping[str, Any]) -> str | None:
    from kvplan.models.overrides import hf_overrides_json

    return hf_overrides_json(o.get("hf_overrides"))


def _deployment(o: Mapping[str, Any], spec: Mapping[str, Any], mml: int | None, auto: bool
                ) -> Deployment:
    """The `Deployment` that check and fit plan: the flags, else `--speculative-config`'s keys."""
    from kvplan.models.build import Deployment

    return Deployment(
        vllm_version=o.get("vllm"), with_fix=o.get("with_fix", False),
        kv_cache_dtype=o.get("kv_cache_dtype", "auto"), dtype=o.get("dtype", "auto"),
        block_size=o.get("block_size"), max_model_len=mml, auto_fit_max_model_len=auto,
        allow_long_max_model_len=o.get("allow_long_max_model_len", False),
        max_num_batched_tokens=o.get("max_num_batched_tokens"),
        max_num_seqs=o.get("max_num_seqs"),
        tensor_parallel_size=o.get("tensor_parallel_size", 1),
        pipeline_parallel_size=o.get("pipeline_parallel_size", 1),
        decode_context_parallel_size=o.get("decode_context_parallel_size", 1),
        pp_layer_partition=o.get("pp_layer_partition") or None,
        enable_prefix_caching=o.get("enable_prefix_caching", True),
        mamba_cache_dtype=o.get("mamba_cache_dtype", "auto"),
        mamba_ssm_cache_dtype=o.get("mamba_ssm_cache_dtype", "auto"),
        attention_backend=o.get("attention_backend"),
        num_gpu_blocks_override=o.get("num_gpu_blocks_override"),
        runner=o.get("runner", "auto"), convert=o.get("convert", "auto"),
        speculative_method=o.get("speculative_method") or spec.get("method"),
        num_speculative_tokens=o.get("num_speculative_tokens", 0)
        or int(spec.get("num_speculative_tokens") or 0),
        draft_kv_cache_dtype=o.get("draft_kv_cache_dtype") or spec.get("kv_cache_dtype"),
        draft_tensor_parallel_size=o.get("draft_tensor_parallel_size")
        or spec.get("draft_tensor_parallel_size"),
        draft_attention_backend=spec.get("attention_backend"),
        draft_block_size=o.get("draft_block_size"),
        async_scheduling=o.get("async_scheduling"),
        enable_chunked_prefill=o.get("enable_chunked_prefill"))


def check_specs(path_or_dict: str | Path | Mapping[str, Any], **options: Unpack[SpecsOptions]
                ) -> Plan:
    """Plan a layer-spec file (docs/specs-format.md), given as a path or as its parsed dict.

    Returns the `Plan` that `kvplan check --specs FILE --json` prints.
    """
    o = _options(options, SpecsOptions, "check_specs")
    from dataclasses import replace

    from kvplan.analysis.plan import build_plan
    from kvplan.engine.planner import plan as run_plan
    from kvplan.sources.specfile import load_spec_file
    from kvplan.units import GiB, parse_kv_cache_memory_bytes

    if isinstance(path_or_dict, Mapping):
        case: Any = dict(path_or_dict)
    elif isinstance(path_or_dict, str | Path):
        case = read_json(Path(path_or_dict), "spec file")
    else:
        raise OptionError(f"check_specs needs a path or a dict, got {type(path_or_dict).__name__}")
    gib = _available_kv_gib(o)
    kv_mem = o.get("kv_cache_memory")
    avail: int | None = None
    if kv_mem is not None:
        avail = parse_kv_cache_memory_bytes(kv_mem)  # 0 or negative: vLLM's no-memory error
    elif gib is not None:
        avail = int(round(gib * GiB))
    mml, auto = parse_max_model_len(o.get("max_model_len"))
    sf = load_spec_file(case, vllm_version=o.get("vllm"), with_fix=o.get("with_fix", False),
                        available_kv_bytes=avail, max_model_len=mml,
                        max_num_batched_tokens=o.get("max_num_batched_tokens"))
    inp = replace(sf.planner_input, auto_fit_max_model_len=True) if auto else sf.planner_input
    result = run_plan(inp)
    explanation = None
    if o.get("explain", False):
        from kvplan.analysis.explain import Explanation, causes, what_ifs_for_input

        explanation = Explanation(causes=causes(result), what_ifs=what_ifs_for_input(inp, result))
    label = o.get("model")
    plan = build_plan(result, model=sf.name if label is None else label,
                      budget_mode="explicit (spec file)" if avail is None else "explicit",
                      max_num_batched_tokens=inp.max_num_batched_tokens, explanation=explanation)
    workloads = parse_workloads(o["workload"] if o.get("workload") is not None
                                else _spec_file_workload(case))
    if not workloads:
        return plan
    from kvplan.pipeline.workload import not_started, with_workload, workload_results

    if not plan.fits:
        return not_started(plan)
    return with_workload(plan, workload_results(
        result, inp, workloads, max_num_seqs=_case_int(case, "max_num_seqs", 256),
        enable_chunked_prefill=bool(case.get("enable_chunked_prefill", True)),
        enable_prefix_caching=bool(case.get("enable_prefix_caching", True)),
        reserve_full_isl=bool(case.get("scheduler_reserve_full_isl", True))))


def _spec_file_workload(case: Mapping[str, Any]) -> list[str] | None:
    """A spec file's `workload`: {"prompt": P, "output": D} or {"pairs": [[P, D], ...]}."""
    w = case.get("workload")
    if w is None:
        return None
    if not isinstance(w, dict) or not ({"prompt", "output"} <= set(w) or "pairs" in w):
        raise InputError("the spec file's workload must be {\"prompt\": P, \"output\": D} or "
                         "{\"pairs\": [[P, D], ...]}")
    if "pairs" in w:
        import json

        return [json.dumps(w["pairs"])]
    return [f"{w['prompt']}:{w['output']}"]


def _case_int(case: Mapping[str, Any], key: str, default: int) -> int:
    v = case.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise InputError(f"the spec file's {key} must be an integer ≥ 1, got {v!r}")
    return v


def parse_workloads(value: str | Path | Sequence[str | Path] | None) -> list[Any]:
    """--workload values → engine Workloads: each PROMPT:OUTPUT (vLLM's number notation), a
    file of (prompt, output) pairs, or such a list as JSON text."""
    from kvplan.engine.workload import Workload
    from kvplan.sources.workload_spec import looks_like_pair, parse_pair, parse_pairs_file

    if value is None:
        return []
    values = [value] if isinstance(value, str | Path) else list(value)
    if not values:
        raise InputError("--workload needs at least one PROMPT:OUTPUT or a file")
    out = []
    for v in values:
        if not isinstance(v, str | Path):
            raise OptionError(f"--workload takes text or a path, got {type(v).__name__}")
        text = str(v).strip()
        if isinstance(v, str) and looks_like_pair(text):
            out.append(Workload((parse_pair(text),), label=text))
        elif isinstance(v, str) and text.startswith("["):
            out.append(Workload(parse_pairs_file(text, "(pairs)"), label="pairs"))
        else:
            path = Path(text)
            if not path.is_file():
                raise InputError(f"--workload {text!r} is neither PROMPT:OUTPUT nor a file",
                                 hint="e.g. --workload 8k:1k (vLLM's notation: k = 1000, K = "
                                      "1024), or a file of (prompt, output) pairs")
            if path.stat().st_size > 16 * 2**20:
                raise InputError(f"--workload {path} is over 16 MiB")
            try:
                body = path.read_bytes().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"--workload {path} is not UTF-8 text (byte {exc.start})"
                                 ) from None
            out.append(Workload(parse_pairs_file(body, str(path)), label=path.name))
    return out


def sweep(model: str, *, draft: str | None = None, **options: Unpack[SweepOptions]) -> Sweep:
    """The largest fitting context and the concurrency per GPU × KV dtype × max_model_len.

    Returns the `Sweep` that `kvplan sweep --json` prints.
    """
    o = _options(options, SweepOptions, "sweep")
    _need_str(model, "model")
    from kvplan.models.build import Deployment
    from kvplan.pipeline.deploy import Request
    from kvplan.pipeline.sweep import parse_lengths, run_sweep
    from kvplan.units import parse_size_bytes

    raw_lengths = o.get("max_model_len", "8k..1M")
    lengths = parse_lengths(raw_lengths if isinstance(raw_lengths, str) else str(raw_lengths)
                            if isinstance(raw_lengths, int) else ",".join(map(str, raw_lengths)))
    gpus, dtypes = _names(o.get("gpu", "H100")), _names(o.get("kv_cache_dtype", "auto"))
    if not gpus or not dtypes or not lengths:
        raise InputError("--gpu, --kv-cache-dtype and --max-model-len need at least one value")
    kv_mem = o.get("kv_cache_memory")
    dep = Deployment(vllm_version=o.get("vllm"), with_fix=o.get("with_fix", False),
                     tensor_parallel_size=o.get("tensor_parallel_size", 1),
                     allow_long_max_model_len=o.get("allow_long_max_model_len", False),
                     max_num_batched_tokens=o.get("max_num_batched_tokens"),
                     speculative_method=o.get("speculative_method"),
                     num_speculative_tokens=o.get("num_speculative_tokens", 0),
                     draft_kv_cache_dtype=o.get("draft_kv_cache_dtype"))
    base = Request(model=model, deployment=dep, draft=draft,
                   gpu_memory_utilization=o.get("gpu_memory_utilization"),
                   kv_cache_memory_bytes=parse_size_bytes(kv_mem) if kv_mem else None)
    return run_sweep(base, gpus=gpus, kv_dtypes=dtypes, lengths=lengths)


def fit(model: str, *, max_model_len: int | str, concurrency: int, draft: str | None = None,
        progress: Any = None, **options: Unpack[FitOptions]) -> FitResult:
    """The cheapest deployments (GPU × count × TP/PP/DP × KV dtype × draft on/off) that serve
    `max_model_len` tokens to `concurrency` requests at once.

    Returns the `FitResult` that `kvplan fit --json` prints (no candidate: its nearest misses).
    `progress(done, total)`, if given, is called after each planned shape.
    """
    o = _options(options, FitOptions, "fit")
    _need_str(model, "model")
    from kvplan.pipeline.deploy import Request
    from kvplan.pipeline.fit import parse_price, parse_prices_file, search

    mml, auto = parse_max_model_len(max_model_len)
    if auto or mml is None:
        raise InputError("kvplan fit needs a number for --max-model-len, not auto",
                         hint="e.g. --max-model-len 128k")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InputError(f"--concurrency must be ≥ 1, got {concurrency}",
                         hint="the number of concurrent requests of --max-model-len tokens")
    util = o.get("gpu_memory_utilization")
    if util is not None and not 0 < util <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    price_map: dict[str, float] = {}
    if o.get("prices") is not None:
        path = Path(o["prices"])
        if not path.is_file():
            raise InputError(f"prices file {path} does not exist")
        try:
            text = path.read_bytes()[: 1 << 20].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"prices file {path} is not UTF-8 text (byte {exc.start})") from None
        price_map.update(parse_prices_file(text, f"prices file {path}"))
    given = o.get("price") or []
    if isinstance(given, Mapping):
        given = [f"{k}={v}" for k, v in given.items()]
    price_map.update(dict(parse_price(p) for p in given))
    spec = speculative_config(o.get("speculative_config"))
    searched = {"kv_cache_dtype", "gpu"}  # per candidate
    dep = _deployment({k: v for k, v in o.items() if k not in searched}, spec, None, False)
    base = Request(model=model, deployment=dep, revision=o.get("revision"),
                   draft=draft or spec.get("model"), gpu_memory_utilization=util,
                   enforce_eager=o.get("enforce_eager", False),
                   hf_overrides=_hf_overrides(o))
    gpu = o.get("gpu")
    gpus = _names(gpu) if gpu is not None else None
    if gpu is not None and not gpus:
        raise InputError("--gpu needs at least one name", hint="e.g. --gpu H100,H200,B200")
    workloads = parse_workloads(o.get("workload"))
    if len(workloads) > 1:
        raise InputError("kvplan fit takes one --workload", hint="run fit once per workload")
    return search(base, max_model_len=mml, concurrency=concurrency, gpus=gpus,
                  kv_dtypes=_names(o.get("kv_cache_dtype", "auto,fp8,nvfp4")),
                  max_gpus=o.get("max_gpus", 8), prices=price_map, top=o.get("top", 5),
                  progress=progress, workload=workloads[0] if workloads else None)

def _available_kv_gib(o: Mapping[str, Any]) -> float | None:
    """--available-kv-gib as vLLM logged it: zero or negative plans into vLLM's no-memory error."""
    import math

    gib = o.get("available_kv_gib")
    if gib is not None and not math.isfinite(gib):
        raise InputError(f"--available-kv-gib must be a number, got {gib}")
    return gib  # type: ignore[no-any-return]

def _names(value: str | list[str]) -> list[str]:
    items = value.split(",") if isinstance(value, str) else value
    return [s.strip() for s in items if s.strip()]


def _need_str(value: object, name: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise OptionError(f"{name} must be a non-empty string, got {value!r}")


def _options(options: Mapping[str, Any], schema: type, where: str) -> dict[str, Any]:
    """Check option names and types against the TypedDict `schema`; None means the default."""
    import difflib
    import types
    import typing

    hints = typing.get_type_hints(schema)
    for name, value in options.items():
        if name not in hints:
            close = difflib.get_close_matches(name, hints, n=1)
            raise OptionError(f"{where}() got an unknown option {name!r}",
                              hint=f"did you mean {close[0]!r}?" if close else
                              f"the options are the CLI flags in snake_case: {', '.join(hints)}")
        hint = hints[name]
        allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        if not any(_is_a(value, t) for t in allowed):
            want = " or ".join(getattr(typing.get_origin(t) or t, "__name__", str(t))
                               for t in allowed)
            raise OptionError(f"{where}() option {name} must be {want}, got {value!r}")
    return {k: v for k, v in options.items() if v is not None}


def _is_a(value: object, t: Any) -> bool:
    import types
    import typing

    if isinstance(t, types.UnionType):
        return any(_is_a(value, a) for a in typing.get_args(t))
    if t is type(None):
        return value is None
    base = typing.get_origin(t) or t
    if base is list:
        (item,) = typing.get_args(t)
        return isinstance(value, list | tuple) and all(_is_a(v, item) for v in value)
    if isinstance(value, bool) and base is not bool:
        return False  # True is an int in Python, not a tensor-parallel size
    if base is float:
        return isinstance(value, int | float)
    return isinstance(value, base)


def parse_max_model_len(value: int | str | None) -> tuple[int | None, bool]:
    """--max-model-len: None (the config's), a count (131072, '128k') or auto / -1 → (len, auto)."""
    from kvplan.units import parse_token_count

    if value is None:
        return None, False
    v = str(value).strip().lower()
    if v in ("auto", "-1"):
        return None, True
    try:
        n = parse_token_count(v)
    except ValueError:
        raise InputError(f"--max-model-len must be a number, 'auto' or -1, got {value!r}",
                         hint="a token count such as 131072, 128k or 1M; auto (or -1) fits it "
                              "to the memory") from None
    if n < 1:
        raise InputError(f"--max-model-len must be ≥ 1 (or auto), got {value!r}")
    if n > 2**31:
        raise InputError(f"--max-model-len {value} is out of range (at most {2**31:,})",
                         hint="or use --max-model-len auto")
    return n, False


def speculative_config(value: Mapping[str, Any] | str | None) -> dict[str, Any]:
    """vLLM's --speculative-config: a JSON object (text or dict) → dict."""
    import json

    if not value:
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    try:
        cfg = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InputError(f"--speculative-config is not valid JSON: {exc.msg} at column "
                         f"{exc.colno}") from None
    if not isinstance(cfg, dict):
        raise InputError("--speculative-config must be a JSON object")
    return cfg


def read_json(path: Path, what: str) -> Any:
    """A small JSON file, with one clear error per way it can be wrong."""
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
