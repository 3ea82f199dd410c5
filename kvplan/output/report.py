"""Render a `Plan`: rich table, JSON, markdown. Renders only; never computes a number."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kvplan.analysis.plan import GroupRow, Plan, Verdict
from kvplan.budget.kv_memory import TermComparison


def _b(n: int) -> str:
    return f"{n:,}"


def _kib(n: int) -> str:
    v = n / 1024
    return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"


def _size(n: int) -> str:
    """Human page size: 65,536 → 64 KiB; 3,354,624 → 3.2 MiB (exact bytes are in --json)."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= factor:
            v = n / factor
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.2f} {unit}"
    return f"{n} B"


def _mib(n: int) -> str:
    return f"{n / 2**20:,.2f} MiB"


def _workers(values: list, fmt=str) -> str:  # type: ignore[no-untyped-def,type-arg]
    return " / ".join(fmt(v) for v in values)


SHORT_KIND = {"full_attention": "full", "sliding_window": "swa", "mla_attention": "mla",
              "sliding_window_mla": "swa-mla", "chunked_local_attention": "chunked",
              "cross_attention": "cross", "encoder_only_attention": "encoder",
              "sink_full_attention": "sink", "mamba": "mamba"}
# vLLM gives these spec classes no kind of their own (KVCacheSpecKind.UNKNOWN)
SHORT_SPEC_TYPE = {"CircularBufferSpec": "ring", "HiSparseHotSpec": "hs-hot",
                   "HiSparseResidentSpec": "hs-resident"}


def _collapse(plan: Plan) -> list[tuple[str, GroupRow, int]]:
    """Consecutive groups with the same numbers become one row ("0-9", ×10)."""
    rows: list[tuple[str, GroupRow, int]] = []
    for g in plan.groups:
        key = (g.kind, g.is_draft, g.draft_layers, g.block_size_tokens, g.page_size_bytes,
               g.blocks_per_request)
        if rows:
            ids, first, count = rows[-1]
            if (first.kind, first.is_draft, first.draft_layers, first.block_size_tokens,
                    first.page_size_bytes, first.blocks_per_request) == key:
                rows[-1] = (f"{first.group_id}-{g.group_id}", first, count + 1)
                continue
        rows.append((str(g.group_id), g, 1))
    return rows


def render_table(plan: Plan, console: Console) -> None:
    _render_main(plan, console)
    render_workload(plan, console)
    render_explanation(plan, console)


_CAP = {"kv_cache": "KV cache", "max_num_seqs": "max_num_seqs"}


def _group_blocks(rows: list[Any]) -> str:
    """'mamba (align) 1 ×3 · full 12': blocks per group, identical neighbours merged."""
    merged: list[list[Any]] = []
    for r in rows:
        if merged and merged[-1][0] == r.kind and merged[-1][1] == r.blocks:
            merged[-1][2] += 1
        else:
            merged.append([r.kind, r.blocks, 1])
    return " · ".join(f"{k} {b:,}" + (f" ×{n}" if n > 1 else "") for k, b, n in merged)


def _limit(capped_by: str, kind: str | None) -> str:
    """'KV (full)': the pool, and the kind of group that held the most of it."""
    if capped_by == "kv_cache" and kind:
        return f"KV ({kind})"
    return _CAP.get(capped_by, capped_by)


def render_workload(plan: Plan, console: Console) -> None:
    """--workload: how many such requests vLLM's scheduler runs at once."""
    if not plan.workload:
        return
    table = Table(title=f"Workload: vLLM {plan.vllm_version}'s scheduler, requests submitted "
                        "together",
                  title_justify="left", pad_edge=False, box=box.SIMPLE_HEAD, padding=(0, 1),
                  collapse_padding=True)
    for name, justify in (("workload", "left"), ("clean", "right"), ("limit", "left"),
                          ("admits", "right"), ("limit", "left"),
                          ("blocks of one request at its end", "left"),
                          ("formula", "right")):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for w in plan.workload:
        formula = w.vllm_formula_concurrency
        table.add_row(escape(w.label), _b(w.max_concurrent_without_preemption),
                      escape(_limit(w.concurrency_capped_by, w.capping_kind)),
                      _b(w.admission_peak),
                      escape(_limit(w.admission_capped_by, w.admission_capping_kind)),
                      escape(_group_blocks(w.blocks_per_request_at_end)),
                      f"{formula:.2f}" if formula is not None else "-")
    console.print(table)
    console.print(f"[dim]clean = the most requests submitted together that all run at once "
                  f"and finish with no preemption; admits = the most running at once while more "
                  f"wait (vLLM admits on the prompt), up to its first preemption or completion; "
                  f"formula = the boot log's 'Maximum concurrency' at P+D tokens (at "
                  f"max_model_len: {plan.max_concurrency or 0:.2f}); "
                  f"{plan.workload[0].usable_blocks:,} usable blocks, max_num_seqs "
                  f"{plan.workload[0].max_num_seqs:,}[/]")
    for w in plan.workload:
        pool = w.kv_pool_at_first_preemption
        if pool and w.capping_kind is not None and len(pool) > 1:
            console.print(f"[dim]{escape(w.label)}: request {w.max_concurrent_without_preemption + 1}"
                          f" makes vLLM preempt; the pool then holds "
                          f"{escape(_group_blocks(pool))} blocks[/]")
        elif w.next_request_preempts is False:
            console.print(f"[dim]{escape(w.label)}: request {w.max_concurrent_without_preemption + 1}"
                          f" waits for blocks until a request completes[/]")


def _render_main(plan: Plan, console: Console) -> None:
    head = Text()
    head.append("kvplan", style="bold")
    head.append(f"  model {plan.model}")
    if plan.draft:
        head.append(f"  draft {plan.draft}")
    head.append(f"  vLLM {plan.vllm_version}{' + PR #53499 fix' if plan.with_fix else ''}")
    if plan.gpu:
        head.append(f"  GPU {plan.gpu}")
    console.print(head)
    console.print(f"budget ({escape(plan.budget_mode)}): "
                  f"{_workers(plan.available_kv_bytes, _b)} B available for KV per GPU  ·  "
                  f"max_model_len {plan.max_model_len:,}  ·  max_num_batched_tokens "
                  f"{plan.max_num_batched_tokens:,} ({plan.max_in_flight_tokens:,} in flight)")
    if plan.provenance:
        console.print("inputs: " + escape("; ".join(
            f"{where}: {', '.join(k for k, w in plan.provenance.items() if w == where)}"
            for where in dict.fromkeys(plan.provenance.values())) + "; the rest: defaults"))
    budget = plan.budget
    if budget is not None and budget.breakdown and (budget.mode == "estimated"
                                                    or len(budget.breakdown) > 1):
        for term in budget.breakdown:
            console.print(f"  [dim]{term.num_bytes / 2**30:+9.2f} GiB  {escape(term.name)}: "
                          f"{escape(term.how)}[/]")
        what = "(estimate)" if budget.mode == "estimated" else "(as given)"
        console.print(f"  [dim]= {budget.available_kv_bytes_per_gpu / 2**30:9.2f} GiB "
                      f"available for the KV cache {what}[/]")
    if budget is not None and budget.log_comparison:
        console.print(_log_comparison_table(budget.log_comparison))
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    for n in plan.notes:
        console.print(f"[cyan]note:[/] {escape(n)}")
    if plan.verdict is Verdict.CANNOT_GROUP:
        console.print(Text("CANNOT GROUP", style="bold red"),
                      f"vLLM fails while grouping the layers: {escape(plan.error_type or '')}: "
                      f"{escape(plan.error_message or '(no message)')}")
        return
    table = Table(title="KV cache groups: block demand of one request at max_model_len",
                  title_justify="left", show_lines=False, pad_edge=False,
                  box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True)
    table.add_column("grp", justify="right", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    table.add_column("layers", justify="right", no_wrap=True)
    table.add_column("block", justify="right", no_wrap=True)
    table.add_column("page KiB", justify="right", no_wrap=True)
    table.add_column("pad %", justify="right", no_wrap=True)
    table.add_column("blk/req", justify="right", no_wrap=True)
    table.add_column("GiB/req", justify="right", no_wrap=True)
    table.add_column("share", justify="right", no_wrap=True)
    legend: list[str] = []
    for ids, g, count in _collapse(plan):
        page = (_kib(g.page_size_bytes) if g.natural_page_size_bytes == g.page_size_bytes
                else f"{_kib(g.natural_page_size_bytes)}→{_kib(g.page_size_bytes)}")
        kind = SHORT_SPEC_TYPE.get(g.spec_type) or SHORT_KIND.get(g.kind, g.kind)
        kind = kind + (
            "·draft" if g.is_draft else f"+{g.draft_layers}d" if g.draft_layers else "")
        pad_style = "red" if g.padding_pct >= 50 else ""
        per_group = f" ×{count}" if count > 1 else ""
        legend.append(f"{ids}: {escape(g.layers)}")
        table.add_row(ids, kind, f"{g.num_layers}{per_group}",
                      _b(g.block_size_tokens), page,
                      Text(f"{g.padding_pct:.1f}", style=pad_style),
                      _b(g.blocks_per_request * count),
                      f"{g.bytes_per_request * count / 2**30:.2f}",
                      f"{g.share_of_total_pct * count:.1f}%")
    console.print(table)
    console.print("[dim]layers " + "  ·  ".join(legend) + "[/]")
    for w in plan.padding_layer_warnings:
        console.print(f"[dim]vLLM: {escape(w)}[/]")
    console.print(
        f"pool bytes per block {_workers(plan.pool_bytes_per_block, _b)}  ·  blocks per request "
        f"{plan.total_blocks_per_request:,}  ·  KV needed {_workers(plan.total_bytes_needed, _b)} B"
        f" ({_workers(plan.total_gib_needed)} GiB) vs available after the null block "
        f"{_workers(plan.check_memory_bytes, _b)} B ({_workers(plan.check_gib)} GiB)")
    if plan.fits:
        margin = plan.margin_bytes or 0
        console.print(Text("FITS", style="bold green"),
                      f"margin {margin:,} B ({margin / 2**30:.2f} GiB)")
        if plan.max_model_len_after_planning != plan.max_model_len:
            console.print(f"auto-fit: max_model_len reduced from {plan.max_model_len:,} to "
                          f"{plan.max_model_len_after_planning:,}")
        if plan.capacity_log_line:
            console.print(f"vLLM would log: {escape(plan.capacity_log_line)}")
        if plan.data_parallel_size > 1 and plan.total_max_concurrency is not None:
            console.print(f"{plan.data_parallel_size} data-parallel replicas: "
                          f"{plan.total_max_concurrency:.2f}x max-length requests in total")
    else:
        short_by = plan.margin_bytes
        short = (f"short by {-short_by:,} B ({-short_by / 2**30:.2f} GiB)"
                 if short_by is not None and short_by < 0 else "")
        console.print(Text("DOES NOT FIT", style="bold red"), short)
        if plan.weights_limit is not None:
            _render_weights_limit(plan, console)
        elif plan.estimated_max_model_len:
            console.print(f"largest max_model_len that fits: "
                          f"{_workers(plan.estimated_max_model_len, lambda v: f'{v:,}')}")
        if plan.error_message or plan.error_type:  # some vLLM errors carry no message
            console.print(f"vLLM {plan.vllm_version} would raise {escape(plan.error_type or '')}"
                          + (f": {escape(plan.error_message)}" if plan.error_message else ""),
                          soft_wrap=True)


def _render_weights_limit(plan: Plan, console: Console) -> None:
    """The weights, not the KV cache, are why nothing fits: say so and what helps."""
    w = plan.weights_limit
    assert w is not None
    console.print(Text("cause: the weights", style="bold red"),
                  f"{w.weight_bytes_per_gpu / 2**30:.2f} GiB per GPU at TP "
                  f"{w.tensor_parallel_size} × PP {w.pipeline_parallel_size} > "
                  f"{w.usable_bytes_per_gpu / 2**30:.2f} GiB usable (requested memory less vLLM's "
                  "other start-up memory): no max_model_len fits")
    if w.exceeds_gpu_memory and w.gpu_total_memory_bytes:
        console.print(f"  they exceed the whole GPU ({w.gpu_total_memory_bytes / 2**30:.2f} GiB): "
                      "vLLM runs out of memory while loading them")
    console.print("what helps:")
    for tip in w.suggestions:
        console.print(f"  - {escape(tip)}", soft_wrap=True)


def render_explanation(plan: Plan, console: Console) -> None:
    ex = plan.explanation
    if ex is None:
        return
    if plan.weights_limit is not None:
        console.print("[bold]Why: the weights leave no memory for the KV cache[/]")
    else:
        console.print("[bold]Why: what takes the blocks of one request[/]")
    for c in ex.causes:
        share = "weights" if c.share_of_blocks_pct is None else f"{c.share_of_blocks_pct:5.1f}%"
        console.print(f"  {share:>6}  {escape(c.text)}")
    if not ex.what_ifs:
        return
    table = Table(title="What if (each recomputed by the engine)", title_justify="left",
                  box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True)
    table.add_column("change", overflow="fold")
    table.add_column("needed GiB", justify="right", no_wrap=True)
    table.add_column("avail GiB", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for w in ex.what_ifs:
        verdict = ("invalid" if w.fits is None else "FITS" if w.fits else "DOES NOT FIT")
        style = "green" if w.fits else ("yellow" if w.fits is None else "red")
        if w.note and w.fits is None:
            verdict += f": {w.note}"
        table.add_row(escape(w.change), w.needed_gib or "-", w.available_gib or "-",
                      Text(verdict, style=style))
    console.print(table)


def _log_comparison_table(rows: tuple[TermComparison, ...]) -> Table:
    """vLLM's logged memory terms beside kvplan's estimate of each."""
    table = Table(title="memory per GPU: vLLM's log vs kvplan's estimate", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
    for col in ("term", "logged GiB", "kvplan GiB", "kvplan − log"):
        table.add_column(col, justify="left" if col == "term" else "right")
    for r in rows:
        diff = "-" if r.difference_bytes is None else f"{r.difference_bytes / 2**30:+.2f}"
        table.add_row(r.name, _gib_or_dash(r.logged_bytes), _gib_or_dash(r.estimated_bytes), diff)
    return table


def render_json(plan: Plan) -> str:
    return plan.to_json()


def _gib_or_dash(num_bytes: int | None) -> str:
    return "-" if num_bytes is None else f"{num_bytes / 2**30:.2f}"


def render_markdown(plan: Plan) -> str:
    lines = [f"### kvplan: `{plan.model}`" + (f" + draft `{plan.draft}`" if plan.draft else ""),
             "",
             f"vLLM {plan.vllm_version}{' + PR #53499 fix' if plan.with_fix else ''}"
             + (f" · GPU {plan.gpu}" if plan.gpu else "")
             + f" · max_model_len {plan.max_model_len:,} · budget {plan.budget_mode}", ""]
    if plan.provenance:
        lines += ["Inputs: " + "; ".join(
            f"{where}: {', '.join(f'`{k}`' for k, w in plan.provenance.items() if w == where)}"
            for where in dict.fromkeys(plan.provenance.values())) + "; the rest: defaults.", ""]
    if plan.budget is not None and plan.budget.log_comparison:
        lines += ["| memory per GPU | vLLM's log GiB | kvplan GiB |", "|---|---:|---:|"]
        lines += [f"| {r.name} | {_gib_or_dash(r.logged_bytes)} | {_gib_or_dash(r.estimated_bytes)} |"
                  for r in plan.budget.log_comparison] + [""]
    if plan.verdict is Verdict.CANNOT_GROUP:
        lines.append(f"**CANNOT GROUP** — `{plan.error_type}: {plan.error_message}`")
        return "\n".join(lines) + "\n"
    lines += ["| grp | kind | layers | block | page B | pad % | blocks/req | share |",
              "|---:|---|---|---:|---:|---:|---:|---:|"]
    for g in plan.groups:
        lines.append(f"| {g.group_id} | {g.kind}{' (draft)' if g.is_draft else ''} | "
                     f"{g.num_layers} · `{g.layers}` | {g.block_size_tokens:,} | "
                     f"{g.page_size_bytes:,} | {g.padding_pct:.1f} | {g.blocks_per_request:,} | "
                     f"{g.share_of_total_pct:.1f}% |")
    lines += ["", f"Pool bytes per block {', '.join(f'{p:,}' for p in plan.pool_bytes_per_block)};"
              f" {plan.total_blocks_per_request:,} blocks per request; needed "
              f"{' / '.join(plan.total_gib_needed)} GiB vs {' / '.join(plan.check_gib)} GiB.", ""]
    if plan.explanation is not None:
        lines += ["", "**Why**", ""] + [
            f"- {'weights' if c.share_of_blocks_pct is None else f'{c.share_of_blocks_pct:.1f}%'}"
            f" — {c.text}" for c in plan.explanation.causes]
        if plan.explanation.what_ifs:
            lines += ["", "| what if | needed GiB | verdict |", "|---|---:|---|"]
            for w in plan.explanation.what_ifs:
                v = "invalid" if w.fits is None else "FITS" if w.fits else "DOES NOT FIT"
                lines.append(f"| {w.change} | {w.needed_gib or '-'} | {v} |")
        lines.append("")
    if plan.fits:
        lines.append(f"**FITS** — margin {(plan.margin_bytes or 0) / 2**30:.2f} GiB. "
                     f"`{plan.capacity_log_line}`")
    elif plan.weights_limit is not None:
        lines.append(f"**DOES NOT FIT** — cause: the weights; {plan.weights_limit.summary}.")
        lines += [""] + [f"- {tip}" for tip in plan.weights_limit.suggestions]
        if plan.error_message:
            lines += ["", f"> {plan.error_message}"]
    else:
        lines.append(f"**DOES NOT FIT** — largest max_model_len that fits: "
                     f"{' / '.join(f'{v:,}' for v in plan.estimated_max_model_len)}.")
        if plan.error_message:
            lines += ["", f"> {plan.error_message}"]
    return "\n".join(lines + _markdown_workload(plan)) + "\n"


def _markdown_workload(plan: Plan) -> list[str]:
    if not plan.workload:
        return []
    lines = ["", f"**Workload** (vLLM {plan.vllm_version}'s scheduler, requests submitted "
             "together)", "", "| workload | runs clean | limit | admits | limit | one request at "
             "its end (blocks) | vLLM formula at P+D |", "|---|---:|---|---:|---|---|---:|"]
    for w in plan.workload:
        f = w.vllm_formula_concurrency
        lines.append(f"| {w.label} | {w.max_concurrent_without_preemption:,} | "
                     f"{_limit(w.concurrency_capped_by, w.capping_kind)} | {w.admission_peak:,} | "
                     f"{_limit(w.admission_capped_by, w.admission_capping_kind)} | "
                     f"{_group_blocks(w.blocks_per_request_at_end)} | "
                     f"{'-' if f is None else f'{f:.2f}'} |")
    return lines


def render_gpus(rows: list, console: Console) -> None:  # type: ignore[type-arg]
    table = Table(title="GPU catalogue (memory as the CUDA/HIP runtime reports it)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True)
    for col in ("name", "arch", "memory", "fp8 KV", "nvfp4 KV", "USD/h"):
        table.add_column(col, justify="right" if col in ("memory", "USD/h") else "left")
    for g in rows:
        mem = f"{g.total_memory_bytes / 2**30:.2f} GiB" if g.total_memory_bytes else "unmeasured"
        if g.total_memory_nominal:
            mem += "*"
        price = "-" if g.usd_per_hour is None else f"{g.usd_per_hour:.2f}" + (
            "~" if (g.usd_per_hour_source or "").startswith("estimate") else "")
        table.add_row(escape(g.name), escape(g.arch), mem, "yes" if g.supports_fp8_kv else "-",
                      "yes" if g.supports_nvfp4_kv else "-", price)
    console.print(table)
    console.print("[dim]* nominal: the vendor's capacity less the runtime reserve, not measured; "
                  "pass --gpu-memory with the runtime total (torch.cuda.mem_get_info()[1]).[/]")
    console.print("[dim]USD/h: typical on-demand price per GPU (~ = estimate); sources in "
                  "`kvplan gpus --json` and docs/gpu-catalogue.md; override with --price GPU=USD.[/]")


def render_fit(fit, console: Console) -> None:  # type: ignore[no-untyped-def]
    """`kvplan fit`: the cheapest deployments first, each with its serve and check lines."""
    t = fit.target
    console.print(Text.assemble(("kvplan fit", "bold"), f"  model {t.model}",
                                f"  draft {t.draft}" if t.draft else "",
                                f"  vLLM {t.vllm_version}"))
    what = (f"{t.workload} requests run without preemption (max_model_len "
            f"{t.max_model_len:,})" if t.workload else f"requests of {t.max_model_len:,} tokens")
    console.print(f"target: {t.concurrency} concurrent {what} · "
                  f"{len(t.gpus)} GPU types · KV {', '.join(t.kv_cache_dtypes)} · at most "
                  f"{t.max_gpus} GPUs")
    if fit.candidates:
        table = Table(title="cheapest first (USD per hour, then GPU count)", title_justify="left",
                      box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True)
        for col, just in (("#", "right"), ("GPU", "left"), ("n", "right"),
                          ("TP×PP×DP", "left"), ("KV", "left"), ("draft", "left"),
                          ("conc.", "right"), ("KV tokens", "right"), ("headroom", "right"),
                          ("USD/h", "right")):
            table.add_column(col, justify=just,  # type: ignore[arg-type]
                             no_wrap=col != "GPU", overflow="fold")
        for i, c in enumerate(fit.candidates, 1):
            usd = "-" if c.usd_per_hour is None else f"{c.usd_per_hour:.2f}"
            name = c.gpu.removeprefix("NVIDIA ").removeprefix("AMD Instinct ")
            table.add_row(str(i), escape(name) + ("*" if c.total_memory_nominal else ""),
                          str(c.num_gpus),
                          f"{c.tensor_parallel_size}×{c.pipeline_parallel_size}×"
                          f"{c.data_parallel_size}",
                          "=".join([c.kv_cache_dtype, *c.merged_kv_cache_dtypes]),
                          "on" if c.speculative else "off",
                          (f"{c.workload_concurrency}" if c.workload_concurrency is not None
                           else f"{c.max_concurrency:.1f}"),
                          f"{c.kv_cache_size_tokens:,}", f"{c.headroom_pct:+.0f}%", usd)
        console.print(table)
        for i, c in enumerate(fit.candidates, 1):
            console.print(f"{i}. [dim]$[/] {escape(c.vllm_serve)}", soft_wrap=True)
            console.print(f"   [dim]check:[/] {escape(c.kvplan_check)}", soft_wrap=True)
        conc = (f"{t.workload} requests vLLM's scheduler runs at once without preemption × DP"
                if t.workload else "vLLM's maximum concurrency at max_model_len × DP")
        console.print(f"[dim]conc. = {conc}; KV tokens "
                      "per replica; headroom = conc. over the target"
                      + ("; KV a=b: both planned identically (one row)" if any(
                          c.merged_kv_cache_dtypes for c in fit.candidates) else "")
                      + ("; * nominal GPU memory (not measured)" if any(
                          c.total_memory_nominal for c in fit.candidates) else "")
                      + ("; USD/h '-': no price, ranked last (give --price GPU=USD)" if any(
                          c.usd_per_hour is None for c in fit.candidates) else "") + ".[/]")
    else:
        console.print(Text("NOTHING FITS", style="bold red"),
                      f"no deployment of at most {t.max_gpus} GPUs serves {t.concurrency} × "
                      f"{t.max_model_len:,} tokens" + ("; the nearest misses:" if fit.misses
                                                        else "; no shape could be planned:"))
        for m in fit.misses:
            usd = "" if m.usd_per_gpu_hour is None else f" (${m.usd_per_gpu_hour:.2f}/GPU-h)"
            console.print(f"  {escape(m.gpu)}{usd} TP {m.tensor_parallel_size} × PP "
                          f"{m.pipeline_parallel_size}, KV "
                          f"{'/'.join([m.kv_cache_dtype, *m.merged_kv_cache_dtypes])}, draft "
                          f"{'on' if m.speculative else 'off'} — reaches {m.closeness:.0%} of the target: "
                          f"{escape(m.lacks)}")
        if fit.weights_need_more_gpus:
            need = fit.weights_need_more_gpus
            console.print(Text("the weights need more GPUs than --max-gpus "
                               f"{t.max_gpus}:", style="bold"),
                          ", ".join(f"{n} × {escape(g.removeprefix('NVIDIA '))}"
                                    for g, n in need.items())
                          + f" at least; rerun with --max-gpus {min(need.values())}")
    by_dtype: dict[str, list[str]] = {}
    by_reason: dict[str, list[str]] = {}
    for s in fit.skipped:
        if s.kv_cache_dtype is not None:
            by_dtype.setdefault(s.kv_cache_dtype, []).append(s.gpu.removeprefix("NVIDIA "))
        else:
            by_reason.setdefault(s.reason, []).append(
                f"TP {s.tensor_parallel_size}×PP {s.pipeline_parallel_size}")
    for dt, names in by_dtype.items():
        console.print(f"[dim]not tried: {dt} KV on {len(names)} GPU type(s) without native "
                      f"support in this release ({escape(', '.join(names[:6]))}"
                      f"{', …' if len(names) > 6 else ''}); reasons in --json[/]")
    for reason, shapes in by_reason.items():
        console.print(f"[dim]not plannable: {escape(', '.join(dict.fromkeys(shapes)))}: "
                      f"{escape(reason)}[/]")
    console.print(f"[dim]{fit.planned:,} replica shapes planned, {fit.pruned:,} skipped because "
                  f"they cannot be cheaper; {fit.num_fitting:,} meet the target.[/]")


# `kvplan layers`: kinds the group table's SHORT_KIND does not name
_LAYER_KIND = {**SHORT_KIND, "mla_indexer": "indexer", "compressor_state": "compressor"}


def render_layers(rows: list, notes: tuple[str, ...], console: Console) -> None:  # type: ignore[type-arg]
    """Layers with the same numbers share one row (their names as a range below the table), so
    a 160-layer model stays readable at 80 columns; --json keeps one row per layer."""
    from kvplan.analysis.plan import compact_layer_range

    for n in notes:
        console.print(f"[yellow]note:[/] {escape(n)}")
    same: dict[tuple, list] = {}  # type: ignore[type-arg]
    for r in rows:
        key = (r.kind, r.draft, r.heads_x_dim, r.window, r.dtype, r.backend, r.block_size_tokens,
               r.page_bytes_per_token)
        same.setdefault(key, []).append(r)
    table = Table(title="Layers as vLLM's workers would report them (per TP rank)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True)
    for col, just in (("#", "right"), ("n", "right"), ("kind", "left"), ("heads×dim", "right"),
                      ("window", "right"), ("dtype", "left"), ("block", "right"),
                      ("B/token", "right")):
        short = col in ("#", "n", "kind", "window", "block")  # the rest may wrap, never cut
        table.add_column(col, justify=just, no_wrap=short,  # type: ignore[arg-type]
                         overflow="ellipsis" if short else "fold")
    legend = []
    for i, group in enumerate(same.values(), 1):
        r = group[0]
        dtype, _, quant = r.dtype.partition(" (")
        per_tok = r.page_bytes_per_token
        if "/" in per_tok and " " not in per_tok:  # an exact fraction: shown rounded
            num, den = per_tok.split("/")
            per_tok = f"≈{int(num) / int(den):.2f}"
        per_tok = per_tok.replace(" state", "/req")
        table.add_row(str(i), str(len(group)),
                      _LAYER_KIND.get(r.kind, r.kind) + (" (draft)" if r.draft else ""),
                      r.heads_x_dim.replace(" × ", "×"), f"{r.window:,}" if r.window else "-",
                      escape(dtype.replace("/", "/ ")) + ("*" if quant else ""), f"{r.block_size_tokens:,}", per_tok)
        extra = [x for x in (r.backend, quant.rstrip(")") and f"KV quant {quant.rstrip(')')}")
                 if x]
        legend.append(f"{i}: {escape(compact_layer_range([x.name for x in group]))}"
                      + (f" [dim]({escape(', '.join(extra))})[/]" if extra else ""))
    console.print(table)
    for line in legend:
        console.print(line)
    console.print("[dim]n: layers with these numbers (their names above, by row) · heads×dim: KV "
                  "heads × head size per rank, K/V when they differ; state layers: the state "
                  "shapes · window: sliding window or chunk (tokens) · dtype*: quantized KV (mode "
                  "above) · block: tokens per block · B/token: page bytes ÷ block tokens (≈: not "
                  "a whole number; exact in --json) · /req: a state layer's bytes per request[/]")


def _short_len(n: int) -> str:
    if n >= 2**20 and n % 2**20 == 0:
        return f"{n // 2**20}M"
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024}k"
    return f"{n:,}"


def render_sweep(sweep, console: Console) -> None:  # type: ignore[no-untyped-def]
    """Table (max concurrency per length; '-' = does not fit) and a bar chart of the largest
    fitting max_model_len per GPU × KV dtype (log scale)."""
    import math

    table = Table(title=f"kvplan sweep: {escape(sweep.model)}"
                  + (f" + {escape(sweep.draft)}" if sweep.draft else "")
                  + " — max concurrency per max_model_len ('-' = does not fit)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True)
    table.add_column("GPU")
    table.add_column("KV")
    table.add_column("KV GiB", justify="right")
    table.add_column("largest fit", justify="right")
    for n in sweep.lengths:
        table.add_column(_short_len(n), justify="right")
    for r in sweep.rows:
        if r.error and not r.points:
            table.add_row(escape(r.gpu), r.kv_cache_dtype, "-", "-",
                          *([Text("error", style="yellow")] * len(sweep.lengths)))
            continue
        cells = {p.max_model_len: (f"{p.max_concurrency:.1f}x" if p.fits else "-")
                 for p in r.points}
        table.add_row(escape(r.gpu), r.kv_cache_dtype,
                      f"{(r.available_kv_bytes or 0) / 2**30:.1f}",
                      f"{r.largest_fitting_max_model_len or 0:,}",
                      *[cells.get(n, "?") for n in sweep.lengths])
    console.print(table)
    for r in sweep.rows:
        if r.error:
            console.print(f"[yellow]{escape(r.gpu)} {r.kv_cache_dtype}:[/] {escape(r.error)}")
        for w in r.warnings:
            console.print(f"[yellow]warning:[/] {escape(w)}")
    top = max(sweep.lengths)
    width = 40
    console.print("[bold]largest max_model_len that fits[/] (log scale, up to "
                  f"{_short_len(top)})")
    for r in sweep.rows:
        v = r.largest_fitting_max_model_len or 0
        frac = math.log2(v) / math.log2(top) if v > 1 else 0.0
        bar = "█" * max(0, round(frac * width))
        label = f"{r.gpu[:24]:<24} {r.kv_cache_dtype:<9}"
        console.print(f"  {escape(label)} {bar} {_short_len(v) if v else 'none'}")
    console.print(f"[dim]{sweep.plans_evaluated:,} plans evaluated[/]")


def plot_sweep(sweep, path: str) -> None:  # type: ignore[no-untyped-def]
    """A real chart: max concurrency vs max_model_len per GPU × KV dtype (matplotlib, optional)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from kvplan.errors import UnsupportedError

        raise UnsupportedError("--plot needs matplotlib",
                               hint="pip install 'kvplan[plot]' (or pip install matplotlib)") from None
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for r in sweep.rows:
        pts = [p for p in r.points if p.fits]
        if pts:
            ax.plot([p.max_model_len for p in pts], [p.max_concurrency for p in pts], marker="o",
                    label=f"{r.gpu} · {r.kv_cache_dtype}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("max_model_len (tokens)")
    ax.set_ylabel("max concurrency (requests at full length)")
    ax.set_title(f"{sweep.model}" + (f" + {sweep.draft}" if sweep.draft else ""), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def render_batch(batch, console: Console) -> None:  # type: ignore[no-untyped-def]
    table = Table(title="kvplan ci", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1),
                  collapse_padding=True)
    for col, just in (("deployment", "left"), ("verdict", "left"), ("needed GiB", "right"),
                      ("avail GiB", "right"), ("largest fit", "right"), ("concurrency", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for e in batch.entries:
        if e.plan is None:
            table.add_row(escape(e.name), Text("INVALID", style="yellow"), "-", "-", "-", "-")
            continue
        p = e.plan
        verdict = Text(p.verdict.value, style="green" if p.fits else "red")
        conc = f"{p.max_concurrency:.2f}x" if p.max_concurrency is not None else "-"
        table.add_row(escape(e.name), verdict, " / ".join(p.total_gib_needed) or "-",
                      " / ".join(p.check_gib) or "-",
                      f"{min(p.estimated_max_model_len):,}" if p.estimated_max_model_len else "-",
                      conc)
    console.print(table)
    for e in batch.entries:
        if e.error:
            console.print(f"[yellow]{escape(e.name)}:[/] {escape(e.error)}"
                          + (f" — {escape(e.hint)}" if e.hint else ""))
        elif e.plan is not None and e.plan.weights_limit is not None:
            console.print(f"[red]{escape(e.name)}:[/] {escape(e.plan.weights_limit.summary)}")
        elif e.plan is not None and not e.plan.fits and e.plan.error_message:
            console.print(f"[red]{escape(e.name)}:[/] {escape(e.plan.error_message)}")


class DelayedProgress:
    """A progress bar on stderr that appears only once the work has taken `delay_s` seconds
    (and only on a terminal). Call it as `progress(done, total)`; `close()` at the end."""

    def __init__(self, console: Console, description: str, delay_s: float = 1.0,
                 clock: Callable[[], float] | None = None) -> None:
        import time

        self._clock = clock or time.monotonic
        self._start = self._clock()
        self._console, self._description, self._delay_s = console, description, delay_s
        self._bar: Any = None
        self._task: Any = None
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if self._clock() - self._start < self._delay_s or not self._console.is_terminal:
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), console=self._console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self._description, total=total)
            self.shown = True
        self._bar.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
