"""Why a deployment does not fit, ranked by effect, and what-ifs each recomputed by the engine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from kvplan.engines.vllm.build import BuildResult, Deployment, build
from kvplan.engines.vllm.planner import EngineResult, GroupDemand, PlannerInput, plan
from kvplan.engines.vllm.specs import (
    AttentionSpec,
    CircularBufferSpec,
    HiddenStateCacheSpec,
    MambaSpec,
    SlidingWindowSpec,
    UniformTypeKVCacheSpecs,
)
from kvplan.errors import KvplanError
from kvplan.frozen import Frozen
from kvplan.models.description import ModelDescription
from kvplan.units import format_gib


class Cause(Frozen):
    """One reason the KV cache is as large as it is, with its number."""

    share_of_blocks_pct: float | None  # None: not the KV blocks (the weights leave no memory)
    text: str


class WhatIf(Frozen):
    change: str
    fits: bool | None  # None: the variant itself is invalid (reason in `note`)
    needed_gib: str | None
    available_gib: str | None
    blocks_per_request: int | None = None
    estimated_max_model_len: int | None = None
    note: str | None = None


class Explanation(Frozen):
    causes: list[Cause]
    what_ifs: list[WhatIf]


def as_planned(r: EngineResult) -> WhatIf:
    """The plan itself in what-if terms: what a what-if must differ from to be listed."""
    return _result_what_if("(as planned)", r)


def changes_something(w: WhatIf, base: WhatIf) -> bool:
    """A what-if whose numbers (verdict, KV needed, available, blocks, largest length) are all
    the plan's changes nothing and is not listed; an invalid variant always says something."""
    if w.fits is None or base.fits is None:
        return True
    fields = ("fits", "needed_gib", "available_gib", "blocks_per_request",
              "estimated_max_model_len")
    return any(getattr(w, f) != getattr(base, f) for f in fields
               if getattr(w, f) is not None and getattr(base, f) is not None)


def _kind_words(spec: object) -> str:
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return "mixed-shape full-attention"
    if isinstance(spec, MambaSpec):
        return "state-space (Mamba/GDN)"
    if isinstance(spec, SlidingWindowSpec):
        return "sliding-window"
    if isinstance(spec, CircularBufferSpec):
        return "ring-buffer"
    if isinstance(spec, HiddenStateCacheSpec):
        return "hidden-state"
    return "full-attention" if isinstance(spec, AttentionSpec) else "KV"


def causes(result: EngineResult, draft_layers: frozenset[str] = frozenset()) -> list[Cause]:
    """Groups ranked by the share of a request's blocks they take, each with its numbers."""
    total = result.total_blocks_per_request or 1
    pool = result.pool_bytes_per_block[0] if result.pool_bytes_per_block else 0
    merged: dict[tuple[str, int, int, int, bool], list[GroupDemand]] = {}
    for d in result.groups:
        spec = d.group.spec
        in_draft = any(n in draft_layers for n in d.group.layer_names) or spec.is_draft
        key = (type(spec).__name__, spec.block_size, spec.page_size_bytes, d.blocks_per_request,
               in_draft)
        merged.setdefault(key, []).append(d)
    out = []
    for (_, block, page, blocks, is_draft), ds in merged.items():
        spec = ds[0].group.spec
        layers = sum(len(d.group.layer_names) for d in ds)
        natural = getattr(spec, "unpadded_page_size_bytes", page)
        pad = (page - natural) / page * 100 if page else 0
        who = ("draft" if is_draft else "target") + f" {_kind_words(spec)}"
        groups = f"{len(ds)} group{'s' if len(ds) > 1 else ''}"
        take = blocks * len(ds)
        text = (f"{who}: {layers} layers in {groups}, {block:,}-token blocks in a "
                f"{page / 2**20:.2f} MiB page")
        if pad >= 1:
            text += f" ({pad:.0f}% padding)"
        text += (f", take {take:,} of {total:,} blocks per request "
                 f"({take * pool / 2**30:.2f} GiB)")
        out.append(Cause(share_of_blocks_pct=round(take / total * 100, 2), text=text))
    if result.grouping is not None and result.grouping.padding_layers:
        pads = ", ".join(f"{n} ({pct:.1f}%)" for n, pct in result.grouping.padding_layers)
        out.append(Cause(share_of_blocks_pct=0.0,
                         text=f"group padding: every block costs the widest group's bytes; "
                              f"padding layers {pads}"))
    return sorted(out, key=lambda c: -(c.share_of_blocks_pct or 0.0))


def _summary(change: str, fn: Callable[[], EngineResult]) -> WhatIf:
    try:
        r = fn()
    except KvplanError as exc:
        return WhatIf(change=change, fits=None, needed_gib=None, available_gib=None,
                      note=exc.message)
    if r.grouping_error is not None:
        return WhatIf(change=change, fits=False, needed_gib=None, available_gib=None,
                      note=f"vLLM cannot group the layers: {r.grouping_error.message}")
    return _result_what_if(change, r)


def _result_what_if(change: str, r: EngineResult) -> WhatIf:
    check = r.effective_check_memory_bytes or r.check_memory_bytes
    return WhatIf(change=change, fits=r.fits, needed_gib=format_gib(max(r.total_bytes_needed)),
                  available_gib=format_gib(min(check)),
                  blocks_per_request=r.total_blocks_per_request,
                  estimated_max_model_len=min(r.estimated_max_model_len))


def what_ifs_for_input(inp: PlannerInput, base: EngineResult) -> list[WhatIf]:
    """What-ifs that only change planner knobs (usable for --specs files too)."""
    out = []
    padded = any(getattr(g.group.spec, "page_size_padded", None) for g in base.groups)
    if not inp.with_fix and padded:
        out.append(_summary("apply the PR #53499 fix (--with-fix)",
                            lambda: plan(replace(inp, with_fix=True))))
    est = min(base.estimated_max_model_len) if base.estimated_max_model_len else 0
    if not base.fits and est > 0:
        out.append(_summary(f"--max-model-len {est} (the largest that fits)",
                            lambda: plan(replace(inp, max_model_len=est))))
    for mnbt in (inp.max_num_batched_tokens // 2, inp.max_num_batched_tokens // 4):
        if mnbt >= 256:
            def smaller(m: int = mnbt) -> EngineResult:
                return plan(replace(inp, max_num_batched_tokens=m))

            out.append(_summary(f"--max-num-batched-tokens {mnbt}", smaller))
    base_row = as_planned(base)
    return [w for w in out if changes_something(w, base_row)]


def explain_model(target: ModelDescription, dep: Deployment, draft: ModelDescription | None,
                  base: EngineResult, built: BuildResult, inp: PlannerInput,
                  draft_layers: frozenset[str] = frozenset(),
                  budget_per_gpu_fixed: bool = True) -> Explanation:
    """Causes plus what-ifs that rebuild the specs (dtypes, TP, prefix caching).

    `built` and `inp` are what produced `base`; `dep` carries the KV budget per GPU."""
    ifs = what_ifs_for_input(inp, base)

    def run(**changes: object) -> EngineResult:
        return plan(build(target, replace(dep, **changes), draft).planner_input)  # type: ignore[arg-type]

    current = built.kv_cache_dtype if built.kv_cache_dtype != "auto" else built.model_dtype
    for kv in ("fp8", "nvfp4", "bfloat16"):
        if kv != current:
            def other_dtype(dtype: str = kv) -> EngineResult:
                return run(kv_cache_dtype=dtype)

            ifs.append(_summary(f"--kv-cache-dtype {kv}", other_dtype))
    if built.draft_kv_cache_dtype and built.draft_kv_cache_dtype != built.kv_cache_dtype:
        ifs.append(_summary(f"--draft-kv-cache-dtype {built.kv_cache_dtype} (same as the target)",
                            lambda: run(draft_kv_cache_dtype=built.kv_cache_dtype)))
    if dep.draft_block_size:
        ifs.append(_summary("the draft on the target's block size (no --draft-block-size)",
                            lambda: run(draft_block_size=None)))
    if budget_per_gpu_fixed:  # an estimated budget changes with TP: deploy re-estimates it
        ifs.append(_summary(f"--tensor-parallel-size {dep.tensor_parallel_size * 2} "
                            "(same KV memory per GPU)",
                            lambda: run(tensor_parallel_size=dep.tensor_parallel_size * 2)))
    if built.mamba_cache_mode == "align":
        ifs.append(_summary("--no-enable-prefix-caching (Mamba 'none' mode)",
                            lambda: run(enable_prefix_caching=False)))
    if draft is not None or dep.speculative_method:
        ifs.append(_summary("no speculative decoding", lambda: plan(
            build(target, replace(dep, speculative_method=None, num_speculative_tokens=0),
                  None).planner_input)))
    base_row = as_planned(base)
    return Explanation(causes=causes(base, draft_layers),
                       what_ifs=[w for w in ifs if changes_something(w, base_row)])
