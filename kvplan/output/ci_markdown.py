"""`kvplan ci --format markdown`: one table of every deployment and, under it, why each one that
does not fit (or could not be planned) fails — for a pull-request comment. Renders only."""

from __future__ import annotations

from typing import Any


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _verdict(entry: Any) -> str:
    p = entry.plan
    if p is None:
        return "**ERROR**"
    if p.refused_at_startup:
        return f"**DOES NOT FIT** (refused: {p.failure_cause})"
    if p.fits:
        return "FITS"
    return f"**{p.verdict.value}**" + (f" ({p.failure_cause})" if p.failure_cause else "")


def render_batch_markdown(batch: Any) -> str:
    entries = batch.entries
    fit = sum(1 for e in entries if e.fits)
    lines = [f"### kvplan ci: {fit} of {len(entries)} deployments fit", "",
             "| deployment | verdict | KV needed GiB | available GiB | largest max_model_len "
             "that fits | max concurrency |",
             "|---|---|---:|---:|---:|---:|"]
    for e in entries:
        p = e.plan
        if p is None or p.refused_at_startup:
            lines.append(f"| {_cell(e.name)} | {_verdict(e)} | - | - | - | - |")
            continue
        if p.engine == "sglang":  # SGLang's own figures: its token pool, its request cap
            from kvplan.output.sglang_report import batch_cells

            lines.append(f"| {_cell(e.name)} | {_verdict(e)} | "
                         + " | ".join(_cell(c) for c in batch_cells(p)) + " |")
            continue
        largest = f"{min(p.estimated_max_model_len):,}" if p.estimated_max_model_len else "-"
        conc = f"{p.max_concurrency:.2f}x" if p.max_concurrency is not None else "-"
        lines.append(f"| {_cell(e.name)} | {_verdict(e)} | {' / '.join(p.total_gib_needed) or '-'}"
                     f" | {' / '.join(p.check_gib) or '-'} | {largest} | {conc} |")
    details = []
    for e in entries:
        p = e.plan
        if p is None:
            why = f"{e.error}" + (f" — {e.hint}" if e.hint else "")
        elif p.fits:
            continue
        elif p.engine == "sglang":
            from kvplan.output.sglang_report import failure_line

            why = failure_line(p) or "does not fit"
        elif p.refused_at_startup:
            why = (f"vLLM {p.vllm_version} refuses it at start-up ({p.failure_cause}), before it "
                   f"sizes the KV cache: `{p.error_type}: {p.error_message}`"
                   + (f" What helps: {p.failure_hint}" if p.failure_hint else ""))
        elif p.weights_limit is not None:
            why = p.weights_limit.summary
        else:
            why = (f"vLLM {p.vllm_version} would raise `{p.error_type}: {p.error_message}`"
                   if p.error_message else "does not fit")
        details.append(f"- **{_cell(e.name)}**: {' '.join(why.split())}")
    if details:
        lines += ["", *details]
    return "\n".join(lines) + "\n"
