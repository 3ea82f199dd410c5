"""inclusionAI Bailing hybrids: Ling/Ring 2.5 (MLA + lightning linear attention) and Ling 3.0
(MLA + Kimi delta attention), text and VL."""

from __future__ import annotations

from typing import Any

from kvplan.models._common import (
    Cfg,
    finish,
    layers_prefix,
    mla,
    note_encoder_cache,
    text_cfg,
)
from kvplan.models.description import (
    GdnDims,
    LayerDescription,
    LayerKind,
    LinearAttentionDims,
    ModelDescription,
)
from kvplan.models.quant import quantization_info

# transformers BailingHybridConfig (model_type bailing_hybrid, the class vLLM loads without
# --trust-remote-code) and vLLM's own BailingMoeV3TextConfig (configs/bailing_moe_v3_vl.py)
_HYBRID_DEFAULTS = {"num_hidden_layers": 42, "num_attention_heads": 32, "head_dim": 128,
                    "layer_group_size": 6, "short_conv_kernel_size": 4, "kv_lora_rank": 512,
                    "qk_rope_head_dim": 64, "max_position_embeddings": 262144}
_V3_VL_DEFAULTS = {"num_hidden_layers": 20, "num_attention_heads": 16, "head_dim": 128,
                   "layer_group_size": 5, "short_conv_kernel_size": 4, "kv_lora_rank": 512,
                   "qk_rope_head_dim": 64, "max_position_embeddings": 32768}


def _read(text: Cfg, defaults: dict[str, int], key: str) -> int:
    return text.int_default(key, defaults[key], minimum=0 if key == "qk_rope_head_dim" else 1)


def _state_head_dim(text: Cfg, defaults: dict[str, int], own_class: bool) -> int:
    """The head dim vLLM's linear / KDA layers read as config.head_dim. BailingHybridConfig's
    __post_init__ overwrites head_dim with qk_rope_head_dim (it keeps the file's value as
    linear_head_dim, which vLLM does not read); vLLM's BailingMoeV3TextConfig keeps it (head_dim
    or hidden_size // num_attention_heads)."""
    rope = _read(text, defaults, "qk_rope_head_dim")
    if own_class:
        if text.present("head_dim") and not text.has("head_dim"):  # explicit null
            return text.int_default("hidden_size", 2048) // _read(text, defaults,
                                                                  "num_attention_heads")
        return _read(text, defaults, "head_dim")
    written = text.get_int("head_dim", None)
    if written is not None and written != rope:
        text.warn(f"transformers' BailingHybridConfig replaces head_dim ({written}) with "
                  f"qk_rope_head_dim ({rope}); vLLM's linear-attention state reads it, so the plan "
                  f"uses {rope} (with --trust-remote-code the checkpoint's own config class "
                  f"keeps {written})")
    return rope


def _describe(top: Cfg, hf_quant_config: dict[str, Any] | None, *, v3: bool) -> ModelDescription:
    text = text_cfg(top)
    own_class = v3 and text is not top  # BailingMoeV3VLConfig's text config (vLLM's class)
    defaults = _V3_VL_DEFAULTS if own_class else _HYBRID_DEFAULTS
    n = _read(text, defaults, "num_hidden_layers")
    heads = _read(text, defaults, "num_attention_heads")
    group = _read(text, defaults, "layer_group_size")
    head_dim = _state_head_dim(text, defaults, own_class)
    rank = _read(text, defaults, "kv_lora_rank")
    rope = _read(text, defaults, "qk_rope_head_dim")
    prefix = layers_prefix(top, text)
    if text is not top:
        note_encoder_cache(top)
    if v3:
        kda = GdnDims(num_k_heads=heads, num_v_heads=heads, head_k_dim=head_dim,
                      head_v_dim=head_dim,
                      conv_kernel=_read(text, defaults, "short_conv_kernel_size"))
    lin = LinearAttentionDims(num_heads=heads, head_dim=head_dim)
    layers: list[LayerDescription] = []
    for i in range(n):
        name = f"{prefix}.{i}.self_attn"
        if v3:
            # vLLM: bailing_moe_v3.py _is_kda_layer — the last layer of each full group and
            # every layer of a trailing partial group are MLA
            state = not ((i + 1) % group == 0 or i >= n // group * group)
        else:
            # vLLM: bailing_moe_linear.py is_linear_layer — (i + 1) % layer_group_size != 0
            state = (i + 1) % group != 0
        if not state:
            layers.append(mla(i, f"{name}.attn", kv_lora_rank=rank, qk_rope_head_dim=rope))
        elif v3:
            layers.append(LayerDescription(index=i, name=name, kind=LayerKind.KDA, gdn=kda))
        else:
            layers.append(LayerDescription(index=i, name=name, kind=LayerKind.LINEAR_ATTENTION,
                                           linear_attention=lin))
    return finish(top, text, family="bailing_v3" if v3 else "bailing_v2_5", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config), use_mla=True,
                  length_defaults={"max_position_embeddings":
                                   defaults["max_position_embeddings"]})


def describe_bailing_v2_5(top: Cfg, hf_quant_config: dict[str, Any] | None) -> ModelDescription:
    """BailingMoeV2_5ForCausalLM (Ling/Ring 2.5, 2.6). vLLM: models/bailing_moe_linear.py —
    layer i is BailingMoELinearAttention (model.layers.{i}.self_attn, state
    linear_attention_state_shape(num_attention_heads, head_dim), layers/mamba/linear/base.py) when
    (i + 1) % layer_group_size != 0, else BailingMoeV25MLAAttention (MLA, kv_lora_rank +
    qk_rope_head_dim, at model.layers.{i}.self_attn.attn)."""
    return _describe(top, hf_quant_config, v3=False)


def describe_bailing_v3(top: Cfg, hf_quant_config: dict[str, Any] | None) -> ModelDescription:
    """BailingMoeV3ForCausalLM (Ling 3.0) and BailingMoeV3VLForConditionalGeneration (its
    text_config under language_model.). vLLM: models/bailing_moe_v3.py — KDA layers
    (BailingMoeV3KimiDeltaAttention: kda_state_shape(num_attention_heads, head_dim,
    short_conv_kernel_size), kda_state_dtype without an SSM dtype → fp32 recurrent state) and MLA
    layers (BailingMoeV3MLAAttention)."""
    return _describe(top, hf_quant_config, v3=True)
