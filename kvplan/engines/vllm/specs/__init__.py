"""Typed per-layer KV cache specs, mirroring `vllm/v1/kv_cache_interface.py`.

Frozen dataclasses (not pydantic) because the engine creates and hashes thousands of them per
second in sweeps; equality and hashing follow vLLM's dataclass semantics exactly (`is_draft`
never takes part), which is what grouping relies on.

Modules: `base.py` the `KVCacheSpec` base, `DemandSettings` and the enums; `attention.py` the
attention specs (full, MLA, sliding window, chunked local, cross / encoder-only, the one-block
rings); `mamba.py` `MambaSpec`; `hisparse.py` HiSparse's raw pages; `kinds.py`
`UniformTypeKVCacheSpecs` and the kind / uniform-type tables the grouping reads.
"""

from kvplan.engines.vllm.specs.attention import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    CircularBufferSpec,
    CrossAttentionSpec,
    EncoderOnlyAttentionSpec,
    FullAttentionSpec,
    HiddenStateCacheSpec,
    KpoolTailSpec,
    MLAAttentionSpec,
    RSWASpec,
    SinkFullAttentionSpec,
    SlidingWindowMLASpec,
    SlidingWindowSpec,
    bytes_per_token,
)
from kvplan.engines.vllm.specs.base import (
    DemandSettings,
    KVCacheGroupRole,
    KVCacheSpec,
    MultipleOf,
    SparseCacheRole,
    SpecKind,
)
from kvplan.engines.vllm.specs.hisparse import HiSparseHotSpec, HiSparseResidentSpec
from kvplan.engines.vllm.specs.kinds import (
    UniformTypeKVCacheSpecs,
    is_uniform_with_collection,
    spec_kind,
    uniform_type_base,
)
from kvplan.engines.vllm.specs.mamba import MambaSpec, MambaType

__all__ = [
    "AttentionSpec", "ChunkedLocalAttentionSpec", "CircularBufferSpec", "CrossAttentionSpec",
    "DemandSettings", "EncoderOnlyAttentionSpec", "FullAttentionSpec", "HiSparseHotSpec",
    "HiSparseResidentSpec", "HiddenStateCacheSpec", "KVCacheGroupRole", "KVCacheSpec",
    "KpoolTailSpec", "MLAAttentionSpec", "MambaSpec", "MambaType", "MultipleOf", "RSWASpec",
    "SinkFullAttentionSpec", "SlidingWindowMLASpec", "SlidingWindowSpec", "SparseCacheRole",
    "SpecKind", "UniformTypeKVCacheSpecs", "bytes_per_token", "is_uniform_with_collection",
    "spec_kind", "uniform_type_base",
]
