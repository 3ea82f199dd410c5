#!/usr/bin/env python3
"""kvplan's extension of the shared vLLM KV-cache oracle: the spec kinds its schema lacks.

Usage (same arguments as oracle.py; see docs/specs-format.md and
tests/data/golden-oracle-2026/README.md):

    KVPLAN_ORACLE=/path/to/oracle.py python3 tools/oracle_ext.py CASE.json --vllm 0.33.0 [--patched]

Loads the unmodified oracle (``$KVPLAN_ORACLE``, default ``/work/oracle/oracle.py``, a copy of
``shared/oracle``), adds layer kinds and fields, and runs its ``main``. Every spec is still a real
dataclass of the installed ``vllm.v1.kv_cache_interface``, built the way the model layer named
below builds it; grouping and planning are vLLM's own code, untouched. Nothing of vLLM is copied.

New layer kinds (vLLM class, the layer that builds it):
  rswa               RSWASpec            (RSWAAttention.get_kv_cache_spec) + rswa_window
  circular_buffer    CircularBufferSpec  (deepseek_v41 compressor, glm5next, step5 rings)
  kpool_tail         KpoolTailSpec       (0.31.0 only: glm5next kpool tail)
  hidden_state       HiddenStateCacheSpec (extract_hidden_states: heads, head_size, dtype)
  hisparse_hot       HiSparseHotSpec     (page_size, blocks_per_request)
  hisparse_resident  HiSparseResidentSpec (page_size)
  indexer            MLAAttentionSpec, cache_role=INDEXER, as DeepseekV32IndexerCache builds it
                     from index_head_dim: head = d + d // 128 * 4 bytes (fp8 values + fp32
                     scales), uint8, one head, max_tp_shards=1, no cache_dtype_str, no packing
New MLA fields: cache_role (sparse | indexer), topk_buffer_width, is_index_group_leader,
non_causal_multi_token_decode, storage_block_size; sliding_window_mla: bounded_replay,
non_causal_multi_token_decode. A class or field the running release does not define is an
input error naming the release (``oracle_error`` in the output).
Each spec in the output also carries ``prefix_cacheable`` and, where they apply, ``cache_role``
and ``rswa_window``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys

ORACLE_PATH = os.environ.get("KVPLAN_ORACLE", "/work/oracle/oracle.py")
NEW_KINDS = frozenset({"rswa", "circular_buffer", "kpool_tail", "hidden_state", "hisparse_hot",
                       "hisparse_resident", "indexer"})
NEW_LAYER_KEYS = frozenset("""
    rswa_window cache_role topk_buffer_width is_index_group_leader non_causal_multi_token_decode
    storage_block_size bounded_replay page_size blocks_per_request index_head_dim
""".split())
MLA_EXTRA = ("cache_role", "topk_buffer_width", "is_index_group_leader",
             "non_causal_multi_token_decode", "storage_block_size")
SWA_MLA_EXTRA = ("bounded_replay", "non_causal_multi_token_decode")
INDEXER_QUANT_BLOCK = 128  # DeepseekV32 Indexer.quant_block_size


def _load_oracle():
    spec = importlib.util.spec_from_file_location("oracle", ORACLE_PATH)
    if spec is None or spec.loader is None:
        sys.exit(f"oracle_ext: cannot load {ORACLE_PATH} (set KVPLAN_ORACLE)")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["oracle"] = mod
    spec.loader.exec_module(mod)
    return mod


O = _load_oracle()  # noqa: E741 (the oracle module)
_orig_build_spec = O.build_spec
_orig_spec_info = O.spec_info


def _iface(name: str):
    import vllm
    import vllm.v1.kv_cache_interface as iface

    cls = getattr(iface, name, None)
    if cls is None:
        raise ValueError(f"{name} does not exist in vLLM {vllm.__version__}")
    return cls


def _require_field(cls, name: str) -> None:
    import vllm

    if not O._has_field(cls, name):
        raise ValueError(f"{cls.__name__}.{name} does not exist in vLLM {vllm.__version__}")


def _rebuild(spec, cls, drop=(), **changes):
    """The fields of `spec` that `cls` has, as `cls` (vLLM's replace_as, field by field)."""
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    kw = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)
          if f.init and f.name in names and f.name not in drop}
    kw.update(changes)
    return cls(**kw)


def _plain(layer: dict, kind: str, **extra) -> dict:
    out = {k: v for k, v in layer.items() if k not in NEW_LAYER_KEYS}
    out.update(kind=kind, **extra)
    return out


def _common(layer: dict, top: dict, ignored: list[str]) -> dict:
    kw: dict = {"block_size": int(layer.get("block_size", top.get("block_size", 16)))}
    if layer.get("is_draft"):
        if O._has_field(_iface("KVCacheSpec"), "is_draft"):
            kw["is_draft"] = True
        else:
            ignored.append("is_draft")
    if "block_stride_alignment" in layer:
        kw["block_stride_alignment"] = O._alignment(layer["block_stride_alignment"])
    return kw


def _with_mla_extras(spec, layer: dict, keys):
    changes = {}
    for key in keys:
        if layer.get(key) is None:
            continue
        _require_field(type(spec), key)
        val = layer[key]
        if key == "cache_role":
            val = _iface("SparseCacheRole")(str(val).lower())
        changes[key] = val
    return dataclasses.replace(spec, **changes) if changes else spec


def build_spec(layer: dict, top: dict, ignored: list[str]):
    kind = layer.get("kind", "full_attention")
    if kind not in NEW_KINDS:
        spec = _orig_build_spec(_plain(layer, kind), top, ignored)
        base = O.KIND_ALIASES.get(kind)
        if base == "mla":
            return _with_mla_extras(spec, layer, MLA_EXTRA)
        if base == "sliding_window_mla":
            return _with_mla_extras(spec, layer, SWA_MLA_EXTRA)
        return spec
    if kind in ("hisparse_hot", "hisparse_resident"):
        kw = _common(layer, top, ignored)
        kw["page_size"] = int(layer["page_size"])
        if kind == "hisparse_hot":
            return _iface("HiSparseHotSpec")(blocks_per_request=int(layer["blocks_per_request"]),
                                             **kw)
        return _iface("HiSparseResidentSpec")(**kw)
    if kind == "hidden_state":
        # ExtractHiddenStatesAttention.get_kv_cache_spec: block, heads, head size, dtype only
        model_dtype = layer.get("model_dtype", top.get("model_dtype", "bfloat16"))
        tdtype, _, _ = O.resolve_kv_dtype(layer.get("dtype"), model_dtype)
        return _iface("HiddenStateCacheSpec")(num_kv_heads=int(layer["num_kv_heads"]),
                                              head_size=int(layer["head_size"]), dtype=tdtype,
                                              **_common(layer, top, ignored))
    if kind == "indexer":
        import torch

        dim = int(layer["index_head_dim"])
        base = _plain(layer, "mla", head_size=dim + dim // INDEXER_QUANT_BLOCK * 4,
                      dtype="uint8", backend="none")
        base.setdefault("num_kv_heads", 1)
        spec = _orig_build_spec(base, top, ignored)
        spec = dataclasses.replace(spec, dtype=torch.uint8, cache_dtype_str=None,
                                   kv_quant_mode=_iface("KVQuantMode").NONE,
                                   cache_role=_iface("SparseCacheRole").INDEXER)
        return _with_mla_extras(spec, {k: v for k, v in layer.items() if k != "cache_role"},
                                MLA_EXTRA)
    if kind == "rswa":
        spec = _orig_build_spec(_plain(layer, "full_attention"), top, ignored)
        return _rebuild(spec, _iface("RSWASpec"), rswa_window=int(layer["rswa_window"]))
    if kind == "circular_buffer":
        spec = _orig_build_spec(_plain(layer, "full_attention"), top, ignored)
        return _rebuild(spec, _iface("CircularBufferSpec"))
    # kpool_tail (0.31.0)
    spec = _orig_build_spec(_plain(layer, "sliding_window"), top, ignored)
    return _rebuild(spec, _iface("KpoolTailSpec"))


def spec_info(spec) -> dict:
    d = _orig_spec_info(spec)
    d["prefix_cacheable"] = bool(spec.prefix_cacheable)
    role = getattr(spec, "cache_role", None)
    if role is not None:
        d["cache_role"] = role.value
    if getattr(spec, "rswa_window", None) is not None:
        d["rswa_window"] = spec.rswa_window
    return d


def ensure_vllm_version(version: str, argv: list[str]) -> None:
    """oracle.ensure_vllm_version, re-executing this file (not oracle.py) in the venv."""
    if O._installed_vllm_version() == version:
        return
    py = O._venv_python(version)
    if py is None or os.environ.get(O._REEXEC_ENV) == version:
        sys.stderr.write(f"oracle_ext: vllm {version} is not installed next to {ORACLE_PATH}\n")
        sys.exit(2)
    os.environ[O._REEXEC_ENV] = version
    os.execv(py, [py, os.path.abspath(__file__), *argv])


O.build_spec = build_spec
O.spec_info = spec_info
O.ensure_vllm_version = ensure_vllm_version
O.LAYER_KEYS = O.LAYER_KEYS | NEW_LAYER_KEYS

if __name__ == "__main__":
    sys.exit(O.main())
