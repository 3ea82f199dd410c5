"""What a user asks for one deployment (`Request`: CLI flags, a serve line, a CI entry), loaded
(`Resolved`: the configs read through `kvplan.sources.hub`, described, with the checkpoint's
safetensors headers), and the catalogue GPU it names."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvplan.engines.vllm.build import Deployment
from kvplan.errors import UnsupportedError
from kvplan.models.description import ModelDescription

if TYPE_CHECKING:
    from kvplan.sources.vllm_log import LoggedMemory


@dataclass(frozen=True)
class Request:
    """Everything a user says about one deployment (CLI flags, a serve line, a CI entry)."""

    model: str
    deployment: Deployment = field(default_factory=Deployment)
    revision: str | None = None
    draft: str | None = None
    # speculative_config.draft_model_config.hf_config (extract_hidden_states reads its aux ids)
    draft_hf_config: dict[str, Any] | None = None
    gpu: str | None = None
    gpu_memory_bytes: int | None = None  # --gpu-memory: the runtime total, overrides the catalogue
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None  # vLLM's kv_cache_memory_bytes (explicit budget)
    available_kv_gib: float | None = None  # from a vLLM "Available KV cache memory" log line
    logged_memory: LoggedMemory | None = None  # the memory lines of that log
    data_parallel_size: int = 1
    enforce_eager: bool = False
    explain: bool = False
    label: str | None = None
    hf_overrides: str | None = None  # vLLM's --hf-overrides, as canonical JSON (hashable)
    trust_remote_code: bool = False  # vLLM's --trust-remote-code
    config_format: str = "auto"  # vLLM's --config-format: auto, hf (config.json), mistral
    # weights that leave no KV memory: search the fewest GPUs and bigger GPUs (fit turns it off)
    diagnose_weights: bool = True


@dataclass(frozen=True)
class Resolved:
    """The loaded inputs of a request (reused by sweeps: configs are read once)."""

    target: ModelDescription
    draft: ModelDescription | None
    target_config: dict[str, Any]
    target_quant: dict[str, Any] | None
    draft_config: dict[str, Any] | None
    weight_headers: dict[str, dict] | None  # type: ignore[type-arg]
    notes: tuple[str, ...]
    # weight totals (and bytes per rank), computed once per loaded model: sweeps and `fit` plan
    # the same model many times
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)


def resolve(req: Request) -> Resolved:
    """Load the target (and draft) configs and describe them."""
    from kvplan import models as config
    from kvplan.models.resolution.overrides import apply_hf_overrides, overrides_note
    from kvplan.sources import hub
    files = hub.load_model_files(req.model, revision=req.revision,
                                 config_format=req.config_format)
    overrides = json.loads(req.hf_overrides) if req.hf_overrides else None
    target_config = apply_hf_overrides(files.config, overrides)
    remote_note = _config_readable(req, files, target_config)
    try:
        if files.config_format == "mistral":
            from kvplan.models.mistral import describe_mistral_format
            target = describe_mistral_format(target_config, source=req.model,
                                             hf_quant_config=files.hf_quant_config)
        else:
            target = config.describe_model(target_config, source=req.model,
                                           hf_quant_config=files.hf_quant_config)
    except UnsupportedError as exc:
        _length_check_first(req, target_config, exc)
        raise
    target = with_model_folder(target, files)
    notes = list(files.notes) + [n for n in [overrides_note(overrides), remote_note] if n]
    method = req.deployment.speculative_method
    draft_desc, draft_cfg = None, None
    if req.draft is not None:
        dfiles = hub.load_model_files(req.draft)
        draft_note = _config_readable(req, dfiles, dfiles.config)
        notes += [draft_note] if draft_note else []
        draft_desc = config.describe_draft(dfiles.config, source=req.draft, method=method,
                                           target=target, hf_quant_config=dfiles.hf_quant_config)
        draft_cfg = dfiles.config
        notes += list(dfiles.notes)
    elif method == "mtp":
        draft_desc = config.mtp_draft(target)
    elif method == "extract_hidden_states":
        from kvplan.models.drafts import hidden_state_draft
        draft_desc = hidden_state_draft(target, target_config, req.draft_hf_config)
    headers = None
    if req.kv_cache_memory_bytes is None and req.available_kv_gib is None:
        headers = hub.safetensors_headers(files)
    return Resolved(target=target, draft=draft_desc, target_config=target_config,
                    target_quant=files.hf_quant_config, draft_config=draft_cfg,
                    weight_headers=headers, notes=tuple(notes))


def _config_readable(req: Request, files: Any, cfg: dict[str, Any]) -> str | None:
    """vLLM's first start-up step: reading config.json (remote code, unknown model types), then
    its registry's architecture check."""
    import os

    from kvplan.models.resolution.arch_resolution import unresolved_architecture_error
    from kvplan.models.resolution.remote_code import check_config_readable

    note = None
    # vLLM's MistralConfigParser builds a Mistral-format config itself (no transformers class,
    # no remote code): only the registry's check applies
    if getattr(files, "config_format", "hf") != "mistral":
        if files.is_hub:
            name, local = files.repo_id, None
        else:  # vLLM is given the folder (a config.json path stands for its folder)
            name = files.source if files.config_path != files.source else files.local_dir
            local = os.path.abspath(name)
        note = check_config_readable(cfg, model_name=name, local_abspath=local,
                                     trust_remote_code=req.trust_remote_code,
                                     version=req.deployment.vllm_version)
    if note is None:  # remote code resolves its own classes
        refusal = unresolved_architecture_error(cfg, req.deployment.vllm_version)
        if refusal is not None:
            raise refusal
    return note


def _length_check_first(req: Request, cfg: dict[str, Any], exc: UnsupportedError) -> None:
    """vLLM checks --max-model-len (ModelConfig) before it builds the model class: a refusal
    that only building the model would raise (a draft head served as a target, a layer kvplan
    cannot size) comes after vLLM's max-length refusal, which is raised here first."""
    if exc.vllm_stage is not None:
        return  # vLLM refused while reading the config: before the length check
    from kvplan.models import length_only_description
    from kvplan.models.resolution.max_len import verify_max_model_len

    dep = req.deployment
    if dep.max_model_len is not None:
        verify_max_model_len(length_only_description(cfg, req.model), dep.max_model_len,
                             allow_long=dep.allow_long_max_model_len)


def with_model_folder(target: ModelDescription, files: Any) -> ModelDescription:
    """The target with what its model folder says beyond config.json: the sentence-transformers
    pooling module vLLM's `--runner auto` reads (`kvplan.sources.st_modules`)."""
    from kvplan.models.pooling import st_pooling_types
    from kvplan.sources.st_modules import read_st_modules

    st = read_st_modules(files)
    update: dict[str, Any] = {
        "model_folder_read": st.known,
        "st_pooling": None if st.pooling is None else st_pooling_types(st.pooling)}
    if target.hf_format_constructor_error is not None:
        from kvplan.sources.hub import mistral_format

        # read from config.json (a Mistral-format checkpoint's params.json builds); when the hub
        # repo's file list could not be asked, vLLM may read its params.json and build the model
        if mistral_format(files) is None:
            update["hf_format_constructor_error"] = None
            error_type, message = target.hf_format_constructor_error
            update["warnings"] = (
                *target.warnings,
                "the hub repo's file list is not available here: if it has no Mistral-format "
                "checkpoint (params.json, consolidated*.safetensors), vLLM reads config.json and "
                f"its model class raises {error_type}: {message}; kvplan planned the model from "
                "config.json")
    return target.model_copy(update=update)


def text_config(cfg: dict[str, Any], source: str) -> dict[str, Any]:
    """The language-model part of a config, as the adapters read it (config._common.text_cfg)."""
    from kvplan.models._common import Cfg, text_cfg

    return dict(text_cfg(Cfg(cfg, source)).data)


def catalogue_gpu(req: Request) -> tuple[Any, int | None, str | None]:
    """(catalogue Gpu or None, sm version, note)."""
    if req.gpu is None:
        return None, None, None
    from kvplan.budget import hardware
    g = hardware.lookup_gpu(req.gpu)
    note = f"GPU {req.gpu!r}: {g.resolved_from}" if g.resolved_from else None
    if g.total_memory_nominal and req.gpu_memory_bytes is None:
        nominal = f"{g.name}: {hardware.nominal_memory_note(g)}"
        note = f"{note}; {nominal}" if note else nominal
    return g, hardware.sm_version(g), note

