"""Llama-Nemotron Super/Ultra NAS models (model_type nemotron-nas, DeciLMForCausalLM): Llama
layers with per-layer attention from `block_configs`.

Neither transformers nor vLLM has a class for it: vLLM loads the checkpoint's remote
configuration_decilm.py (DeciLMConfig, a LlamaConfig plus block_configs), whose defaults are
applied here by hand.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.errors import UnsupportedError
from kvplan.models._common import Cfg, attention, attn_name, no_kv
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.families._plain import class_int, class_lengths, plain_model

_CLS = "DeciLMConfig (remote configuration_decilm.py, a LlamaConfig)"


def describe_nemotron_nas(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/nemotron_nas.py DeciLMDecoderLayer — a block whose attention is `no_op` has
    no attention module (no KV); any other builds LlamaAttention with
    num_attention_heads // n_heads_in_group KV heads of head_dim or hidden_size // heads."""
    n = class_int(top, ("num_hidden_layers",), 32, _CLS)
    heads = class_int(top, ("num_attention_heads",), 32, _CLS)
    head_size = top.get_int("head_dim", None) or class_int(top, ("hidden_size",), 4096, _CLS) // heads
    blocks = top.req_list("block_configs", "the per-layer attention of a NAS model")
    if len(blocks) < n:
        raise top.error(f"field 'block_configs' has {len(blocks)} entries but num_hidden_layers "
                        f"is {n}")
    layers: list[LayerDescription] = []
    for i, block in enumerate(blocks[:n]):
        attn = block.get("attention") if isinstance(block, Mapping) else None
        if not isinstance(attn, Mapping):
            raise top.error(f"field 'block_configs[{i}].attention' must be an object")
        if attn.get("no_op"):
            layers.append(no_kv(i, attn_name(i)))
            continue
        if attn.get("replace_with_linear"):
            # vLLM reads only no_op: such a block would get an attention module it has no
            # weights for (or fail on n_heads_in_group null)
            raise UnsupportedError(
                f"{top.source}: block_configs[{i}].attention has replace_with_linear, which "
                "vLLM's nemotron_nas.py does not implement (it builds attention only from "
                "n_heads_in_group and skips only no_op blocks)")
        group = attn.get("n_heads_in_group")
        if isinstance(group, bool) or not isinstance(group, int) or group < 1 or heads % group:
            raise top.error(f"field 'block_configs[{i}].attention.n_heads_in_group' must be a "
                            f"divisor of num_attention_heads ({heads}), got {group!r}")
        if attn.get("window_length") is not None:
            top.warn(f"block_configs[{i}].attention.window_length is ignored by vLLM's "
                     "nemotron_nas.py: planned as full attention")
        layers.append(attention(i, attn_name(i), kv_heads=heads // group, head_size=head_size))
    # LlamaConfig.max_position_embeddings = 2048
    lengths = class_lengths(top, {"max_position_embeddings": 2048}, _CLS)
    return plain_model(top, top, hf_quant_config, family="nemotron_nas", layers=layers,
                       lengths=lengths)
