"""A vLLM start-up log beside kvplan's plan of the same deployment: every figure the log states
(whether the server started, the attention block size, the KV memory needed and available, the
estimated maximum length, the GPU KV cache size, the blocks, the concurrency) that the plan does
not reproduce is a `LogDisagreement`, with both values and the likely reasons (the release, the
flags, the model, the budget). `kvplan check --from-log` prints each as a `warning:` and lists
them under `disagreements` in the JSON.

Tolerances are the log's own rounding only: vLLM prints memory with `format_gib` (2 decimals) and
concurrency with `%.2f`; when the budget came from the log's rounded memory, a count derived from
it may move by that rounding (±0.005 GiB) plus one block. Nothing else is forgiven.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from kvplan.frozen import Frozen

# `plan` below is an `analysis.plan.Plan` (which holds these disagreements: not imported here);
# `log` a `sources.vllm_log.VllmLog` (log parsing loads only on the paths that read a log)
Plan = Any
VllmLog = Any

LOG_ROUNDING_GIB = 0.005  # format_gib rounds to 2 decimals


class LogDisagreement(Frozen):
    """One figure of a vLLM log that kvplan's plan does not reproduce."""

    figure: str = Field(description="what differs: verdict, attention block size, KV needed, "
                                    "available KV memory, estimated max_model_len, GPU KV cache "
                                    "size, GPU blocks, max concurrency")
    logged: str = Field(description="the log's value, as the log states it")
    kvplan: str = Field(description="kvplan's value for the same figure")
    likely_reasons: list[str] = Field(default_factory=list,
                                      description="why they may differ, most likely first")

    @property
    def text(self) -> str:
        why = "; ".join(self.likely_reasons) or "unknown"
        return (f"the log disagrees on the {self.figure}: the log says {self.logged}, kvplan "
                f"{self.kvplan}. Likely reasons: {why}")


def disagreement_warning(found: Sequence[LogDisagreement]) -> str:
    """All of a log's disagreements as one warning: each figure with both values, then the
    likely reasons once each (most likely first; the flags' hints of every figure merged)."""
    figures = "; ".join(f"{d.figure}: log {d.logged}, kvplan {d.kvplan}" for d in found)
    merged: dict[str, tuple[str, list[str]]] = {}
    for d in found:
        for reason in d.likely_reasons:
            base, hint = _split_hint(reason)
            key = base.split(":", 1)[0]
            text, hints = merged.setdefault(key, (base, []))
            hints += [h for h in hint if h not in hints]
    reasons = [text + (f" ({', '.join(hints)})" if hints else "")
               for text, hints in merged.values()]
    return (f"the log disagrees with this plan on {len(found)} figure"
            f"{'s' if len(found) > 1 else ''} — {figures}. Likely reasons, most likely first: "
            + "; ".join(reasons))


_HINT = " — check "


def _split_hint(reason: str) -> tuple[str, list[str]]:
    base, _, hint = reason.partition(_HINT)
    return base, [h.strip() for h in hint.split(",") if h.strip()]


def _major_minor(version: str | None) -> tuple[str, ...]:
    return tuple((version or "").split(".")[:2])


class _Reasons:
    """The likely reasons, worded once per log and plan."""

    def __init__(self, log: VllmLog, plan: Plan, provenance: Mapping[str, str],
                 log_keys: Sequence[str], unmodelled: Sequence[str]) -> None:
        v, p = log.version, plan.vllm_version or "?"
        if v is None:
            self.release = (f"the release: the log does not name its vLLM version; kvplan "
                            f"planned with its {p} profile (--vllm picks another)")
        elif _major_minor(v) != _major_minor(p):
            self.release = (f"the release: the log is from vLLM {v}, kvplan planned with its {p} "
                            "profile (kvplan models 0.31-0.34; older rules differ)")
        else:
            self.release = (f"the release: vLLM {v} as the server ran it (a dev build, a patch, a "
                            f"platform plugin) may differ from kvplan's {p} profile")
        # a log key planned from elsewhere (or dropped, as a budget the command line replaced)
        changed = sorted(k for k in log_keys if provenance.get(k) != "log"
                         and k not in ("model", "draft"))  # the model is its own reason
        flags = []
        if changed:
            flags.append("the command line replaced the log's " + ", ".join(changed))
        if unmodelled:
            flags.append("the log sets flags kvplan does not model: " + ", ".join(unmodelled))
        flags.append("flags the log does not show (its engine-config line may be cut) were "
                     "taken as vLLM's defaults")
        self.flags = "the flags: " + "; ".join(flags)
        model_source = provenance.get("model")
        other_model = bool(log.model) and model_source not in (None, "log") and not _same_model(
            log.model, plan.model)
        if other_model:
            self.model = (f"the model: the log served {log.model}, kvplan read {plan.model} "
                          f"(given on the {model_source})")
        elif log.model and model_source not in (None, "log"):
            self.model = (f"the model: kvplan read {plan.model} for the log's {log.model}; a copy "
                          "may differ from what the server loaded")
        else:
            self.model = (f"the model: kvplan read {plan.model} as it is now; the server may have "
                          "loaded another revision or a local copy")
        spec = log.speculative_config or {}
        logged_draft = spec.get("model") if isinstance(spec, dict) else None
        other_draft = bool(logged_draft and plan.draft and not _same_model(logged_draft,
                                                                           plan.draft))
        if other_draft:
            self.model += f"; its draft was {logged_draft}, kvplan's is {plan.draft}"
        mode = plan.budget_mode
        budget_from = provenance.get("kv_cache_memory") or provenance.get("available_kv_gib")
        if "log" in mode:
            self.budget = (f"the budget: the log rounds memory to 0.01 GiB (±{LOG_ROUNDING_GIB} "
                           "GiB), kvplan planned with the rounded value")
        elif budget_from == "log":
            self.budget = ("the budget: the log's own kv_cache_memory_bytes, as kvplan planned "
                           "it (vLLM may still have had less)")
        else:
            self.budget = (f"the budget: kvplan's is {mode}, not the memory the logged server "
                           "measured")
        # most likely first: what is known to differ, then what may
        self.strong = {
            "model": other_model or other_draft,
            "flags": bool(changed),
            "release": v is None or _major_minor(v) != _major_minor(p),
            "budget": "log" not in mode and budget_from != "log",
        }

    def order(self, reasons: Sequence[str]) -> list[str]:
        def weak(reason: str) -> bool:
            return not self.strong.get(reason.split(":", 1)[0].removeprefix("the "), False)
        return sorted(reasons, key=weak)  # stable: the given order within each rank


def _same_model(logged: str, read: str) -> bool:
    """A hub id and what kvplan read name the same model: equal, or the path holds the id's
    name (a local copy such as `Org--Name/config.json` or `models/Name`)."""
    if logged == read:
        return True
    name = logged.rstrip("/").rsplit("/", 1)[-1]
    parts = read.replace("\\", "/").split("/")
    return any(p == name or p.endswith("--" + name) for p in parts)


def _num(x: float) -> str:
    return f"{x:,.2f}".rstrip("0").rstrip(".") if x != int(x) else f"{int(x):,}"


def compare_with_log(log: VllmLog, plan: Plan, *, provenance: Mapping[str, str] | None = None,
                     log_keys: Sequence[str] = (), unmodelled: Sequence[str] = (),
                     budget_from_capacity_error: bool = False) -> list[LogDisagreement]:
    """Every figure `log` states that `plan` does not reproduce (see the module's tolerances).
    `log_keys`: the deployment keys the log supplied; `provenance`: where each planned value
    came from (log, serve line, command line); `unmodelled`: the log's flags kvplan ignores;
    `budget_from_capacity_error`: the budget is the capacity error's available memory (so that
    figure agrees by construction)."""
    r = _Reasons(log, plan, provenance or {}, log_keys, unmodelled)
    out: list[LogDisagreement] = []

    def add(figure: str, logged: str, ours: str, *reasons: str) -> None:
        out.append(LogDisagreement(figure=figure, logged=logged, kvplan=ours,
                                   likely_reasons=r.order(reasons)))

    # how far a count derived from the budget may move with the log's rounding
    avail = min(plan.available_kv_bytes, default=0)
    slack = (LOG_ROUNDING_GIB * 2**30 / avail) if "log" in plan.budget_mode and avail > 0 else 0.0
    largest_block = max((g.block_size_tokens for g in plan.groups), default=1)

    err = log.capacity_error
    if err is not None and plan.fits:
        what = {"max_seq_len": "vLLM refused to start: the KV cache does not hold one request "
                               f"of {err.max_model_len or '?'} tokens",
                "max_seq_len_tokens": "vLLM refused to start: max seq len above the KV cache "
                                      "capacity",
                "no_memory": "vLLM refused to start: no memory for the cache blocks",
                "auto_fit": "vLLM refused to start: it cannot auto-fit max_model_len"}
        add("verdict", what.get(err.kind, "vLLM refused to start"), "FITS", r.budget, r.flags,
            r.model, r.release)
    elif err is None and log.kv_cache_size_tokens and not plan.fits:
        add("verdict", f"vLLM started (GPU KV cache size {log.kv_cache_size_tokens[0]:,} tokens)",
            plan.verdict.value, r.budget, r.flags, r.model, r.release)

    if log.attention_block_size is not None:
        attention = sorted({g.block_size_tokens for g in plan.groups
                            if g.kind != "mamba" and not g.is_draft})
        if attention and log.attention_block_size not in attention:
            add("attention block size", f"{log.attention_block_size:,} tokens ('Setting "
                "attention block size to …')", " / ".join(f"{b:,}" for b in attention) + " tokens",
                r.release, r.flags + _HINT + "--block-size, --attention-backend, the KV dtype",
                r.model)

    if err is not None and err.needed_gib is not None and plan.total_gib_needed:
        ours = [float(x) for x in plan.total_gib_needed]
        if not any(abs(x - err.needed_gib) <= 0.0051 for x in ours):
            add("KV needed for one request", f"{_num(err.needed_gib)} GiB",
                " / ".join(plan.total_gib_needed) + " GiB", r.flags + _HINT + "max_model_len, the "
                "KV dtype, the draft", r.model, r.release)
    if err is not None and err.available_gib is not None and plan.check_gib \
            and not budget_from_capacity_error:
        ours = [float(x) for x in plan.check_gib]
        if not any(abs(x - err.available_gib) <= 0.0051 + LOG_ROUNDING_GIB for x in ours):
            add("available KV memory (after the null block)", f"{_num(err.available_gib)} GiB",
                " / ".join(plan.check_gib) + " GiB", r.budget, r.release)
    if err is not None and err.estimated_max_model_len and plan.estimated_max_model_len \
            and not plan.fits:  # a plan that fits has no estimate of its own (the verdict differs)
        ours_len = min(plan.estimated_max_model_len)
        if abs(ours_len - err.estimated_max_model_len) > (err.estimated_max_model_len * slack
                                                           + largest_block):
            add("estimated maximum model length", f"{err.estimated_max_model_len:,}",
                f"{ours_len:,}", r.budget, r.flags, r.model, r.release)
    if log.kv_cache_size_tokens and plan.kv_cache_size_tokens is not None:
        logged = log.kv_cache_size_tokens[0]
        if abs(plan.kv_cache_size_tokens - logged) > logged * slack + largest_block:
            add("GPU KV cache size", f"{logged:,} tokens", f"{plan.kv_cache_size_tokens:,} tokens",
                r.budget, r.flags, r.model, r.release)
    if log.gpu_blocks is not None and plan.num_blocks is not None:
        if abs(plan.num_blocks - log.gpu_blocks) > log.gpu_blocks * slack + 1:
            add("number of GPU blocks", f"{log.gpu_blocks:,}", f"{plan.num_blocks:,}", r.budget,
                r.flags, r.model, r.release)
    if log.max_concurrency and plan.max_concurrency is not None:
        logged_c = log.max_concurrency[0]
        per_block = plan.max_concurrency / plan.num_blocks if plan.num_blocks else 0.0
        if abs(plan.max_concurrency - logged_c) > logged_c * slack + 0.0051 + per_block:
            tokens = (f" for {log.max_concurrency_tokens:,} tokens"
                      if log.max_concurrency_tokens else "")
            add("maximum concurrency", f"{logged_c:.2f}x{tokens}", f"{plan.max_concurrency:.2f}x",
                r.budget, r.flags, r.model, r.release)
    if log.max_concurrency_tokens and plan.max_concurrency is not None \
            and log.max_concurrency_tokens != plan.max_model_len_after_planning:
        add("max_model_len of the capacity line", f"{log.max_concurrency_tokens:,} tokens",
            f"{plan.max_model_len_after_planning:,} tokens", r.flags, r.model, r.release)
    return out
