"""Layer-spec files (the golden-case schema of shared/golden/README.md) → a `PlannerInput`.

Lets anyone plan a custom architecture by hand: each layer's spec as vLLM's workers would report
it. Pure: takes the parsed JSON dict; reading the file is the caller's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from kvplan.engines.vllm.planner import PlannerInput
from kvplan.engines.vllm.specs import KVCacheSpec, MambaSpec
from kvplan.errors import InputError
from kvplan.sources.layer_spec import bool_field, build_spec, check_keys, int_field
from kvplan.units import GiB, read_tokens

CASE_KEYS = frozenset("""
    name notes max_model_len auto_fit_max_model_len max_num_batched_tokens max_num_seqs
    async_scheduling use_v2_model_runner enable_chunked_prefill available_kv_memory_bytes
    available_kv_memory_gib num_speculative_tokens speculative_method num_nextn_predict_layers
    disable_eagle_block_drop mamba_cache_mode enable_prefix_caching
    disable_hybrid_kv_cache_manager num_gpu_blocks_override kv_cache_layout
    supported_kv_cache_layouts pipeline_parallel_size tensor_parallel_size
    decode_context_parallel_size workers max_num_encoder_input_tokens model_dtype model_type
    block_size prefix_match_unit enable_extensible_kv_cache gpu_memory_utilization
    templates layers workload scheduler_reserve_full_isl
""".split())
LAYER_KEYS = frozenset("""
    name notes kind block_size model_dtype num_kv_heads head_size head_size_v dtype backend
    sliding_window attention_chunk_size extra_retained_tokens sink_len kv_lora_rank
    qk_rope_head_dim alignment model_version page_size_padded num_head_slots
    state_content_bytes tokens_per_state max_tp_shards dcp_sharded block_stride_alignment
    is_draft shapes dtypes mamba_type gdn mamba_cache_mode num_speculative_blocks
    num_prefill_checkpoint_blocks prefill_checkpoint_alignment tp_replicated state_alignment
    rswa_window cache_role topk_buffer_width is_index_group_leader non_causal_multi_token_decode
    storage_block_size bounded_replay page_size blocks_per_request index_head_dim
""".split())
SHORTHAND_KEYS = frozenset({"template", "repeat", "start", "pattern", "layer_suffix"})
MAX_LAYERS = 100_000


@dataclass(frozen=True)
class SpecFile:
    name: str
    notes: tuple[str, ...]
    planner_input: PlannerInput
    layer_count: int
    kv_cache_layout: str


def expand_layers(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Expand `template` / `repeat` / `pattern` shorthands into an ordered layer list."""
    templates = case.get("templates") or {}
    if not isinstance(templates, dict):
        raise InputError("templates must be an object of name → layer fields")
    layers_in = case.get("layers")
    if not isinstance(layers_in, list) or not layers_in:
        raise InputError("the spec file needs a non-empty 'layers' list")
    out: list[dict[str, Any]] = []

    def template(name: Any, where: str) -> dict[str, Any]:
        if name not in templates:
            raise InputError(f"{where}: unknown template {name!r}",
                             hint=f"templates defined: {', '.join(templates) or 'none'}")
        return dict(templates[name])

    for i, entry in enumerate(layers_in):
        where = f"layers[{i}]"
        if not isinstance(entry, dict):
            raise InputError(f"{where} must be an object")
        check_keys(entry, LAYER_KEYS | SHORTHAND_KEYS, where)
        if "pattern" in entry:
            pattern = entry["pattern"]
            if not isinstance(pattern, list) or not pattern:
                raise InputError(f"{where}.pattern must be a non-empty list of template names")
            start = int_field(entry, "start", where, 0)
            repeat = int_field(entry, "repeat", where, 1, minimum=1)
            if repeat * len(pattern) > MAX_LAYERS:
                raise InputError(f"{where}: {repeat * len(pattern):,} layers is more than "
                                 f"kvplan plans ({MAX_LAYERS:,})")
            for r in range(repeat):
                for j, tname in enumerate(pattern):
                    layer = template(tname, where)
                    suffix = layer.pop("layer_suffix", tname)
                    layer["name"] = _format(entry, where, i=start + r * len(pattern) + j,
                                            t=suffix)
                    out.append(layer)
        else:
            base = template(entry["template"], where) if "template" in entry else {}
            base.pop("layer_suffix", None)
            base.update({k: v for k, v in entry.items() if k not in ("template", "layer_suffix")})
            if "repeat" in base:
                n = int_field(base, "repeat", where, minimum=1)
                if n > MAX_LAYERS:
                    raise InputError(f"{where}: repeat {n:,} is more layers than kvplan plans "
                                     f"({MAX_LAYERS:,})")
                start = int_field(base, "start", where, 0)
                for key in ("repeat", "start"):
                    base.pop(key, None)
                for k in range(start, start + n):
                    layer = dict(base)
                    layer["name"] = _format(base, where, i=k)
                    out.append(layer)
            else:
                if "name" not in base:
                    raise InputError(f"{where} needs a 'name'")
                out.append(base)
    names = [layer["name"] for layer in out]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InputError(f"duplicate layer name {dup!r} after expansion")
    return out


def _format(entry: Mapping[str, Any], where: str, **kw: Any) -> str:
    name = entry.get("name")
    if not isinstance(name, str):
        raise InputError(f"{where} needs a 'name' pattern such as \"model.layers.{{i}}.attn\"")
    try:
        return name.format(**kw)
    except (KeyError, IndexError, ValueError) as exc:
        raise InputError(f"{where}: bad name pattern {name!r} ({exc})") from None


def _length_field(case: dict[str, Any], key: str) -> int:
    """A length of the spec file: an integer, or a text read as vLLM reads the flag ("128k")."""
    if case.get(key) is None:
        raise InputError(f"missing required field {key!r} in the spec file")
    try:
        return read_tokens(case[key], "--" + key.replace("_", "-"))
    except InputError as exc:
        raise InputError(f"the spec file's {key}: {exc.message}", hint=exc.hint) from None


def load_spec_file(case: Any, *, vllm_version: str | None = None, with_fix: bool = False,
                   available_kv_bytes: int | None = None, max_model_len: int | None = None,
                   max_num_batched_tokens: int | None = None) -> SpecFile:
    """A parsed layer-spec JSON object → `SpecFile` (flags given here override the file)."""
    if not isinstance(case, dict):
        raise InputError("a layer-spec file must be a JSON object",
                         hint="see docs/specs-format.md")
    check_keys(case, CASE_KEYS, "the spec file")
    for tname, t in (case.get("templates") or {}).items():
        if not isinstance(t, dict):
            raise InputError(f"template {tname!r} must be an object")
        check_keys(t, LAYER_KEYS | {"layer_suffix"}, f"template {tname!r}")
    layers = expand_layers(case)
    specs: dict[str, KVCacheSpec] = {}
    deferred: dict[str, Any] = {}
    for layer in layers:
        spec, pad = build_spec(layer, case)
        if pad is not None:
            deferred[layer["name"]] = pad
        specs[layer["name"]] = spec
    for name, pad in deferred.items():
        target = specs.get(pad["match_layer"])
        if target is None:
            raise InputError(f"layer {name!r}: match_layer {pad['match_layer']!r} does not exist")
        mamba = specs[name]
        assert isinstance(mamba, MambaSpec)
        specs[name] = padded = replace(mamba, page_size_padded=target.page_size_bytes)
        if padded.page_size_padded is not None and padded.page_size_padded < padded.unpadded_page_size_bytes:
            raise InputError(f"layer {name!r}: padded page is smaller than its state")

    workers_raw = case.get("workers")
    if workers_raw:
        if not isinstance(workers_raw, list) or not all(isinstance(w, list) for w in workers_raw):
            raise InputError("workers must be a list (one per stage) of layer-name lists")
        for w in workers_raw:
            for n in w:
                if n not in specs:
                    raise InputError(f"workers: unknown layer {n!r}")
        worker_specs = tuple({n: specs[n] for n in w} for w in workers_raw)
    else:
        worker_specs = (specs,)

    if available_kv_bytes is not None:
        avail_list = [available_kv_bytes] * len(worker_specs)
    else:
        avail = case.get("available_kv_memory_bytes")
        if avail is None and case.get("available_kv_memory_gib") is not None:
            avail = int(float(case["available_kv_memory_gib"]) * GiB)
        if avail is None:
            raise InputError("the spec file gives no available_kv_memory_bytes",
                             hint="add it to the file or pass --kv-cache-memory SIZE")
        avail_list = avail if isinstance(avail, list) else [avail] * len(worker_specs)
        if len(avail_list) != len(worker_specs) or not all(
                isinstance(a, int) and not isinstance(a, bool) for a in avail_list):
            raise InputError("available_kv_memory_bytes must be an integer or one per stage")

    layout = case.get("kv_cache_layout") or None
    supported = case.get("supported_kv_cache_layouts")
    if supported is not None and (not isinstance(supported, list)
                                  or not all(isinstance(x, str) for x in supported)):
        raise InputError("supported_kv_cache_layouts must be a list of layout names")
    pp = int_field(case, "pipeline_parallel_size", "the case", len(worker_specs), 1)
    inp = PlannerInput(
        worker_specs=worker_specs,
        available_kv_bytes=tuple(int(a) for a in avail_list),
        max_model_len=max_model_len if max_model_len is not None
        else _length_field(case, "max_model_len"),
        auto_fit_max_model_len=bool_field(case, "auto_fit_max_model_len", False),
        max_num_batched_tokens=max_num_batched_tokens if max_num_batched_tokens is not None
        else _length_field(case, "max_num_batched_tokens"),
        max_num_encoder_input_tokens=case.get("max_num_encoder_input_tokens"),
        async_scheduling=bool_field(case, "async_scheduling", True),
        use_v2_model_runner=bool_field(case, "use_v2_model_runner", True),
        pipeline_parallel_size=pp,
        decode_context_parallel_size=int_field(case, "decode_context_parallel_size", "the case", 1, 1),
        mamba_cache_mode=str(case.get("mamba_cache_mode", "none")),
        num_speculative_tokens=int_field(case, "num_speculative_tokens", "the case", 0),
        speculative_method=case.get("speculative_method"),
        num_nextn_predict_layers=int_field(case, "num_nextn_predict_layers", "the case", 1),
        disable_hybrid_kv_cache_manager=bool_field(case, "disable_hybrid_kv_cache_manager", False),
        num_gpu_blocks_override=case.get("num_gpu_blocks_override"),
        enable_extensible_kv_cache=bool_field(case, "enable_extensible_kv_cache", False),
        gpu_memory_utilization=case.get("gpu_memory_utilization"),
        vllm_version=vllm_version,
        with_fix=with_fix,
        kv_cache_layout=str(layout) if layout else None,
        supported_kv_cache_layouts=tuple(supported) if supported else None,
    )
    for name, spec in specs.items():
        for attr in ("sliding_window", "attention_chunk_size"):
            window = getattr(spec, attr, None)
            if window is not None and window > inp.max_model_len:
                raise InputError(f"layer {name!r}: {attr} {window} is larger than max_model_len "
                                 f"{inp.max_model_len}", hint="a window longer than the context is "
                                 "full attention: use kind full_attention, or a longer max_model_len")
    notes = case.get("notes") or []
    return SpecFile(name=str(case.get("name", "layer-spec file")),
                    notes=tuple(str(n) for n in notes) if isinstance(notes, list) else (),
                    planner_input=inp, layer_count=len(specs),
                    kv_cache_layout=str(layout) if layout else "resolved")
