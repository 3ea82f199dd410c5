"""Render a `Plan` (check, explain, --serve, --from-log) and `kvplan ci`'s table of plans: rich
table, JSON, markdown. Renders only; never computes a number."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kvplan.analysis.plan import GroupRow, Plan, Verdict
from kvplan.budget.kv_memory import TermComparison
from kvplan.output.tables import Column, print_table


def _b(n: int) -> str:
    return f"{n:,}"


def _kib(n: int) -> str:
    v = n / 1024
    return f"{v:,.0f}" if v == int(v) else f"{v:,.1f}"


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


def refusal_line(plan: Plan) -> str:
    """One line for a deployment vLLM refuses at start-up: why, and vLLM's error."""
    return (f"vLLM {plan.vllm_version} refuses it at start-up ({plan.failure_cause}), before it "
            f"sizes the KV cache: {plan.error_type}: {plan.error_message}")


def _render_refusal(plan: Plan, console: Console) -> None:
    """A deployment vLLM refuses before it sizes the KV cache: what was asked, vLLM's error."""
    console.print(f"budget ({escape(plan.budget_mode)})  ·  max_model_len "
                  f"{plan.max_model_len:,}" if plan.max_model_len else
                  f"budget ({escape(plan.budget_mode)})")
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    for n in plan.notes:
        console.print(f"[cyan]note:[/] {escape(n)}")
    console.print(Text("DOES NOT FIT", style="bold red"),
                  f"vLLM refuses it at start-up ({plan.failure_cause}), before it sizes the KV "
                  "cache")
    console.print(f"vLLM {plan.vllm_version} would raise {escape(plan.error_type or '')}: "
                  f"{escape(plan.error_message or '')}", soft_wrap=True)
    if plan.failure_hint:
        console.print(f"what helps: {escape(plan.failure_hint)}", soft_wrap=True)


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
    columns = [Column("workload", key=True, bare=True), Column("clean", "right"),
               Column("limit", drop=2), Column("admits", "right"), Column("limit", drop=3),
               Column("blocks of one request at its end", wrap=True, drop=1),
               Column("formula", "right")]
    rows: list[list[str | Text]] = []
    for w in plan.workload:
        formula = w.vllm_formula_concurrency
        rows.append([w.label, _b(w.max_concurrent_without_preemption),
                     _limit(w.concurrency_capped_by, w.capping_kind), _b(w.admission_peak),
                     _limit(w.admission_capped_by, w.admission_capping_kind),
                     _group_blocks(w.blocks_per_request_at_end),
                     f"{formula:.2f}" if formula is not None else "-"])
    print_table(console, columns, rows, title=f"Workload: vLLM {plan.vllm_version}'s scheduler, "
                "requests submitted together", pad_edge=False, what="workload")
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
    if plan.refused_at_startup:
        _render_refusal(plan, console)
        return
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
        _log_comparison_table(budget.log_comparison, console)
    for w in plan.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}")
    for n in plan.notes:
        console.print(f"[cyan]note:[/] {escape(n)}")
    if plan.verdict is Verdict.CANNOT_GROUP:
        console.print(Text("CANNOT GROUP", style="bold red"),
                      f"vLLM fails while grouping the layers: {escape(plan.error_type or '')}: "
                      f"{escape(plan.error_message or '(no message)')}")
        return
    columns = [Column("grp", "right", key=True), Column("kind", key=True, bare=True), Column("layers", "right"),
               Column("block", "right"), Column("page KiB", "right", drop=2),
               Column("pad %", "right", drop=3), Column("blk/req", "right"),
               Column("GiB/req", "right", drop=1), Column("share", "right", drop=4)]
    rows: list[list[str | Text]] = []
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
        rows.append([ids, kind, f"{g.num_layers}{per_group}",
                     _b(g.block_size_tokens), page,
                     Text(f"{g.padding_pct:.1f}", style=pad_style),
                     _b(g.blocks_per_request * count),
                     f"{g.bytes_per_request * count / 2**30:.2f}",
                     f"{g.share_of_total_pct * count:.1f}%"])
    print_table(console, columns, rows, pad_edge=False, what="group",
                title="KV cache groups: block demand of one request at max_model_len")
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
        fitted = plan.max_model_len_after_planning
        if fitted != plan.max_model_len:  # --max-model-len auto: vLLM fits the length first
            console.print(f"auto-fit: vLLM reduces max_model_len from {plan.max_model_len:,} to "
                          f"{fitted:,}, where one request needs "
                          f"{_workers(plan.total_bytes_needed_after_planning, _b)} B")
            console.print(Text("FITS", style="bold green"), f"at max_model_len {fitted:,}, margin "
                          f"{margin:,} B ({margin / 2**30:.2f} GiB)")
        else:
            console.print(Text("FITS", style="bold green"),
                          f"margin {margin:,} B ({margin / 2**30:.2f} GiB)")
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
    columns = [Column("change", wrap=True, key=True, bare=True), Column("needed GiB", "right"),
               Column("avail GiB", "right", drop=1), Column("verdict", wrap=True)]
    rows: list[list[str | Text]] = []
    for w in ex.what_ifs:
        verdict = ("invalid" if w.fits is None else "FITS" if w.fits else "DOES NOT FIT")
        style = "green" if w.fits else ("yellow" if w.fits is None else "red")
        if w.note and w.fits is None:
            verdict += f": {w.note}"
        rows.append([w.change, w.needed_gib or "-", w.available_gib or "-",
                     Text(verdict, style=style)])
    print_table(console, columns, rows, title="What if (each recomputed by the engine)",
                what="what-if")


def _log_comparison_table(rows: tuple[TermComparison, ...], console: Console) -> None:
    """vLLM's logged memory terms beside kvplan's estimate of each."""
    columns = [Column("term", wrap=True, key=True, bare=True), Column("logged GiB", "right"),
               Column("kvplan GiB", "right"), Column("kvplan − log", "right", drop=1)]
    cells: list[list[str | Text]] = []
    for r in rows:
        diff = "-" if r.difference_bytes is None else f"{r.difference_bytes / 2**30:+.2f}"
        cells.append([r.name, _gib_or_dash(r.logged_bytes), _gib_or_dash(r.estimated_bytes), diff])
    print_table(console, columns, cells, pad_edge=False, what="term",
                title="memory per GPU: vLLM's log vs kvplan's estimate")


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
    if plan.refused_at_startup:
        lines += [f"**DOES NOT FIT** — vLLM refuses it at start-up ({plan.failure_cause}), "
                  "before it sizes the KV cache.", "", f"> {plan.error_type}: {plan.error_message}"]
        if plan.failure_hint:
            lines += ["", f"What helps: {plan.failure_hint}"]
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
        fitted = plan.max_model_len_after_planning
        at = (f" at the auto-fitted max_model_len {fitted:,} (from {plan.max_model_len:,})"
              if fitted != plan.max_model_len else "")
        lines.append(f"**FITS**{at} — margin {(plan.margin_bytes or 0) / 2**30:.2f} GiB. "
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


def render_batch(batch, console: Console) -> None:  # type: ignore[no-untyped-def]
    columns = [Column("deployment", wrap=True, key=True, bare=True), Column("verdict"),
               Column("needed GiB", "right"), Column("avail GiB", "right", drop=2),
               Column("largest fit", "right", drop=1), Column("concurrency", "right", drop=3)]
    rows: list[list[str | Text]] = []
    for e in batch.entries:
        if e.plan is None:  # could not be planned (its error below)
            rows.append([e.name, Text("ERROR", style="yellow"), "-", "-", "-", "-"])
            continue
        p = e.plan
        verdict = Text(p.verdict.value, style="green" if p.fits else "red")
        if p.engine == "sglang":  # SGLang's own figures: its token pool, its request cap
            from kvplan.output.sglang_report import batch_cells

            rows.append([e.name, verdict, *batch_cells(p)])
            continue
        conc = f"{p.max_concurrency:.2f}x" if p.max_concurrency is not None else "-"
        rows.append([e.name, verdict, " / ".join(p.total_gib_needed) or "-",
                     " / ".join(p.check_gib) or "-",
                     f"{min(p.estimated_max_model_len):,}" if p.estimated_max_model_len else "-",
                     conc])
    print_table(console, columns, rows, title="kvplan ci", what="deployment")
    for e in batch.entries:
        if e.error:  # one line each, as the terminal wraps it (URLs and flags stay whole)
            console.print(f"[yellow]{escape(e.name)}:[/] {escape(e.error)}"
                          + (f" — {escape(e.hint)}" if e.hint else ""), soft_wrap=True)
        elif e.plan is not None and e.plan.engine == "sglang":
            from kvplan.output.sglang_report import failure_line

            why = failure_line(e.plan)
            if why:
                console.print(f"[red]{escape(e.name)}:[/] {escape(why)}", soft_wrap=True)
        elif e.plan is not None and e.plan.refused_at_startup:
            console.print(f"[red]{escape(e.name)}:[/] {escape(refusal_line(e.plan))}",
                          soft_wrap=True)
        elif e.plan is not None and e.plan.weights_limit is not None:
            console.print(f"[red]{escape(e.name)}:[/] {escape(e.plan.weights_limit.summary)}",
                          soft_wrap=True)
        elif e.plan is not None and not e.plan.fits and e.plan.error_message:
            console.print(f"[red]{escape(e.name)}:[/] {escape(e.plan.error_message)}",
                          soft_wrap=True)
