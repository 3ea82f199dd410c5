"""Render `kvplan sweep`: a table of max concurrency per max_model_len, a bar chart of the
largest fitting length, and (`--plot`) a matplotlib chart. Renders only."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kvplan.output.tables import Column, print_table, short_gpu_name

_ENGINE = {"vllm": "vLLM", "sglang": "SGLang"}


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

    title = (f"kvplan sweep: {sweep.model}" + (f" + {sweep.draft}" if sweep.draft else "")
             + " — max concurrency per max_model_len ('-' = does not fit)")
    engines = any(getattr(r, "engine", "vllm") != "vllm" for r in sweep.rows)
    columns = [Column("engine", key=True)] if engines else []
    columns += [Column("GPU", wrap=True, key=True, bare=True), Column("KV", key=True, bare=True),
                Column("KV GiB", "right", drop=2), Column("largest fit", "right", drop=1)]
    columns += [Column(_short_len(n), "right") for n in sweep.lengths]
    rows: list[list[str | Text]] = []
    for r in sweep.rows:
        who = [_ENGINE.get(r.engine, r.engine)] if engines else []
        name = short_gpu_name(r.gpu)
        if r.error and not r.points:
            rows.append([*who, name, r.kv_cache_dtype, "-", "-",
                         *([Text("error", style="yellow")] * len(sweep.lengths))])
            continue
        cells = {p.max_model_len: (f"{p.max_concurrency:.1f}x" if p.fits else "-")
                 for p in r.points}
        rows.append([*who, name, r.kv_cache_dtype, f"{(r.available_kv_bytes or 0) / 2**30:.1f}",
                     f"{r.largest_fitting_max_model_len or 0:,}",
                     *[cells.get(n, "?") for n in sweep.lengths]])
    print_table(console, columns, rows, title=title, what="GPU × KV dtype")
    for r in sweep.rows:
        if r.error:
            console.print(f"[yellow]{escape(short_gpu_name(r.gpu))} {r.kv_cache_dtype}:[/] "
                          f"{escape(r.error)}")
    for w in sweep.warnings:  # each once, with the rows it applies to
        where = "" if w.every_row else (
            f" [dim](for {escape(', '.join(short_gpu_name(x) for x in w.applies_to))})[/]")
        console.print(f"[yellow]warning:[/] {escape(w.text)}{where}")
    top = max(sweep.lengths)
    labels = [(f"{r.engine:<6} " if engines else "") + f"{short_gpu_name(r.gpu)}  {r.kv_cache_dtype}"
              for r in sweep.rows]
    label_width = max((len(x) for x in labels), default=0)
    # the bars take what the labels and the value (at most "none" / "512k" / "1,234,567") leave
    width = max(10, min(40, console.width - 2 - label_width - 1 - 1 - 9))
    console.print("[bold]largest max_model_len that fits[/] (log scale, up to "
                  f"{_short_len(top)})")
    for r, label in zip(sweep.rows, labels, strict=True):
        v = r.largest_fitting_max_model_len or 0
        frac = math.log2(v) / math.log2(top) if v > 1 else 0.0
        bar = "█" * max(0, round(frac * width))
        console.print(f"  {escape(label):<{label_width}} {bar} {_short_len(v) if v else 'none'}")
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
                    label=f"{r.gpu} · {r.kv_cache_dtype}"
                    + (f" · {r.engine}" if getattr(r, "engine", "vllm") != "vllm" else ""))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("max_model_len (tokens)")
    ax.set_ylabel("max concurrency (requests at full length)")
    ax.set_title(f"{sweep.model}" + (f" + {sweep.draft}" if sweep.draft else ""), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
