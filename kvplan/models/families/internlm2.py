"""InternLM2 / InternLM2.5 (model_type internlm2, InternLM2ForCausalLM).

Neither transformers nor vLLM has a class for it: vLLM loads the checkpoint's remote
configuration_internlm2.py (InternLM2Config), whose defaults are applied here by hand.
"""

from __future__ import annotations

from kvplan.models._common import Cfg
from kvplan.models.description import ModelDescription
from kvplan.models.families._plain import class_int, class_lengths, plain_model, uniform_layers

# internlm/internlm2*/configuration_internlm2.py: num_hidden_layers=32, num_attention_heads=32,
# hidden_size=4096, num_key_value_heads=None → num_attention_heads, max_position_embeddings=2048.
_CLS = "InternLM2Config (remote configuration_internlm2.py)"


def describe_internlm2(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/internlm2.py InternLM2Attention — num_key_value_heads KV heads,
    head_dim = hidden_size // num_attention_heads (no head_dim field is read)."""
    n = class_int(top, ("num_hidden_layers",), 32, _CLS)
    heads = class_int(top, ("num_attention_heads",), 32, _CLS)
    kv = top.get_int("num_key_value_heads", None) or heads
    head_size = class_int(top, ("hidden_size",), 4096, _CLS) // heads
    lengths = class_lengths(top, {"max_position_embeddings": 2048}, _CLS)
    layers = uniform_layers(n, "model.layers.{}.attention.attn", kv_heads=kv, head_size=head_size)
    return plain_model(top, top, hf_quant_config, family="internlm2", layers=layers,
                       lengths=lengths)
