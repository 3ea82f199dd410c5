"""`kvplan ci` entries planned by SGLang: `engine = "sglang"` in an entry (or `[defaults]`),
`kvplan ci --engine sglang`, or a `serve = "python -m sglang.launch_server …"` line. The keys are
SGLang's flag names (dashes or underscores); `[defaults]` apply as for vLLM's entries."""

from __future__ import annotations

from typing import Any

from kvplan.errors import InputError

# entry keys → the option names kvplan.check takes for SGLang
SGLANG_KEYS = {
    "model", "revision", "gpu", "gpu_memory", "kv_cache_memory", "draft",
    "speculative_draft_model_path", "tp_size", "pp_size", "dp_size", "enable_dp_attention",
    "mem_fraction_static", "max_total_tokens", "context_length", "page_size", "kv_cache_dtype",
    "max_running_requests", "chunked_prefill_size", "max_prefill_tokens", "cuda_graph_max_bs",
    "disable_cuda_graph", "attention_backend", "swa_full_tokens_ratio", "disable_radix_cache",
    "disable_overlap_schedule", "mamba_full_memory_ratio", "max_mamba_cache_size",
    "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
    "speculative_num_draft_tokens", "speculative_draft_kv_cache_dtype",
    "json_model_override_args", "concurrency", "sglang"}
ALIASES = {"tp": "tp_size", "tensor_parallel_size": "tp_size", "pp": "pp_size",
           "pipeline_parallel_size": "pp_size", "dp": "dp_size", "data_parallel_size": "dp_size",
           "kv_dtype": "kv_cache_dtype", "cuda_graph_max_bs_decode": "cuda_graph_max_bs",
           "model_path": "model", "max_model_len": "context_length"}


def entry_engine(entry: dict[str, Any], defaults: dict[str, Any], forced: str | None) -> str:
    """The server an entry names: --engine, else its `engine` key, else its serve line's."""
    if forced is not None:
        return forced
    e = entry.get("engine", defaults.get("engine"))
    if e is not None:
        if str(e).lower() not in ("vllm", "sglang"):
            raise InputError(f"engine {e!r}: expected vllm or sglang")
        return str(e).lower()
    serve = entry.get("serve", defaults.get("serve"))
    if serve is not None:
        from kvplan.sources.sglang_serve import is_sglang_line

        if is_sglang_line(str(serve)):
            return "sglang"
    return "vllm"


def sglang_entry_request(entry: dict[str, Any], defaults: dict[str, Any], where: str) -> Any:
    """One `[[deployment]]` table (over `[defaults]`) → SglangRequest."""
    from dataclasses import replace

    from kvplan.pipeline.sglang_options import sglang_deployment, sglang_request
    from kvplan.sources.sglang_serve import human_readable_int

    def norm(k: str) -> str:
        k = k.strip().replace("-", "_")
        return ALIASES.get(k, k)

    merged = {norm(k): v for k, v in defaults.items() if norm(k) != "engine"}
    own = {norm(k): v for k, v in entry.items() if norm(k) != "engine"}
    if "serve" in own or "serve" in merged:
        from kvplan.sources.sglang_serve import parse_sglang_command

        cmd = parse_sglang_command(str(own.pop("serve", merged.pop("serve", ""))))
        base = {norm(k): v for k, v in cmd.options.items()}
        base["model"] = cmd.model
        merged.update(base)
    merged.update(own)
    name = str(merged.pop("name", merged.get("model", where)))
    unknown = sorted(set(merged) - SGLANG_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown SGLang key(s) {unknown}",
                         hint="keys are SGLang's flag names (context-length, tp-size, "
                              "mem-fraction-static, ...)")
    model = merged.pop("model", None)
    if model is None:
        raise InputError(f"{where}: no model", hint='add model = "org/name"')
    for k in ("context_length", "max_total_tokens", "max_prefill_tokens"):
        if isinstance(merged.get(k), str):
            try:
                merged[k] = human_readable_int(merged[k])
            except ValueError as exc:
                raise InputError(f"{where}: {k}: {exc}") from None
    draft = merged.pop("draft", None) or merged.pop("speculative_draft_model_path", None)
    try:
        dep = sglang_deployment(merged)
        req = sglang_request(str(model), draft, merged, dep)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}", hint=exc.hint) from None
    return replace(req, label=name)
