"""Weight bytes estimated from the raw HF config (no safetensors metadata): the virtual tensors of
`inventories`, counted by part (`count_parameters`) or in bytes under the quantization `schemes`
the config declares, grouped by where vLLM places them (`weight_bytes_from_config`). No I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kvplan.budget.weights.config_view import ConfigView
from kvplan.budget.weights.core import (
    Placement,
    ShardKind,
    WeightBytes,
    WeightGroup,
    classify_tensor,
)
from kvplan.budget.weights.inventories import config_virtual_tensors
from kvplan.budget.weights.schemes import quant_plan, scheme_for, tensor_pieces
from kvplan.frozen import FrozenStrict
from kvplan.units import dtype_size_bytes

__all__ = ["ParamCounts", "count_parameters", "weight_bytes_from_config"]


class ParamCounts(FrozenStrict):
    total: int  # parameters the target loads
    embedding: int
    lm_head: int
    attention: int  # attention / MLA / Mamba / GDN mixers
    mlp: int  # dense MLPs and shared experts
    experts: int  # routed experts
    router: int
    norms: int
    other: int  # vision tower, fusion layers, ...
    extra: int  # MTP modules in the checkpoint (not loaded for the target)

    @property
    def checkpoint_total(self) -> int:
        return self.total + self.extra


def count_parameters(config: Mapping[str, Any], *, draft_method: str | None = None,
                     include_vision: bool = True) -> ParamCounts:
    """Parameter counts by part, from the raw HF config dict (nested text_config handled)."""
    tensors, _, layers = config_virtual_tensors(config, draft_method=draft_method,
                                                include_vision=include_vision)
    parts = dict.fromkeys(("embedding", "lm_head", "attention", "mlp", "experts", "router", "norms",
                           "other", "extra"), 0)
    for vt in tensors:
        place, _, _ = classify_tensor(vt.name, vt.shape, layers)
        if place is Placement.EXTRA:
            parts["extra"] += vt.numel
            continue
        if place is Placement.OTHER:  # vision tower, projector
            parts["other"] += vt.numel
        elif vt.role == "embed":
            parts["embedding"] += vt.numel
        elif vt.role == "lm_head":
            parts["lm_head"] += vt.numel
        elif vt.role == "norm":
            parts["norms"] += vt.numel
        elif vt.role == "router":
            parts["router"] += vt.numel
        elif ".fc." in vt.name or vt.role in ("int64", "bool"):
            parts["other"] += vt.numel
        elif ".experts." in vt.name:
            parts["experts"] += vt.numel
        elif re.search(r"\.(mlp|mixer)\.(shared_experts?\.|dense_)?(gate|up|down)_proj|\.dense_mlp\."
                       r"|_latent_proj\.", vt.name):
            parts["mlp"] += vt.numel
        else:
            parts["attention"] += vt.numel
    total = sum(v for k, v in parts.items() if k != "extra")
    return ParamCounts(total=total, **parts)


def weight_bytes_from_config(config: Mapping[str, Any], *,
                             hf_quant_config: Mapping[str, Any] | None = None,
                             scheme: str | None = None, draft_method: str | None = None,
                             dtype: str | None = None, include_vision: bool = True) -> WeightBytes:
    """Estimate checkpoint bytes from the raw HF config dict (no safetensors metadata at hand).

    Bytes follow the quantization the config declares (`quantization_config`, or ModelOpt's
    `hf_quant_config.json` passed as `hf_quant_config`), or an explicit `scheme` ('bf16', 'fp8',
    'nvfp4', 'mxfp4', 'awq', 'gptq', 'int4', 'int8'). Unquantized tensors take the model dtype.
    """
    tensors, warnings, layers = config_virtual_tensors(config, draft_method=draft_method,
                                                       include_vision=include_vision)
    c = ConfigView(config)
    model_dtype = dtype or c.get("torch_dtype", "dtype", default="bfloat16")
    try:
        elem = dtype_size_bytes(str(model_dtype))
    except Exception:
        elem = 2
        warnings.append(f"model dtype {model_dtype!r} unknown; 2 bytes per parameter assumed")
    plan = quant_plan(config, hf_quant_config, scheme)
    warnings += list(plan.warnings)
    kv_heads = c.get("num_key_value_heads")
    if c.get("kv_lora_rank"):
        kv_heads = None  # MLA: no k/v projections
    by_dtype: dict[str, int] = {}
    agg: dict[tuple[Placement, int | None, ShardKind], list[int]] = {}
    vocab_groups: list[WeightGroup] = []
    n_loaded = n_extra = 0
    n_tensors = 0
    for vt in tensors:
        sch = scheme_for(vt, plan)
        pieces = tensor_pieces(vt, sch, elem)
        nbytes = sum(b for _, b in pieces)
        for d, b in pieces:
            by_dtype[d] = by_dtype.get(d, 0) + b
        place, layer, shard = classify_tensor(vt.name, vt.shape, layers)
        n_tensors += vt.count * len(pieces)
        if place is Placement.EXTRA:
            n_extra += vt.numel
        else:
            n_loaded += vt.numel
        if shard is ShardKind.VOCAB:
            vocab_groups.append(WeightGroup(placement=place, layer=layer, shard=shard,
                                            num_bytes=nbytes, vocab_rows=vt.shape[0]))
        else:
            slot = agg.setdefault((place, layer, shard), [0, 0])
            slot[0] += nbytes
            slot[1] += vt.count
    groups = vocab_groups + [WeightGroup(placement=p, layer=la, shard=s, num_bytes=v[0],
                                         num_tensors=v[1]) for (p, la, s), v in agg.items()]
    groups.sort(key=lambda g: (list(Placement).index(g.placement), g.layer or -1, g.shard.value))
    tie = bool(c.get("tie_word_embeddings", default=False)) and draft_method is None
    what = f"draft head ({draft_method}) " if draft_method else ""
    return WeightBytes(
        total_bytes=sum(by_dtype.values()), bytes_by_dtype=dict(sorted(by_dtype.items())),
        groups=tuple(groups), num_layers=layers,
        num_kv_heads=int(kv_heads) if kv_heads else None, tied_embeddings=tie,
        parameter_count=n_loaded, extra_parameter_count=n_extra, num_tensors=n_tensors,
        estimated=True,
        method=f"{what}estimate from config.json parameter counts; bytes by {plan.method}, "
               f"unquantized tensors {model_dtype}",
        warnings=tuple(dict.fromkeys(warnings)),
    )
