"""Speculative-decoding draft heads: DFlash / DFlash2, EAGLE, EAGLE3, DSpark, XPress, Muse Glimmer's
assistant, the extract_hidden_states cache, and the target's own MTP."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models._common import (
    SPECS_HINT,
    Cfg,
    architectures,
    attention,
    attn_name,
    finish,
    head_dim_of,
    kv_heads_of,
    layer_types,
    num_layers_of,
    positive_window,
)
from kvplan.models.description import FAMILY_RULES, FP8_DS_MLA, LayerDescription, LayerKind, ModelDescription
from kvplan.models.families._shared import DSV4, dsv4_layer_caches, llama_layers
from kvplan.models.quant import quantization_info

DRAFT_METHODS = ("dflash", "eagle", "eagle3", "dspark")
EXTRACT_HIDDEN_STATES = "extract_hidden_states"

# vLLM 0.34 registry: drafters whose layers are DFlash's Qwen3 backbone
# (qwen3_dflash.DFlashQwen3Model), with the method that selects each.
_DFLASH_BACKBONE = {
    "Qwen3DSparkModel": "dspark", "Qwen3OmniDSparkModel": "dspark",  # qwen3_dspark.py
    "Qwen3XPressModel": "dflash", "DFlashQwen3XPressModel": "dflash",  # qwen3_xpress.py (0.33+)
    "MuseGlimmerAssistantModel": "dflash", "DFlashMuseGlimmerAssistantModel": "dflash",
}
_GLIMMER = "muse_glimmer_assistant"

# model_types whose transformers config class nulls sliding_window unless use_sliding_window and
# derives layer_types from max_window_layers (Qwen2Config / Qwen3Config.__post_init__).
_QWEN_STYLE = ("qwen2", "qwen3")


def is_draft_architecture(archs: tuple[str, ...]) -> bool:
    """Architectures vLLM registers only as speculative drafters (models/registry.py)."""
    return any(a.startswith(("DFlash", "Eagle")) or a.endswith(("Eagle3", "DFlash"))
               or "DraftModel" in a or "DSpark" in a or a in _DFLASH_BACKBONE
               or a == "ExtractHiddenStatesModel" for a in archs)


def detect_method(cfg: Cfg) -> str | None:
    archs = architectures(cfg)
    if any("DSpark" in a for a in archs):
        return "dspark"
    if (cfg.has("dflash_config") or cfg.get("model_type") == _GLIMMER
            or any("DFlash" in a or _DFLASH_BACKBONE.get(a) == "dflash" for a in archs)):
        return "dflash"
    if any(a.startswith("Eagle3") or a.endswith("Eagle3") for a in archs):
        return "eagle3"
    # EAGLE-3 heads carry a reduced draft vocabulary (and often eagle_config aux layer ids);
    # EAGLE-1 heads do not.
    if cfg.has("draft_vocab_size") or (
            isinstance(cfg.get("eagle_config"), Mapping)
            and "eagle_aux_hidden_state_layer_ids" in cfg.get("eagle_config")):
        return "eagle3"
    if any(a.startswith("Eagle") for a in archs):
        return "eagle"
    return None


def _unwrap(top: Cfg, method: str | None) -> tuple[Cfg, str | None]:
    """vLLM's EAGLEConfig (model_type "eagle", the head under "model") and speculators configs
    (model_type "speculators", the layer under "transformer_layer_config")."""
    model_type = top.get("model_type")
    if model_type == "eagle":
        inner = top.sub("model")
        if inner is None:
            raise top.error("an EAGLE config (model_type 'eagle') needs a 'model' sub-config")
        return inner, method or str(top.get("method", "eagle"))
    if model_type == "speculators":
        inner = top.sub("transformer_layer_config")
        if inner is None:
            raise top.error("a speculators config needs 'transformer_layer_config'")
        kind = top.get("speculators_model_type")
        return inner, method or (str(kind) if kind else None)
    return top, method


def _target_layers(target: ModelDescription | None, cfg: Cfg) -> int:
    """Number of target decoder layers; draft layers are numbered after them.

    vLLM: the drafter's start_layer_id = target model_config.get_total_num_hidden_layers().
    """
    declared = cfg.get_int("num_target_layers", None)
    if target is not None:
        count = len({layer.index for layer in target.layers})
        if declared is not None and declared != count:
            cfg.warn(f"draft config says num_target_layers={declared}, the target has {count} "
                     "layers; numbered after the target's")
        return count
    if declared is not None:
        cfg.warn("no target model given: draft layers numbered after the draft config's "
                 f"num_target_layers ({declared})")
        return declared
    cfg.warn("no target model given and no num_target_layers: draft layers numbered from 0")
    return 0


# --- DFlash -----------------------------------------------------------------------------------

def _dflash_layer_types(cfg: Cfg, n: int) -> tuple[list[str] | None, int | None]:
    """layer_types and sliding_window as vLLM sees them after transformers' config class."""
    types = layer_types(cfg, n)
    model_type = cfg.get("model_type")
    if model_type in _QWEN_STYLE:
        window = positive_window(cfg) if cfg.get("use_sliding_window", False) else None
        if types is None:
            mwl = cfg.get_int("max_window_layers", 28, minimum=0)
            assert mwl is not None
            types = ["sliding_attention" if window is not None and i >= mwl else "full_attention"
                     for i in range(n)]
    else:
        window = positive_window(cfg)
    return types, window


def dflash_layers(cfg: Cfg, first: int, target_window: int | None) -> list[LayerDescription]:
    """vLLM: models/qwen3_dflash.py _resolve_layer_attention (also used by DFlash2).

    With layer_types (or use_swa on an all-full layer_types) each layer is SWA or full; without
    layer_types every layer follows dflash_config.use_swa. The window is
    dflash_config.swa_window_size, else the top-level sliding_window. Full layers fall back to
    the target's model-level window (shared CacheConfig).
    """
    n = num_layers_of(cfg)
    dflash = cfg.get("dflash_config") or {}
    if not isinstance(dflash, Mapping):
        raise cfg.error("field 'dflash_config' must be an object")
    use_swa = bool(dflash.get("use_swa", False))
    types, top_window = _dflash_layer_types(cfg, n)
    any_sliding = types is not None and "sliding_attention" in types
    kv = kv_heads_of(cfg)
    hd = head_dim_of(cfg)
    layers = []
    for i in range(n):
        if types is None or (use_swa and not any_sliding):
            sliding = use_swa
        else:
            sliding = types[i] == "sliding_attention"
        window = target_window
        if sliding:
            window = dflash.get("swa_window_size", top_window)
            if window is None:
                raise cfg.error(
                    "DFlash sliding attention needs a window: set dflash_config.swa_window_size "
                    "or the top-level sliding_window (with use_sliding_window for Qwen-style "
                    "configs)")
            window = int(window)
        idx = first + i
        layers.append(attention(idx, attn_name(idx), kv_heads=kv, head_size=hd, window=window))
    return layers


def _on_dflash_backbone(cfg: Cfg, archs: tuple[str, ...]) -> bool:
    """Qwen3DSparkModel / Qwen3OmniDSparkModel, or a qwen3 config named DSparkDraftModel
    (vLLM: SpeculativeConfig.hf_config_override renames it Qwen3DSparkModel)."""
    return (any(_DFLASH_BACKBONE.get(a) == "dspark" for a in archs)
            or ("DSparkDraftModel" in archs and cfg.get("model_type") == "qwen3"))


def _glimmer_defaults(cfg: Cfg) -> Cfg:
    """transformers' MuseGlimmerAssistantConfig defaults (5 layers, 8 KV heads × 128, every layer
    sliding_attention with window 2048) for the fields the config leaves out."""
    n = cfg.get_int("num_hidden_layers", None) or 5
    defaults = {"num_hidden_layers": n, "num_key_value_heads": 8, "head_dim": 128,
                "num_attention_heads": 32, "hidden_size": 6656, "sliding_window": 2048,
                "layer_types": ["sliding_attention"] * n}
    missing = {k: v for k, v in defaults.items() if cfg.get(k) is None}
    return Cfg({**cfg.data, **missing}, cfg.source, cfg.path, cfg.warnings) if missing else cfg


# --- public ---------------------------------------------------------------------------------

def dspark_layers(cfg: Cfg, archs: tuple[str, ...], first: int
                  ) -> tuple[list[LayerDescription], int]:
    """A DeepSeek-V4 DSpark draft (DSparkDraftModel): n_mtp_layers (default 3)
    DeepseekV4DecoderLayers at model.layers.{num_hidden_layers + i}, numbered after the draft
    config's own num_hidden_layers; a layer id past num_hidden_layers has compress ratio 1, so
    each keeps its SWA cache only.

    vLLM: models/deepseek_v4/nvidia/dspark.py DSparkDeepseekV4Model (L89–146),
    get_draft_kv_cache_layer_names (L393) = each layer's swa_cache; deepseek_v4/attention.py
    L236–243 (ratio 1 past num_hidden_layers).
    """
    if "DSparkDraftModel" not in archs:
        raise UnsupportedError(
            f"{cfg.source}: only DeepSeek-V4's DSpark draft (DSparkDraftModel) is modelled; "
            f"got {', '.join(archs) or 'no architectures'}", hint=SPECS_HINT)
    n = cfg.get_int("num_hidden_layers", None) or first
    count = cfg.get_int("n_mtp_layers", None) or 3
    head_dim = cfg.int_default("head_dim", 512)
    window = cfg.int_default("sliding_window", 128)
    index_dim = cfg.int_default("index_head_dim", 128)
    layers = [d for i in range(count)
              for d in dsv4_layer_caches(n + i, f"model.layers.{n + i}.attn", ratio=1,
                                         head_dim=head_dim, window=window,
                                         index_head_dim=index_dim)]
    return layers, n


def describe_draft(config: Mapping[str, Any], *, source: str, method: str | None = None,
                   target: ModelDescription | None = None,
                   hf_quant_config: Mapping[str, Any] | None = None) -> ModelDescription:
    """A separate draft head (DFlash, DFlash2, EAGLE, EAGLE3) as vLLM builds it next to `target`.

    Draft layers are named model.layers.{T + i}.self_attn.attn with T the target's layer count
    (vLLM: start_layer_id); the draft runs at the target's dtype (speculator_config.py:
    draft ModelConfig(dtype=target.dtype)).
    """
    if not isinstance(config, Mapping):
        raise ConfigError(f"{source}: the draft config must be a JSON object")
    top = Cfg(config, source)
    cfg, method = _unwrap(top, method)
    if method is None:
        method = detect_method(cfg) or detect_method(top)
    if method is None:
        raise UnsupportedError(
            f"{source}: cannot tell the speculative method from the draft config (no "
            "dflash_config, no Eagle/Eagle3/DFlash architecture, no draft_vocab_size)",
            hint="Pass the method explicitly (dflash, eagle or eagle3); for MTP use the "
                 "target's own MTP modules. " + SPECS_HINT)
    method = method.lower()
    if method == "mtp" or method.endswith("_mtp"):
        raise UnsupportedError(f"{source}: MTP drafts are the target's own modules",
                               hint="Describe the target model and use its MTP layers.")
    if method not in DRAFT_METHODS:
        raise UnsupportedError(f"{source}: speculative method {method!r} is not one kvplan "
                               f"sizes (supported: {', '.join(DRAFT_METHODS)}, mtp)",
                               hint=SPECS_HINT)
    first = _target_layers(target, cfg)
    target_window = target.model_sliding_window if target is not None else None
    archs = architectures(cfg) or architectures(top)
    rules: dict[str, Any] = {}  # family rules of the draft's own layers (ModelDescription)
    if cfg.get("model_type") == "qwen3" and not cfg.has("head_dim"):
        cfg.warn("qwen3 draft without head_dim: used Qwen3Config's default 128")
        cfg = Cfg({**cfg.data, "head_dim": 128}, cfg.source, cfg.path, cfg.warnings)
    if cfg.get("model_type") == _GLIMMER:
        cfg = _glimmer_defaults(cfg)
    if method == "dspark" and _on_dflash_backbone(cfg, archs):
        # vLLM: Qwen3DSparkModel(DFlashQwen3Model) — DFlash's layers, numbered after the target
        # (start_layer_id = get_total_num_hidden_layers); the Markov / confidence heads own no KV
        layers = dflash_layers(cfg, first, target_window)
        family = "dspark"
    elif method == "dspark":
        layers, first = dspark_layers(cfg, archs, first)
        family = DSV4
        rules["mla_kv_layout"] = FP8_DS_MLA  # DeepseekV4DecoderLayers: the fp8_ds_mla layout
    elif method == "dflash":
        layers = dflash_layers(cfg, first, target_window)
        family = "dflash2" if any("DFlash2" in a for a in archs) else "dflash"
    else:
        layers, _ = llama_layers(cfg, first_index=first, is_draft=True,
                                 target_window=target_window)
        family = method
    dtype = None
    if target is not None:
        dtype = target.dtype
        for key in ("dtype", "torch_dtype"):
            own = cfg.get(key) or top.get(key)
            if own is not None and str(own) != target.dtype:
                cfg.warn(f"draft config dtype {own} differs from the target's {target.dtype}: "
                         "vLLM runs the draft at the target's dtype")
                break
    desc = finish(top, cfg, family=family, layers=layers,
                  quantization=quantization_info(top, cfg, hf_quant_config), dtype=dtype,
                  model_type=str(cfg.get("model_type", top.get("model_type", ""))))
    return desc.model_copy(update={"draft_method": method, "num_target_layers": first,
                                   "architectures": archs, **rules})


def hidden_state_draft(target: ModelDescription, target_config: Mapping[str, Any],
                       hf_config: Mapping[str, Any] | None = None) -> ModelDescription:
    """vLLM's extract_hidden_states "draft": one cache-only layer, no weights.

    vLLM: ExtractHiddenStatesSpeculatorConfig.configure merges speculative_config
    draft_model_config.hf_config over the target's config; ExtractHiddenStatesModel builds
    cache_only_layers.{T} (T = the target's layer count) with num_heads = len(
    eagle_aux_hidden_state_layer_ids) and head_size = the target's hidden_size, not split by TP.
    """
    from kvplan.models._common import text_cfg

    top = Cfg(target_config, target.source)
    ids = (hf_config or {}).get("eagle_aux_hidden_state_layer_ids",
                                top.get("eagle_aux_hidden_state_layer_ids"))
    if not ids or not isinstance(ids, list):
        # vLLM: ExtractHiddenStatesSpeculator.__init__ raises the same
        raise UnsupportedError(
            f"{target.source}: extract_hidden_states needs eagle_aux_hidden_state_layer_ids",
            hint='pass --speculative-config \'{"method": "extract_hidden_states", '
                 '"num_speculative_tokens": 1, "draft_model_config": {"hf_config": '
                 '{"eagle_aux_hidden_state_layer_ids": [1, 2]}}}\'')
    hidden = text_cfg(top).get_int("hidden_size", None)
    if hidden is None:
        raise top.error("extract_hidden_states needs the target's hidden_size")
    n = len({layer.index for layer in target.layers})
    layer = LayerDescription(index=n, name=f"cache_only_layers.{n}", kind=LayerKind.HIDDEN_STATE,
                             num_kv_heads=len(ids), head_size=hidden)
    return ModelDescription(
        source=f"{target.source} (extract_hidden_states)", model_type=EXTRACT_HIDDEN_STATES,
        architectures=("ExtractHiddenStatesModel",), family=EXTRACT_HIDDEN_STATES,
        dtype=target.dtype, max_position_embeddings=target.max_position_embeddings,
        layers=(layer,), draft_method=EXTRACT_HIDDEN_STATES, num_target_layers=n)


_NO_MTP_DRAFTER = {
    "minimax_m2": "vLLM 0.34 has no MTP drafter for MiniMaxM2ForCausalLM "
                  "(config/speculative.py has no minimax_m2 branch)",
}


def mtp_draft(target: ModelDescription, num_layers: int | None = None) -> ModelDescription:
    """The target's own MTP module(s) as a draft description (vLLM method "mtp").

    Each module is built like the target's decoder layer (full attention or MLA; MiMo-V2 uses
    its sliding-window layer), numbered after the target's layers. `num_layers` is the number of
    MTP modules (default: the checkpoint's num_nextn_predict_layers / mtp_num_hidden_layers).
    """
    n0 = target.num_nextn_predict_layers
    if not target.mtp_layers:
        if n0 == 0:
            raise UnsupportedError(
                f"{target.source}: the checkpoint carries no MTP modules "
                "(num_nextn_predict_layers / mtp_num_hidden_layers is 0 or absent)",
                hint="Use a separate draft head (dflash, eagle, eagle3) instead.")
        reason = _NO_MTP_DRAFTER.get(target.family,
                                     f"vLLM has no MTP drafter kvplan knows for {target.family}")
        raise UnsupportedError(f"{target.source}: {reason}", hint=SPECS_HINT)
    per_module, rest = divmod(len(target.mtp_layers), n0)
    assert rest == 0, "mtp_layers must hold num_nextn_predict_layers equal modules"
    count = n0 if num_layers is None else num_layers
    if count < 1:
        raise UnsupportedError(f"{target.source}: the number of MTP modules must be >= 1")
    if count > n0:
        raise UnsupportedError(
            f"{target.source}: {count} MTP modules requested, but the checkpoint carries {n0}")
    num_target = len({layer.index for layer in target.layers})
    return ModelDescription(
        source=target.source, model_type=target.model_type, architectures=target.architectures,
        family=target.family, dtype=target.dtype,
        max_position_embeddings=target.max_position_embeddings,
        layers=target.mtp_layers[: count * per_module], quantization=target.quantization,
        num_nextn_predict_layers=n0, use_mla=target.use_mla,
        model_sliding_window=target.model_sliding_window,
        draft_method="mtp", num_target_layers=num_target,
        **{rule: getattr(target, rule) for rule in FAMILY_RULES})
