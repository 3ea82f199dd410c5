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
    from kvplan.analysis.engine_comparison import EngineComparison
    from kvplan.analysis.plan import Plan
    from kvplan.engines.vllm.build import Deployment
    from kvplan.pipeline.fit_result import FitResult
    from kvplan.pipeline.sweep import Sweep

__all__ = ["CheckOptions", "FitOptions", "SpecsOptions", "SweepOptions", "check", "check_specs",
           "compare", "fit", "sweep"]


class CheckOptions(TypedDict, total=False):
    """`kvplan.check` options: `kvplan check` flags in snake_case (defaults as the CLI's)."""

    speculative_config: dict[str, Any] | str | None  # vLLM's JSON, as a dict or a JSON string
    speculative_method: str | None
    num_speculative_tokens: int
    kv_cache_dtype: str
    draft_kv_cache_dtype: str | None
    dtype: str
    max_model_len: int | str | None  # 131072, "128K" (131,072), "128k" (128,000), "auto" or -1
    allow_long_max_model_len: bool  # VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (the CLI reads the variable)
    trust_remote_code: bool  # vLLM's --trust-remote-code
    allow_deprecated_quantization: bool  # vLLM's --allow-deprecated-quantization
    max_num_batched_tokens: int | str | None  # 16384, "16K" or "16k" (16,000)
    max_num_seqs: int | None
    block_size: int | None
    draft_block_size: int | None
    tensor_parallel_size: int
    pipeline_parallel_size: int
    decode_context_parallel_size: int
    draft_tensor_parallel_size: int | None
    pp_layer_partition: str | None  # the CLI reads it from VLLM_PP_LAYER_PARTITION
    enable_prefix_caching: bool | None  # None: vLLM's default for the model
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
    performance_mode: str | None  # --performance-mode: balanced (None), interactivity, throughput
    config_format: str | None  # --config-format: auto (None), hf, mistral (params.json)
    enable_chunked_prefill: bool | None  # None: vLLM's default for the model
    # --workload: "8k:1k" (vLLM's notation), a list of them, or a file of (prompt, output) pairs
    workload: str | Path | Sequence[str | Path] | None
    # engine="sglang": SGLang's own flags (python -m sglang.launch_server), snake_case; the
    # parallel sizes and the context length may also be given by the vLLM names above
    sglang: str | None  # the SGLang release profile (default: the newest modelled)
    tp_size: int
    pp_size: int
    dp_size: int
    enable_dp_attention: bool
    mem_fraction_static: float | None
    max_total_tokens: int | None
    context_length: int | None
    page_size: int | None
    max_running_requests: int | None
    chunked_prefill_size: int | None
    cuda_graph_max_bs: int | None  # --cuda-graph-max-bs-decode
    swa_full_tokens_ratio: float | None
    disable_radix_cache: bool
    mamba_full_memory_ratio: float | None
    max_mamba_cache_size: int | None
    speculative_algorithm: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_draft_kv_cache_dtype: str | None
    pre_model_load_gib: float | None  # SGLang's logged "Load weight begin. avail mem=X GB"
    post_load_gib: float | None  # SGLang's logged "Load weight end. … avail mem=Y GB"
    max_prefill_tokens: int | None
    disable_cuda_graph: bool
    disable_overlap_schedule: bool
    speculative_draft_model_path: str | None  # SGLang's name for the draft (same as draft=)
    json_model_override_args: dict[str, Any] | str | None  # SGLang's name for hf_overrides
    concurrency: int  # engine="sglang": requests of the context length to hold at once


# options only vLLM reads: refused with engine="sglang" (the SGLang flag to use, if any)
_VLLM_ONLY = {"speculative_config": "speculative_algorithm", "speculative_method":
              "speculative_algorithm", "num_speculative_tokens": "speculative_num_draft_tokens",
              "draft_kv_cache_dtype": "speculative_draft_kv_cache_dtype",
              "max_num_batched_tokens": "chunked_prefill_size",
              "max_num_seqs": "max_running_requests", "block_size": "page_size",
              "gpu_memory_utilization": "mem_fraction_static", "available_kv_gib":
              "pre_model_load_gib", "draft_block_size": None, "decode_context_parallel_size": None,
              "draft_tensor_parallel_size": None, "pp_layer_partition": None,
              "enable_prefix_caching": "disable_radix_cache", "mamba_cache_dtype": None,
              "mamba_ssm_cache_dtype": None, "num_gpu_blocks_override": None, "runner": None,
              "convert": None, "dtype": None, "allow_long_max_model_len": None,
              "enforce_eager": "disable_cuda_graph", "vllm": "sglang", "with_fix": None,
              "async_scheduling": "disable_overlap_schedule", "enable_chunked_prefill": None,
              "workload": None, "performance_mode": None, "config_format": None}
# options only SGLang reads: refused with engine="vllm"
_SGLANG_ONLY = ("sglang", "tp_size", "pp_size", "dp_size", "enable_dp_attention",
                "mem_fraction_static", "max_total_tokens", "context_length", "page_size",
                "max_running_requests", "chunked_prefill_size", "cuda_graph_max_bs",
                "swa_full_tokens_ratio", "disable_radix_cache", "mamba_full_memory_ratio",
                "max_mamba_cache_size", "speculative_algorithm", "speculative_num_steps",
                "speculative_eagle_topk", "speculative_num_draft_tokens",
                "speculative_draft_kv_cache_dtype", "pre_model_load_gib", "post_load_gib",
                "max_prefill_tokens", "disable_cuda_graph", "disable_overlap_schedule",
                "speculative_draft_model_path", "json_model_override_args", "concurrency")


class SpecsOptions(TypedDict, total=False):
    """`kvplan.check_specs` options: the flags that override a layer-spec file."""

    model: str | None  # the name shown in the plan (default: the file's `name`)
    vllm: str | None
    with_fix: bool
    kv_cache_memory: int | str | None
    available_kv_gib: float | None
    max_model_len: int | str | None
    max_num_batched_tokens: int | str | None
    explain: bool
    workload: str | Path | Sequence[str | Path] | None  # default: the file's `workload`


class SweepOptions(TypedDict, total=False):
    """`kvplan.pipeline.sweep` options: `kvplan sweep` flags; lists given as lists or comma strings."""

    max_model_len: str | int | list[int]  # "8K..1M", "8k,32k,128k", 131072 or [8192, 32768]
    allow_long_max_model_len: bool
    gpu: str | list[str]
    kv_cache_dtype: str | list[str]
    speculative_method: str | None
    num_speculative_tokens: int
    draft_kv_cache_dtype: str | None
    tensor_parallel_size: int
    max_num_batched_tokens: int | str | None
    gpu_memory_utilization: float | None
    kv_cache_memory: int | str | None
    vllm: str | None
    with_fix: bool
    # engine="sglang" (or "vllm,sglang"): SGLang's own flags
    sglang: str | None
    tp_size: int
    mem_fraction_static: float | None
    page_size: int | None
    max_running_requests: int | None
    chunked_prefill_size: int | None
    disable_radix_cache: bool
    swa_full_tokens_ratio: float | None
    mamba_full_memory_ratio: float | None
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None


_SWEEP_SGLANG = ("sglang", "tp_size", "mem_fraction_static", "page_size", "max_running_requests",
                 "chunked_prefill_size", "disable_radix_cache", "swa_full_tokens_ratio",
                 "mamba_full_memory_ratio", "speculative_algorithm",
                 "speculative_draft_model_path", "speculative_num_steps",
                 "speculative_eagle_topk", "speculative_num_draft_tokens")
_SWEEP_VLLM = ("allow_long_max_model_len", "speculative_method", "num_speculative_tokens",
               "draft_kv_cache_dtype", "max_num_batched_tokens", "gpu_memory_utilization",
               "vllm", "with_fix")


class FitOptions(TypedDict, total=False):
    """`kvplan.pipeline.fit` options: `kvplan fit` flags (the model, draft and scheduler flags of check;
    the GPU, KV dtype and parallel layout are searched)."""

    gpu: str | list[str] | None  # default: every catalogue GPU with a price
    vendor: str | list[str] | None  # "nvidia", "amd" (default: both)
    # default auto,fp8,nvfp4 where the GPU runs them natively; named: dequantised paths too
    kv_cache_dtype: str | list[str] | None
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
    max_num_batched_tokens: int | str | None
    max_num_seqs: int | None
    block_size: int | None
    decode_context_parallel_size: int
    enable_prefix_caching: bool | None  # None: vLLM's default for the model
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
    # engine="sglang" (or "vllm,sglang"): SGLang's own flags for its deployments
    sglang: str | None
    mem_fraction_static: float | None
    page_size: int | None
    max_running_requests: int | None
    chunked_prefill_size: int | None
    cuda_graph_max_bs: int | None
    disable_cuda_graph: bool
    swa_full_tokens_ratio: float | None
    disable_radix_cache: bool
    disable_overlap_schedule: bool
    mamba_full_memory_ratio: float | None
    max_mamba_cache_size: int | None
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_draft_kv_cache_dtype: str | None
    json_model_override_args: dict[str, Any] | str | None


# fit's SGLang options (the rest of FitOptions are vLLM's, or shared)
_FIT_SGLANG = ("sglang", "mem_fraction_static", "page_size", "max_running_requests",
               "chunked_prefill_size", "cuda_graph_max_bs", "disable_cuda_graph",
               "swa_full_tokens_ratio", "disable_radix_cache", "disable_overlap_schedule",
               "mamba_full_memory_ratio", "max_mamba_cache_size", "speculative_algorithm",
               "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk",
               "speculative_num_draft_tokens", "speculative_draft_kv_cache_dtype",
               "json_model_override_args")
_FIT_SHARED = ("gpu", "vendor", "kv_cache_dtype", "max_gpus", "price", "prices", "top",
               "allow_long_max_model_len", "revision")
# vLLM's --speculative-method → SGLang's --speculative-algorithm
_SGLANG_ALGORITHM = {"eagle": "EAGLE", "eagle3": "EAGLE3", "dflash": "DFLASH", "mtp": "NEXTN"}

def check(model: str, *, draft: str | None = None, engine: str = "vllm",
          **options: Unpack[CheckOptions]) -> Plan:
    """Plan one deployment of `model` (hub id org/name[@rev], local folder or config.json).

    Returns the `Plan` that `kvplan check --json` prints. Raises a `KvplanError` subclass on bad
    input; a deployment that does not fit is a plan with `fits=False`, not an exception — also
    one vLLM refuses before it sizes the KV cache (`refused_at_startup`, `failure_cause`).
    `engine="sglang"` plans SGLang's KV pool sizing instead of vLLM's (`plan.sglang`), with
    SGLang's own flags (`mem_fraction_static`, `max_total_tokens`, `context_length`, ...).
    """
    o = _options(options, CheckOptions, "check")
    _need_str(model, "model")
    if draft is not None:
        _need_str(draft, "draft")
    if engine not in ("vllm", "sglang"):
        raise OptionError(f"check() engine must be 'vllm' or 'sglang', got {engine!r}")
    if engine == "sglang":
        return _check_sglang(model, draft, o)
    given = [k for k in _SGLANG_ONLY if k in o]
    if given:
        raise OptionError(f"check() option {given[0]} is an SGLang flag",
                          hint="pass engine='sglang', or use the vLLM option")
    from kvplan.errors import StartupError
    from kvplan.pipeline.deploy import Request, evaluate, evaluate_plan
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
                  gpu_memory_bytes=parse_size_bytes(gpu_mem, "--gpu-memory") if gpu_mem else None,
                  gpu_memory_utilization=util,
                  kv_cache_memory_bytes=(parse_kv_cache_memory_bytes(kv_mem)
                                         if kv_mem is not None else None),
                  available_kv_gib=gib, data_parallel_size=o.get("data_parallel_size", 1),
                  enforce_eager=o.get("enforce_eager", False), explain=o.get("explain", False),
                  hf_overrides=_hf_overrides(o),
                  trust_remote_code=o.get("trust_remote_code", False),
                  config_format=o.get("config_format") or "auto")
    workloads = parse_workloads(o.get("workload"))  # bad --workload fails before planning
    if not workloads:
        return evaluate_plan(req)  # a start-up refusal is a plan that does not fit, too
    from kvplan.pipeline.workload import for_evaluation, not_started, with_workload

    try:
        ev = evaluate(req)
    except StartupError:
        return not_started(evaluate_plan(req))
    if not ev.plan.fits:
        return not_started(ev.plan)
    return with_workload(ev.plan, for_evaluation(ev, req, workloads))


def sglang_deployment(o: Mapping[str, Any]) -> Any:
    from kvplan.pipeline.sglang_options import sglang_deployment as build

    return build(o)


def sglang_request(model: str, draft: str | None, o: Mapping[str, Any], dep: Any) -> Any:
    from kvplan.pipeline.sglang_options import sglang_request as build

    return build(model, draft, o, dep)


def _check_sglang(model: str, draft: str | None, o: Mapping[str, Any]) -> Plan:
    """kvplan.check(..., engine="sglang"): SGLang's flags → SglangDeployment → the SGLang plan."""
    from kvplan.pipeline.sglang import evaluate_sglang

    for name, instead in _VLLM_ONLY.items():
        if name in o:
            raise OptionError(f"check() option {name} is a vLLM flag; engine='sglang' does not "
                              "read it", hint=f"use {instead}" if instead else
                              "drop it for engine='sglang'")
    return evaluate_sglang(sglang_request(model, draft, o, sglang_deployment(o)))


# vLLM's --kv-cache-dtype names → SGLang's (a side-by-side plan asks both for the same cache)
_SGLANG_KV_DTYPE = {"fp8": "fp8_e4m3", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2",
                    "bfloat16": "bfloat16", "bf16": "bfloat16", "auto": "auto",
                    "nvfp4": "nvfp4", "mxfp8": "mxfp8"}
_VLLM_KV_DTYPE = {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2", "bf16": "bfloat16",
                  "bfloat16": "bfloat16", "auto": "auto", "nvfp4": "nvfp4", "fp8": "fp8"}


def compare(model: str, *, draft: str | None = None,
            **options: Unpack[CheckOptions]) -> EngineComparison:
    """`model` planned by vLLM and by SGLang for the same GPU and context length, side by side.

    Options are check()'s: each engine reads its own flags (vLLM's `gpu_memory_utilization`,
    SGLang's `mem_fraction_static`, …) and the shared ones (`gpu`, `kv_cache_dtype` — vLLM's
    `fp8` is SGLang's `fp8_e4m3` —, the parallel sizes, `kv_cache_memory`). The context length
    is `max_model_len` or `context_length` (one of them; default: vLLM's, from the config).
    Returns what `kvplan check --engine vllm,sglang --json` prints.
    """
    o = _options(options, CheckOptions, "compare")
    _need_str(model, "model")
    concurrency = o.pop("concurrency", 1)
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InputError(f"--concurrency must be ≥ 1, got {concurrency}")
    from kvplan.analysis.engine_comparison import compare_plans
    from kvplan.analysis.serving import vllm_serving
    from kvplan.pipeline.sglang import sglang_launch_line

    length = o.pop("context_length", None)
    mml = o.pop("max_model_len", None)
    if length is not None and mml is not None and \
            parse_max_model_len(length)[0] != parse_max_model_len(mml)[0]:
        raise InputError("--max-model-len and --context-length differ; a side-by-side plan "
                         "asks both engines for one context length")
    length = length if length is not None else mml
    shared = {k: v for k, v in o.items() if k not in _VLLM_ONLY and k not in _SGLANG_ONLY
              and k not in ("attention_backend", "hf_overrides", "explain")}
    vopts = {k: v for k, v in o.items() if k not in _SGLANG_ONLY}
    sopts: dict[str, Any] = {**shared, **{k: v for k, v in o.items() if k in _SGLANG_ONLY}}
    for name in ("tp_size", "pp_size", "dp_size"):
        vname = {"tp_size": "tensor_parallel_size", "pp_size": "pipeline_parallel_size",
                 "dp_size": "data_parallel_size"}[name]
        if name in sopts and vname not in vopts:
            vopts[vname] = sopts[name]
    kv = o.get("kv_cache_dtype")
    if kv is not None:
        vopts["kv_cache_dtype"] = _VLLM_KV_DTYPE.get(kv, kv)
        sopts["kv_cache_dtype"] = _SGLANG_KV_DTYPE.get(kv, kv)
    if "hf_overrides" in o and "json_model_override_args" not in sopts:
        sopts["json_model_override_args"] = o["hf_overrides"]
    vdraft = draft
    sdraft = draft or o.get("speculative_draft_model_path")
    if length is not None:
        vopts["max_model_len"] = length
    vplan = check(model, draft=vdraft, **vopts)
    context = (parse_max_model_len(length)[0] if length is not None else None) \
        or vplan.max_model_len
    sopts["context_length"] = context
    sopts["concurrency"] = concurrency
    if o.get("explain"):  # SGLang's what-ifs too, in SGLang's flags
        sopts["explain"] = True
    sopts.pop("speculative_draft_model_path", None)
    splan = check(model, draft=sdraft, engine="sglang", **sopts)
    seqs = vplan.max_num_seqs
    vserving = vllm_serving(fits=vplan.fits, max_concurrency=vplan.max_concurrency,
                            kv_tokens=vplan.kv_cache_size_tokens, context_length=context,
                            concurrency=concurrency, max_num_seqs=seqs,
                            error=vplan.error_message)
    vline = _vllm_line(model, vdraft, vopts, context)
    sdep = sglang_deployment({**sopts})
    sline = sglang_launch_line(model, sdep, draft=sdraft)
    return compare_plans(vplan, splan, vllm_serving=vserving, context_length=context,
                         concurrency=concurrency, vllm_command=vline, sglang_command=sline)


def _vllm_line(model: str, draft: str | None, o: Mapping[str, Any], context: int) -> str:
    """The `vllm serve …` line of check()'s vLLM options."""
    import shlex

    words = ["vllm", "serve", shlex.quote(model), "--max-model-len", str(context)]
    for name in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                 "kv_cache_dtype", "gpu_memory_utilization", "max_num_seqs",
                 "max_num_batched_tokens", "block_size", "dtype"):
        v = o.get(name)
        if v is not None and v not in (1, "auto"):
            words += ["--" + name.replace("_", "-"), shlex.quote(str(v))]
    method = o.get("speculative_method")
    if draft or method or o.get("speculative_config"):
        cfg = dict(speculative_config(o.get("speculative_config")))
        cfg.setdefault("method", method)
        if draft:
            cfg.setdefault("model", draft)
        if o.get("num_speculative_tokens"):
            cfg.setdefault("num_speculative_tokens", o["num_speculative_tokens"])
        import json

        words += ["--speculative-config", shlex.quote(json.dumps(
            {k: v for k, v in cfg.items() if v is not None}, separators=(",", ":")))]
    if o.get("enable_prefix_caching") is not None:  # None: vLLM's default for the model
        words.append("--enable-prefix-caching" if o["enable_prefix_caching"]
                     else "--no-enable-prefix-caching")
    if o.get("enforce_eager"):
        words.append("--enforce-eager")
    return " ".join(words)


def _hf_overrides(o: Mapping[str, Any]) -> str | None:
    from kvplan.models.resolution.overrides import hf_overrides_json

    return hf_overrides_json(o.get("hf_overrides"))


def _deployment(o: Mapping[str, Any], spec: Mapping[str, Any], mml: int | None, auto: bool
                ) -> Deployment:
    """The `Deployment` that check and fit plan: the flags, else `--speculative-config`'s keys."""
    from kvplan.engines.vllm.build import Deployment

    return Deployment(
        vllm_version=o.get("vllm"), with_fix=o.get("with_fix", False),
        kv_cache_dtype=o.get("kv_cache_dtype", "auto"), dtype=o.get("dtype", "auto"),
        block_size=o.get("block_size"), max_model_len=mml, auto_fit_max_model_len=auto,
        allow_long_max_model_len=o.get("allow_long_max_model_len", False),
        allow_deprecated_quantization=o.get("allow_deprecated_quantization", False),
        max_num_batched_tokens=parse_batched_tokens(o.get("max_num_batched_tokens")),
        max_num_seqs=o.get("max_num_seqs"),
        tensor_parallel_size=o.get("tensor_parallel_size", 1),
        pipeline_parallel_size=o.get("pipeline_parallel_size", 1),
        decode_context_parallel_size=o.get("decode_context_parallel_size", 1),
        pp_layer_partition=o.get("pp_layer_partition") or None,
        enable_prefix_caching=o.get("enable_prefix_caching"),
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
        enable_chunked_prefill=o.get("enable_chunked_prefill"),
        performance_mode=o.get("performance_mode") or "balanced")


def check_specs(path_or_dict: str | Path | Mapping[str, Any], **options: Unpack[SpecsOptions]
                ) -> Plan:
    """Plan a layer-spec file (docs/specs-format.md), given as a path or as its parsed dict.

    Returns the `Plan` that `kvplan check --specs FILE --json` prints.
    """
    o = _options(options, SpecsOptions, "check_specs")
    from dataclasses import replace

    from kvplan.analysis.plan import build_plan
    from kvplan.engines.vllm.planner import plan as run_plan
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
                        max_num_batched_tokens=parse_batched_tokens(o.get("max_num_batched_tokens")))
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
    from kvplan.engines.vllm.workload import Workload
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


def sweep(model: str, *, draft: str | None = None, engine: str = "vllm",
          **options: Unpack[SweepOptions]) -> Sweep:
    """The largest fitting context and the concurrency per GPU × KV dtype × max_model_len.

    `engine` "sglang" sweeps SGLang's pools (every point planned by SGLang's engine);
    "vllm,sglang" gives both engines' rows. Returns the `Sweep` that `kvplan sweep --json`
    prints.
    """
    o = _options(options, SweepOptions, "sweep")
    _need_str(model, "model")
    engines = _engines(engine)
    if "sglang" not in engines and any(k in o for k in _SWEEP_SGLANG):
        raise OptionError(f"sweep() option {next(k for k in _SWEEP_SGLANG if k in o)} is an "
                          "SGLang flag", hint="pass engine='sglang' or engine='vllm,sglang'")
    if "vllm" not in engines and any(k in o for k in _SWEEP_VLLM):
        raise OptionError(f"sweep() option {next(k for k in _SWEEP_VLLM if k in o)} is a vLLM "
                          "flag; engine='sglang' does not read it")
    srows: list[Any] = []
    scount = 0
    if "sglang" in engines:
        from kvplan.pipeline.sglang_sweep import sglang_rows
        from kvplan.pipeline.sweep import parse_lengths as _lengths

        raw = o.get("max_model_len", "8k..1M")
        lengths_ = _lengths(raw if isinstance(raw, str) else str(raw) if isinstance(raw, int)
                            else ",".join(map(str, raw)))
        sopts = {k: v for k, v in o.items() if k in _SWEEP_SGLANG or k in
                 ("tensor_parallel_size", "kv_cache_memory")}
        sdraft = draft or sopts.pop("speculative_draft_model_path", None)
        req = sglang_request(model, sdraft, sopts, sglang_deployment(sopts))
        srows, scount = sglang_rows(req, gpus=_names(o.get("gpu", "H100")),
                                    kv_dtypes=_names(o.get("kv_cache_dtype", "auto")),
                                    lengths=lengths_)
        if engines == ("sglang",):
            from kvplan.engines.sglang.profiles import sglang_profile
            from kvplan.pipeline.sweep import Sweep as _Sweep

            return _Sweep(model=model, draft=sdraft, vllm_version=None,
                          sglang_version=sglang_profile(o.get("sglang")).version,
                          lengths=sorted(set(lengths_)), rows=srows, plans_evaluated=scount)
        o = {k: v for k, v in o.items() if k not in _SWEEP_SGLANG}
    result = _sweep_vllm(model, draft, o)
    if srows:
        from kvplan.engines.sglang.profiles import sglang_profile

        result = result.model_copy(update={
            "rows": [*result.rows, *srows], "plans_evaluated": result.plans_evaluated + scount,
            "sglang_version": sglang_profile(options.get("sglang")).version})
    return result


def _sweep_vllm(model: str, draft: str | None, o: Mapping[str, Any]) -> Sweep:
    from kvplan.engines.vllm.build import Deployment
    from kvplan.pipeline.deploy import Request
    from kvplan.pipeline.sweep import parse_lengths, run_sweep
    from kvplan.units import parse_size_bytes

    raw_lengths = o.get("max_model_len", "8K..1M")
    lengths = parse_lengths(raw_lengths if isinstance(raw_lengths, str) else str(raw_lengths)
                            if isinstance(raw_lengths, int) else ",".join(map(str, raw_lengths)))
    gpus, dtypes = _names(o.get("gpu", "H100")), _names(o.get("kv_cache_dtype", "auto"))
    if not gpus or not dtypes or not lengths:
        raise InputError("--gpu, --kv-cache-dtype and --max-model-len need at least one value")
    kv_mem = o.get("kv_cache_memory")
    dep = Deployment(vllm_version=o.get("vllm"), with_fix=o.get("with_fix", False),
                     tensor_parallel_size=o.get("tensor_parallel_size", 1),
                     allow_long_max_model_len=o.get("allow_long_max_model_len", False),
                     max_num_batched_tokens=parse_batched_tokens(o.get("max_num_batched_tokens")),
                     speculative_method=o.get("speculative_method"),
                     num_speculative_tokens=o.get("num_speculative_tokens", 0),
                     draft_kv_cache_dtype=o.get("draft_kv_cache_dtype"))
    base = Request(model=model, deployment=dep, draft=draft,
                   gpu_memory_utilization=o.get("gpu_memory_utilization"),
                   kv_cache_memory_bytes=parse_size_bytes(kv_mem) if kv_mem else None)
    return run_sweep(base, gpus=gpus, kv_dtypes=dtypes, lengths=lengths)


def fit(model: str, *, max_model_len: int | str, concurrency: int, draft: str | None = None,
        progress: Any = None, engine: str = "vllm", **options: Unpack[FitOptions]) -> FitResult:
    """The cheapest deployments (GPU × count × TP/PP/DP × KV dtype × draft on/off) that serve
    `max_model_len` tokens to `concurrency` requests at once.

    `engine` is "vllm" (default), "sglang", or "vllm,sglang" to rank both servers' deployments
    in one list, each with the command line that starts it. Returns the `FitResult` that
    `kvplan fit --json` prints (no candidate: its nearest misses). `progress(done, total)`, if
    given, is called after each planned shape.
    """
    o = _options(options, FitOptions, "fit")
    _need_str(model, "model")
    engines = _engines(engine)
    if "sglang" not in engines:
        given = [k for k in _FIT_SGLANG if k in o]
        if given:
            raise OptionError(f"fit() option {given[0]} is an SGLang flag",
                              hint="pass engine='sglang' or engine='vllm,sglang'")
    elif "vllm" not in engines:
        given = [k for k in o if k not in _FIT_SGLANG and k not in _FIT_SHARED]
        if given:
            raise OptionError(f"fit() option {given[0]} is a vLLM flag; engine='sglang' does "
                              "not read it", hint="pass engine='vllm,sglang' to plan both")
    if engines == ("vllm",):
        return _fit_vllm(model, max_model_len=max_model_len, concurrency=concurrency,
                         draft=draft, progress=progress, o=o)
    from kvplan.pipeline.sglang_fit import merge_fits

    results = []
    if "vllm" in engines:
        results.append(_fit_vllm(model, max_model_len=max_model_len, concurrency=concurrency,
                                 draft=draft, progress=progress,
                                 o={k: v for k, v in o.items() if k not in _FIT_SGLANG}))
    results.append(_fit_sglang(model, max_model_len=max_model_len, concurrency=concurrency,
                               draft=draft, progress=progress, o=o))
    return merge_fits(results, top=o.get("top", 5))


def _engines(engine: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(p.strip().lower() for p in str(engine).split(",") if p.strip()))
    if not names or any(n not in ("vllm", "sglang") for n in names):
        raise OptionError(f"engine must be 'vllm', 'sglang' or 'vllm,sglang', got {engine!r}")
    return names


def _fit_target(max_model_len: int | str, concurrency: int) -> int:
    """fit's target, checked: a number for --max-model-len (not auto), --concurrency ≥ 1."""
    mml, auto = parse_max_model_len(max_model_len)
    if auto or mml is None:
        raise InputError("kvplan fit needs a number for --max-model-len, not auto",
                         hint="e.g. --max-model-len 128k")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise InputError(f"--concurrency must be ≥ 1, got {concurrency}",
                         hint="the number of concurrent requests of --max-model-len tokens")
    return mml


def _fit_sglang(model: str, *, max_model_len: int | str, concurrency: int, draft: str | None,
                progress: Any, o: Mapping[str, Any]) -> FitResult:
    """fit()'s SGLang search: the shared options and SGLang's own."""
    from kvplan.budget.hardware import parse_vendors
    from kvplan.pipeline.sglang_fit import search_sglang

    mml = _fit_target(max_model_len, concurrency)
    sopts = {k: v for k, v in o.items() if k in _FIT_SGLANG}
    algorithm = sopts.get("speculative_algorithm") or _SGLANG_ALGORITHM.get(
        str(o.get("speculative_method") or "").lower())
    sdraft = draft or sopts.pop("speculative_draft_model_path", None)
    if sdraft and not algorithm:
        raise InputError("a draft under SGLang needs --speculative-algorithm",
                         hint="EAGLE, EAGLE3, NEXTN, DFLASH or STANDALONE (or vLLM's "
                              "--speculative-method when both engines are searched)")
    if algorithm:
        sopts["speculative_algorithm"] = algorithm
    if "revision" in o:
        sopts["revision"] = o["revision"]
    dep = sglang_deployment(sopts)
    req = sglang_request(model, sdraft, sopts, dep)
    price_map = _price_map(o)
    gpu = o.get("gpu")
    gpus = _names(gpu) if gpu is not None else None
    if gpu is not None and not gpus:
        raise InputError("--gpu needs at least one name", hint="e.g. --gpu H100,H200,B200")
    return search_sglang(req, max_model_len=mml, concurrency=concurrency, gpus=gpus,
                         kv_dtypes=_names(o.get("kv_cache_dtype", "auto,fp8,nvfp4")),
                         kv_dtypes_given=o.get("kv_cache_dtype") is not None,
                         max_gpus=o.get("max_gpus", 8), prices=price_map, top=o.get("top", 5),
                         vendors=parse_vendors(o.get("vendor")), progress=progress)


def _price_map(o: Mapping[str, Any]) -> dict[str, float]:
    """--prices FILE then --price GPU=USD, as catalogue name → USD per GPU-hour."""
    from kvplan.pipeline.fit import parse_price, parse_prices_file

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
    return price_map


def _fit_vllm(model: str, *, max_model_len: int | str, concurrency: int, draft: str | None,
              progress: Any, o: Mapping[str, Any]) -> FitResult:
    """fit()'s vLLM search."""
    from kvplan.budget.hardware import parse_vendors
    from kvplan.pipeline.deploy import Request
    from kvplan.pipeline.fit import DEFAULT_KV_DTYPES, search

    mml = _fit_target(max_model_len, concurrency)
    util = o.get("gpu_memory_utilization")
    if util is not None and not 0 < util <= 1:
        raise InputError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    price_map = _price_map(o)
    spec = speculative_config(o.get("speculative_config"))
    searched = {"kv_cache_dtype", "gpu", "vendor"}  # per candidate
    dep = _deployment({k: v for k, v in o.items() if k not in searched}, spec, None, False)
    base = Request(model=model, deployment=dep, revision=o.get("revision"),
                   draft=draft or spec.get("model"), gpu_memory_utilization=util,
                   enforce_eager=o.get("enforce_eager", False),
                   hf_overrides=_hf_overrides(o), config_format=o.get("config_format") or "auto")
    gpu = o.get("gpu")
    gpus = _names(gpu) if gpu is not None else None
    if gpu is not None and not gpus:
        raise InputError("--gpu needs at least one name", hint="e.g. --gpu H100,H200,B200")
    given = o.get("kv_cache_dtype")
    workloads = parse_workloads(o.get("workload"))
    if len(workloads) > 1:
        raise InputError("kvplan fit takes one --workload", hint="run fit once per workload")
    return search(base, max_model_len=mml, concurrency=concurrency, gpus=gpus,
                  kv_dtypes=_names(given) if given is not None else DEFAULT_KV_DTYPES,
                  kv_dtypes_given=given is not None, vendors=parse_vendors(o.get("vendor")),
                  max_gpus=o.get("max_gpus", 8), prices=price_map, top=o.get("top", 5),
                  progress=progress, workload=workloads[0] if workloads else None)

def _available_kv_gib(o: Mapping[str, Any]) -> float | None:
    """--available-kv-gib as vLLM logged it: zero or negative plans into vLLM's no-memory error;
    at most 16 TiB either way (units.MAX_MEMORY_BYTES). Refused beside kv_cache_memory."""
    import math

    from kvplan.units import MAX_MEMORY_BYTES

    gib = o.get("available_kv_gib")
    if gib is not None and o.get("kv_cache_memory") is not None:
        raise InputError("--kv-cache-memory and --available-kv-gib both set the KV cache budget",
                         hint="give one: --kv-cache-memory (vLLM's kv_cache_memory_bytes) or "
                              "--available-kv-gib (copied from a vLLM log)")
    if gib is not None and not math.isfinite(gib):
        raise InputError(f"--available-kv-gib must be a number, got {gib}")
    if gib is not None and abs(gib) > MAX_MEMORY_BYTES / 2**30:
        raise InputError(f"--available-kv-gib {gib} is out of range: at most "
                         f"{MAX_MEMORY_BYTES // 2**30:,} GiB (16 TiB) per GPU",
                         hint="copy the figure of vLLM's 'Available KV cache memory: X GiB' line")
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
    """--max-model-len as vLLM reads it (human_readable_int_or_auto: 128k = 128,000, 128K =
    131,072, auto / -1) → (len, auto); None: the config's."""
    from kvplan.units import read_tokens

    if value is None:
        return None, False
    n = read_tokens(value, "--max-model-len", auto=True)
    return (None, True) if n == -1 else (n, False)


def parse_batched_tokens(value: int | str | None) -> int | None:
    """--max-num-batched-tokens as vLLM reads it (human_readable_int: 16k = 16,000)."""
    from kvplan.units import read_tokens

    return None if value is None else read_tokens(value, "--max-num-batched-tokens")


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
