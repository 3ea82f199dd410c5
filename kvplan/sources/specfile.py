"""Layer-spec files (the golden-case schema of shared/golden/README.md) → a `PlannerInput`.

Lets anyone plan a custom architecture by hand: each layer's spec as vLLM's workers would report
it. Pure: takes the parsed JSON dict; reading the file is the caller's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from kvplan.engine.backends import Backend, customize_spec
from kvplan.engine.planner import PlannerInput
from kvplan.engine.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    KpoolTailSpec,
    KVCacheSpec,
    MambaSpec,
    MambaType,
    MLAAttentionSpec,
    MultipleOf,
    RSWASpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    SparseCacheRole,
)
from kvplan.engine.state_shapes import gdn_state_dtypes, gdn_state_shapes
from kvplan.errors import InputError
from kvplan.units import (
    GiB,
    kv_cache_storage_dtype,
    kv_quant_mode,
    normalize_kv_cache_dtype,
    normalize_torch_dtype,
)

KIND_ALIASES = {
    "full": "full_attention", "full_attention": "full_attention", "attention": "full_attention",
    "sliding_window": "sliding_window", "swa": "sliding_window",
    "chunked_local": "chunked_local", "chunked_local_attention": "chunked_local",
    "mla": "mla", "mla_attention": "mla", "sliding_window_mla": "sliding_window_mla",
    "mamba": "mamba", "gdn": "mamba", "cross_attention": "cross_attention",
    "encoder_only": "encoder_only", "encoder_only_attention": "encoder_only",
    "sink_full_attention": "sink_full_attention",
    "rswa": "rswa", "circular_buffer": "circular_buffer", "kpool_tail": "kpool_tail",
    "hidden_state": "hidden_state", "hisparse_hot": "hisparse_hot",
    "hisparse_resident": "hisparse_resident", "indexer": "indexer",
}
# vLLM DeepseekV32IndexerCache: fp8 values + one fp32 scale per 128 elements, as uint8 bytes
INDEXER_QUANT_BLOCK = 128
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
GDN_KEYS = frozenset("""
    num_k_heads num_v_heads head_k_dim head_v_dim conv_kernel_size tp_size num_spec
    mamba_cache_dtype mamba_ssm_cache_dtype
""".split())
MAX_LAYERS = 100_000


@dataclass(frozen=True)
class SpecFile:
    name: str
    notes: tuple[str, ...]
    planner_input: PlannerInput
    layer_count: int
    kv_cache_layout: str


def _check_keys(keys: Any, allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(keys) - allowed)
    if unknown:
        raise InputError(f"unknown key(s) {unknown} in {where}",
                         hint="see docs/specs-format.md for the layer-spec schema")


def _int(d: Mapping[str, Any], key: str, where: str, default: Any = ..., minimum: int = 0
         ) -> int:
    if key not in d or d[key] is None:
        if default is ...:
            raise InputError(f"missing required field {key!r} in {where}")
        return default  # type: ignore[no-any-return]
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or int(v) != v:
        raise InputError(f"{where}.{key} must be an integer, got {v!r}")
    if int(v) < minimum:
        raise InputError(f"{where}.{key} must be ≥ {minimum}, got {v!r}")
    return int(v)


def _bool(d: Mapping[str, Any], key: str, default: bool) -> bool:
    v = d.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputError(f"{key} must be true or false, got {v!r}")
    return v


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
        _check_keys(entry, LAYER_KEYS | SHORTHAND_KEYS, where)
        if "pattern" in entry:
            pattern = entry["pattern"]
            if not isinstance(pattern, list) or not pattern:
                raise InputError(f"{where}.pattern must be a non-empty list of template names")
            start = _int(entry, "start", where, 0)
            repeat = _int(entry, "repeat", where, 1, minimum=1)
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
                n = _int(base, "repeat", where, minimum=1)
                if n > MAX_LAYERS:
                    raise InputError(f"{where}: repeat {n:,} is more layers than kvplan plans "
                                     f"({MAX_LAYERS:,})")
                start = _int(base, "start", where, 0)
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


def _alignment(v: Any, where: str) -> int | MultipleOf | None:
    if v is None:
        return None
    if isinstance(v, dict):
        return MultipleOf(_int(v, "multiple_of", where, minimum=1))
    return _int({"a": v}, "a", where, minimum=1)


def build_spec(layer: Mapping[str, Any], case: Mapping[str, Any]) -> tuple[KVCacheSpec, Any]:
    """One layer entry → its KVCacheSpec (and a deferred `match_layer` padding, if any)."""
    where = f"layer {layer.get('name')!r}"
    kind = KIND_ALIASES.get(layer.get("kind", "full_attention"))
    if kind is None:
        raise InputError(f"{where}: unknown kind {layer.get('kind')!r}",
                         hint=f"kinds: {', '.join(sorted(set(KIND_ALIASES.values())))}")
    model_dtype = normalize_torch_dtype(layer.get("model_dtype", case.get("model_dtype",
                                                                           "bfloat16")))
    block_size = _int(layer, "block_size", where, _int(case, "block_size", "the case", 16, 1), 1)
    common: dict[str, Any] = {"block_size": block_size, "is_draft": bool(layer.get("is_draft"))}
    if layer.get("block_stride_alignment") is not None:
        common["block_stride_alignment"] = _alignment(layer["block_stride_alignment"], where)
    if kind == "mamba":
        return _build_mamba(layer, case, model_dtype, common, where)
    if kind in ("hisparse_hot", "hisparse_resident"):
        page = _int(layer, "page_size", where, minimum=1)
        if kind == "hisparse_hot":
            return HiSparseHotSpec(page_size=page, hot_blocks_per_request=_int(
                layer, "blocks_per_request", where, minimum=1), **common), None
        return HiSparseResidentSpec(page_size=page, **common), None
    if kind == "indexer":
        # vLLM: DeepseekV32IndexerCache.get_kv_cache_spec — one uint8 row per token:
        # index_head_dim fp8 values + 4 bytes (an fp32 scale) per 128 of them
        dim = _int(layer, "index_head_dim", where, minimum=1)
        layer = {"num_kv_heads": 1, **layer, "dtype": "uint8", "backend": "none",
                 "cache_role": "indexer", "head_size": dim + dim // INDEXER_QUANT_BLOCK * 4}
        kind = "mla"

    dtype_name = layer.get("dtype") or "auto"
    try:
        cache_dtype = normalize_kv_cache_dtype(dtype_name)
        storage = kv_cache_storage_dtype(cache_dtype, model_dtype)
        quant = kv_quant_mode(cache_dtype)
    except InputError:
        # a plain torch dtype name, e.g. float8_e4m3fn
        storage, cache_dtype, quant = normalize_torch_dtype(dtype_name), "auto", kv_quant_mode("auto")
    attn: dict[str, Any] = dict(common, dtype=storage, kv_quant_mode=quant)
    for key in ("page_size_padded", "num_head_slots", "state_content_bytes", "max_tp_shards"):
        if layer.get(key) is not None:
            attn[key] = _int(layer, key, where, minimum=1)
    if layer.get("dcp_sharded") is not None:
        attn["dcp_sharded"] = bool(layer["dcp_sharded"])
    if layer.get("tokens_per_state") is not None:
        tps = layer["tokens_per_state"]
        attn["tokens_per_state"] = Fraction(tps) if isinstance(tps, str) else int(tps)

    spec: AttentionSpec
    if kind in ("mla", "sliding_window_mla", "hidden_state"):
        head = layer.get("head_size")
        if kind == "hidden_state":  # ExtractHiddenStatesAttention: heads and head size given
            head = _int(layer, "head_size", where, minimum=1)
            _int(layer, "num_kv_heads", where, minimum=1)
        if head is None:
            head = (_int(layer, "kv_lora_rank", where, minimum=1)
                    + _int(layer, "qk_rope_head_dim", where))
        attn.update(num_kv_heads=_int(layer, "num_kv_heads", where, 1, 1), head_size=int(head),
                    cache_dtype_str=cache_dtype)
        if kind != "hidden_state":
            attn.setdefault("max_tp_shards", 1)  # vLLM: MLAAttention.get_kv_cache_spec
        if "state_content_bytes" not in attn and kind != "hidden_state":
            # vLLM: MLAAttention.get_kv_cache_spec — opaque per-token blobs
            blob = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(cache_dtype)
            if blob is not None:
                attn["state_content_bytes"] = blob
        if layer.get("alignment") is not None:
            attn["alignment"] = _int(layer, "alignment", where, minimum=1)
        if layer.get("model_version") is not None:
            attn["model_version"] = str(layer["model_version"])
        for key in ("non_causal_multi_token_decode", "bounded_replay" if kind ==
                    "sliding_window_mla" else "is_index_group_leader"):
            if layer.get(key) is not None:
                attn[key] = _bool(layer, key, False)
        if layer.get("cache_role") == "indexer" and layer.get("index_head_dim") is not None:
            attn["cache_dtype_str"] = None  # DeepseekV32IndexerCache passes none
        if kind == "sliding_window_mla":
            spec = SlidingWindowMLASpec(sliding_window=_int(layer, "sliding_window", where,
                                                            minimum=1), **attn)
        else:
            for key in ("topk_buffer_width", "storage_block_size"):
                if layer.get(key) is not None:
                    attn[key] = _int(layer, key, where, minimum=1)
            if layer.get("cache_role") is not None:
                try:
                    attn["cache_role"] = SparseCacheRole(str(layer["cache_role"]).lower())
                except ValueError:
                    raise InputError(f"{where}: unknown cache_role {layer['cache_role']!r}",
                                     hint="sparse or indexer") from None
            if kind == "hidden_state":
                attn.pop("cache_dtype_str")  # vLLM: extract_hidden_states builds it without
                spec = HiddenStateCacheSpec(**attn)
            else:
                spec = MLAAttentionSpec(**attn)
        return _maybe_customize(spec, layer, where), None

    attn.update(num_kv_heads=_int(layer, "num_kv_heads", where, minimum=1),
                head_size=_int(layer, "head_size", where, minimum=1))
    if layer.get("head_size_v") is not None:
        attn["head_size_v"] = _int(layer, "head_size_v", where, minimum=0)
    if kind == "full_attention":
        spec = FullAttentionSpec(sliding_window=layer.get("sliding_window"),
                                 attention_chunk_size=layer.get("attention_chunk_size"), **attn)
    elif kind == "sink_full_attention":
        spec = SinkFullAttentionSpec(sink_len=layer.get("sink_len"), **attn)
    elif kind == "rswa":
        spec = RSWASpec(rswa_window=_int(layer, "rswa_window", where, minimum=1),
                        sliding_window=layer.get("sliding_window"),
                        attention_chunk_size=layer.get("attention_chunk_size"), **attn)
    elif kind == "circular_buffer":
        spec = CircularBufferSpec(**attn)
    elif kind == "kpool_tail":
        spec = KpoolTailSpec(sliding_window=_int(layer, "sliding_window", where, minimum=1),
                             extra_retained_tokens=_int(layer, "extra_retained_tokens", where, 0),
                             **attn)
    elif kind == "sliding_window":
        spec = SlidingWindowSpec(sliding_window=_int(layer, "sliding_window", where, minimum=1),
                                 extra_retained_tokens=_int(layer, "extra_retained_tokens",
                                                            where, 0), **attn)
    elif kind == "chunked_local":
        spec = ChunkedLocalAttentionSpec(
            attention_chunk_size=_int(layer, "attention_chunk_size", where, minimum=1), **attn)
    elif kind == "cross_attention":
        spec = CrossAttentionSpec(**attn)
    else:
        spec = EncoderOnlyAttentionSpec(**attn)
    return _maybe_customize(spec, layer, where), None


def _maybe_customize(spec: AttentionSpec, layer: Mapping[str, Any], where: str) -> AttentionSpec:
    """Backend packing as the worker's customize_attention_spec applies it (`backend` field).

    As the golden-case schema defines it: `auto` packs nvfp4 (FlashInfer) and per-token-head MLA
    (MLA backends); `flashinfer` and `mla` force those packings; `none` or any other backend name
    leaves the page unpacked (state_content_bytes can still describe any packing by hand).
    """
    backend = layer.get("backend", "auto")
    is_mla = isinstance(spec, MLAAttentionSpec | SlidingWindowMLASpec)
    try:
        if backend == "flashinfer" or (backend == "auto" and spec.kv_quant_mode.is_nvfp4):
            return spec if is_mla else customize_spec(Backend.FLASHINFER, spec)
        if backend == "mla" or (backend == "auto" and spec.kv_quant_mode.is_per_token_head
                                and is_mla and not isinstance(spec, HiddenStateCacheSpec)):
            return customize_spec(Backend.TRITON_MLA, spec)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    return spec


def _build_mamba(layer: Mapping[str, Any], case: Mapping[str, Any], model_dtype: str,
                 common: dict[str, Any], where: str) -> tuple[KVCacheSpec, Any]:
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    if "gdn" in layer:
        g = layer["gdn"]
        if not isinstance(g, dict):
            raise InputError(f"{where}.gdn must be an object")
        _check_keys(g, GDN_KEYS, f"{where}.gdn")
        shapes = gdn_state_shapes(
            tp=_int(g, "tp_size", f"{where}.gdn", _int(case, "tensor_parallel_size", "case", 1, 1),
                    1),
            num_k_heads=_int(g, "num_k_heads", f"{where}.gdn", minimum=1),
            num_v_heads=_int(g, "num_v_heads", f"{where}.gdn", minimum=1),
            head_k_dim=_int(g, "head_k_dim", f"{where}.gdn", minimum=1),
            head_v_dim=_int(g, "head_v_dim", f"{where}.gdn", minimum=1),
            conv_kernel_size=_int(g, "conv_kernel_size", f"{where}.gdn", minimum=1),
            num_spec=_int(g, "num_spec", f"{where}.gdn",
                          _int(case, "num_speculative_tokens", "case", 0)))
        dtypes = gdn_state_dtypes(model_dtype, g.get("mamba_cache_dtype", "auto"),
                                  g.get("mamba_ssm_cache_dtype", "float32"))
        mamba_type = MambaType.GDN_ATTN
    else:
        raw_shapes, raw_dtypes = layer.get("shapes"), layer.get("dtypes")
        if not isinstance(raw_shapes, list) or not isinstance(raw_dtypes, list) \
                or len(raw_shapes) != len(raw_dtypes) or not raw_shapes:
            raise InputError(f"{where}: a mamba layer needs 'gdn' or matching 'shapes' and "
                             "'dtypes' lists")
        try:
            shapes = tuple(tuple(int(x) for x in s) for s in raw_shapes)
        except (TypeError, ValueError):
            raise InputError(f"{where}.shapes must be lists of integers") from None
        if any(x < 0 for s in shapes for x in s):
            raise InputError(f"{where}.shapes must not be negative")
        dtypes = tuple(normalize_torch_dtype(d) for d in raw_dtypes)
        try:
            mamba_type = MambaType(str(layer.get("mamba_type", "MAMBA2")).upper())
        except ValueError:
            raise InputError(f"{where}: unknown mamba_type {layer.get('mamba_type')!r}") from None
    kw: dict[str, Any] = dict(
        common, shapes=shapes, dtypes=dtypes, mamba_type=mamba_type,
        mamba_cache_mode=str(layer.get("mamba_cache_mode", case.get("mamba_cache_mode", "none"))),
        num_speculative_blocks=_int(layer, "num_speculative_blocks", where,
                                    _int(case, "num_speculative_tokens", "case", 0)),
        num_prefill_checkpoint_blocks=_int(layer, "num_prefill_checkpoint_blocks", where, 0))
    if layer.get("prefill_checkpoint_alignment") is not None:
        kw["prefill_checkpoint_alignment"] = _int(layer, "prefill_checkpoint_alignment", where)
    if layer.get("tp_replicated") is not None:
        kw["tp_replicated"] = bool(layer["tp_replicated"])
    if layer.get("state_alignment") is not None:
        kw["state_alignment"] = _int(layer, "state_alignment", where, minimum=1)
    pad = layer.get("page_size_padded")
    if isinstance(pad, int) and not isinstance(pad, bool):
        kw["page_size_padded"] = pad
    elif pad is not None and not (isinstance(pad, dict) and "match_layer" in pad):
        raise InputError(f"{where}.page_size_padded must be bytes or {{\"match_layer\": NAME}}")
    return MambaSpec(**kw), pad if isinstance(pad, dict) else None


def load_spec_file(case: Any, *, vllm_version: str | None = None, with_fix: bool = False,
                   available_kv_bytes: int | None = None, max_model_len: int | None = None,
                   max_num_batched_tokens: int | None = None) -> SpecFile:
    """A parsed layer-spec JSON object → `SpecFile` (flags given here override the file)."""
    if not isinstance(case, dict):
        raise InputError("a layer-spec file must be a JSON object",
                         hint="see docs/specs-format.md")
    _check_keys(case, CASE_KEYS, "the spec file")
    for tname, t in (case.get("templates") or {}).items():
        if not isinstance(t, dict):
            raise InputError(f"template {tname!r} must be an object")
        _check_keys(t, LAYER_KEYS | {"layer_suffix"}, f"template {tname!r}")
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
    pp = _int(case, "pipeline_parallel_size", "the case", len(worker_specs), 1)
    inp = PlannerInput(
        worker_specs=worker_specs,
        available_kv_bytes=tuple(int(a) for a in avail_list),
        max_model_len=max_model_len if max_model_len is not None
        else _int(case, "max_model_len", "the spec file", minimum=1),
        auto_fit_max_model_len=_bool(case, "auto_fit_max_model_len", False),
        max_num_batched_tokens=max_num_batched_tokens if max_num_batched_tokens is not None
        else _int(case, "max_num_batched_tokens", "the spec file", minimum=1),
        max_num_encoder_input_tokens=case.get("max_num_encoder_input_tokens"),
        async_scheduling=_bool(case, "async_scheduling", True),
        use_v2_model_runner=_bool(case, "use_v2_model_runner", True),
        pipeline_parallel_size=pp,
        decode_context_parallel_size=_int(case, "decode_context_parallel_size", "the case", 1, 1),
        mamba_cache_mode=str(case.get("mamba_cache_mode", "none")),
        num_speculative_tokens=_int(case, "num_speculative_tokens", "the case", 0),
        speculative_method=case.get("speculative_method"),
        num_nextn_predict_layers=_int(case, "num_nextn_predict_layers", "the case", 1),
        disable_hybrid_kv_cache_manager=_bool(case, "disable_hybrid_kv_cache_manager", False),
        num_gpu_blocks_override=case.get("num_gpu_blocks_override"),
        enable_extensible_kv_cache=_bool(case, "enable_extensible_kv_cache", False),
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
