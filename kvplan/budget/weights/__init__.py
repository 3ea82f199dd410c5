"""Weight bytes per GPU: exact from safetensors headers, or estimated from the config. No I/O.

Two sources, one result type (`WeightBytes`):

* `weight_bytes_from_safetensors(headers)`: headers map file name → the parsed JSON header of a
  `.safetensors` file (tensor name → {"dtype", "shape", "data_offsets"}, plus "__metadata__").
  Bytes are the exact `data_offsets` spans.
* `weight_bytes_from_config(config)`: parameter counts from the raw HF config dict (dense, GQA,
  MLA, MoE, Mamba2, gated delta net, MTP, draft heads) and bytes from the quantization scheme the
  config declares. The result says `estimated=True` and names the method.

Both classify every tensor by its name into how vLLM places it (vocab-parallel embedding / LM
head, TP-sharded linear, KV-head projections, replicated norms/routers/scalars) and where
(first PP stage, a layer, last PP stage, not loaded), so `per_rank_bytes(tp, pp_size=...)` can
be given for any rank.
"""

from kvplan.budget.weights.core import (
    SAFETENSORS_DTYPE_BITS,
    VOCAB_PADDING,
    Placement,
    ShardKind,
    WeightBytes,
    WeightGroup,
    classify_tensor,
    weight_bytes_from_safetensors,
)
from kvplan.budget.weights.estimate import ParamCounts, count_parameters, weight_bytes_from_config
from kvplan.budget.weights.inventories import VirtualTensor, config_virtual_tensors

__all__ = ["SAFETENSORS_DTYPE_BITS", "VOCAB_PADDING", "ParamCounts", "Placement", "ShardKind",
           "VirtualTensor", "WeightBytes", "WeightGroup", "classify_tensor", "config_virtual_tensors",
           "count_parameters", "weight_bytes_from_config", "weight_bytes_from_safetensors"]
