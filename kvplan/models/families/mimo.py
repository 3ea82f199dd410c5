"""Xiaomi MiMo-V2-Flash / MiMo-V2: hybrid sliding-window + full attention, own head dims per kind."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    architectures,
    attention,
    attn_name,
    finish,
    num_layers_of,
    pattern_list,
    text_cfg,
)
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.quant import quantization_info
from kvplan.models.resolution.resolved import encoder_cache_note

# vLLM: models/mimo_v2_mtp.py _MIMO_V2_FLASH_NUM_MTP_LAYERS / _MIMO_V2_PRO_NUM_MTP_LAYERS
_VLLM_MTP_LAYERS = 1
OMNI = "MiMoV2OmniForCausalLM"


def _swa_layer(text: Cfg, index: int, name: str) -> LayerDescription:
    window = text.get_int("sliding_window_size", -1, minimum=None)
    assert window is not None
    hd = text.req_int("swa_head_dim", "the sliding-window layers")
    layer = attention(index, name,
                      kv_heads=text.req_int("swa_num_key_value_heads", "the sliding-window layers"),
                      head_size=hd, head_size_v=text.get_int("swa_v_head_dim", hd),
                      window=window if window > -1 else None)
    # vLLM: mimo_v2.py MiMoV2Attention — sinks on the SWA layers (and the MTP layer) when
    # add_swa_attention_sink_bias; the full layers never get them
    return layer.model_copy(update={"has_sinks": bool(text.get("add_swa_attention_sink_bias"))})


def describe_mimo_v2(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/mimo_v2.py MiMoV2FlashDecoderLayer — hybrid_layer_pattern[i] == 1 is a
    sliding-window layer (swa_num_key_value_heads, swa_head_dim, swa_v_head_dim,
    sliding_window_size; its sink bias holds no KV); 0 is full attention (num_key_value_heads,
    head_dim, v_head_dim). CacheConfig.sliding_window is cleared, so full layers get no window.
    MTP (mimo_v2_mtp.py): one SWA-configured layer at model.mtp.layers.0.self_attn.attn."""
    text = text_cfg(top)
    n = num_layers_of(text)
    pattern = pattern_list(text, "hybrid_layer_pattern", n)
    # vLLM: mimo_v2_omni.py MiMoV2OmniForCausalLM — the same MiMoV2FlashForCausalLM under
    # language_model. (vision and audio towers beside it); its MTP (mimo_v2_mtp.py
    # MiMoV2OmniMTP) is MiMoV2MTP's
    omni = architectures(top)[:1] == (OMNI,)
    prefix = "language_model.model.layers" if omni else "model.layers"
    kv = text.req_int("num_key_value_heads", "the full-attention layers")
    hd = text.req_int("head_dim", "the full-attention layers")
    hd_v = text.get_int("v_head_dim", hd)
    layers: list[LayerDescription] = []
    for i, p in enumerate(pattern):
        if int(p) == 1:
            layers.append(_swa_layer(text, i, attn_name(i, prefix)))
        else:
            layers.append(attention(i, attn_name(i, prefix), kv_heads=kv, head_size=hd,
                                    head_size_v=hd_v))
    mtp = [_swa_layer(text, n + k, f"model.mtp.layers.{k}.self_attn.attn")
           for k in range(_VLLM_MTP_LAYERS)]
    desc = finish(top, text, family="mimo_v2", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  num_nextn_predict_layers=_VLLM_MTP_LAYERS, mtp_layers=mtp)
    # vLLM: models/mimo_v2.py MiMoV2Attention (and mimo_v2_mtp.py's) picks the *_DIFFKV backends
    desc = desc.model_copy(update={"diff_kv_attention": True})
    note = encoder_cache_note(desc.architectures) if omni else None
    return desc.model_copy(update={"warnings": desc.warnings + (note,)}) if note else desc
