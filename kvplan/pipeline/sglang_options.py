"""kvplan.check's options (snake_case SGLang flags; the parallel sizes and the context length
may come by their vLLM names) → the `SglangDeployment` and `SglangRequest` of one SGLang
deployment. Used by the API, the CLI's serve lines and logs, and `kvplan ci`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import InputError, OptionError


def _context_length(value: Any) -> int | None:
    """A context length given by vLLM's name (max_model_len): a count, never auto."""
    from kvplan.units import read_tokens

    if value is None:
        return None
    if str(value).strip().lower() in ("auto", "-1"):
        raise InputError("engine='sglang' takes a number for the context length, not auto")
    return read_tokens(value, "--max-model-len")  # vLLM's notation, as the name says


def sglang_deployment(o: Mapping[str, Any]) -> Any:
    """SGLang's flags (snake_case options) → SglangDeployment; the parallel sizes and the
    context length may come by their vLLM names too."""
    from kvplan.engines.sglang.deployment import SglangDeployment

    mml = _context_length(o.get("max_model_len"))

    def pick(name: str, alias: str, default: Any) -> Any:
        if name in o and alias in o and o[name] != o[alias]:
            raise OptionError(f"check() got both {name} and {alias} with different values")
        return o.get(name, o.get(alias, default))

    fields = dict(
        sglang_version=o.get("sglang"), tp_size=pick("tp_size", "tensor_parallel_size", 1),
        pp_size=pick("pp_size", "pipeline_parallel_size", 1),
        dp_size=pick("dp_size", "data_parallel_size", 1),
        context_length=o.get("context_length", mml),
        kv_cache_dtype=o.get("kv_cache_dtype", "auto"),
        cuda_graph_max_bs_decode=o.get("cuda_graph_max_bs"),
        **{k: o[k] for k in ("enable_dp_attention", "mem_fraction_static", "max_total_tokens",
                             "page_size", "max_running_requests", "chunked_prefill_size",
                             "swa_full_tokens_ratio", "disable_radix_cache",
                             "mamba_full_memory_ratio", "max_mamba_cache_size",
                             "speculative_algorithm", "speculative_num_steps",
                             "speculative_eagle_topk", "speculative_num_draft_tokens",
                             "speculative_draft_kv_cache_dtype", "attention_backend",
                             "max_prefill_tokens", "disable_cuda_graph",
                             "disable_overlap_schedule")
           if k in o})
    try:
        dep = SglangDeployment(**fields)
    except ValueError as exc:  # pydantic's: a flag out of range
        first = exc.errors()[0] if hasattr(exc, "errors") else None  # type: ignore[union-attr]
        where = ".".join(str(x) for x in first["loc"]) if first else ""
        raise OptionError(f"check() option {where}: {first['msg'] if first else exc}") from None
    return dep


def sglang_request(model: str, draft: str | None, o: Mapping[str, Any], dep: Any) -> Any:
    """The SglangRequest of check()'s options (the deployment already built)."""
    from kvplan.pipeline.sglang import SglangRequest
    from kvplan.units import parse_kv_cache_memory_bytes, parse_size_bytes

    kv_mem = o.get("kv_cache_memory")
    gpu_mem = o.get("gpu_memory")
    path = o.get("speculative_draft_model_path")
    if draft is not None and path is not None and draft != path:
        raise OptionError("check() got both draft and speculative_draft_model_path with "
                          "different values")
    if "json_model_override_args" in o and "hf_overrides" in o:
        raise OptionError("check() got both hf_overrides and json_model_override_args")
    concurrency = o.get("concurrency", 1)
    if isinstance(concurrency, bool) or concurrency < 1:
        raise InputError(f"--concurrency must be ≥ 1, got {concurrency}")
    from kvplan.models.resolution.overrides import hf_overrides_json

    overrides = hf_overrides_json(o.get("hf_overrides", o.get("json_model_override_args")))
    return SglangRequest(
        model=model, deployment=dep, revision=o.get("revision"), draft=draft or path,
        gpu=o.get("gpu"), gpu_memory_mib=parse_size_bytes(gpu_mem) / 2**20 if gpu_mem else None,
        kv_budget_bytes=parse_kv_cache_memory_bytes(kv_mem) if kv_mem is not None else None,
        pre_model_load_gib=o.get("pre_model_load_gib"), post_load_gib=o.get("post_load_gib"),
        hf_overrides=overrides, concurrency=concurrency, explain=o.get("explain", False))
