#!/usr/bin/env python3
"""Write the per-layer KV-cache specs kvplan builds for a model deployment as a layer-spec case
(docs/specs-format.md), the input of the planner oracle and of tools/vllm_scheduler_oracle.py.

    .venv/bin/python tools/kvplan_specs_case.py MODEL [kvplan check flags] \
        --workload 8192:1024 [--max-num-seqs N] -o CASE.json

Each layer is written with its explicit fields (`backend: none`, padded pages, packed head slots,
Mamba shapes and dtypes), so the oracle rebuilds exactly kvplan's specs as vLLM's dataclasses.
That kvplan's specs are vLLM's for these models is what the planner goldens and the 0.34
end-to-end comparison (shared/vllm-e2e) check; the case's `notes` say where it came from.
Only the spec kinds the workload goldens use are written (attention, sliding window, chunked
local, MLA, Mamba); others are refused.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kvplan.engines.vllm.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    MambaSpec,
    MLAAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
)

KV_DTYPE_BY_QUANT = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8_e5m2"}


def compact_json(case: dict[str, Any]) -> str:
    """The case as JSON with one layer per line."""
    head = {k: v for k, v in case.items() if k != "layers"}
    text = json.dumps(head, indent=1)[:-2]
    layers = ",\n  ".join(json.dumps(layer) for layer in case["layers"])
    return f"{text},\n \"layers\": [\n  {layers}\n ]\n}}\n"


def layer_entry(name: str, spec: Any, kv_dtype: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "block_size": spec.block_size}
    if spec.is_draft:
        d["is_draft"] = True
    if isinstance(spec, MambaSpec):
        d.update(kind="mamba", shapes=[list(s) for s in spec.shapes], dtypes=list(spec.dtypes),
                 mamba_type=spec.mamba_type.value.upper(), mamba_cache_mode=spec.mamba_cache_mode,
                 num_speculative_blocks=spec.num_speculative_blocks,
                 num_prefill_checkpoint_blocks=spec.num_prefill_checkpoint_blocks)
        if spec.prefill_checkpoint_alignment is not None:
            d["prefill_checkpoint_alignment"] = spec.prefill_checkpoint_alignment
        if spec.page_size_padded is not None:
            d["page_size_padded"] = spec.page_size_padded
        if spec.state_alignment != 1:
            d["state_alignment"] = spec.state_alignment
        if spec.tp_replicated:
            d["tp_replicated"] = True
        return d
    if not isinstance(spec, AttentionSpec):
        raise SystemExit(f"{name}: {type(spec).__name__} is not written by this tool")
    kind = {SlidingWindowMLASpec: "sliding_window_mla", MLAAttentionSpec: "mla",
            SlidingWindowSpec: "sliding_window", ChunkedLocalAttentionSpec: "chunked_local",
            FullAttentionSpec: "full_attention"}.get(type(spec))
    if kind is None:
        raise SystemExit(f"{name}: {type(spec).__name__} is not written by this tool")
    quant = spec.kv_quant_mode.value
    dtype = spec.dtype if quant == "none" else KV_DTYPE_BY_QUANT.get(kv_dtype, kv_dtype)
    d.update(kind=kind, num_kv_heads=spec.num_kv_heads, head_size=spec.head_size,
             dtype=dtype, backend="none")
    if kind in ("full_attention", "sliding_window", "chunked_local") and spec.head_size_v != spec.head_size:
        d["head_size_v"] = spec.head_size_v
    for key in ("page_size_padded", "num_head_slots", "state_content_bytes", "sliding_window",
                "attention_chunk_size"):
        v = getattr(spec, key, None)
        if v is not None:
            d[key] = v
    if getattr(spec, "extra_retained_tokens", 0):
        d["extra_retained_tokens"] = spec.extra_retained_tokens
    if isinstance(spec, MLAAttentionSpec | SlidingWindowMLASpec):
        if spec.max_tp_shards is not None:
            d["max_tp_shards"] = spec.max_tp_shards
    return d


def kvplan_version() -> str:
    from importlib.metadata import version

    return version("kvplan-vllm")


def evaluation(model: str, draft: str | None, opts: dict[str, Any]) -> Any:
    """kvplan.check's path, returning the whole Evaluation (planner input, build, plan)."""
    from dataclasses import replace

    import kvplan.api as api
    from kvplan.pipeline.deploy import Request, evaluate
    from kvplan.units import parse_kv_cache_memory_bytes

    sched = {k: opts.pop(k) for k in ("async_scheduling", "enable_chunked_prefill") if k in opts}
    o = api._options(opts, api.CheckOptions, "check")
    mml, auto = api.parse_max_model_len(o.get("max_model_len"))
    spec = api.speculative_config(o.get("speculative_config"))
    dep = replace(api._deployment(o, spec, mml, auto), **sched)
    kv_mem = o.get("kv_cache_memory")
    req = Request(model=model, deployment=dep, draft=draft or spec.get("model"), gpu=o.get("gpu"),
                  kv_cache_memory_bytes=(parse_kv_cache_memory_bytes(kv_mem)
                                         if kv_mem is not None else None))
    return evaluate(req)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--workload", required=True, help="PROMPT:OUTPUT in tokens")
    ap.add_argument("--name", default=None)
    args, rest = ap.parse_known_args(argv)
    model, flags = rest[0], rest[1:]
    opts: dict[str, Any] = {}
    i = 0
    while i < len(flags):  # --flag value pairs in the API's snake_case
        key = flags[i].lstrip("-").replace("-", "_")
        if i + 1 >= len(flags) or flags[i + 1].startswith("--"):
            if key.startswith("no_"):
                opts[key[3:]] = False
            else:
                opts[key] = True
            i += 1
            continue
        val: Any = flags[i + 1]
        if val.lstrip("-").isdigit():
            val = int(val)
        opts[key] = val
        i += 2
    draft = opts.pop("draft", None)
    max_num_seqs = opts.get("max_num_seqs")
    chunked = opts.get("enable_chunked_prefill", True)
    prefix = opts.get("enable_prefix_caching", True)
    ev = evaluation(model, draft, opts)
    inp, built = ev.planner_input, ev.built
    if len(inp.worker_specs) != 1:
        raise SystemExit("pipeline parallel deployments are not written by this tool")
    p, o = (int(x) for x in args.workload.split(":"))
    layers = [layer_entry(n, s, built.kv_cache_dtype if not s.is_draft else
                          (built.draft_kv_cache_dtype or built.kv_cache_dtype))
              for n, s in inp.worker_specs[0].items()]
    case = {
        "name": args.name or f"{model} {args.workload}",
        "notes": [f"layer specs written by tools/kvplan_specs_case.py from kvplan's build of "
                  f"{model} with {' '.join(rest[1:])} (kvplan {kvplan_version()})"],
        "max_model_len": inp.max_model_len,
        "max_num_batched_tokens": inp.max_num_batched_tokens,
        "max_num_seqs": max_num_seqs or 256,
        "async_scheduling": inp.async_scheduling,
        "enable_chunked_prefill": bool(chunked),
        "enable_prefix_caching": bool(prefix),
        "available_kv_memory_bytes": inp.available_kv_bytes[0],
        "num_speculative_tokens": inp.num_speculative_tokens,
        "mamba_cache_mode": inp.mamba_cache_mode,
        "model_dtype": built.model_dtype,
        "layers": layers,
        "workload": {"prompt": p, "output": o},
    }
    if inp.speculative_method is not None:
        case["speculative_method"] = inp.speculative_method
        case["num_nextn_predict_layers"] = inp.num_nextn_predict_layers
    if inp.kv_cache_layout:
        case["kv_cache_layout"] = inp.kv_cache_layout
    with open(args.output, "w") as f:
        f.write(compact_json(case))
    print(f"wrote {args.output}: {len(layers)} layers", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
