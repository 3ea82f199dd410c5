"""Qwen families: Qwen2/2.5, Qwen3 dense and MoE, and the GDN hybrids Qwen3-Next and Qwen3.5/3.6."""

from __future__ import annotations

from kvplan.errors import UnsupportedError
from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    head_dim_of,
    interval_layer_types,
    kv_heads_of,
    layer_types,
    model_level_window,
    num_layers_of,
    text_cfg,
    unsupported_layer_type,
    without_pipeline_parallel,
)
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.families._shared import gdn_dims
from kvplan.models.quant import quantization_info
from kvplan.models.resolution.resolved import encoder_cache_note


def _effective_window(cfg: Cfg) -> int | None:
    """transformers Qwen2Config/Qwen3Config/Qwen3MoeConfig.__post_init__:
    sliding_window = sliding_window if use_sliding_window else None (defaults False / 4096)."""
    if not cfg.get("use_sliding_window", False):
        return None
    if cfg.present("sliding_window"):
        value = cfg.get_int("sliding_window", None, minimum=None)
        return value if value is not None and value > 0 else None
    return 4096


def qwen_layer_types(cfg: Cfg, n: int, window: int | None) -> list[str]:
    """`layer_types`, or transformers' default for Qwen2/Qwen3: sliding from max_window_layers on
    when a window is set (configuration_qwen3.Qwen3Config.__post_init__)."""
    types = layer_types(cfg, n)
    if types is not None:
        return types
    mwl = cfg.get_int("max_window_layers", 28, minimum=0)
    assert mwl is not None
    return ["sliding_attention" if window is not None and i >= mwl else "full_attention"
            for i in range(n)]


def describe_qwen_dense(top: Cfg, hf_quant_config: dict | None, *, family: str
                        ) -> ModelDescription:
    """Qwen2 (family "qwen2"), Qwen3 ("qwen3") and Qwen3-MoE ("qwen3_moe").

    vLLM's Qwen2/Qwen3/Qwen3-MoE attention has no per-layer window: every layer gets
    CacheConfig.sliding_window, which is set only when layer_types is absent or all sliding
    (models/qwen2.py Qwen2DecoderLayer, qwen3.py, qwen3_moe.py; engine/arg_utils.py).
    """
    text = text_cfg(top)
    n = num_layers_of(text)
    window = _effective_window(text)
    if family == "qwen3_moe":
        types = layer_types(text, n)  # Qwen3MoeConfig derives no layer_types
    else:
        types = qwen_layer_types(text, n, window)
    if types is not None and len(set(types)) > 1:
        mwl = text.get_int("max_window_layers", 28, minimum=0)
        if family == "qwen2" and mwl != n:
            # vLLM: models/qwen2.py Qwen2DecoderLayer asserts max_window_layers == num_layers
            raise UnsupportedError(
                f"{top.source}: Qwen2 with sliding window on some but not all layers "
                f"(max_window_layers={mwl} < num_hidden_layers={n}) is rejected by vLLM")
        text.warn("layer_types mixes sliding and full attention; vLLM's Qwen model code has no "
                  "per-layer window, so every layer is planned as full attention")
    shared = model_level_window(window, types)
    kv = kv_heads_of(text)
    if family == "qwen2":
        hd = text.req_int("hidden_size") // text.req_int("num_attention_heads")  # qwen2.py L150
    elif family == "qwen3":
        hd = head_dim_of(text, default=128)  # Qwen3Config.head_dim = 128
    else:
        hd = head_dim_of(text)
    layers = [attention(i, attn_name(i), kv_heads=kv, head_size=hd, window=shared)
              for i in range(n)]
    desc = finish(top, text, family=family, layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=shared)
    # vLLM 0.31–0.34: voyage.py VoyageQwen3BidirectionalEmbedModel is not SupportsPP;
    # Qwen3ForCausalLM is
    return without_pipeline_parallel(desc, top, ("VoyageQwen3BidirectionalEmbedModel",))


# --- GDN hybrids ---------------------------------------------------------------------------


def _hybrid_types(cfg: Cfg, n: int) -> list[str]:
    types = layer_types(cfg, n)
    if types is None:
        # transformers Qwen3NextConfig / Qwen3_5TextConfig: full attention every
        # full_attention_interval-th layer, gated delta net elsewhere.
        interval = cfg.int_default("full_attention_interval", 4)
        types = interval_layer_types(n, interval, every="full_attention",
                                     other="linear_attention")
    return types


def describe_qwen_gdn(top: Cfg, hf_quant_config: dict | None, *, family: str,
                      encoder_note: bool = False) -> ModelDescription:
    """Qwen3-Next ("qwen3_next") and Qwen3.5/3.6 ("qwen3_5") text decoders.

    vLLM: models/qwen3_next.py Qwen3NextDecoderLayer and models/qwen3_5 (layer_types[i] picks
    `self_attn` or `linear_attn`). MTP: qwen3_next_mtp.py / qwen3_5 mtp.py build
    num_nextn_predict_layers / mtp_num_hidden_layers "full_attention" decoder layers named
    mtp.layers.{k}.
    """
    text = text_cfg(top)
    n = num_layers_of(text)
    types = _hybrid_types(text, n)
    kv = kv_heads_of(text)
    hd = head_dim_of(text)
    gdn = gdn_dims(text)
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        if t == "full_attention":
            layers.append(attention(i, attn_name(i), kv_heads=kv, head_size=hd))
        elif t == "linear_attention":
            layers.append(LayerDescription(index=i, name=f"model.layers.{i}.linear_attn",
                                           kind=LayerKind.GDN, gdn=gdn))
        else:
            raise unsupported_layer_type(text, "layer_types", t, family)

    if family == "qwen3_5":
        mtp_key = "mtp_num_hidden_layers"
        # vLLM: models/config.py Qwen3_5ForConditionalGenerationConfig copies mamba_ssm_dtype
        ssm_dtype = text.get("mamba_ssm_dtype")
        if ssm_dtype is not None:
            ssm_dtype = str(ssm_dtype)
    else:
        mtp_key = "num_nextn_predict_layers"
        ssm_dtype = None  # no config hook for Qwen3-Next
    n_mtp = text.get_int(mtp_key, None, minimum=0)
    if n_mtp is None:
        n_mtp = 1  # vLLM's MTP model: getattr(config, <field>, 1)
        text.warn(f"'{text.field(mtp_key)}' is absent: assumed 1 MTP module (vLLM's default)")
    mtp = [attention(n + k, f"mtp.layers.{k}.self_attn.attn", kv_heads=kv, head_size=hd)
           for k in range(n_mtp)]
    desc = finish(top, text, family=family, layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  mamba_ssm_dtype=ssm_dtype, num_nextn_predict_layers=n_mtp, mtp_layers=mtp)
    note = encoder_cache_note(desc.architectures) if encoder_note else None
    return desc.model_copy(update={"warnings": desc.warnings + (note,)}) if note else desc
