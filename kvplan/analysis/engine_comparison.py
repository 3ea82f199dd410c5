"""The same model, GPU and context length planned by vLLM and by SGLang, side by side: each
engine's numbers in one row (`EngineRow`), and why they differ (`differences`) — the memory
basis, the fraction, the pools, the request caps. Built from the two plans; computes nothing
the plans do not hold."""

from __future__ import annotations

from pydantic import Field

from kvplan import __version__
from kvplan.analysis.plan import Plan
from kvplan.analysis.serving import ServingCheck
from kvplan.frozen import Frozen

SCHEMA_VERSION = 1
GIB = 2**30


class EngineRow(Frozen):
    engine: str
    version: str
    starts: bool = Field(description="the server starts (no start-up error)")
    fits: bool = Field(description="starts and holds `concurrency` requests of context_length")
    kv_budget_bytes: int | None = Field(description="memory for the KV cache / pools per GPU")
    kv_tokens: int | None = Field(description="tokens the KV cache holds per replica")
    bytes_per_token: float | None = Field(
        description="KV bytes per token per GPU: SGLang's cell size; vLLM's budget / tokens")
    granularity_tokens: int | None = Field(description="vLLM's block size / SGLang's page size")
    max_concurrency: float | None = Field(
        description="requests of context_length the tokens hold (vLLM's 'Maximum concurrency'; "
                    "SGLang: tokens / context_length)")
    serving: ServingCheck | None
    fraction: str = Field(description="the memory fraction the engine applied, and how")
    memory_basis: str = Field(description="what the budget is taken from")
    pools: str = Field(description="the KV cache's layout in a few words")
    error: str | None = None
    command: str | None = Field(default=None, description="the command line that starts it")


class EngineComparison(Frozen):
    schema_version: int = SCHEMA_VERSION
    kvplan_version: str = __version__
    model: str
    gpu: str | None
    context_length: int
    concurrency: int
    rows: list[EngineRow]
    differences: list[str] = Field(description="why the engines' numbers differ")
    plans: list[Plan] = Field(description="each engine's full plan (kvplan check --json)")

    @property
    def all_fit(self) -> bool:
        return all(r.fits for r in self.rows)

    def to_json(self) -> str:
        import json

        return json.dumps(self.model_dump(mode="json"), indent=2)


def _vllm_row(plan: Plan, serving: ServingCheck, command: str | None) -> EngineRow:
    b = plan.budget
    avail = min(plan.available_kv_bytes) if plan.available_kv_bytes else None
    util = b.gpu_memory_utilization if b is not None else None
    total = b.total_memory_bytes if b is not None else None
    blocks = sorted({g.block_size_tokens for g in plan.groups})
    kinds: dict[str, int] = {}
    for g in plan.groups:
        kinds[g.kind] = kinds.get(g.kind, 0) + g.num_layers
    per_token = (avail / plan.kv_cache_size_tokens
                 if avail and plan.kv_cache_size_tokens else None)
    return EngineRow(
        engine="vllm", version=plan.vllm_version or "", starts=plan.error_type is None
        or plan.fits, fits=plan.fits and serving.holds, kv_budget_bytes=avail,
        kv_tokens=plan.kv_cache_size_tokens, bytes_per_token=per_token,
        granularity_tokens=blocks[0] if len(blocks) == 1 else None,
        max_concurrency=plan.max_concurrency, serving=serving,
        fraction=(f"gpu_memory_utilization {util}" if util is not None else
                  "--kv-cache-memory (no fraction)"),
        memory_basis=(f"the runtime total {total / GIB:.2f} GiB × the fraction, less the "
                      "weights, non-torch memory, the activation peak and CUDA graphs"
                      if total and plan.budget_mode == "estimated" else plan.budget_mode),
        pools=(f"{plan.num_groups} KV cache group(s): "
               + ", ".join(f"{k} × {n} layers" for k, n in kinds.items())
               + (f"; blocks of {blocks[0]} tokens" if len(blocks) == 1 else "")),
        error=plan.error_message, command=command)


def _sglang_row(plan: Plan, command: str | None) -> EngineRow:
    s = plan.sglang
    r = s.resolved if s is not None else None
    b = plan.budget
    total = b.total_memory_bytes if b is not None else None
    pools = ", ".join(f"{p.pool} ({p.layers} layers)" for p in s.pools) if s is not None else ""
    fraction = "--kv-cache-memory (no fraction)"
    if r is not None and plan.budget_mode != "explicit":
        fraction = (f"mem_fraction_static {r.mem_fraction_static:g} "
                    + ("(SGLang's default" + (f"; reserve {r.reserved_mem_mib:,.0f} MiB"
                                              if r.reserved_mem_mib is not None else "")
                       + ("; reduced for a multimodal model" if r.vlm_adjusted else "") + ")"
                       if r.mem_fraction_static_is_default else "(given)"))
    return EngineRow(
        engine="sglang", version=plan.sglang_version or "",
        starts=s is not None and s.error is None, fits=plan.fits,
        kv_budget_bytes=s.available_bytes if s is not None else None,
        kv_tokens=plan.kv_cache_size_tokens,
        bytes_per_token=s.cell_size_bytes_per_token if s is not None else None,
        granularity_tokens=s.page_size if s is not None else None,
        max_concurrency=plan.max_concurrency, serving=plan.serving, fraction=fraction,
        memory_basis=(f"nvidia-smi's total {total / 2**20:,.0f} MiB: the free memory before "
                      "the weights × the fraction, less the weights"
                      if total and plan.budget_mode != "explicit" else plan.budget_mode),
        pools=f"{s.pool_configurator if s is not None else ''}: {pools}"
              + (f"; pages of {s.page_size} tokens" if s is not None and s.page_size else ""),
        error=plan.error_message, command=command)


def _differences(v: EngineRow, s: EngineRow, vplan: Plan, splan: Plan) -> list[str]:
    out: list[str] = []
    if v.kv_budget_bytes is not None and s.kv_budget_bytes is not None:
        out.append(f"KV memory per GPU: vLLM {v.kv_budget_bytes / GIB:.2f} GiB, SGLang "
                   f"{s.kv_budget_bytes / GIB:.2f} GiB — vLLM takes {v.fraction} of "
                   f"{'the runtime total' if 'runtime' in v.memory_basis else 'its budget'}; "
                   f"SGLang {s.fraction} of the free memory before the weights "
                   "(the rest is its reserve for activations and CUDA graphs)")
    if v.bytes_per_token and s.bytes_per_token:
        ratio = v.bytes_per_token / s.bytes_per_token
        if abs(ratio - 1) > 0.02:
            kinds = {g.kind for g in vplan.groups}
            why = ("vLLM's blocks also hold the Mamba / linear-attention states"
                   if "mamba" in kinds else
                   "vLLM keeps only the sliding window of its SWA layers"
                   if kinds & {"sliding_window", "sliding_window_mla"} else
                   "vLLM pads its pages")
            out.append(f"bytes per KV token: vLLM {v.bytes_per_token:,.0f} (its budget over "
                       f"its tokens), SGLang {s.bytes_per_token:,.0f} (its cell size) — {why}; "
                       f"vLLM: {v.pools}; SGLang: {s.pools}")
    if v.granularity_tokens and s.granularity_tokens and \
            v.granularity_tokens != s.granularity_tokens:
        out.append(f"allocation unit: vLLM blocks of {v.granularity_tokens} tokens, SGLang "
                   f"pages of {s.granularity_tokens}")
    ss = splan.sglang
    carve = next((t for t in (splan.budget.breakdown if splan.budget else ())
                  if t.name.startswith("the Mamba")), None)
    if carve is not None:
        out.append(f"SGLang's {s.kv_budget_bytes / GIB if s.kv_budget_bytes else 0:.2f} GiB for "
                   f"its token pool is after its Mamba state pool ({-carve.num_bytes / GIB:.2f} "
                   "GiB); vLLM's budget holds the states inside its KV blocks")
    if ss is not None and ss.max_mamba_cache_size is not None:
        out.append(f"state (Mamba / linear-attention) layers: SGLang keeps "
                   f"{ss.max_mamba_cache_size:,} state slots and caps running requests at "
                   f"{ss.max_running_requests:,}; vLLM keeps one state per request in its "
                   "KV blocks")
    vs, sv = v.serving, s.serving
    if vs is not None and sv is not None and vs.request_cap != sv.request_cap:
        out.append(f"request cap: vLLM max_num_seqs {vs.request_cap if vs.request_cap else '-'},"
                   f" SGLang max_running_requests {sv.request_cap if sv.request_cap else '-'}")
    if v.kv_tokens and s.kv_tokens:
        more, less = ("SGLang", "vLLM") if s.kv_tokens > v.kv_tokens else ("vLLM", "SGLang")
        hi, lo = max(v.kv_tokens, s.kv_tokens), min(v.kv_tokens, s.kv_tokens)
        out.append(f"{more} holds {hi / lo:.2f}× the KV tokens of {less} "
                   f"({hi:,} vs {lo:,})")
    if v.starts != s.starts:
        who, err = ("vLLM", v.error) if not v.starts else ("SGLang", s.error)
        out.append(f"only one starts: {who} refuses — {err}")
    return out


def compare_plans(vplan: Plan, splan: Plan, *, vllm_serving: ServingCheck, context_length: int,
                  concurrency: int, vllm_command: str | None = None,
                  sglang_command: str | None = None) -> EngineComparison:
    v = _vllm_row(vplan, vllm_serving, vllm_command)
    s = _sglang_row(splan, sglang_command)
    return EngineComparison(model=vplan.model, gpu=vplan.gpu or splan.gpu,
                            context_length=context_length, concurrency=concurrency, rows=[v, s],
                            differences=_differences(v, s, vplan, splan), plans=[vplan, splan])
