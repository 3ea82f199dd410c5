"""OLMo Hybrid: gated delta net layers with full attention every few layers."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    kv_heads_of,
    layer_types,
    text_cfg,
)
from kvplan.models.description import GdnDims, LayerDescription, LayerKind, ModelDescription
from kvplan.models.quant import quantization_info


def describe_olmo_hybrid(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/olmo_hybrid.py — layer_types[i] == "linear_attention" →
    OlmoHybridGatedDeltaNetAttention (model.layers.{i}.linear_attn; GDN state, no prefill
    checkpoints), else OlmoHybridAttention (model.layers.{i}.self_attn.attn, head = hidden //
    heads, KV heads `num_key_value_heads or num_attention_heads`). OlmoHybridConfig: 32 layers,
    layer_types full attention at i % 4 == 3 (else the last layer), linear_num_key_heads /
    linear_num_value_heads = num_attention_heads, linear_key_head_dim int(0.75 * hidden / k
    heads), linear_value_head_dim 2 * key dim, linear_conv_kernel_dim 4."""
    text = text_cfg(top)
    n = text.int_default("num_hidden_layers", 32)
    types = layer_types(text, n)
    if types is None:
        text.warn("no 'layer_types': OlmoHybridConfig's default (full attention at i % 4 == 3)")
        types = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
        if "full_attention" not in types:
            types[-1] = "full_attention"
    hidden = text.req_int("hidden_size")
    heads = text.req_int("num_attention_heads")
    kv = kv_heads_of(text, heads)
    k_heads = text.get_int("linear_num_key_heads", None) or heads
    k_dim = text.get_int("linear_key_head_dim", None) or int(0.75 * hidden / k_heads)
    gdn = GdnDims(num_k_heads=k_heads,
                  num_v_heads=text.get_int("linear_num_value_heads", None) or heads,
                  head_k_dim=k_dim,
                  head_v_dim=text.get_int("linear_value_head_dim", None) or 2 * k_dim,
                  conv_kernel=text.int_default("linear_conv_kernel_dim", 4))
    layers = [LayerDescription(index=i, name=f"model.layers.{i}.linear_attn", kind=LayerKind.GDN,
                               gdn=gdn)
              if t == "linear_attention" else
              attention(i, attn_name(i), kv_heads=kv, head_size=hidden // heads)
              for i, t in enumerate(types)]
    desc = finish(top, text, family="olmo_hybrid", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
    # vLLM: OlmoHybridGatedDeltaNetAttention keeps MambaBase's spec (no prefill checkpoints)
    return desc.model_copy(update={"gdn_prefill_checkpoints": False})
