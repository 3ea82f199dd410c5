"""Render `kvplan sweep`: a table of max concurrency per max_model_len, a bar chart of the
largest fitting length, and (`--plot`) a matplotlib chart. Renders only."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text


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
    engines = any(getattr(r, "engine", "vllm") != "vllm" for r in sweep.rows)
    if engines:
        table.add_column("engine")
    table.add_column("GPU")
    table.add_column("KV")
    table.add_column("KV GiB", justify="right")
    table.add_column("largest fit", justify="right")
    for n in sweep.lengths:
        table.add_column(_short_len(n), justify="right")
    for r in sweep.rows:
        who = ({"vllm": "vLLM", "sglang": "SGLang"}.get(r.engine, r.engine),) if engines else ()
        if r.error and not r.points:
            table.add_row(*who, escape(r.gpu), r.kv_cache_dtype, "-", "-",
                          *([Text("error", style="yellow")] * len(sweep.lengths)))
            continue
        cells = {p.max_model_len: (f"{p.max_concurrency:.1f}x" if p.fits else "-")
                 for p in r.points}
        table.add_row(*who, escape(r.gpu), r.kv_cache_dtype,
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
        label = (f"{r.engine:<6} " if engines else "") + f"{r.gpu[:24]:<24} {r.kv_cache_dtype:<9}"
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
