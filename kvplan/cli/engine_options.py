"""`--engine` and SGLang's own flags on `check`, `explain`, `fit`, `sweep` and `ci`.

`with_engine_options(names)` adds `--engine vllm|sglang|vllm,sglang` and the named SGLang flags
to a command's options (its signature, as typer reads it) and hands the command only its own:
the SGLang values go to `values["sglang"]`, the engines to `values["engine"]`. Each command then
decides with `check_engine_flags` which of the typed flags its engines read:

* a flag only vLLM has, under `--engine sglang` (or only SGLang has, under the default vLLM):
  one line `Error: --gpu-memory-utilization is a vLLM flag; SGLang's is --mem-fraction-static`,
  exit 2;
* `--engine vllm,sglang`: each engine reads its own flags and the shared ones (model, GPU,
  `--kv-cache-dtype`, the parallel sizes, `--kv-cache-memory` …); the context length is the same
  for both (`--max-model-len` or `--context-length`, one of them).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any

import typer

from kvplan.errors import InputError

Opt = typer.Option
ENGINES = ("vllm", "sglang")
_PANEL = "SGLang (--engine sglang)"

# SGLang's flags as kvplan's CLI takes them: name → (type, default, typer option). Names are
# SGLang's argparse dests; `cuda_graph_max_bs` is 0.5.23's --cuda-graph-max-bs-decode.
SGLANG_OPTIONS: dict[str, tuple[Any, Any, Any]] = {
    "sglang": (str | None, None, Opt("--sglang", rich_help_panel=_PANEL,
                                     help="SGLang release profile (default: the newest, 0.5.23)")),
    "context_length": (str | None, None, Opt(
        "--context-length", rich_help_panel=_PANEL,
        help="SGLang's context length, read as SGLang does (32k = 32000, 32Ki = 32768); "
             "default: the model's")),
    "mem_fraction_static": (float | None, None, Opt(
        "--mem-fraction-static", rich_help_panel=_PANEL,
        help="share of the free memory before the weights SGLang keeps for weights + KV "
             "(default: SGLang's per-GPU heuristic)")),
    "max_total_tokens": (str | None, None, Opt(
        "--max-total-tokens", rich_help_panel=_PANEL, help="cap on the KV pool's tokens")),
    "page_size": (int | None, None, Opt("--page-size", rich_help_panel=_PANEL)),
    "max_running_requests": (int | None, None, Opt("--max-running-requests",
                                                   rich_help_panel=_PANEL)),
    "chunked_prefill_size": (int | None, None, Opt("--chunked-prefill-size",
                                                   rich_help_panel=_PANEL,
                                                   help="-1 disables chunked prefill")),
    "max_prefill_tokens": (str | None, None, Opt("--max-prefill-tokens", rich_help_panel=_PANEL)),
    "cuda_graph_max_bs": (int | None, None, Opt(
        "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs", rich_help_panel=_PANEL,
        help="largest decode CUDA-graph batch (older SGLang: --cuda-graph-max-bs)")),
    "disable_cuda_graph": (bool, False, Opt("--disable-cuda-graph", rich_help_panel=_PANEL)),
    "tp_size": (int | None, None, Opt("--tp-size", "--tp", rich_help_panel=_PANEL,
                                      help="SGLang's tensor-parallel size "
                                           "(--tensor-parallel-size works too)")),
    "pp_size": (int | None, None, Opt("--pp-size", rich_help_panel=_PANEL)),
    "dp_size": (int | None, None, Opt("--dp-size", rich_help_panel=_PANEL)),
    "enable_dp_attention": (bool, False, Opt("--enable-dp-attention", rich_help_panel=_PANEL)),
    "swa_full_tokens_ratio": (float | None, None, Opt("--swa-full-tokens-ratio",
                                                      rich_help_panel=_PANEL)),
    "disable_radix_cache": (bool, False, Opt("--disable-radix-cache", rich_help_panel=_PANEL)),
    "disable_overlap_schedule": (bool, False, Opt("--disable-overlap-schedule",
                                                  rich_help_panel=_PANEL)),
    "mamba_full_memory_ratio": (float | None, None, Opt("--mamba-full-memory-ratio",
                                                        rich_help_panel=_PANEL)),
    "max_mamba_cache_size": (int | None, None, Opt("--max-mamba-cache-size",
                                                   rich_help_panel=_PANEL)),
    "speculative_algorithm": (str | None, None, Opt(
        "--speculative-algorithm", rich_help_panel=_PANEL,
        help="EAGLE, EAGLE3, NEXTN, STANDALONE, DFLASH")),
    "speculative_draft_model_path": (str | None, None, Opt(
        "--speculative-draft-model-path", "--speculative-draft-model", rich_help_panel=_PANEL)),
    "speculative_num_steps": (int | None, None, Opt("--speculative-num-steps",
                                                    rich_help_panel=_PANEL)),
    "speculative_eagle_topk": (int | None, None, Opt("--speculative-eagle-topk",
                                                     rich_help_panel=_PANEL)),
    "speculative_num_draft_tokens": (int | None, None, Opt("--speculative-num-draft-tokens",
                                                           rich_help_panel=_PANEL)),
    "speculative_draft_kv_cache_dtype": (str | None, None, Opt(
        "--speculative-draft-kv-cache-dtype", rich_help_panel=_PANEL)),
    "json_model_override_args": (str | None, None, Opt(
        "--json-model-override-args", rich_help_panel=_PANEL,
        help="SGLang's JSON applied to the model's config")),
    "concurrency": (int | None, None, Opt(
        "--concurrency", rich_help_panel=_PANEL,
        help="requests of the context length to hold at once (SGLang plans, side by side; "
             "default 1)")),
}

# the SGLang flag a vLLM flag corresponds to (for the error under --engine sglang)
SGLANG_NAME_OF = {"gpu_memory_utilization": "--mem-fraction-static",
                  "max_model_len": "--context-length", "max_num_seqs": "--max-running-requests",
                  "max_num_batched_tokens": "--chunked-prefill-size",
                  "block_size": "--page-size", "speculative_config": "--speculative-algorithm",
                  "speculative_method": "--speculative-algorithm",
                  "num_speculative_tokens": "--speculative-num-draft-tokens",
                  "draft_kv_cache_dtype": "--speculative-draft-kv-cache-dtype",
                  "enforce_eager": "--disable-cuda-graph",
                  "enable_prefix_caching": "--disable-radix-cache",
                  "hf_overrides": "--json-model-override-args", "vllm": "--sglang",
                  "available_kv_gib": None}
# the vLLM flag an SGLang flag corresponds to (for the error under the default engine)
VLLM_NAME_OF = {"mem_fraction_static": "--gpu-memory-utilization",
                "context_length": "--max-model-len", "max_running_requests": "--max-num-seqs",
                "chunked_prefill_size": "--max-num-batched-tokens", "page_size": "--block-size",
                "tp_size": "--tensor-parallel-size", "pp_size": "--pipeline-parallel-size",
                "dp_size": "--data-parallel-size", "disable_cuda_graph": "--enforce-eager",
                "disable_radix_cache": "--no-enable-prefix-caching",
                "json_model_override_args": "--hf-overrides", "sglang": "--vllm",
                "speculative_algorithm": "--speculative-method",
                "speculative_num_draft_tokens": "--num-speculative-tokens",
                "speculative_draft_kv_cache_dtype": "--draft-kv-cache-dtype",
                "speculative_draft_model_path": "--draft"}


def parse_engines(text: str) -> tuple[str, ...]:
    """--engine vllm | sglang | vllm,sglang (either order) → the engines, in that order."""
    names = tuple(dict.fromkeys(p.strip().lower() for p in str(text).split(",") if p.strip()))
    bad = [n for n in names if n not in ENGINES]
    if not names or bad:
        raise InputError(f"unknown --engine {text!r}",
                         hint="use vllm (default), sglang, or vllm,sglang for both side by side")
    return names


def with_engine_options(names: Iterable[str], *, engine_help: str | None = None
                        ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add `--engine` and the SGLang flags `names` to a command; the command gets them as
    keyword `engine_values` = {"engine": (...), "sglang": {name: value}, "given": {names typed
    on the command line}}."""
    names = list(names)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        params = [p for p in sig.parameters.values() if p.name != "engine_values"]
        extra = [inspect.Parameter(
            "engine", inspect.Parameter.KEYWORD_ONLY, default="vllm",
            annotation=Annotated[str, Opt("--engine", help=engine_help or
                                          "vllm (default), sglang, or vllm,sglang")])]
        for name in names:
            typ, default, opt = SGLANG_OPTIONS[name]
            extra.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                           default=default, annotation=Annotated[typ, opt]))
        own = {p.name for p in params}
        ctx_name = next((p.name for p in params if p.annotation is typer.Context), None)
        if ctx_name is None:  # the click context tells which flags were typed
            ctx_name = "engine_ctx"
            extra.insert(0, inspect.Parameter("engine_ctx", inspect.Parameter.KEYWORD_ONLY,
                                              annotation=typer.Context))

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            engine = kwargs.pop("engine", "vllm")
            values = {n: kwargs.pop(n) for n in names if n in kwargs}
            ctx = kwargs.pop("engine_ctx") if ctx_name == "engine_ctx" else kwargs.get(ctx_name)
            if ctx is None and args and isinstance(args[0], typer.Context):
                ctx = args[0]
            given: set[str] = set()
            if ctx is not None:
                for n in [*own, *names, "engine"]:
                    src = ctx.get_parameter_source(n) if n in ctx.params else None
                    if getattr(src, "name", None) in ("COMMANDLINE", "ENVIRONMENT"):
                        given.add(n)
            kwargs["engine_values"] = {"engine": parse_engines(engine), "sglang": values,
                                       "given": given}
            return fn(*args, **kwargs)

        new_params = [*(p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
                        if p.kind is inspect.Parameter.VAR_KEYWORD else p for p in params),
                      *extra]
        # keyword-only after positional-or-keyword is fine for typer; keep the order
        wrapper.__signature__ = sig.replace(parameters=new_params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in new_params
                                   if p.annotation is not inspect.Parameter.empty}
        return wrapper

    return decorate


def check_engine_flags(engines: tuple[str, ...], given: set[str], *, vllm_only: Iterable[str],
                       sglang_only: Iterable[str], command: str = "check") -> None:
    """One clear error for a flag none of the chosen engines reads."""
    def flag(name: str) -> str:
        return "--cuda-graph-max-bs-decode" if name == "cuda_graph_max_bs" else \
            "--" + name.replace("_", "-")

    if "sglang" not in engines:
        for name in sglang_only:
            if name in given:
                other = VLLM_NAME_OF.get(name)
                raise InputError(f"{flag(name)} is an SGLang flag; the engine is vLLM"
                                 + (f" (its flag is {other})" if other else ""),
                                 hint=f"add --engine sglang (or --engine vllm,sglang) to "
                                      f"`kvplan {command}`")
    if "vllm" not in engines:
        for name in vllm_only:
            if name in given:
                other = SGLANG_NAME_OF.get(name)
                raise InputError(f"{flag(name)} is a vLLM flag; --engine sglang does not read it"
                                 + (f" (SGLang's is {other})" if other else ""),
                                 hint="use SGLang's flag, or --engine vllm,sglang to plan both")


def sglang_options_dict(values: Mapping[str, Any]) -> dict[str, Any]:
    """The SGLang flags typed (None / False left out), as `kvplan.check` options; token counts
    read as SGLang reads them (`human_readable_int`: 32k = 32000, 32Ki = 32768)."""
    from kvplan.sources.sglang_serve import human_readable_int

    out: dict[str, Any] = {}
    for k, v in values.items():
        if v is None or v is False:
            continue
        if k in ("context_length", "max_total_tokens", "max_prefill_tokens"):
            try:
                v = human_readable_int(str(v))
            except ValueError as exc:
                raise InputError(f"--{k.replace('_', '-')}: {exc}",
                                 hint="a token count as SGLang reads it: 32768, 32k (= 32000) "
                                      "or 32Ki (= 32768)") from None
        out[k] = v
    return out
