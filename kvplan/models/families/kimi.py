"""Kimi delta attention (KDA) hybrids: Moonshot Kimi-Linear / Kimi-K3 (with MLA) and AliceAI (with
gated full attention)."""

from __future__ import annotations

from typing import Any

from kvplan.errors import UnsupportedError
from kvplan.models._common import (
    SPECS_HINT,
    Cfg,
    attention,
    attn_name,
    finish,
    head_dim_of,
    kv_heads_of,
    layer_types,
    mla,
    model_level_window,
    num_layers_of,
    positive_window,
    text_cfg,
    unsupported_layer_type,
)
from kvplan.models.description import GdnDims, LayerDescription, LayerKind, ModelDescription
from kvplan.models.families._shared import KIMI_K3, KIMI_K3_FLASHKDA
from kvplan.models.quant import quantization_info

# vLLM: transformers_utils/configs/kimi_linear.py KimiLinearConfig(max_position_embeddings=4096)
KIMI_LINEAR_DEFAULT_MAX_POSITIONS = 4096


def _layer_ids(lac: Cfg, key: str, n: int) -> set[int]:
    """A 1-indexed layer list of linear_attn_config as 0-indexed layer ids."""
    ids = lac.req_list(key, "Kimi's linear-attention layer map")
    if not all(isinstance(i, int) and 1 <= i <= n for i in ids):
        raise lac.error(f"'{lac.field(key)}' must list 1-indexed layer numbers from 1 to {n}")
    return {i - 1 for i in ids}


def describe_kimi_linear(top: Cfg, hf_quant_config: dict[str, Any] | None) -> ModelDescription:
    """vLLM: models/kimi_k3/nvidia/model.py KimiDecoderLayer — layer i is KDA iff (i + 1) is in
    linear_attn_config.kda_layers (configs/kimi_linear.py is_kda_layer), else MLA
    (MultiHeadLatentAttention, head kv_lora_rank + qk_rope_head_dim). Both register at
    model.layers.{i}.self_attn (KimiK3ForConditionalGeneration: under language_model., model.py
    L1791). KDA state: kda_state_shape (mamba_utils.py) with num_heads × head_dim for q, k and v;
    conv kernel short_conv_kernel_size."""
    text = text_cfg(top)
    n = num_layers_of(text)
    lac = text.sub("linear_attn_config")
    if lac is None:
        raise text.error(f"'{text.field('linear_attn_config')}' is missing: Kimi-Linear needs "
                         "its KDA layer map")
    kda = _layer_ids(lac, "kda_layers", n)
    if text.present("dsa_config"):
        # vLLM: nvidia/model.py — K3's KimiK3DSAAttention (sparse MLA + indexer, BLHNC layout)
        raise UnsupportedError(f"{top.source}: Kimi-K3 DSA layers (dsa_config) are not "
                               "modelled by kvplan yet", hint=SPECS_HINT)
    heads = lac.req_int("num_heads", "the KDA layers")
    head_dim = lac.req_int("head_dim", "the KDA layers")
    dims = GdnDims(num_k_heads=heads, num_v_heads=heads, head_k_dim=head_dim,
                   head_v_dim=head_dim,
                   conv_kernel=lac.req_int("short_conv_kernel_size", "the KDA layers"))
    rank = text.req_int("kv_lora_rank", "the MLA layers")
    rope = text.req_int("qk_rope_head_dim", "the MLA layers", minimum=0)
    # Kimi-K3 (use_full_rank_gate): KimiK3DeltaAttention (nvidia/kda.py) reads
    # mamba_ssm_cache_dtype and, with FlashKDA prefill (head_dim 128 and a gate_lower_bound,
    # kda.py L370 is_flashkda_supported), exports prefill checkpoints
    version = None
    if lac.get("use_full_rank_gate"):
        flashkda = head_dim == 128 and lac.get("gate_lower_bound") is not None
        version = KIMI_K3_FLASHKDA if flashkda else KIMI_K3
    prefix = "language_model.model.layers" if top.sub("text_config") is not None else \
        "model.layers"
    layers: list[LayerDescription] = []
    for i in range(n):
        name = f"{prefix}.{i}.self_attn"
        if i in kda:
            layers.append(LayerDescription(index=i, name=name, kind=LayerKind.KDA, gdn=dims,
                                           model_version=version))
        else:
            layers.append(mla(i, name, kv_lora_rank=rank, qk_rope_head_dim=rope))
    return finish(top, text, family="kimi_linear", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config), use_mla=True,
                  length_defaults={"max_position_embeddings": KIMI_LINEAR_DEFAULT_MAX_POSITIONS})


def describe_alice_ai(top: Cfg, hf_quant_config: dict[str, Any] | None) -> ModelDescription:
    """AliceAIForCausalLM (vLLM 0.33+). vLLM: models/alice_ai.py AliceAIDecoderBlock —
    layer_types[i] "linear_attention": KimiGatedDeltaNetAttention at model.layers.{i}.linear_attn
    (kda_state_shape of linear_num_key_heads × linear_key_head_dim, conv linear_conv_kernel_dim;
    kda_state_dtype without an SSM dtype → fp32 recurrent state); "full_attention":
    Qwen3NextAttention (model.layers.{i}.self_attn.attn, num_key_value_heads × head_dim, no
    per-layer window). The config class is the checkpoint's own: fields are read as written."""
    text = text_cfg(top)
    n = num_layers_of(text)
    types = layer_types(text, n)
    if types is None:
        raise text.error(f"'{text.field('layer_types')}' is missing: AliceAI builds each layer "
                         "from it", hint=SPECS_HINT)
    why = "the KDA layers"
    heads, head_dim = (text.req_int("linear_num_key_heads", why),
                       text.req_int("linear_key_head_dim", why))
    if (text.req_int("linear_num_value_heads", why), text.req_int("linear_value_head_dim", why)) \
            != (heads, head_dim):
        raise text.error("AliceAI KDA requires matching key/value head counts and dimensions "
                         "(vLLM: alice_ai.py _make_kimi_kda_config)")
    dims = GdnDims(num_k_heads=heads, num_v_heads=heads, head_k_dim=head_dim,
                   head_v_dim=head_dim, conv_kernel=text.req_int("linear_conv_kernel_dim", why))
    kv, hd = kv_heads_of(text), head_dim_of(text)
    window = model_level_window(positive_window(text), types)
    layers: list[LayerDescription] = []
    for i, kind in enumerate(types):
        if kind == "linear_attention":
            layers.append(LayerDescription(index=i, name=f"model.layers.{i}.linear_attn",
                                           kind=LayerKind.KDA, gdn=dims))
        elif kind == "full_attention":
            layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd, window=window))
        else:
            raise unsupported_layer_type(text, "layer_types", kind, "alice_ai")
    desc = finish(top, text, family="alice_ai", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=window)
    # vLLM 0.34: alice_ai.py AliceAIForCausalLM is not SupportsPP (its forward raises on PP too)
    return desc.model_copy(update={"supports_pipeline_parallel": False})
