"""Render an SGLang plan (`engine: "sglang"`): the budget as SGLang takes it, the resolved server
arguments, the per-pool table, the verdict at `--context-length` × `--concurrency`, the
diagnosis and what-ifs in SGLang's flags, a start-up log's numbers beside kvplan's. Table or
markdown. Renders only; never computes a number."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kvplan.analysis.plan import Plan
from kvplan.units import format_gib


def _n(v: float | int | None, fmt: str = ",") -> str:
    if v is None:
        return "-"
    return format(v, fmt) if isinstance(v, int) else format(v, ",.0f" if fmt == "," else fmt)


def _gib(b: int | float) -> str:
    return f"{b / 2**30:,.2f}"


def _head(plan: Plan) -> Text:
    head = Text()
    head.append("kvplan", style="bold")
    head.append(f"  model {plan.model}")
    if plan.draft:
        head.append(f"  draft {plan.draft}")
    head.append(f"  SGLang {plan.sglang_version}")
    if plan.gpu:
        head.append(f"  GPU {plan.gpu}")
    return head


def server_args_line(plan: Plan) -> str | None:
    s = plan.sglang
    r = s.resolved if s is not None else None
    if r is None:
        return None
    mfs = (f"mem_fraction_static {r.mem_fraction_static:g} ("
           + ("SGLang's default" + (f"; reserve {r.reserved_mem_mib:,.0f} MiB"
                                    if r.reserved_mem_mib is not None else "")
              + ("; reduced for a multimodal model" if r.vlm_adjusted else "")
              if r.mem_fraction_static_is_default else "given") + ")")
    graph = (f"cuda_graph_max_bs_decode {r.cuda_graph_max_bs_decode}"
             if r.cuda_graph_max_bs_decode is not None else "decode CUDA graph off")
    parts = [f"attention {r.attention_backend}", f"page_size {r.page_size}",
             f"kv_cache_dtype {r.kv_cache_dtype} ({r.kv_cache_torch_dtype})", mfs,
             f"chunked_prefill_size {r.chunked_prefill_size:,}", graph,
             f"TP {r.attn_tp_size * r.attn_dp_size}"
             + (f" (attention DP {r.attn_dp_size})" if r.attn_dp_size > 1 else "")]
    if r.speculative_algorithm:
        parts.append(f"speculative {r.speculative_algorithm} (steps {r.speculative_num_steps}, "
                     f"topk {r.speculative_eagle_topk}, draft tokens "
                     f"{r.speculative_num_draft_tokens})")
    return " · ".join(parts)


def verdict_line(plan: Plan) -> tuple[Text, str]:
    """("FITS" / "DOES NOT FIT" styled, the sentence after it)."""
    s = plan.sglang
    sv = plan.serving
    if plan.fits and sv is not None:
        return (Text("FITS", style="bold green"),
                f"{sv.kv_tokens:,} KV tokens hold {sv.requests_at_length:,} × "
                f"{sv.context_length:,}-token requests at once (asked: {sv.concurrency:,}); "
                f"max_running_requests {sv.request_cap if sv.request_cap is not None else '-'}")
    if s is not None and s.error is not None and s.error.stage == "attention_kernel":
        return (Text("DOES NOT FIT", style="bold red"),
                f"SGLang {plan.sglang_version} sizes the pools, then stops when its Triton "
                f"attention kernels compile (CUDA-graph capture) — {s.error.type}: "
                f"{s.error.message}")
    if s is not None and s.error is not None:
        return (Text("DOES NOT FIT", style="bold red"),
                f"SGLang {plan.sglang_version} refuses to start — {s.error.type}: "
                f"{s.error.message}")
    return (Text("DOES NOT FIT", style="bold red"),
            f"SGLang starts, but {sv.reason}" if sv is not None and sv.reason else "")


def batch_cells(plan: Plan) -> tuple[str, str, str, str]:
    """`kvplan ci`'s figures for an SGLang plan: the token-pool GiB the requests need and the
    pool's GiB (cell size × tokens), the largest context length that holds the requests, and the
    requests of the context length the tokens hold (within max_running_requests)."""
    sv = plan.serving
    if sv is None or plan.sglang is None or plan.sglang.error is not None:
        return "-", "-", "-", "-"
    needed = format_gib(sv.kv_bytes_needed) if sv.kv_bytes_needed is not None else "-"
    pool = format_gib(sv.kv_pool_bytes) if sv.kv_pool_bytes is not None else "-"
    largest = (f"{min(plan.estimated_max_model_len):,}" if plan.estimated_max_model_len
               else "-")
    conc = "-" if sv.concurrency_at_length is None else (
        f"{sv.concurrency_at_length:.2f}x" + (" (cap)" if sv.capped_by_requests else ""))
    return needed, pool, largest, conc


def failure_line(plan: Plan) -> str | None:
    """Why an SGLang plan does not fit, in one line (a start-up error word for word, or what
    the pool cannot hold)."""
    if plan.fits:
        return None
    s = plan.sglang
    if s is not None and s.error is not None:
        return f"SGLang {plan.sglang_version} stops at start-up: {s.error.type}: {s.error.message}"
    sv = plan.serving
    return f"SGLang starts, but {sv.reason}" if sv is not None and sv.reason else None


def render_sglang_table(plan: Plan, console: Console) -> None:
    console.print(_head(plan))
    s = plan.sglang
    budget = plan.budget
    avail = f"{_n(s.available_bytes)} B" if s is not None and s.available_bytes is not None \
        else "-"
    console.print(f"budget ({escape(plan.budget_mode)}): {avail} for the KV pools per GPU  ·  "
                  f"context_length {_n(plan.max_model_len or None)}  ·  concurrency "
                  f"{plan.serving.concurrency if plan.serving else 1}")
    if plan.provenance:
        console.print("inputs: " + escape("; ".join(
            f"{where}: {', '.join(k for k, w in plan.provenance.items() if w == where)}"
            for where in dict.fromkeys(plan.provenance.values())) + "; the rest: defaults"))
    if budget is not None and budget.breakdown:
        if budget.total_memory_bytes:
            console.print(f"  [dim]GPU total as SGLang reads it (nvidia-smi): "
                          f"{budget.total_memory_bytes / 2**20:,.0f} MiB[/]")
        for term in budget.breakdown:
            console.print(f"  [dim]{term.num_bytes / 2**30:+9.2f} GiB  {escape(term.name)}: "
                          f"{escape(term.how)}[/]")
        console.print(f"  [dim]= {budget.available_kv_bytes_per_gpu / 2**30:9.2f} GiB for the "
                      f"KV pools[/]")
    args = server_args_line(plan)
    if args:
        console.print(f"server args: {escape(args)}", soft_wrap=True)
    if plan.sglang_log is not None:
        console.print(_log_table(plan))
    for w in plan.warnings:
        loud = w.startswith("DISAGREES")
        console.print(f"[{'bold red' if loud else 'yellow'}]warning:[/] {escape(w)}",
                      soft_wrap=True)
    for n in plan.notes:
        console.print(f"[cyan]note:[/] {escape(n)}", soft_wrap=True)
    if s is not None and s.pools:
        console.print(_pool_table(plan))
    label, text = verdict_line(plan)
    console.print(label, escape(text), soft_wrap=True)
    if not plan.fits and plan.estimated_max_model_len and s is not None and s.error is None:
        c = plan.serving.concurrency if plan.serving else 1
        console.print(f"largest context length that holds {c:,} request{'s' if c > 1 else ''} "
                      f"at once: {plan.estimated_max_model_len[0]:,}")
    if plan.capacity_log_line:
        console.print(f"SGLang would log: {escape(plan.capacity_log_line)}")
    if plan.data_parallel_size > 1 and plan.serving is not None and plan.fits:
        console.print(f"{plan.data_parallel_size} data-parallel replicas: "
                      f"{plan.serving.requests_at_length * plan.data_parallel_size:,} requests "
                      "at once in total")
    _render_explanation(plan, console)


def _pool_table(plan: Plan) -> Table:
    s = plan.sglang
    assert s is not None
    table = Table(title=f"KV pools per GPU ({s.pool_configurator})", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for col, just in (("pool", "left"), ("layers", "right"), ("B/token", "right"),
                      ("MiB/request", "right"), ("tokens", "right"), ("slots", "right"),
                      ("note", "left")):
        table.add_column(col, justify=just, no_wrap=col != "note")  # type: ignore[arg-type]
    for p in s.pools:
        table.add_row(p.pool, str(p.layers),
                      _n(p.bytes_per_token) if p.bytes_per_token else "-",
                      f"{p.bytes_per_request / 2**20:,.2f}" if p.bytes_per_request else "-",
                      _n(p.tokens), _n(p.slots), escape(p.note))
    return table


def _log_table(plan: Plan) -> Table:
    lc = plan.sglang_log
    assert lc is not None
    table = Table(title="SGLang's log vs kvplan", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, padding=(0, 1), collapse_padding=True)
    for col in ("number", "logged", "kvplan", "", "note"):
        table.add_column(col, justify="left" if col in ("number", "note", "") else "right")
    for r in lc.rows:
        mark = Text("ok", style="green") if r.agrees else (
            Text("DIFFERS", style="bold red") if r.agrees is False else Text("-"))
        fmt = ",.2f" if "GB" in r.name or r.name == "mem_fraction_static" else ","
        if r.name == "mem_fraction_static":
            fmt = "g"
        table.add_row(r.name, _fmt(r.logged, fmt), _fmt(r.kvplan, fmt), mark, escape(r.note))
    return table


def _fmt(v: float | None, fmt: str) -> str:
    if v is None:
        return "-"
    if fmt == ",":
        return f"{int(v):,}"
    return format(v, fmt)


def _render_explanation(plan: Plan, console: Console) -> None:
    ex = plan.explanation
    if ex is None:
        return
    console.print("[bold]Why: what one token costs, and what sized the pools[/]")
    for c in ex.causes:
        share = "" if c.share_of_blocks_pct is None else f"{c.share_of_blocks_pct:5.1f}%"
        console.print(f"  {share:>6}  {escape(c.text)}", soft_wrap=True)
    if not ex.what_ifs:
        return
    table = Table(title="What if (SGLang's flags; each recomputed by the engine)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  collapse_padding=True)
    table.add_column("change", overflow="fold")
    table.add_column("needed GiB", justify="right", no_wrap=True)
    table.add_column("pool GiB", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("SGLang", overflow="fold")
    for row in ex.what_ifs:
        verdict = "invalid" if row.fits is None else "FITS" if row.fits else "DOES NOT FIT"
        style = "green" if row.fits else ("yellow" if row.fits is None else "red")
        table.add_row(escape(row.change), row.needed_gib or "-", row.available_gib or "-",
                      Text(verdict, style=style), escape(row.note or ""))
    console.print(table)


def render_sglang_markdown(plan: Plan) -> str:
    s = plan.sglang
    lines = [f"### kvplan: `{plan.model}`" + (f" + draft `{plan.draft}`" if plan.draft else ""),
             "", f"SGLang {plan.sglang_version}" + (f" · GPU {plan.gpu}" if plan.gpu else "")
             + f" · context_length {_n(plan.max_model_len or None)} · budget "
             f"{plan.budget_mode}", ""]
    args = server_args_line(plan)
    if args:
        lines += [f"Server args: {args}.", ""]
    if plan.sglang_log is not None:
        lines += ["| number | SGLang's log | kvplan | |", "|---|---:|---:|---|"]
        for r in plan.sglang_log.rows:
            ok = "ok" if r.agrees else "**differs**" if r.agrees is False else ""
            lines.append(f"| {r.name} | {_fmt(r.logged, 'g')} | {_fmt(r.kvplan, 'g')} | {ok} |")
        lines.append("")
    if s is not None and s.pools:
        lines += ["| pool | layers | B/token | MiB/request | tokens | slots |",
                  "|---|---:|---:|---:|---:|---:|"]
        for p in s.pools:
            lines.append(f"| {p.pool} | {p.layers} | {_n(p.bytes_per_token)} | "
                         + (f"{p.bytes_per_request / 2**20:,.2f}" if p.bytes_per_request
                            else "-")
                         + f" | {_n(p.tokens)} | {_n(p.slots)} |")
        lines.append("")
    for w in plan.warnings:
        lines.append(f"> warning: {w}")
    label, text = verdict_line(plan)
    lines += ["", f"**{label.plain}** — {text}"]
    if plan.capacity_log_line:
        lines += ["", f"`{plan.capacity_log_line}`"]
    if plan.explanation is not None and plan.explanation.what_ifs:
        lines += ["", "| what if | needed GiB | verdict | SGLang |", "|---|---:|---|---|"]
        for row in plan.explanation.what_ifs:
            v = "invalid" if row.fits is None else "FITS" if row.fits else "DOES NOT FIT"
            lines.append(f"| `{row.change}` | {row.needed_gib or '-'} | {v} | {row.note or ''} |")
    return "\n".join(lines) + "\n"
