"""Weight bytes: the result type, tensor classification (how vLLM places each tensor over TP/PP)
and the exact count from safetensors headers. No I/O; the config estimate is `estimate.py`."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any

from kvplan.engines.vllm.parallel import pp_partitions
from kvplan.errors import ConfigError
from kvplan.frozen import FrozenStrict
from kvplan.units import cdiv, round_up

# vLLM: model_executor/layers/vocab_parallel_embedding.DEFAULT_VOCAB_PADDING_SIZE
VOCAB_PADDING = 64


class ShardKind(StrEnum):
    SHARDED = "sharded"  # column/row-parallel linears, experts, per-head params: bytes / tp
    VOCAB = "vocab"  # VocabParallelEmbedding / ParallelLMHead: rows padded to 64, then / tp
    KV_HEADS = "kv_heads"  # k/v projections: / min(tp, kv heads) (replicated when tp > heads)
    REPLICATED = "replicated"  # norms, routers, MLA down-projections, row-parallel biases, scalars


class Placement(StrEnum):
    EMBED = "embed"  # first PP stage
    LAYER = "layer"  # the PP stage owning `layer`
    HEAD = "head"  # last PP stage (final norm, LM head)
    OTHER = "other"  # vision tower, projector, other top-level tensors: first PP stage
    EXTRA = "extra"  # in the checkpoint, not loaded for the target (MTP modules)


class WeightGroup(FrozenStrict):
    """Bytes that share a placement, a layer and a sharding rule."""

    placement: Placement
    layer: int | None = None
    shard: ShardKind
    num_bytes: int
    num_tensors: int = 1
    vocab_rows: int | None = None  # VOCAB only: rows of the tensor as stored (before padding)


class WeightBytes(FrozenStrict):
    total_bytes: int  # every tensor counted (incl. EXTRA)
    bytes_by_dtype: dict[str, int]
    groups: tuple[WeightGroup, ...]
    num_layers: int | None = None  # decoder layers the target loads (for PP)
    num_kv_heads: int | None = None  # total KV heads (k/v projections replicate above it)
    tied_embeddings: bool = False  # LM head shares the embedding (no lm_head tensor)
    parameter_count: int | None = None  # loaded parameters (estimate, or unpacked checkpoints)
    extra_parameter_count: int | None = None  # EXTRA (MTP) parameters
    num_tensors: int = 0
    estimated: bool = False
    method: str
    warnings: tuple[str, ...] = ()

    def _sum(self, pred) -> int:
        return sum(g.num_bytes for g in self.groups if pred(g))

    @property
    def loaded_bytes(self) -> int:
        """Everything vLLM loads for the target (all but EXTRA), unsharded."""
        return self._sum(lambda g: g.placement is not Placement.EXTRA)

    @property
    def extra_bytes(self) -> int:
        return self._sum(lambda g: g.placement is Placement.EXTRA)

    @property
    def sharded_bytes(self) -> int:
        return self._sum(lambda g: g.shard is ShardKind.SHARDED and g.placement is not Placement.EXTRA)

    @property
    def vocab_bytes(self) -> int:
        return self._sum(lambda g: g.shard is ShardKind.VOCAB and g.placement is not Placement.EXTRA)

    @property
    def kv_proj_bytes(self) -> int:
        return self._sum(lambda g: g.shard is ShardKind.KV_HEADS and g.placement is not Placement.EXTRA)

    @property
    def replicated_bytes(self) -> int:
        return self._sum(lambda g: g.shard is ShardKind.REPLICATED
                         and g.placement is not Placement.EXTRA)

    def per_rank_bytes(self, tp: int = 1, *, pp_size: int = 1, pp_rank: int = 0,
                       pp_partition: str | None = None, num_kv_heads: int | None = None,
                       include_extra: bool = False) -> int:
        """Bytes one GPU holds at this TP size and PP stage.

        Sharded bytes are split by `tp` (rounded up), vocab-parallel tensors are padded to 64
        rows and split, k/v projections split by min(tp, kv heads); replicated bytes are whole.
        With PP, layers go to stages as `get_pp_indices` does (`pp_partition` = the value of
        VLLM_PP_LAYER_PARTITION); the embedding (and vision tower) sits on the first stage, the
        final norm and LM head on the last; with tied embeddings the last stage holds its own copy.
        """
        if tp < 1:
            raise ValueError("tp must be >= 1")
        kv = num_kv_heads or self.num_kv_heads
        first = pp_rank == 0
        last = pp_rank == pp_size - 1
        lo, hi = 0, 1 << 62
        if pp_size > 1:
            if self.num_layers is None:
                raise ConfigError("the number of decoder layers is unknown, cannot split by PP")
            parts = pp_partitions(self.num_layers, pp_size, pp_partition)
            lo = sum(parts[:pp_rank])
            hi = lo + parts[pp_rank]

        def on_rank(g: WeightGroup) -> bool:
            p = g.placement
            if p is Placement.EXTRA:
                return include_extra and last
            if p in (Placement.EMBED, Placement.OTHER):
                return first
            if p is Placement.HEAD:
                return last
            return g.layer is None or lo <= g.layer < hi

        total = 0
        for g in self.groups:
            if not on_rank(g):
                continue
            total += _group_rank_bytes(g, tp, kv)
        if self.tied_embeddings and pp_size > 1 and last and not first:
            # vLLM: the last stage builds its own ParallelLMHead and loads the embedding into it.
            total += sum(_group_rank_bytes(g, tp, kv) for g in self.groups
                         if g.placement is Placement.EMBED and g.shard is ShardKind.VOCAB)
        return total

    def max_per_rank_bytes(self, tp: int = 1, *, pp_size: int = 1,
                           pp_partition: str | None = None, num_kv_heads: int | None = None) -> int:
        """The largest `per_rank_bytes` over the PP stages (the rank that limits the KV cache)."""
        return max(self.per_rank_bytes(tp, pp_size=pp_size, pp_rank=r, pp_partition=pp_partition,
                                       num_kv_heads=num_kv_heads) for r in range(pp_size))


def _group_rank_bytes(g: WeightGroup, tp: int, kv_heads: int | None) -> int:
    if g.shard is ShardKind.REPLICATED or tp == 1:
        return g.num_bytes
    if g.shard is ShardKind.VOCAB and g.vocab_rows:
        padded = round_up(g.vocab_rows, VOCAB_PADDING)
        return cdiv(padded, tp) * g.num_bytes // g.vocab_rows
    if g.shard is ShardKind.KV_HEADS and kv_heads:
        return cdiv(g.num_bytes, min(tp, kv_heads))
    return cdiv(g.num_bytes, tp)


# --------------------------------------------------------------------------------------------
# Name classification (shared by both sources)

_VISION_MARKERS = ("visual.", "vision_tower", "vision_model", "vision_encoder", "multi_modal_projector",
                   "mm_projector", "image_newline", "audio_tower", "audio_model", "vpm.", "resampler",
                   "patch_embed", "embed_vision", "vision_embed")
_EMBED_NAMES = {"embed_tokens", "wte", "word_embeddings", "tok_embeddings", "embed_tokens_per_layer",
                "embedding"}
_HEAD_NAMES = {"lm_head", "embed_out", "output"}
_FINAL_NORMS = {"norm", "final_layernorm", "ln_f", "norm_f", "final_norm"}
_REPLICATED_MODULES = {"q_a_proj", "kv_a_proj_with_mqa", "fused_qkv_a_proj", "kv_a_proj",
                       "router", "shared_expert_gate", "indexer", "gate"}
_ROW_PARALLEL = {"o_proj", "down_proj", "w2", "out_proj", "dense", "c_proj", "fc2", "wo",
                 "dense_4h_to_h", "proj", "linear_fc2"}
_SHARDED_MODULES = {"q_proj", "gate_proj", "up_proj", "gate_up_proj", "w1", "w3", "q_b_proj",
                    "kv_b_proj", "qkv_proj", "query_key_value", "c_attn", "c_fc", "fc1", "in_proj",
                    "in_proj_qkvz", "in_proj_ba", "in_proj_qkv", "in_proj_z", "in_proj_b",
                    "in_proj_a", "conv1d", "dense_h_to_4h", "wq", "wk", "wv", "wqkv", "x_proj",
                    "dt_proj", "experts", "shared_experts", "shared_expert", "fc", "eh_proj",
                    "linear_fc1", "qkv", "attn", "mlp"}
_PER_HEAD_PARAMS = {"A_log", "D", "dt_bias", "A", "sinks"}
_LAYER_RE = re.compile(r"(?:^|\.)(?:layers|h|blocks|layer)\.(\d+)\.")


def _numel(shape: Iterable[int]) -> int:
    return math.prod(int(s) for s in shape)


def classify_tensor(name: str, shape: tuple[int, ...] | list[int] = (),
                    num_layers: int | None = None) -> tuple[Placement, int | None, ShardKind]:
    """How vLLM places one checkpoint tensor: (placement, layer index or None, sharding)."""
    n = name
    tokens = n.split(".")
    param = tokens[-1]
    modules = tokens[:-1]
    lowered = n.lower()
    # MTP modules: Qwen3.5/3.6 `mtp.*`, DeepSeek/GLM layers numbered past num_hidden_layers.
    if tokens[0] == "mtp" or ".mtp." in n or n.startswith("model.mtp"):
        return Placement.EXTRA, None, _module_shard(modules, param, shape)
    if any(m in lowered for m in _VISION_MARKERS):
        return Placement.OTHER, None, _module_shard(modules, param, shape)
    m = _LAYER_RE.search(n)
    if m:
        layer = int(m.group(1))
        place = Placement.LAYER
        if num_layers is not None and layer >= num_layers:
            place = Placement.EXTRA
        return place, layer, _module_shard(modules, param, shape)
    last_module = modules[-1] if modules else param
    if last_module in _EMBED_NAMES or param in _EMBED_NAMES:
        return Placement.EMBED, None, ShardKind.VOCAB if len(shape) == 2 else ShardKind.REPLICATED
    if last_module in _HEAD_NAMES:
        return Placement.HEAD, None, ShardKind.VOCAB if len(shape) == 2 else ShardKind.REPLICATED
    if last_module in _FINAL_NORMS:
        return Placement.HEAD, None, ShardKind.REPLICATED
    return Placement.OTHER, None, ShardKind.REPLICATED


def _module_shard(modules: list[str], param: str, shape) -> ShardKind:
    mods = set(modules)
    last = modules[-1] if modules else ""
    shape = tuple(shape or ())
    # Norms are replicated, except the gated group norm inside a Mamba2 mixer (sharded).
    if any("norm" in t or t.startswith("ln_") or t == "ln" for t in modules) or "norm" in param:
        if "mixer" in mods and last == "norm":
            return ShardKind.SHARDED
        return ShardKind.REPLICATED
    # Routers (`mlp.gate`, gpt-oss `mlp.router`), Qwen's shared-expert gate, DeepSeek's
    # correction bias and V3.2 indexer, MLA down-projections (ReplicatedLinear in vLLM).
    if param == "e_score_correction_bias" or "router" in mods or "indexer" in mods \
            or "patch_embed" in mods or last in _REPLICATED_MODULES:
        return ShardKind.REPLICATED
    if len(shape) == 0 or _numel(shape) <= 1:  # per-tensor scales
        return ShardKind.REPLICATED
    if last in ("k_proj", "v_proj"):
        return ShardKind.KV_HEADS
    if param in _PER_HEAD_PARAMS:
        return ShardKind.SHARDED
    is_bias = param == "bias" or param.endswith("_bias")
    if "experts" in mods:
        # gpt-oss `down_proj_bias` [E, H] is added once per rank; other expert tensors shard.
        if is_bias and param.startswith("down"):
            return ShardKind.REPLICATED
        return ShardKind.SHARDED
    if last in _ROW_PARALLEL:
        return ShardKind.REPLICATED if is_bias else ShardKind.SHARDED
    if mods & _SHARDED_MODULES:
        return ShardKind.SHARDED
    return ShardKind.REPLICATED


# --------------------------------------------------------------------------------------------
# (a) exact bytes from safetensors headers

# Element sizes in bytes (safetensors dtype names); only used to cross-check data_offsets.
SAFETENSORS_DTYPE_BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
                          "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16,
                          "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64,
                          "F64": 64, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
_PACKED_DTYPES = {"U8", "I32", "U32", "I8", "F4"}


def weight_bytes_from_safetensors(headers: Mapping[str, Mapping[str, Any]], *,
                                  num_layers: int | None = None,
                                  num_kv_heads: int | None = None) -> WeightBytes:
    """Exact bytes of a checkpoint from its safetensors headers (file name → parsed header).

    `num_layers` (the config's num_hidden_layers) marks layers past it as MTP (EXTRA, not loaded
    for the target); without it every numbered layer counts as loaded.
    """
    if not headers:
        raise ConfigError("no safetensors headers given")
    by_dtype: dict[str, int] = {}
    agg: dict[tuple[Placement, int | None, ShardKind], list[int]] = {}
    vocab: list[WeightGroup] = []
    warnings: list[str] = []
    seen: set[str] = set()
    n_tensors = 0
    numel_loaded = 0
    numel_extra = 0
    packed = False
    max_layer = -1
    has_embed = has_head = False
    for fname, header in headers.items():
        if not isinstance(header, Mapping):
            raise ConfigError(f"safetensors header of {fname} is not an object")
        for tname, info in header.items():
            if tname == "__metadata__":
                continue
            try:
                dtype = str(info["dtype"])
                shape = tuple(int(s) for s in info["shape"])
                a, b = (int(x) for x in info["data_offsets"])
            except (KeyError, TypeError, ValueError) as e:
                raise ConfigError(f"tensor {tname!r} in {fname} has a malformed header entry") from e
            if b < a:
                raise ConfigError(f"tensor {tname!r} in {fname} has data_offsets {a}, {b}")
            if tname in seen:
                warnings.append(f"tensor {tname} appears in more than one file")
            seen.add(tname)
            nbytes = b - a
            bits = SAFETENSORS_DTYPE_BITS.get(dtype)
            if bits is not None and cdiv(_numel(shape) * bits, 8) != nbytes:
                warnings.append(f"{tname}: {nbytes} bytes do not match {dtype}{list(shape)}")
            n_tensors += 1
            by_dtype[dtype] = by_dtype.get(dtype, 0) + nbytes
            place, layer, shard = classify_tensor(tname, shape, num_layers)
            if place is Placement.LAYER and layer is not None:
                max_layer = max(max_layer, layer)
            if place is Placement.EMBED and shard is ShardKind.VOCAB:
                has_embed = True
            if place is Placement.HEAD and shard is ShardKind.VOCAB:
                has_head = True
            if dtype in _PACKED_DTYPES and len(shape) >= 2:
                packed = True
            if place is Placement.EXTRA:
                numel_extra += _numel(shape)
            else:
                numel_loaded += _numel(shape)
            if shard is ShardKind.VOCAB:
                vocab.append(WeightGroup(placement=place, layer=layer, shard=shard,
                                         num_bytes=nbytes, vocab_rows=shape[0] if shape else None))
            else:
                slot = agg.setdefault((place, layer, shard), [0, 0])
                slot[0] += nbytes
                slot[1] += 1
    groups = vocab + [WeightGroup(placement=p, layer=layer, shard=s, num_bytes=v[0], num_tensors=v[1])
                      for (p, layer, s), v in agg.items()]
    groups.sort(key=lambda g: (list(Placement).index(g.placement), g.layer or -1, g.shard.value))
    total = sum(by_dtype.values())
    layers = num_layers if num_layers is not None else (max_layer + 1 if max_layer >= 0 else None)
    return WeightBytes(
        total_bytes=total, bytes_by_dtype=dict(sorted(by_dtype.items())), groups=tuple(groups),
        num_layers=layers, num_kv_heads=num_kv_heads, tied_embeddings=has_embed and not has_head,
        parameter_count=None if packed else numel_loaded,
        extra_parameter_count=None if packed else numel_extra,
        num_tensors=n_tensors, estimated=False,
        method=f"safetensors headers ({len(headers)} file(s), {n_tensors} tensors, exact bytes)",
        warnings=tuple(dict.fromkeys(warnings)),
    )


# --------------------------------------------------------------------------------------------
# (b) estimate from the raw HF config
