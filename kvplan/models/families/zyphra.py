"""Zyphra's hybrids: Zamba2 (Mamba2 backbone + shared attention blocks) and ZAYA1 (CCA)."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    finish,
    layer_types,
    positive_window,
    text_cfg,
)
from kvplan.models.description import (
    CcaDims,
    LayerDescription,
    LayerKind,
    Mamba2Dims,
    ModelDescription,
)
from kvplan.models.quant import quantization_info

ZAMBA2_LONG_CONTEXT = 16384  # Zamba2Config: use_long_context → max_position_embeddings


def _zamba2_block_types(text: Cfg, n: int) -> list[str]:
    types = layer_types(text, n, key="layers_block_type")
    if types is not None:
        return types
    text.warn("no 'layers_block_type': Zamba2Config's default 54-layer pattern")
    return (["linear_attention"] + (["linear_attention"] * 5 + ["hybrid"]) * 7
            + ["linear_attention"] * 4 + ["hybrid"] + ["linear_attention"] * 3 + ["hybrid"]
            + ["linear_attention"] * 2)[:n]


def describe_zamba2(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/zamba2.py — every layer has a MambaMixer2 registered as "{H + i}.mixer"
    (H = number of "hybrid" layers; intermediate mamba_expand * hidden, n_mamba_heads heads of
    intermediate // n_mamba_heads, mamba_ngroups, mamba_d_state, mamba_d_conv). The num_mem_blocks
    shared attention blocks each own one Attention per hybrid layer they serve (block b serves
    hybrid ordinal k when k % num_mem_blocks == b), named model.attn.{j} with j counting from
    b * ceil(H / num_mem_blocks); heads = KV heads = num_attention_heads, head
    attention_head_dim. Zamba2Config: 54 layers, mamba_d_state 64, mamba_d_conv 4, mamba_expand
    2, mamba_ngroups 1, n_mamba_heads 8, num_mem_blocks 1, attention_head_dim
    2 * hidden // heads, use_long_context → max_position_embeddings 16384."""
    text = text_cfg(top)
    if text.data.get("use_long_context") is True:
        text = Cfg({**text.data, "max_position_embeddings": ZAMBA2_LONG_CONTEXT}, text.source,
                   text.path, text.warnings)
    n = text.int_default("num_hidden_layers", 54)
    types = _zamba2_block_types(text, n)
    hybrid = [i for i, t in enumerate(types) if t == "hybrid"]
    hidden = text.req_int("hidden_size")
    heads = text.int_default("num_attention_heads", 32)
    head_dim = text.get_int("attention_head_dim", None) or 2 * hidden // heads
    mem_blocks = text.int_default("num_mem_blocks", 1)
    layers: list[LayerDescription] = []
    # vLLM registers the shared blocks' attentions first (block 0's, then block 1's, ...)
    for b in range(mem_blocks):
        j = b * (len(hybrid) + mem_blocks - 1) // mem_blocks
        for k, i in enumerate(hybrid):
            if k % mem_blocks == b:
                layers.append(attention(i, f"model.attn.{j}", kv_heads=heads, head_size=head_dim))
                j += 1
    inner = text.int_default("mamba_expand", 2) * hidden
    mamba_heads = text.int_default("n_mamba_heads", 8)
    dims = Mamba2Dims(intermediate_size=inner, state_size=text.int_default("mamba_d_state", 64),
                      conv_kernel=text.int_default("mamba_d_conv", 4),
                      n_groups=text.int_default("mamba_ngroups", 1), num_heads=mamba_heads,
                      head_dim=inner // mamba_heads)
    layers += [LayerDescription(index=i, name=f"{len(hybrid) + i}.mixer", kind=LayerKind.MAMBA2,
                                mamba2=dims) for i in range(n)]
    desc = finish(top, text, family="zamba2", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
    # vLLM 0.34: zamba2.py Zamba2ForCausalLM is not SupportsPP
    return desc.model_copy(update={"supports_pipeline_parallel": False})


def describe_zaya(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/zaya.py — every layer is ZayaAttention: a CCA state (ZayaCCA, MambaSpec of
    type SHORT_CONV, TP-replicated, at model.layers.{i}.self_attn.qkv_proj) and an Attention
    with all num_attention_heads / num_key_value_heads on every rank (ReplicatedLinear
    projections) at model.layers.{i}.self_attn.attn, windowed by sliding_window on
    "hybrid_sliding" layers. ZayaConfig (transformers): 40 layers, 8 heads, 2 KV heads, head_dim
    128, layer_types all "hybrid", cca_time0 2, cca_time1 2."""
    text = text_cfg(top)
    n = text.int_default("num_hidden_layers", 40)
    types = layer_types(text, n) or ["hybrid"] * n
    heads = text.int_default("num_attention_heads", 8)
    kv = text.int_default("num_key_value_heads", 2)
    hd = text.int_default("head_dim", 128)
    cca = CcaDims(num_heads=heads, num_kv_heads=kv, head_dim=hd,
                  history=text.int_default("cca_time0", 2) + text.int_default("cca_time1", 2) - 2)
    window = positive_window(text)
    if "hybrid_sliding" in types and window is None:
        raise text.error("'sliding_window' must be set when layer_types has 'hybrid_sliding' "
                         "(ZayaConfig.validate_architecture)")
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        prefix = f"model.layers.{i}.self_attn"
        layers.append(LayerDescription(index=i, name=f"{prefix}.qkv_proj", kind=LayerKind.CCA,
                                       cca=cca, tp_replicated=True))
        layers.append(attention(i, f"{prefix}.attn", kv_heads=kv, head_size=hd,
                                window=window if t == "hybrid_sliding" else None)
                      .model_copy(update={"tp_replicated": True}))
    desc = finish(top, text, family="zaya", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
    # vLLM 0.34: zaya.py ZayaForCausalLM is not SupportsPP, and raises NotImplementedError with
    # a speculative config
    return desc.model_copy(update={
        "supports_pipeline_parallel": False,
        "speculative_decoding_refusal": "ZAYA1 does not support speculative decoding (vLLM: zaya.py "
                                        "ZayaForCausalLM raises NotImplementedError)"})
