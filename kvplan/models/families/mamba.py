"""State-space families: Mamba1 / Mamba2, Jamba, Nemotron-H, Falcon-H1, Granite-4.0-H."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    finish,
    head_dim_of,
    kv_heads_of,
    layers_prefix,
    model_level_window,
    no_kv,
    note_encoder_cache,
    num_layers_of,
    positive_window,
    text_cfg,
    unsupported_layer_type,
    without_pipeline_parallel,
)
from kvplan.models.description import LayerDescription, LayerKind, Mamba1Dims, Mamba2Dims, ModelDescription
from kvplan.models.quant import quantization_info


def _mamba1(index: int, name: str, dims: Mamba1Dims) -> LayerDescription:
    return LayerDescription(index=index, name=name, kind=LayerKind.MAMBA1, mamba1=dims)


def _mamba2(index: int, name: str, dims: Mamba2Dims) -> LayerDescription:
    return LayerDescription(index=index, name=name, kind=LayerKind.MAMBA2, mamba2=dims)


def _mamba_prefixed_dims(text: Cfg, inner: int) -> Mamba2Dims:
    """Falcon-H1 / Granite-4.0-H `mamba_*` fields; their config classes share these defaults:
    mamba_n_heads 128, mamba_d_state 256, mamba_d_conv 4, mamba_n_groups 1, mamba_d_head auto."""
    heads = text.int_default("mamba_n_heads", 128)
    return Mamba2Dims(intermediate_size=inner,
                      state_size=text.int_default("mamba_d_state", 256),
                      conv_kernel=text.int_default("mamba_d_conv", 4),
                      n_groups=text.int_default("mamba_n_groups", 1),
                      num_heads=heads, head_dim=_head_split(text, inner, heads, "mamba_d_head"))


def _head_split(cfg: Cfg, inner: int, heads: int, key: str) -> int:
    """A mamba head dim that transformers may store as "auto" (= inner // heads)."""
    value = cfg.get(key, "auto")
    if value == "auto":
        return inner // heads
    return cfg.req_int(key)


# --- pure Mamba ---------------------------------------------------------------------------

def describe_mamba1(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/mamba.py MambaDecoderLayer — MambaMixer(intermediate_size, state_size,
    conv_kernel) at backbone.layers.{i}.mixer. MambaConfig defaults: state 16, conv 4, expand 2."""
    text = text_cfg(top)
    n = num_layers_of(text)
    inner = text.get_int("intermediate_size", None)
    if inner is None:
        inner = text.int_default("expand", 2) * text.req_int("hidden_size")
    dims = Mamba1Dims(intermediate_size=inner, state_size=text.int_default("state_size", 16),
                      conv_kernel=text.int_default("conv_kernel", 4))
    layers = [_mamba1(i, f"backbone.layers.{i}.mixer", dims) for i in range(n)]
    desc = finish(top, text, family="mamba", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
    # MambaForCausalLM (FalconMamba's class too) is IsAttentionFree and SupportsPP
    return desc.model_copy(update={"attention_free": True})


def describe_mamba2(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/mamba2.py — MambaMixer2 at backbone.layers.{i}.mixer; the state shape uses
    expand * hidden_size (Mamba2ForCausalLM.get_mamba_state_shape_from_config). Mamba2Config
    defaults: num_heads 128, head_dim 64, state 128, n_groups 8, conv 4, expand 2."""
    text = text_cfg(top)
    n = num_layers_of(text)
    inner = text.int_default("expand", 2) * text.req_int("hidden_size")
    dims = Mamba2Dims(intermediate_size=inner, state_size=text.int_default("state_size", 128),
                      conv_kernel=text.int_default("conv_kernel", 4),
                      n_groups=text.int_default("n_groups", 8),
                      num_heads=text.int_default("num_heads", 128),
                      head_dim=text.int_default("head_dim", 64))
    layers = [_mamba2(i, f"backbone.layers.{i}.mixer", dims) for i in range(n)]
    desc = finish(top, text, family="mamba2", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
    # Mamba2ForCausalLM is IsAttentionFree; vLLM 0.31–0.34: mamba2.py Mamba2ForCausalLM is not
    # SupportsPP (mamba.py MambaForCausalLM, also FalconMamba's class, is)
    return without_pipeline_parallel(desc.model_copy(update={"attention_free": True}), top)


# --- Jamba --------------------------------------------------------------------------------

def describe_jamba(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/jamba.py — layers_block_type[i] picks JambaAttentionDecoderLayer
    (model.layers.{i}.attn, head = hidden // heads, model-level window) or JambaMambaDecoderLayer
    (MambaMixer at model.layers.{i}.mixer: intermediate mamba_expand * hidden, mamba_d_state,
    mamba_d_conv). JambaConfig: attention where i % attn_layer_period == attn_layer_offset
    (defaults 8 / 4); mamba_d_state 16, mamba_d_conv 4, mamba_expand 2, num_key_value_heads 8."""
    text = text_cfg(top)
    n = num_layers_of(text)
    period = text.int_default("attn_layer_period", 8)
    offset = text.int_default("attn_layer_offset", 4, minimum=0)
    hidden = text.req_int("hidden_size")
    kv = kv_heads_of(text, 8)
    hd = hidden // text.req_int("num_attention_heads")
    # JambaConfig has no layer_types attribute: a sliding_window applies to every attention layer
    window = model_level_window(positive_window(text), None)
    dims = Mamba1Dims(intermediate_size=text.int_default("mamba_expand", 2) * hidden,
                      state_size=text.int_default("mamba_d_state", 16),
                      conv_kernel=text.int_default("mamba_d_conv", 4))
    layers = []
    for i in range(n):
        if i % period == offset:
            layers.append(attention(i, f"model.layers.{i}.attn", kv_heads=kv, head_size=hd,
                                    window=window))
        else:
            layers.append(_mamba1(i, f"model.layers.{i}.mixer", dims))
    return finish(top, text, family="jamba", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=window)


# --- Nemotron-H -----------------------------------------------------------------------------

_NEMOTRON_H_VL_WRAPPERS = ("NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3",
                           "NemotronH_Omni_Reasoning_V3", "NemotronH_Super_Omni_Reasoning_V3")
_NEMOTRON_CHARS = {"linear_attention": "M", "mamba": "M", "full_attention": "*",
                   "attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_pattern(cfg: Cfg, pattern_key: str, list_key: str) -> str | None:
    if cfg.has(pattern_key):
        value = cfg.data[pattern_key]
        if not isinstance(value, str):
            raise cfg.error(f"field '{cfg.field(pattern_key)}' must be a string")
        return value
    if cfg.has(list_key):
        value = cfg.data[list_key]
        if not isinstance(value, list):
            raise cfg.error(f"field '{cfg.field(list_key)}' must be a list")
        try:
            return "".join(_NEMOTRON_CHARS[str(v)] for v in value)
        except KeyError as exc:
            raise unsupported_layer_type(cfg, list_key, exc.args[0], "nemotron_h") from None
    return None


def describe_nemotron_h(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/nemotron_h.py — hybrid_override_pattern[i]: "M" MambaMixer2
    (model.layers.{i}.mixer), "*" attention (model.layers.{i}.mixer.attn, per-layer
    `sliding_window`), "-" MLP and "E" MoE (no cache). Mamba intermediate = mamba_num_heads *
    mamba_head_dim. NemotronHConfig (transformers) also accepts `layers_block_type` and defaults
    head_dim 128, ssm_state_size 128, mamba_num_heads 128, mamba_head_dim 64, n_groups 8,
    conv_kernel 4, mamba_ssm_cache_dtype float32.

    The same decoder serves NemotronHPuzzleForCausalLM (nemotron_h.py; vLLM reads the pattern and
    the model-wide heads, not block_configs) and, under `language_model.`, the multimodal wrappers
    NemotronH_Nano_VL_V2 / *_Omni_Reasoning_V3 (nano_nemotron_vl.py) and
    Nemotron3_5TranscribeForConditionalGeneration (llm_config), which build
    NemotronHForCausalLM from their text config (init_vllm_registered_model)."""
    text = text_cfg(top)
    prefix = layers_prefix(top, text)
    if text is not top:
        note_encoder_cache(top)
    pattern = _nemotron_pattern(text, "hybrid_override_pattern", "layers_block_type")
    if pattern is None:
        raise text.error("neither 'hybrid_override_pattern' nor 'layers_block_type' is present "
                         "(needed for the layer list)")
    n = len(pattern)
    if text.has("num_hidden_layers") and text.req_int("num_hidden_layers") != n:
        text.warn(f"num_hidden_layers ({text.req_int('num_hidden_layers')}) differs from the "
                  f"pattern length ({n}); the pattern wins (as in transformers)")
    kv = kv_heads_of(text, 8)
    hd = head_dim_of(text, default=128)
    legacy_hd = text.get_int("attention_head_dim", None)
    if legacy_hd is not None and legacy_hd != hd:
        text.warn(f"'attention_head_dim' ({legacy_hd}) is not read by transformers' "
                  f"NemotronHConfig; vLLM uses head_dim {hd}")
    window = positive_window(text)  # NemotronHAttention: per_layer_sliding_window
    heads = text.int_default("mamba_num_heads", 128)
    head_dim = text.int_default("mamba_head_dim", 64)

    def alias(key: str, legacy: str, default: int) -> int:
        return text.req_int(legacy) if text.has(legacy) else text.int_default(key, default)

    dims = Mamba2Dims(intermediate_size=heads * head_dim,
                      state_size=text.int_default("ssm_state_size", 128),
                      conv_kernel=alias("conv_kernel", "mamba_d_conv", 4),
                      n_groups=alias("n_groups", "mamba_n_groups", 8),
                      num_heads=heads, head_dim=head_dim)
    layers: list[LayerDescription] = []
    for i, ch in enumerate(pattern):
        if ch == "M":
            layers.append(_mamba2(i, f"{prefix}.{i}.mixer", dims))
        elif ch == "*":
            layers.append(attention(i, f"{prefix}.{i}.mixer.attn", kv_heads=kv,
                                    head_size=hd, window=window))
        elif ch in "-E":
            layers.append(no_kv(i, f"{prefix}.{i}.mixer"))
        else:
            raise unsupported_layer_type(text, "hybrid_override_pattern", ch, "nemotron_h")

    # MTP: vLLM models/nemotron_h_mtp.py builds one module from mtp_hybrid_override_pattern
    # (default "*E"), its attention at mtp.layers.{j}.mixer.attn; it asserts a single module.
    n_mtp = text.get_int("num_nextn_predict_layers", 0, minimum=0) or 0
    mtp: list[LayerDescription] = []
    if n_mtp == 1:
        mtp_pattern = _nemotron_pattern(text, "mtp_hybrid_override_pattern",
                                        "mtp_layers_block_type") or "*E"
        for j, ch in enumerate(mtp_pattern):
            if ch == "*":
                mtp.append(attention(n + j, f"mtp.layers.{j}.mixer.attn", kv_heads=kv,
                                     head_size=hd, window=window))
    elif n_mtp > 1:
        text.warn(f"num_nextn_predict_layers={n_mtp}: vLLM's Nemotron-H MTP supports one module")
    # vLLM: models/config.py NemotronHForCausalLMConfig.update_mamba_ssm_cache_dtype
    ssm_dtype = str(text.get("mamba_ssm_cache_dtype", "float32"))
    desc = finish(top, text, family="nemotron_h", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  mamba_ssm_dtype=ssm_dtype, num_nextn_predict_layers=n_mtp, mtp_layers=mtp)
    # vLLM 0.31–0.34: nano_nemotron_vl.py NemotronH_Nano_VL_V2 (the class of the four VL / Omni
    # wrappers) is not SupportsPP; NemotronHForCausalLM (also the Puzzle's class) and
    # Nemotron3_5TranscribeForConditionalGeneration are
    return without_pipeline_parallel(desc, top, _NEMOTRON_H_VL_WRAPPERS)


# --- Falcon-H1 ------------------------------------------------------------------------------

def describe_falcon_h1(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/falcon_h1.py FalconH1ParallelHybrid — every decoder layer has an attention
    branch (model.layers.{i}.attn) and a parallel Mamba2 branch registered as
    model.{num_hidden_layers + i}.mixer. FalconH1Config: mamba_d_ssm 1024 (null → mamba_expand *
    hidden), mamba_n_heads 128, mamba_d_head "auto" (= d_ssm // heads), mamba_n_groups 1,
    mamba_d_state 256, mamba_d_conv 4, num_key_value_heads 8."""
    text = text_cfg(top)
    n = num_layers_of(text)
    kv = kv_heads_of(text, 8)
    hd = head_dim_of(text)
    if text.present("mamba_d_ssm") and text.raw("mamba_d_ssm") is None:
        d_ssm = text.int_default("mamba_expand", 2) * text.req_int("hidden_size")
    else:
        d_ssm = text.int_default("mamba_d_ssm", 1024)
    dims = _mamba_prefixed_dims(text, d_ssm)
    # FalconH1Config maps layer_types to layers_block_type (all "hybrid"), so vLLM's model-level
    # window is never set (engine/arg_utils.py); the attention layers get none.
    window = model_level_window(positive_window(text), ["hybrid"] * n)
    layers: list[LayerDescription] = []
    for i in range(n):
        layers.append(attention(i, f"model.layers.{i}.attn", kv_heads=kv, head_size=hd,
                                window=window))
        layers.append(_mamba2(i, f"model.{n + i}.mixer", dims))
    return finish(top, text, family="falcon_h1", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=window)


# --- Granite-4.0-H --------------------------------------------------------------------------

def describe_granite_hybrid(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/granitemoehybrid.py — layer_types[i] "full_attention" (legacy "attention"):
    attention at model.layers.{i}.self_attn.attn, head = hidden // heads; "linear_attention"
    (legacy "mamba"): MambaMixer2 at model.layers.{i}.mixer with intermediate mamba_expand *
    hidden. GraniteMoeHybridConfig: layer_types all mamba, mamba_n_heads 128, mamba_n_groups 1,
    mamba_d_state 256, mamba_d_head "auto", mamba_d_conv 4, mamba_expand 2."""
    text = text_cfg(top)
    n = num_layers_of(text)
    key = "layer_types" if text.has("layer_types") else "layers_block_type"
    raw = text.get(key)
    if raw is None:
        text.warn("no 'layer_types': transformers' default is every layer Mamba")
        types = ["mamba"] * n
    else:
        if not isinstance(raw, list) or len(raw) < n:
            raise text.error(f"field '{text.field(key)}' must list one type per layer")
        types = [str(t) for t in raw[:n]]
    hidden = text.req_int("hidden_size")
    kv = kv_heads_of(text)
    hd = hidden // text.req_int("num_attention_heads")
    inner = text.int_default("mamba_expand", 2) * hidden
    dims = _mamba_prefixed_dims(text, inner)
    # layer_types always exists (mamba/attention names), so vLLM's model-level window is unset
    window = model_level_window(positive_window(text), types)
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        if t in ("mamba", "linear_attention"):
            layers.append(_mamba2(i, f"model.layers.{i}.mixer", dims))
        elif t in ("attention", "full_attention"):
            layers.append(attention(i, f"model.layers.{i}.self_attn.attn", kv_heads=kv,
                                    head_size=hd, window=window))
        else:
            raise unsupported_layer_type(text, key, t, "granitemoehybrid")
    return finish(top, text, family="granitemoehybrid", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=window)
