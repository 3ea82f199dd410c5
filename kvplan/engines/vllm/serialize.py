"""EngineResult → plain dicts in the golden-case output schema (shared/golden/README.md)."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from kvplan.engines.vllm.planner import EngineResult
from kvplan.engines.vllm.specs import (
    AttentionSpec,
    KVCacheSpec,
    MambaSpec,
    MLAAttentionSpec,
    RSWASpec,
    UniformTypeKVCacheSpecs,
    bytes_per_token,
    spec_kind,
)

_ATTN_OPTIONAL = ("sliding_window", "attention_chunk_size", "extra_retained_tokens",
                  "cache_dtype_str", "num_head_slots", "state_content_bytes")


def spec_info(spec: KVCacheSpec, extra: bool = False) -> dict[str, Any]:
    """One spec as the oracle describes it (same keys, same values); `extra` adds what
    tools/oracle_ext.py also reports (prefix_cacheable, cache_role, rswa_window)."""
    d: dict[str, Any] = {"spec_type": spec.spec_type, "kind": spec_kind(spec).value,
                         "block_size": spec.block_size, "page_size_bytes": spec.page_size_bytes}
    if extra:
        d["prefix_cacheable"] = spec.prefix_cacheable
        if isinstance(spec, MLAAttentionSpec):
            d["cache_role"] = spec.cache_role.value
        if isinstance(spec, RSWASpec):
            d["rswa_window"] = spec.rswa_window
    if isinstance(spec, UniformTypeKVCacheSpecs):
        uniq = sorted({json.dumps(spec_info(s, extra), sort_keys=True)
                       for _, s in spec.kv_cache_specs})
        d["layer_specs"] = [json.loads(s) for s in uniq]
        return d
    if isinstance(spec, AttentionSpec):
        bpt = bytes_per_token(spec)
        d.update(
            unpadded_page_size_bytes=spec.unpadded_page_size_bytes,
            page_size_padded=spec.page_size_padded,
            padded=spec.page_size_padded is not None
            and spec.page_size_padded != spec.unpadded_page_size_bytes,
            num_kv_heads=spec.num_kv_heads, head_size=spec.head_size,
            head_size_v=spec.head_size_v, dtype=spec.dtype,
            kv_quant_mode=spec.kv_quant_mode.value,
            bytes_per_token=str(bpt) if isinstance(bpt, Fraction) else bpt,
        )
        for attr in _ATTN_OPTIONAL:
            if getattr(spec, attr, None) is not None:
                d[attr] = getattr(spec, attr)
    elif isinstance(spec, MambaSpec):
        d.update(
            unpadded_page_size_bytes=spec.unpadded_page_size_bytes,
            page_size_padded=spec.page_size_padded,
            padded=spec.page_size_padded is not None
            and spec.page_size_padded != spec.unpadded_page_size_bytes,
            shapes=[list(s) for s in spec.shapes], dtypes=list(spec.dtypes),
            mamba_type=spec.mamba_type.value, mamba_cache_mode=spec.mamba_cache_mode,
            num_speculative_blocks=spec.num_speculative_blocks,
            num_prefill_checkpoint_blocks=spec.num_prefill_checkpoint_blocks,
        )
    if spec.is_draft:
        d["is_draft"] = True
    return d


def _one_or_list(values: tuple[Any, ...]) -> Any:
    return values[0] if len(values) == 1 else list(values)


def contract_dict(r: EngineResult, extra_spec_keys: bool = False) -> dict[str, Any]:
    """The contract fields of a golden expected file, computed by kvplan."""
    if r.grouping_error is not None:
        err = {"type": r.grouping_error.type, "message": r.grouping_error.message}
        return {"grouping_error": err, "fits": False, "error": err}
    groups = []
    for d in r.groups:
        groups.append({"group_id": d.group_id, "layer_names": list(d.group.layer_names),
                       "num_layers": len(d.group.layer_names),
                       **spec_info(d.group.spec, extra_spec_keys),
                       "max_memory_usage_bytes": d.max_memory_usage_bytes,
                       "blocks_per_request": d.blocks_per_request,
                       "max_num_blocks_per_req": d.max_num_blocks_per_req})
    return {
        "groups": groups,
        "num_groups": len(groups),
        "pool_bytes_per_block": _one_or_list(r.pool_bytes_per_block),
        "total_blocks_per_request": r.total_blocks_per_request,
        "total_bytes_needed": _one_or_list(r.total_bytes_needed),
        "total_gib_needed": _one_or_list(r.total_gib_needed),
        "check_memory_bytes": _one_or_list(r.check_memory_bytes),
        "estimated_max_model_len": _one_or_list(r.estimated_max_model_len),
        "fits": r.fits,
        "error": None if r.error is None else {"type": r.error.type, "message": r.error.message},
        "max_model_len_after_planning": r.max_model_len_after_planning,
        "num_blocks": r.num_blocks,
        "capacity_is_hypothetical": r.capacity_is_hypothetical,
        "max_concurrency": r.max_concurrency,
        "kv_cache_size_tokens": r.kv_cache_size_tokens,
        "capacity_log_line": r.capacity_log_line,
    }
