"""`kvplan ci FILE`: several named deployments from a TOML (or YAML) file → plans + a summary."""

from __future__ import annotations

import os
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from pydantic import Field

from kvplan import __version__
from kvplan.analysis.plan import Plan
from kvplan.engines.vllm.build import Deployment
from kvplan.errors import EXIT_DOES_NOT_FIT, EXIT_FITS, InputError, KvplanError
from kvplan.frozen import Frozen
from kvplan.pipeline.deploy import Request, evaluate_plan
from kvplan.units import parse_kv_cache_memory_bytes, parse_size_bytes, read_tokens

# deployment-file keys (vLLM flag names, dashes or underscores) → Request / Deployment fields
REQUEST_KEYS = {"model", "revision", "draft", "gpu", "gpu_memory", "gpu_memory_utilization",
                "kv_cache_memory", "kv_cache_memory_bytes", "available_kv_gib",
                "data_parallel_size", "enforce_eager", "speculative_config", "serve", "name",
                "hf_overrides", "trust_remote_code", "config_format"}
DEPLOYMENT_KEYS = {f.name for f in fields(Deployment)} - {
    "sm", "gpu_name", "gpu_total_memory_bytes", "available_kv_bytes"}
ALIASES = {"vllm": "vllm_version", "kv_dtype": "kv_cache_dtype", "tp": "tensor_parallel_size",
           "pp": "pipeline_parallel_size", "dp": "data_parallel_size", "fix": "with_fix",
           "dcp": "decode_context_parallel_size"}


class BatchEntry(Frozen):
    name: str
    fits: bool | None = Field(description="None: the entry could not be planned (error, hint)")
    plan: Plan | None = Field(default=None, description="also for a deployment vLLM refuses at "
                              "start-up (plan.refused_at_startup, plan.failure_cause)")
    error: str | None = None
    hint: str | None = None
    exit_code: int = Field(default=EXIT_FITS, description="kvplan check's exit code for this "
                           "entry: 0 fits, 1 does not fit (or refused), 2 bad entry")


class Batch(Frozen):
    schema_version: int = 1
    kvplan_version: str = __version__
    entries: list[BatchEntry]

    @property
    def all_fit(self) -> bool:
        return all(e.fits for e in self.entries)

    @property
    def exit_code(self) -> int:
        """The worst entry's: 2 if any could not be planned, else 1 if any does not fit."""
        return max((e.exit_code for e in self.entries), default=EXIT_FITS)


def _norm(key: str) -> str:
    k = key.strip().replace("-", "_")
    return ALIASES.get(k, k)


SERVE_ONLY_KEYS = {"model_tag", "max_num_seqs", "config", "served_model_name", "tokenizer"}


def serve_options(options: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """vLLM dest-name options (a serve line, a log's non-default args) → deployment-file keys;
    the ones kvplan does not model are returned as notes."""
    known = REQUEST_KEYS | DEPLOYMENT_KEYS
    out, skipped = {}, []
    for k, v in options.items():
        key = _norm(k)
        if key == "kv_cache_memory_bytes":
            out["kv_cache_memory"] = v
        elif key in known:
            out[key] = v
        elif key not in SERVE_ONLY_KEYS:
            skipped.append(k)
    return out, skipped


# what the resolved fields of a log (engine-config line over non-default args) set
_LOG_FIELDS = {"max_seq_len": "max_model_len", "tensor_parallel_size": "tensor_parallel_size",
               "pipeline_parallel_size": "pipeline_parallel_size",
               "decode_context_parallel_size": "decode_context_parallel_size",
               "data_parallel_size": "data_parallel_size", "kv_cache_dtype": "kv_cache_dtype",
               "enable_prefix_caching": "enable_prefix_caching", "block_size": "block_size",
               "speculative_config": "speculative_config"}
BUDGET_KEYS = ("kv_cache_memory", "available_kv_gib")


def log_entry(log: Any) -> tuple[dict[str, Any], list[str], list[str]]:
    """The deployment a vLLM start-up log (`VllmLog`) describes, as deployment-file keys:
    its non-default args, the values its engine-config line resolved, its release and its
    logged KV memory. Returns (entry, flags kvplan does not model, notes)."""
    from kvplan.engines.vllm.profiles import PROFILES

    entry, skipped = serve_options(dict(log.non_default_args))
    notes: list[str] = []
    auto = str(entry.get("max_model_len", "")).strip().lower() in ("-1", "auto")
    for field, key in _LOG_FIELDS.items():
        value = getattr(log, field)
        if value is not None and not (key == "max_model_len" and auto):
            entry[key] = value
    if log.model:
        entry["model"] = log.model
    if log.version:
        v = ".".join(log.version.split(".")[:2]) + ".0"
        if v in PROFILES:
            entry["vllm"] = v
        else:
            notes.append(f"the log is from vLLM {log.version}; planned with the newest profile "
                         "kvplan has (pass --vllm to choose)")
    if "kv_cache_memory" not in entry and log.limiting_available_kv_cache_gib is not None:
        entry["available_kv_gib"] = log.limiting_available_kv_cache_gib
    elif "kv_cache_memory" not in entry and (gib := capacity_error_budget_gib(log)) is not None:
        entry["available_kv_gib"] = gib
        notes.append(f"the log's only KV memory figure is its capacity error's 'available KV "
                     f"cache memory ({gib} GiB)': planned as the budget (that figure is after "
                     "vLLM's null block; kvplan adds the block back)")
    return entry, skipped, notes


def capacity_error_budget_gib(log: Any) -> float | None:
    """The capacity error's "available KV cache memory (X GiB)" when the log has no other KV
    memory line (PP workers whose lines were not captured, a pasted traceback): X, else None."""
    err = log.capacity_error
    if log.limiting_available_kv_cache_gib is not None or err is None:
        return None
    return err.available_gib  # type: ignore[no-any-return]


def layer_entries(layers: list[tuple[str, dict[str, Any]]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Deployment-file entries merged in order, the later winning key by key (e.g. log <
    serve line < command line), and where each value came from. A budget key (kv_cache_memory,
    available_kv_gib) replaces the other one of any earlier layer, and an earlier layer's
    gpu_memory_utilization, which a given budget makes moot."""
    entry: dict[str, Any] = {}
    source: dict[str, str] = {}
    for name, layer in layers:
        layer = {_norm(k): v for k, v in layer.items() if v is not None}
        if any(k in layer for k in BUDGET_KEYS):
            for k in (*BUDGET_KEYS, "gpu_memory_utilization"):
                if k not in layer:
                    entry.pop(k, None)
                    source.pop(k, None)
        for k, v in layer.items():
            entry[k] = v
            source[k] = name
    return entry, source


def _file_path(value: Any, base_dir: Path | None) -> Any:
    """A model or draft of a deployments file: a path is relative to the file's folder (never the
    current directory); a hub id (ORG/NAME[@REV]) stays one unless that folder holds such a
    path."""
    from kvplan.sources.hub import is_hub_id

    if base_dir is None or not isinstance(value, str) or not value.strip():
        return value
    path = Path(os.path.expanduser(value))
    if path.is_absolute():
        return value
    candidate = base_dir / path
    if candidate.exists() or not is_hub_id(value):
        return str(candidate)  # (a missing path: the error names where it was looked for)
    return value


def request_from_entry(entry: dict[str, Any], defaults: dict[str, Any], where: str,
                       base_dir: Path | None = None) -> Request:
    """One `[[deployment]]` table (over `[defaults]`) → Request. `base_dir`: the deployments
    file's folder, which relative model and draft paths are read from."""
    own = {_norm(k): v for k, v in entry.items()}
    budget = ("kv_cache_memory", "kv_cache_memory_bytes", "available_kv_gib")
    for table, what in ((own, "the entry"), ({_norm(k): v for k, v in defaults.items()},
                                             "[defaults]")):
        if sum(1 for k in budget if table.get(k) is not None) > 1:
            raise InputError(f"{where}: {what} sets the KV cache budget twice ("
                             + ", ".join(k.replace("_", "-") for k in budget
                                         if table.get(k) is not None) + ")",
                             hint="give one: kv-cache-memory or available-kv-gib")
    # an entry's budget replaces the one of [defaults]
    merged = {_norm(k): v for k, v in defaults.items()
              if not (_norm(k) in budget and any(own.get(b) is not None for b in budget))}
    merged.update(own)
    unknown = sorted(set(merged) - REQUEST_KEYS - DEPLOYMENT_KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {unknown}",
                         hint="keys are vLLM flag names (max-model-len, kv-cache-dtype, ...)")
    if "serve" in merged:
        from kvplan.sources.serve_line import parse_serve_command

        cmd = parse_serve_command(str(merged.pop("serve")))
        opts, _ = serve_options(cmd.options)
        base = {"model": cmd.model, **opts}
        base.update({k: v for k, v in merged.items()})
        merged = base
    if "model" not in merged:
        raise InputError(f"{where}: no model", hint="add model = \"org/name\" (or serve = \"vllm serve ...\")")
    spec_cfg = merged.pop("speculative_config", None) or {}
    if isinstance(spec_cfg, str):
        import json

        try:
            spec_cfg = json.loads(spec_cfg)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: speculative_config is not JSON ({exc.msg})") from None
    dep_kw = {k: merged.pop(k) for k in list(merged) if k in DEPLOYMENT_KEYS}
    if spec_cfg:
        dep_kw.setdefault("speculative_method", spec_cfg.get("method"))
        dep_kw.setdefault("num_speculative_tokens", int(spec_cfg.get("num_speculative_tokens") or 0))
        if spec_cfg.get("kv_cache_dtype"):
            dep_kw.setdefault("draft_kv_cache_dtype", spec_cfg["kv_cache_dtype"])
        if spec_cfg.get("model"):
            merged.setdefault("draft", spec_cfg["model"])
    # lengths as vLLM reads them (human_readable_int[_or_auto]: 128k = 128,000, 128K = 131,072)
    if dep_kw.get("max_model_len") is not None:
        n = _entry_value(where, read_tokens, dep_kw["max_model_len"], "--max-model-len",
                         auto=True)
        dep_kw["max_model_len"] = None if n == -1 else n
        if n == -1:
            dep_kw["auto_fit_max_model_len"] = True
    if dep_kw.get("max_num_batched_tokens") is not None:
        dep_kw["max_num_batched_tokens"] = _entry_value(
            where, read_tokens, dep_kw["max_num_batched_tokens"], "--max-num-batched-tokens")
    try:
        dep = Deployment(**dep_kw)
    except TypeError as exc:
        raise InputError(f"{where}: {exc}") from None
    except InputError as exc:  # a value Deployment refuses (e.g. tensor_parallel_size = 0)
        raise InputError(f"{where}: {exc.message}", hint=exc.hint) from None
    kv_mem = merged.pop("kv_cache_memory", None)
    kv_mem = merged.pop("kv_cache_memory_bytes", None) if kv_mem is None else kv_mem
    gpu_mem = merged.pop("gpu_memory", None)
    if "hf_overrides" in merged:
        from kvplan.models.resolution.overrides import hf_overrides_json

        merged["hf_overrides"] = hf_overrides_json(merged["hf_overrides"])
    name = str(merged.pop("name", merged["model"]))
    if merged.get("draft") is not None:
        merged["draft"] = _file_path(merged["draft"], base_dir)
    return Request(model=str(_file_path(merged.pop("model"), base_dir)), deployment=dep, label=name,
                   kv_cache_memory_bytes=(_entry_value(where, parse_kv_cache_memory_bytes, kv_mem,
                                                       "kv-cache-memory")
                                          if kv_mem is not None else None),
                   gpu_memory_bytes=(_entry_value(where, parse_size_bytes, gpu_mem, "gpu-memory")
                                     if gpu_mem is not None else None),
                   **{k: v for k, v in merged.items() if k in REQUEST_KEYS})


def _entry_value(where: str, read: Any, value: Any, key: str, **kw: Any) -> Any:
    """`read(value, key)`, its error prefixed with the entry it comes from."""
    try:
        return read(value, key, **kw)
    except InputError as exc:
        raise InputError(f"{where}: {exc.message}", hint=exc.hint) from None


def parse_deployments(data: Any) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    if not isinstance(data, dict):
        raise InputError("a deployments file must be a table with [[deployment]] entries")
    defaults = data.get("defaults") or {}
    entries = data.get("deployment") or data.get("deployments")
    if not isinstance(entries, list) or not entries:
        raise InputError("no [[deployment]] entries in the file",
                         hint="see examples/deployments.toml")
    out = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise InputError(f"deployment #{i + 1} must be a table")
        out.append((str(e.get("name", f"#{i + 1}")), e, defaults))
    return out


def run_batch(data: Any, *, vllm_version: str | None = None,
              allow_long_max_model_len: bool = False, engine: str | None = None,
              base_dir: Path | None = None) -> Batch:
    """Validate every entry first (a bad file is one error, exit 2), then plan them all: each
    entry is reported — one that the server refuses at start-up as a plan that does not fit, one
    that cannot be planned (a model not found, a cache miss) with its error (`Batch.exit_code`:
    the worst). `allow_long_max_model_len`: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in the environment;
    `engine` plans every entry with that server, else each entry's `engine` key (default vLLM);
    `base_dir`: the file's folder (relative paths)."""
    from kvplan.pipeline.sglang_batch import entry_engine, sglang_entry_request

    requests: list[tuple[str, Any]] = []
    for name, entry, defaults in parse_deployments(data):
        if entry_engine(entry, defaults, engine) == "sglang":
            sreq = sglang_entry_request(entry, defaults, f"deployment {name!r}")
            requests.append((name, replace(sreq, model=str(_file_path(sreq.model, base_dir)))))
            continue
        entry = {k: v for k, v in entry.items() if k != "engine"}
        defaults = {k: v for k, v in defaults.items() if k != "engine"}
        req = request_from_entry(entry, defaults, f"deployment {name!r}", base_dir)
        if vllm_version:
            req = replace(req, deployment=replace(req.deployment, vllm_version=vllm_version))
        if allow_long_max_model_len:
            req = replace(req, deployment=replace(req.deployment, allow_long_max_model_len=True))
        requests.append((name, req))
    entries = []
    for name, req in requests:
        try:
            if isinstance(req, Request):
                plan = evaluate_plan(req)
            else:  # an SGLang entry
                from kvplan.pipeline.sglang import evaluate_sglang

                plan = evaluate_sglang(req)
        except KvplanError as exc:
            entries.append(BatchEntry(name=name, fits=None, error=" ".join(exc.message.split()),
                                      hint=exc.hint, exit_code=exc.exit_code))
            continue
        entries.append(BatchEntry(name=name, fits=plan.fits, plan=plan,
                                  exit_code=EXIT_FITS if plan.fits else EXIT_DOES_NOT_FIT))
    return Batch(entries=entries)
