"""Render `kvplan check --engine vllm,sglang`: one model, GPU and context length planned by both
servers, side by side, and why their numbers differ. Renders only; never computes a number."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kvplan.analysis.engine_comparison import EngineComparison, EngineRow
from kvplan.analysis.plan import Plan
from kvplan.output.tables import Column, print_table

_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}


def _gib(b: int | None) -> str:
    return "-" if b is None else f"{b / 2**30:,.2f} GiB"


def _verdict(r: EngineRow) -> Text:
    return Text("FITS", style="bold green") if r.fits else Text("DOES NOT FIT", style="bold red")


def _rows(c: EngineComparison) -> list[tuple[str, list[str | Text]]]:
    L = f"{c.context_length:,}"
    out: list[tuple[str, list[str | Text]]] = [
        ("starts", ["yes" if r.starts else "no" for r in c.rows]),
        ("KV memory per GPU", [_gib(r.kv_budget_bytes) for r in c.rows]),
        ("fraction", [r.fraction for r in c.rows]),
        ("KV tokens", ["-" if r.kv_tokens is None else f"{r.kv_tokens:,}" for r in c.rows]),
        ("bytes per token", ["-" if r.bytes_per_token is None else f"{r.bytes_per_token:,.0f}"
                             for r in c.rows]),
        ("block / page", ["-" if r.granularity_tokens is None else f"{r.granularity_tokens}"
                          for r in c.rows]),
        (f"concurrency at {L}", ["-" if r.max_concurrency is None else
                                 f"{r.max_concurrency:.2f}x" for r in c.rows]),
        (f"requests of {L} at once",
         [f"{r.serving.requests_at_length:,}" if r.serving is not None else "-"
          for r in c.rows]),
        ("request cap", [f"{r.serving.request_cap:,}" if r.serving is not None
                         and r.serving.request_cap is not None else "-" for r in c.rows]),
        (f"holds {c.concurrency} × {L}", [_verdict(r) for r in c.rows]),
    ]
    return out


def _what_if_title(plan: Plan) -> str:
    """Whose what-ifs, in whose flags, and what each one's verdict asks."""
    if plan.engine == "sglang":
        return (f"What if: SGLang {plan.sglang_version} (SGLang's flags; each re-planned: holds "
                f"{plan.serving.concurrency if plan.serving else 1} × "
                f"{plan.max_model_len:,} at once)")
    return (f"What if: vLLM {plan.vllm_version} (vLLM's flags; each re-planned: vLLM's own "
            f"start-up check, one request of max_model_len)")


def _verdict_word(fits: bool | None) -> str:
    return "invalid" if fits is None else "FITS" if fits else "DOES NOT FIT"


def _render_what_ifs(c: EngineComparison, console: Console) -> None:
    """Each engine's what-ifs (`--explain`), in its own flags, one table each."""
    columns = [Column("change", wrap=True, key=True, bare=True), Column("needed GiB", "right"),
               Column("avail GiB", "right", drop=2), Column("verdict"),
               Column("note", wrap=True, drop=1)]
    for plan in c.plans:
        ex = plan.explanation
        if ex is None or not ex.what_ifs:
            continue
        rows: list[list[str | Text]] = []
        for w in ex.what_ifs:
            style = "green" if w.fits else ("yellow" if w.fits is None else "red")
            rows.append([w.change, w.needed_gib or "-", w.available_gib or "-",
                         Text(_verdict_word(w.fits), style=style), w.note or ""])
        print_table(console, columns, rows, title=_what_if_title(plan), what="what-if")


def render_comparison(c: EngineComparison, console: Console) -> None:
    head = Text()
    head.append("kvplan", style="bold")
    head.append(f"  model {c.model}")
    if c.gpu:
        head.append(f"  GPU {c.gpu}")
    head.append(f"  context length {c.context_length:,}  concurrency {c.concurrency}")
    console.print(head)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
    table.add_column("")
    for r in c.rows:
        table.add_column(f"{_NAMES.get(r.engine, r.engine)} {r.version}", overflow="fold")
    for label, cells in _rows(c):
        table.add_row(label, *[escape(x) if isinstance(x, str) else x for x in cells])
    console.print(table)
    for r in c.rows:
        name = _NAMES.get(r.engine, r.engine)
        if not r.fits:
            why = (r.serving.reason if r.serving is not None and r.serving.reason else r.error)
            console.print(f"[red]{name}:[/] {escape(why or 'does not fit')}", soft_wrap=True)
    if c.differences:
        console.print("[bold]Why they differ[/]")
        for d in c.differences:
            console.print(f"  - {escape(d)}", soft_wrap=True)
    _render_what_ifs(c, console)
    for r in c.rows:
        if r.command:
            console.print(f"[dim]{_NAMES.get(r.engine, r.engine)}:[/] {escape(r.command)}",
                          soft_wrap=True)


def render_comparison_markdown(c: EngineComparison) -> str:
    lines = [f"### kvplan: `{c.model}` on {c.gpu or '-'}, context length {c.context_length:,}, "
             f"concurrency {c.concurrency}", "",
             "| | " + " | ".join(f"{_NAMES.get(r.engine, r.engine)} {r.version}"
                                 for r in c.rows) + " |",
             "|---|" + "---:|" * len(c.rows)]
    for label, cells in _rows(c):
        lines.append(f"| {label} | " + " | ".join(x.plain if isinstance(x, Text) else x
                                                   for x in cells) + " |")
    if c.differences:
        lines += ["", "Why they differ:", ""] + [f"- {d}" for d in c.differences]
    for plan in c.plans:
        ex = plan.explanation
        if ex is None or not ex.what_ifs:
            continue
        lines += ["", f"{_what_if_title(plan)}:", "",
                  "| what if | needed GiB | avail GiB | verdict | note |",
                  "|---|---:|---:|---|---|"]
        lines += [f"| `{w.change}` | {w.needed_gib or '-'} | {w.available_gib or '-'} | "
                  f"{_verdict_word(w.fits)} | {' '.join((w.note or '').split())} |"
                  for w in ex.what_ifs]
    lines += [""] + [f"`{r.command}`  " for r in c.rows if r.command]
    return "\n".join(lines) + "\n"
