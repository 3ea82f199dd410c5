"""Render `kvplan fit`: the cheapest deployments first, each with its `vllm serve` and
`kvplan check` lines; else the nearest misses. Renders only."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kvplan.output.tables import Column, print_table, short_gpu_name

_ENGINE = {"vllm": "vLLM", "sglang": "SGLang"}


def render_fit(fit, console: Console) -> None:  # type: ignore[no-untyped-def]
    """`kvplan fit`: the cheapest deployments first, each with its serve and check lines."""
    t = fit.target
    servers = "  ".join(([f"vLLM {t.vllm_version}"] if t.vllm_version else [])
                        + ([f"SGLang {t.sglang_version}"] if t.sglang_version else []))
    both = len(t.engines) > 1
    console.print(Text.assemble(("kvplan fit", "bold"), f"  model {t.model}",
                                f"  draft {t.draft}" if t.draft else "", f"  {servers}"))
    what = (f"{t.workload} requests run without preemption (max_model_len "
            f"{t.max_model_len:,})" if t.workload else f"requests of {t.max_model_len:,} tokens")
    console.print(f"target: {t.concurrency} concurrent {what} · {len(t.gpus)} GPU types"
                  + (f" ({', '.join(v.upper() if v == 'amd' else 'NVIDIA' for v in t.vendors)})"
                     if t.vendors else "")
                  + f" · KV {', '.join(t.kv_cache_dtypes)} · at most {t.max_gpus} GPUs")
    if fit.refusal is not None:  # the model itself, whatever the deployment: once
        console.print(Text("NOTHING FITS", style="bold red"),
                      f"vLLM refuses the model at max_model_len {t.max_model_len:,} before any "
                      "deployment matters; no shape was planned:")
        console.print(f"  {escape(fit.refusal)}", soft_wrap=True)
        return
    if fit.candidates:
        show_draft = t.draft is not None
        columns = [Column("#", "right", key=True, bare=True)]
        columns += [Column("engine", key=True)] if both else []
        columns += [Column("GPU", wrap=True, key=True, bare=True), Column("n", "right", key=True),
                    Column("TP×PP×DP"), Column("KV")]
        columns += [Column("draft")] if show_draft else []
        columns += [Column("conc.", "right"), Column("KV tokens", "right", drop=2),
                    Column("headroom", "right", drop=1), Column("USD/h", "right")]
        rows: list[list[str | Text]] = []
        for i, c in enumerate(fit.candidates, 1):
            usd = "-" if c.usd_per_hour is None else f"{c.usd_per_hour:.2f}"
            name = short_gpu_name(c.gpu) + ("*" if c.total_memory_nominal else "")
            kv = "=".join([c.kv_cache_dtype, *c.merged_kv_cache_dtypes]) + (
                " (deq.)" if c.kv_cache_dequantised else "")
            row: list[str | Text] = [str(i)]
            row += [_ENGINE[c.engine]] if both else []
            row += [name, str(c.num_gpus),
                    f"{c.tensor_parallel_size}×{c.pipeline_parallel_size}×"
                    f"{c.data_parallel_size}", kv]
            row += ["on" if c.speculative else "off"] if show_draft else []
            row += [(f"{c.workload_concurrency}" if c.workload_concurrency is not None
                     else f"{c.max_concurrency:.1f}"), f"{c.kv_cache_size_tokens:,}",
                    f"{c.headroom_pct:+.0f}%", usd]
            rows.append(row)
        print_table(console, columns, rows, title="cheapest first (USD per hour, then GPU count)",
                    what="deployment")
        for i, c in enumerate(fit.candidates, 1):
            console.print(f"{i}. [dim]$[/] {escape(c.vllm_serve or c.sglang_launch or '')}",
                          soft_wrap=True)
            console.print(f"   [dim]check:[/] {escape(c.kvplan_check)}", soft_wrap=True)
        console.print("[dim]conc. = " + (f"{t.workload} requests vLLM's scheduler runs at once "
                                          "without preemption" if t.workload else
                                          "the requests of max_model_len the KV tokens hold "
                                          "(vLLM's maximum concurrency; SGLang's tokens / "
                                          "max_model_len)" if both else
                                          "SGLang's tokens / max_model_len"
                                          if t.engines == ["sglang"] else
                                          "vLLM's maximum concurrency at max_model_len")
                      + " × DP; KV tokens per replica; headroom = conc. over the target"
                      + ("; KV a=b: both planned identically (one row)" if any(
                          c.merged_kv_cache_dtypes for c in fit.candidates) else "")
                      + ("; (deq.) the GPU has no hardware for this KV dtype: "
                         + " and ".join(dict.fromkeys(_ENGINE[c.engine] for c in fit.candidates
                                                      if c.kv_cache_dequantised))
                         + " serves it dequantised, memory as planned, attention no faster "
                         "than bfloat16" if any(c.kv_cache_dequantised for c in fit.candidates)
                         else "")
                      + ("; * nominal GPU memory (the vendor's capacity less a typical "
                         "reserve, not measured): ranked on that estimate; its check line takes "
                         "--gpu-memory with the real total" if any(
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
    by_dtype: dict[tuple[str, str, str], list[str]] = {}
    by_reason: dict[str, list[str]] = {}
    for s in fit.skipped:
        if s.kv_cache_dtype is not None:
            key = (s.engine, s.kv_cache_dtype, s.support or "refused")
            names = by_dtype.setdefault(key, [])
            if short_gpu_name(s.gpu) not in names:
                names.append(short_gpu_name(s.gpu))
        else:
            by_reason.setdefault(s.reason, []).append(
                f"TP {s.tensor_parallel_size}×PP {s.pipeline_parallel_size}"
                if s.tensor_parallel_size is not None else short_gpu_name(s.gpu))
    for (engine, dt, support), names in by_dtype.items():
        who = f"{_ENGINE[engine]}: " if both else ""
        server = (f"vLLM {t.vllm_version}" if engine == "vllm"
                  else f"SGLang {t.sglang_version}")
        listed = escape(", ".join(names[:6])) + (f" and {len(names) - 6} more"
                                                 if len(names) > 6 else "")
        if support == "dequantised":
            console.print(f"[dim]not tried: {who}{dt} KV on {len(names)} GPU type(s) where "
                          f"{server} serves it only dequantised ({listed}); name it "
                          f"with --kv-cache-dtype {dt} to include them; reasons in --json[/]")
        else:
            console.print(f"[dim]not tried: {who}{dt} KV on {len(names)} GPU type(s) where "
                          f"{server} has no attention backend for it ({listed}); "
                          "reasons in --json[/]")
    for reason, shapes in by_reason.items():
        console.print(f"[dim]not plannable: {escape(', '.join(dict.fromkeys(shapes)))}: "
                      f"{escape(reason)}[/]")
    console.print(f"[dim]{fit.planned:,} replica shapes planned, {fit.pruned:,} skipped because "
                  f"they cannot be cheaper; {fit.num_fitting:,} meet the target.[/]")
