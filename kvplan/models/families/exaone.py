"""EXAONE 3.0 / 3.5 (model_type exaone, ExaoneForCausalLM).

Neither transformers nor vLLM has a class for it: vLLM loads the checkpoint's remote
configuration_exaone.py (ExaoneConfig), whose defaults are applied here by hand.
"""

from __future__ import annotations

from kvplan.models._common import Cfg
from kvplan.models.description import ModelDescription
from kvplan.models.families._plain import class_int, class_lengths, plain_model, uniform_layers

# LGAI-EXAONE/EXAONE-3.5-*/configuration_exaone.py: num_layers=32, num_attention_heads=32,
# hidden_size=2048, num_key_value_heads=None → num_attention_heads, max_position_embeddings=2048;
# attribute_map num_hidden_layers → num_layers.
_CLS = "ExaoneConfig (remote configuration_exaone.py)"


def describe_exaone(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/exaone.py ExaoneAttention — num_key_value_heads KV heads,
    head_dim = config.head_dim or hidden_size // num_attention_heads."""
    n = class_int(top, ("num_hidden_layers", "num_layers"), 32, _CLS)
    heads = class_int(top, ("num_attention_heads",), 32, _CLS)
    kv = top.get_int("num_key_value_heads", None) or heads
    head_size = top.get_int("head_dim", None) or class_int(top, ("hidden_size",), 2048, _CLS) // heads
    lengths = class_lengths(top, {"max_position_embeddings": 2048}, _CLS)
    layers = uniform_layers(n, "transformer.h.{}.attn.attention.attn", kv_heads=kv,
                            head_size=head_size)
    return plain_model(top, top, hf_quant_config, family="exaone", layers=layers, lengths=lengths)
