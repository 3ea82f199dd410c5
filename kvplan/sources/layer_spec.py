"""One layer entry of a layer-spec file (docs/specs-format.md) → its `KVCacheSpec`, as vLLM's
workers would report it (the backend's page packing applied), and the typed field readers the
spec file's checks share. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kvplan.engines.state_shapes import gdn_state_dtypes, gdn_state_shapes
from kvplan.engines.vllm.backends import Backend, customize_spec
from kvplan.engines.vllm.specs import (
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
from kvplan.errors import InputError
from kvplan.units import (
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
GDN_KEYS = frozenset("""
    num_k_heads num_v_heads head_k_dim head_v_dim conv_kernel_size tp_size num_spec
    mamba_cache_dtype mamba_ssm_cache_dtype
""".split())


def check_keys(keys: Any, allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(keys) - allowed)
    if unknown:
        raise InputError(f"unknown key(s) {unknown} in {where}",
                         hint="see docs/specs-format.md for the layer-spec schema")


def int_field(d: Mapping[str, Any], key: str, where: str, default: Any = ..., minimum: int = 0
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


def bool_field(d: Mapping[str, Any], key: str, default: bool) -> bool:
    v = d.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputError(f"{key} must be true or false, got {v!r}")
    return v



def _alignment(v: Any, where: str) -> int | MultipleOf | None:
    if v is None:
        return None
    if isinstance(v, dict):
        return MultipleOf(int_field(v, "multiple_of", where, minimum=1))
    return int_field({"a": v}, "a", where, minimum=1)


def build_spec(layer: Mapping[str, Any], case: Mapping[str, Any]) -> tuple[KVCacheSpec, Any]:
    """One layer entry → its KVCacheSpec (and a deferred `match_layer` padding, if any)."""
    where = f"layer {layer.get('name')!r}"
    kind = KIND_ALIASES.get(layer.get("kind", "full_attention"))
    if kind is None:
        raise InputError(f"{where}: unknown kind {layer.get('kind')!r}",
                         hint=f"kinds: {', '.join(sorted(set(KIND_ALIASES.values())))}")
    model_dtype = normalize_torch_dtype(layer.get("model_dtype", case.get("model_dtype",
                                                                           "bfloat16")))
    block_size = int_field(layer, "block_size", where, int_field(case, "block_size", "the case", 16, 1), 1)
    common: dict[str, Any] = {"block_size": block_size, "is_draft": bool(layer.get("is_draft"))}
    if layer.get("block_stride_alignment") is not None:
        common["block_stride_alignment"] = _alignment(layer["block_stride_alignment"], where)
    if kind == "mamba":
        return _build_mamba(layer, case, model_dtype, common, where)
    if kind in ("hisparse_hot", "hisparse_resident"):
        page = int_field(layer, "page_size", where, minimum=1)
        if kind == "hisparse_hot":
            return HiSparseHotSpec(page_size=page, hot_blocks_per_request=int_field(
                layer, "blocks_per_request", where, minimum=1), **common), None
        return HiSparseResidentSpec(page_size=page, **common), None
    if kind == "indexer":
        # vLLM: DeepseekV32IndexerCache.get_kv_cache_spec — one uint8 row per token:
        # index_head_dim fp8 values + 4 bytes (an fp32 scale) per 128 of them
        dim = int_field(layer, "index_head_dim", where, minimum=1)
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
            attn[key] = int_field(layer, key, where, minimum=1)
    if layer.get("dcp_sharded") is not None:
        attn["dcp_sharded"] = bool(layer["dcp_sharded"])
    if layer.get("tokens_per_state") is not None:
        tps = layer["tokens_per_state"]
        attn["tokens_per_state"] = Fraction(tps) if isinstance(tps, str) else int(tps)

    spec: AttentionSpec
    if kind in ("mla", "sliding_window_mla", "hidden_state"):
        head = layer.get("head_size")
        if kind == "hidden_state":  # ExtractHiddenStatesAttention: heads and head size given
            head = int_field(layer, "head_size", where, minimum=1)
            int_field(layer, "num_kv_heads", where, minimum=1)
        if head is None:
            head = (int_field(layer, "kv_lora_rank", where, minimum=1)
                    + int_field(layer, "qk_rope_head_dim", where))
        attn.update(num_kv_heads=int_field(layer, "num_kv_heads", where, 1, 1), head_size=int(head),
                    cache_dtype_str=cache_dtype)
        if kind != "hidden_state":
            attn.setdefault("max_tp_shards", 1)  # vLLM: MLAAttention.get_kv_cache_spec
        if "state_content_bytes" not in attn and kind != "hidden_state":
            # vLLM: MLAAttention.get_kv_cache_spec — opaque per-token blobs
            blob = {"fp8_ds_mla": 656, "nvfp4_ds_mla": 352}.get(cache_dtype)
            if blob is not None:
                attn["state_content_bytes"] = blob
        if layer.get("alignment") is not None:
            attn["alignment"] = int_field(layer, "alignment", where, minimum=1)
        if layer.get("model_version") is not None:
            attn["model_version"] = str(layer["model_version"])
        for key in ("non_causal_multi_token_decode", "bounded_replay" if kind ==
                    "sliding_window_mla" else "is_index_group_leader"):
            if layer.get(key) is not None:
                attn[key] = bool_field(layer, key, False)
        if layer.get("cache_role") == "indexer" and layer.get("index_head_dim") is not None:
            attn["cache_dtype_str"] = None  # DeepseekV32IndexerCache passes none
        if kind == "sliding_window_mla":
            spec = SlidingWindowMLASpec(sliding_window=int_field(layer, "sliding_window", where,
                                                                 minimum=1), **attn)
        else:
            for key in ("topk_buffer_width", "storage_block_size"):
                if layer.get(key) is not None:
                    attn[key] = int_field(layer, key, where, minimum=1)
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

    attn.update(num_kv_heads=int_field(layer, "num_kv_heads", where, minimum=1),
                head_size=int_field(layer, "head_size", where, minimum=1))
    if layer.get("head_size_v") is not None:
        attn["head_size_v"] = int_field(layer, "head_size_v", where, minimum=0)
    if kind == "full_attention":
        spec = FullAttentionSpec(sliding_window=layer.get("sliding_window"),
                                 attention_chunk_size=layer.get("attention_chunk_size"), **attn)
    elif kind == "sink_full_attention":
        spec = SinkFullAttentionSpec(sink_len=layer.get("sink_len"), **attn)
    elif kind == "rswa":
        spec = RSWASpec(rswa_window=int_field(layer, "rswa_window", where, minimum=1),
                        sliding_window=layer.get("sliding_window"),
                        attention_chunk_size=layer.get("attention_chunk_size"), **attn)
    elif kind == "circular_buffer":
        spec = CircularBufferSpec(**attn)
    elif kind == "kpool_tail":
        spec = KpoolTailSpec(sliding_window=int_field(layer, "sliding_window", where, minimum=1),
                             extra_retained_tokens=int_field(layer, "extra_retained_tokens", where, 0),
                             **attn)
    elif kind == "sliding_window":
        spec = SlidingWindowSpec(sliding_window=int_field(layer, "sliding_window", where, minimum=1),
                                 extra_retained_tokens=int_field(layer, "extra_retained_tokens",
                                                                 where, 0), **attn)
    elif kind == "chunked_local":
        spec = ChunkedLocalAttentionSpec(
            attention_chunk_size=int_field(layer, "attention_chunk_size", where, minimum=1), **attn)
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
        check_keys(g, GDN_KEYS, f"{where}.gdn")
        shapes = gdn_state_shapes(
            tp=int_field(g, "tp_size", f"{where}.gdn",
                         int_field(case, "tensor_parallel_size", "case", 1, 1), 1),
            num_k_heads=int_field(g, "num_k_heads", f"{where}.gdn", minimum=1),
            num_v_heads=int_field(g, "num_v_heads", f"{where}.gdn", minimum=1),
            head_k_dim=int_field(g, "head_k_dim", f"{where}.gdn", minimum=1),
            head_v_dim=int_field(g, "head_v_dim", f"{where}.gdn", minimum=1),
            conv_kernel_size=int_field(g, "conv_kernel_size", f"{where}.gdn", minimum=1),
            num_spec=int_field(g, "num_spec", f"{where}.gdn",
                               int_field(case, "num_speculative_tokens", "case", 0)))
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
        num_speculative_blocks=int_field(layer, "num_speculative_blocks", where,
                                         int_field(case, "num_speculative_tokens", "case", 0)),
        num_prefill_checkpoint_blocks=int_field(layer, "num_prefill_checkpoint_blocks", where, 0))
    if layer.get("prefill_checkpoint_alignment") is not None:
        kw["prefill_checkpoint_alignment"] = int_field(layer, "prefill_checkpoint_alignment", where)
    if layer.get("tp_replicated") is not None:
        kw["tp_replicated"] = bool(layer["tp_replicated"])
    if layer.get("state_alignment") is not None:
        kw["state_alignment"] = int_field(layer, "state_alignment", where, minimum=1)
    pad = layer.get("page_size_padded")
    if isinstance(pad, int) and not isinstance(pad, bool):
        kw["page_size_padded"] = pad
    elif pad is not None and not (isinstance(pad, dict) and "match_layer" in pad):
        raise InputError(f"{where}.page_size_padded must be bytes or {{\"match_layer\": NAME}}")
    return MambaSpec(**kw), pad if isinstance(pad, dict) else None

