"""Render `kvplan fit`: the cheapest deployments first, each with its `vllm serve` and
`kvplan check` lines; else the nearest misses. Renders only."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

_ENGINE = {"vllm": "vLLM", "sglang": "SGLang"}


def render_fit(fit, console: Console) -> None:  # type: ignore[no-untyped-def]
    """`kvplan fit`: the cheapest deployments first, each with its serve and check lines."""
    t = fit.target
    servers = "  ".join(([f"vLLM {t.vllm_version}"] if t.vllm_version else [])
                        + ([f"SGLang {t.sglang_version}"] if t.sglang_version else []))
    both = len(t.engines) > 1
    console.print(Text.assemble(("kvplan fit", "bold"), f"  model {t.model}",
                                f"  draft {t.draft}" if t.draft else "", f"  {servers}"))
    console.print(f"target: {t.concurrency} concurrent requests of {t.max_model_len:,} tokens · "
                  f"{len(t.gpus)} GPU types · KV {', '.join(t.kv_cache_dtypes)} · at most "
                  f"{t.max_gpus} GPUs")
    if fit.candidates:
        table = Table(title="cheapest first (USD per hour, then GPU count)", title_justify="left",
                      box=box.SIMPLE_HEAD, padding=(0, 1), collapse_padding=True)
        cols = (("#", "right"), *((("engine", "left"),) if both else ()), ("GPU", "left"),
                ("n", "right"),
                          ("TP×PP×DP", "left"), ("KV", "left"), ("draft", "left"),
                          ("conc.", "right"), ("KV tokens", "right"), ("headroom", "right"),
                          ("USD/h", "right"))
        for col, just in cols:
            table.add_column(col, justify=just,  # type: ignore[arg-type]
                             no_wrap=col != "GPU", overflow="fold")
        for i, c in enumerate(fit.candidates, 1):
            usd = "-" if c.usd_per_hour is None else f"{c.usd_per_hour:.2f}"
            name = c.gpu.removeprefix("NVIDIA ").removeprefix("AMD Instinct ")
            table.add_row(str(i), *((_ENGINE[c.engine],) if both else ()),
                          escape(name) + ("*" if c.total_memory_nominal else ""),
                          str(c.num_gpus),
                          f"{c.tensor_parallel_size}×{c.pipeline_parallel_size}×"
                          f"{c.data_parallel_size}",
                          "=".join([c.kv_cache_dtype, *c.merged_kv_cache_dtypes]),
                          "on" if c.speculative else "off", f"{c.max_concurrency:.1f}",
                          f"{c.kv_cache_size_tokens:,}", f"{c.headroom_pct:+.0f}%", usd)
        console.print(table)
        for i, c in enumerate(fit.candidates, 1):
            console.print(f"{i}. [dim]$[/] {escape(c.vllm_serve or c.sglang_launch or '')}",
                          soft_wrap=True)
            console.print(f"   [dim]check:[/] {escape(c.kvplan_check)}", soft_wrap=True)
        console.print("[dim]conc. = " + ("the requests of max_model_len the KV tokens hold "
                                          "(vLLM's maximum concurrency; SGLang's tokens / "
                                          "max_model_len)" if both else
                                          "SGLang's tokens / max_model_len"
                                          if t.engines == ["sglang"] else
                                          "vLLM's maximum concurrency at max_model_len")
                      + " × DP; KV tokens per replica; headroom = conc. over the target"
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
            who = f"{_ENGINE[m.engine]} " if both else ""
            console.print(f"  {who}{escape(m.gpu)}{usd} TP {m.tensor_parallel_size} × PP "
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
    by_dtype: dict[tuple[str, str], list[str]] = {}
    by_reason: dict[str, list[str]] = {}
    for s in fit.skipped:
        if s.kv_cache_dtype is not None:
            names = by_dtype.setdefault((s.engine, s.kv_cache_dtype), [])
            name = s.gpu.removeprefix("NVIDIA ")
            if name not in names:
                names.append(name)
        else:
            by_reason.setdefault(s.reason, []).append(
                f"TP {s.tensor_parallel_size}×PP {s.pipeline_parallel_size}"
                if s.tensor_parallel_size is not None else s.gpu.removeprefix("NVIDIA "))
    for (engine, dt), names in by_dtype.items():
        who = f"{_ENGINE[engine]}: " if both else ""
        console.print(f"[dim]not tried: {who}{dt} KV on {len(names)} GPU type(s) without native "
                      f"support in this release ({escape(', '.join(names[:6]))}"
                      f"{', …' if len(names) > 6 else ''}); reasons in --json[/]")
    for reason, shapes in by_reason.items():
        console.print(f"[dim]not plannable: {escape(', '.join(dict.fromkeys(shapes)))}: "
                      f"{escape(reason)}[/]")
    console.print(f"[dim]{fit.planned:,} replica shapes planned, {fit.pruned:,} skipped because "
                  f"they cannot be cheaper; {fit.num_fitting:,} meet the target.[/]")
