"""Render `kvplan gpus` (the GPU catalogue) and `kvplan layers` (a model's layers as vLLM's
workers would report them). Renders only."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from kvplan.output.report import SHORT_KIND
from kvplan.output.tables import Column, print_table

_SUPPORT_CELL = {"native": "native", "dequantised": "deq.", "refused": "-"}


def render_gpus(rows: list, console: Console, *, support: dict,  # type: ignore[type-arg]
                vllm_version: str) -> None:
    """The catalogue; the fp8 / nvfp4 KV columns are the support table at `vllm_version`
    (`support`: GPU name → `kv_dtype_support.support_summary`)."""
    columns = [Column("name", wrap=True, key=True, bare=True), Column("arch", wrap=True, drop=1),
               Column("memory", "right"), Column("fp8 KV"), Column("nvfp4 KV"),
               Column("USD/h", "right")]
    cells: list[list[str | Text]] = []
    for g in rows:
        mem = f"{g.total_memory_bytes / 2**30:.2f} GiB" if g.total_memory_bytes else "unmeasured"
        if g.total_memory_nominal:
            mem += "*"
        price = "-" if g.usd_per_hour is None else f"{g.usd_per_hour:.2f}" + (
            "~" if (g.usd_per_hour_source or "").startswith("estimate") else "")
        kv = support[g.name]
        cells.append([g.name, g.arch, mem, _SUPPORT_CELL[kv["fp8"]["support"]],
                      _SUPPORT_CELL[kv["nvfp4"]["support"]], price])
    print_table(console, columns, cells, what="GPU",
                title="GPU catalogue (memory as the CUDA/HIP runtime reports it)")
    console.print(f"[dim]fp8 / nvfp4 KV in vLLM {vllm_version} (--vllm for another): native; "
                  "deq. = served dequantised (no such hardware: memory as planned, no speed-up); "
                  "- = no attention backend, vLLM fails at start-up. The paths: --json.[/]")
    console.print("[dim]* nominal: the vendor's capacity less the runtime reserve, not measured; "
                  "pass --gpu-memory with the runtime total (torch.cuda.mem_get_info()[1]).[/]")
    console.print("[dim]USD/h: typical on-demand price per GPU (~ = estimate); sources in "
                  "`kvplan gpus --json` and docs/gpu-catalogue.md; override with --price GPU=USD.[/]")


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
    columns = [Column("#", "right", key=True, bare=True), Column("n", "right", key=True),
               Column("kind", wrap=True, key=True, bare=True),
               Column("heads×dim", "right", wrap=True), Column("window", "right"),
               Column("dtype", wrap=True), Column("block", "right"), Column("B/token", "right")]
    cells: list[list[str | Text]] = []
    legend = []
    for i, group in enumerate(same.values(), 1):
        r = group[0]
        dtype, _, quant = r.dtype.partition(" (")
        per_tok = r.page_bytes_per_token
        if "/" in per_tok and " " not in per_tok:  # an exact fraction: shown rounded
            num, den = per_tok.split("/")
            per_tok = f"≈{int(num) / int(den):.2f}"
        per_tok = per_tok.replace(" state", "/req")
        cells.append([str(i), str(len(group)),
                      _LAYER_KIND.get(r.kind, r.kind) + (" (draft)" if r.draft else ""),
                      r.heads_x_dim.replace(" × ", "×"), f"{r.window:,}" if r.window else "-",
                      dtype.replace("/", "/ ") + ("*" if quant else ""),
                      f"{r.block_size_tokens:,}", per_tok])
        extra = [x for x in (r.backend, quant.rstrip(")") and f"KV quant {quant.rstrip(')')}")
                 if x]
        legend.append(f"{i}: {escape(compact_layer_range([x.name for x in group]))}"
                      + (f" [dim]({escape(', '.join(extra))})[/]" if extra else ""))
    print_table(console, columns, cells, what="kind of layer",
                title="Layers as vLLM's workers would report them (per TP rank)")
    for line in legend:
        console.print(line)
    console.print("[dim]n: layers with these numbers (their names above, by row) · heads×dim: KV "
                  "heads × head size per rank, K/V when they differ; state layers: the state "
                  "shapes · window: sliding window or chunk (tokens) · dtype*: quantized KV (mode "
                  "above) · block: tokens per block · B/token: page bytes ÷ block tokens (≈: not "
                  "a whole number; exact in --json) · /req: a state layer's bytes per request[/]")
