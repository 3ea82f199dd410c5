"""MiniCPM3 (model_type minicpm3, MiniCPM3ForCausalLM): an MLA-shaped config that vLLM serves
as plain multi-head attention.

Defaults are transformers' MiniCPM3Config (models/minicpm3/configuration_minicpm3.py). Its
`head_dim` is the rotary part (qk_rope_head_dim), which is not what vLLM caches.
"""

from __future__ import annotations

from kvplan.models._common import Cfg
from kvplan.models.description import ModelDescription
from kvplan.models.families._plain import class_int, class_lengths, plain_model, uniform_layers

_CLS = "transformers MiniCPM3Config"


def describe_minicpm3(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/minicpm3.py MiniCPM3Attention — Attention(num_heads, qk_nope_head_dim +
    qk_rope_head_dim, num_kv_heads=num_heads): one K and one V head of the full query-key size
    per query head (V is zero-padded from v_head_dim); not MLA (is_deepseek_mla excludes it)."""
    n = class_int(top, ("num_hidden_layers",), 62, _CLS)
    heads = class_int(top, ("num_attention_heads",), 40, _CLS)
    head_size = (class_int(top, ("qk_nope_head_dim",), 64, _CLS)
                 + class_int(top, ("qk_rope_head_dim",), 32, _CLS))
    lengths = class_lengths(top, {"max_position_embeddings": 32768}, _CLS)
    layers = uniform_layers(n, "model.layers.{}.self_attn.attn", kv_heads=heads,
                            head_size=head_size)
    return plain_model(top, top, hf_quant_config, family="minicpm3", layers=layers,
                       lengths=lengths)
