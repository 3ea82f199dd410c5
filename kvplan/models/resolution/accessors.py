"""vLLM's generic `ModelConfig` accessors, on a transformers-resolved config.

Ported from vLLM 0.34 (transformers_utils/model_arch_config_convertor.py
ModelArchConfigConvertorBase and its per-model-type subclasses, config/model.py ModelConfig,
engine/arg_utils.py): the numbers vLLM derives from `hf_config` / `hf_text_config` before any
model code runs. Each function names the vLLM method it mirrors.
"""

from __future__ import annotations

from typing import Any

from kvplan.models.description import RopeScaling
from kvplan.models.resolution.max_len import POSSIBLE_KEYS
from kvplan.models.resolution.resolve import Resolved

# vLLM: transformers_utils/config.CONFIG_FIELD_ALIASES["total_num_kv_heads"]
KV_HEAD_ALIASES = ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num",
                   "num_attention_groups")

# vLLM: ModelArchConfigConvertorBase.is_deepseek_mla — model types whose attention is MLA
MLA_MODEL_TYPES = frozenset({
    "axk1", "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_v4", "deepseek_v41",
    "dots3_note", "deepseek_mtp", "k3_dspark", "glm5_next", "glm5_next_text", "glm_moe_dsa",
    "glm4_moe_lite", "glm4_moe_lite_mtp", "kimi_k2", "kimi_linear", "longcat_flash",
    "mistral_large_4", "pangu_ultra_moe", "pangu_ultra_moe_mtp", "bailing_hybrid",
    "bailing_hybrid_mtp", "bailing_hybrid_v3_mtp", "hy_v4", "hy_v4_mtp",
})

# vLLM: MODEL_ARCH_CONFIG_CONVERTORS — the MTP convertors count num_nextn_predict_layers
_MTP_LAYER_KEYS = {
    "deepseek_mtp": "num_nextn_predict_layers", "mimo_mtp": "num_nextn_predict_layers",
    "glm4_moe_mtp": "num_nextn_predict_layers", "glm_ocr_mtp": "num_nextn_predict_layers",
    "ernie_mtp": "num_nextn_predict_layers", "qwen3_next_mtp": "num_nextn_predict_layers",
    "bailing_hybrid_mtp": "num_nextn_predict_layers", "step3p5_mtp": "num_nextn_predict_layers",
    "pangu_ultra_moe_mtp": "num_nextn_predict_layers", "qwen3_5_mtp": "mtp_num_hidden_layers",
}

# vLLM: ModelArchConfigConvertorBase.derive_max_model_len_and_key — candidate keys, in order
MAX_LEN_KEYS = POSSIBLE_KEYS

# vLLM: config/model.py _ATTENTION_LAYER_TYPES — the layer_types entries that are attention
ATTENTION_LAYER_TYPES = ("full_attention", "sliding_attention", "attention", "hybrid")


def get_attr(cfg: Any, name: str, default: Any = None) -> Any:
    """getattr that treats transformers' per-layer ambiguity errors as absence."""
    try:
        return getattr(cfg, name, default)
    except Exception:  # e.g. AmbiguousGlobalPerLayerAttributeError on heterogeneous configs
        return default


def is_heterogeneous(r: Resolved) -> bool:
    """vLLM: ModelArchConfigConvertorBase.get_per_layer_hf_configs (None → homogeneous)."""
    return bool(get_attr(r.hf_config, "is_heterogeneous", False)
                or get_attr(r.hf_text_config, "is_heterogeneous", False))


def per_layer_text_configs(r: Resolved) -> list[Any] | None:
    """The per-layer text configs of a heterogeneous config, else None.

    vLLM: get_per_layer_hf_configs (the text config's per_layer_config when it is the
    heterogeneous one)."""
    text = r.hf_text_config
    if get_attr(text, "is_heterogeneous", False):
        return list(text.per_layer_config)
    return None


def is_deepseek_mla(r: Resolved) -> bool:
    """vLLM: ModelArchConfigConvertorBase.is_deepseek_mla (compress-ratio models aside)."""
    return r.text_model_type in MLA_MODEL_TYPES and get_attr(r.hf_text_config, "kv_lora_rank") is not None


def num_hidden_layers(r: Resolved) -> int:
    """vLLM: get_num_hidden_layers (+ the LongCat-Flash and MTP convertors)."""
    text = r.hf_text_config
    if r.model_type == "longcat_flash":
        return int(get_attr(text, "num_layers", 0))
    if r.model_type in _MTP_LAYER_KEYS:
        return int(get_attr(text, _MTP_LAYER_KEYS[r.model_type], 0) or 0)
    return int(get_attr(text, "num_hidden_layers", 0) or 0)


def total_num_attention_heads(cfg: Any) -> int:
    """vLLM: get_total_num_attention_heads."""
    return int(get_attr(cfg, "num_attention_heads", 0) or 0)


def head_size(r: Resolved, cfg: Any | None = None) -> int:
    """vLLM: ModelArchConfigConvertorBase.get_head_size (+ Mamba / Zamba2 convertors).

    `cfg` is a per-layer text config of a heterogeneous model (default: the text config)."""
    text = r.hf_text_config if cfg is None else cfg
    if r.model_type in ("mamba", "falcon_mamba"):
        return 0
    if r.model_type == "zamba2":
        return int(get_attr(text, "attention_head_dim", 0) or 0)
    if is_deepseek_mla(r):
        # MLA caches one latent per token: kv_lora_rank + qk_rope_head_dim (VLLM_MLA_DISABLE off)
        return int(text.kv_lora_rank) + int(get_attr(text, "qk_rope_head_dim", 0) or 0)
    head_dim = get_attr(text, "head_dim")
    if head_dim is not None and head_dim > 0:  # some classes store a missing head_dim as 0
        return int(head_dim)
    if get_attr(text, "hidden_size_per_head") is not None:  # PLaMo
        return int(text.hidden_size_per_head)
    heads = total_num_attention_heads(text)
    if heads == 0:
        return 0
    return int(get_attr(text, "hidden_size", 0) or 0) // heads


def total_num_kv_heads(r: Resolved, cfg: Any | None = None) -> int:
    """vLLM: ModelArchConfigConvertorBase.get_total_num_kv_heads with the Falcon, DBRX,
    Nemotron-NAS and Mamba special cases (MODEL_ARCH_CONFIG_CONVERTORS)."""
    text = r.hf_text_config if cfg is None else cfg
    model_type = r.model_type
    if model_type in ("mamba", "falcon_mamba"):
        return 0
    if model_type in ("falcon", "RefinedWeb", "RefinedWebModel"):
        # FalconModelArchConfigConvertor: multi_query (old decoder architecture) → one KV head
        if not get_attr(text, "new_decoder_architecture", False) and get_attr(text, "multi_query", False):
            return 1
    if model_type == "dbrx":
        attn = get_attr(text, "attn_config")
        return int(get_attr(attn, "kv_n_heads", total_num_attention_heads(text)))
    if model_type == "nemotron-nas":
        # NemotronNasModelArchConfigConvertor: the first block with attention decides
        for block in get_attr(text, "block_configs", None) or []:
            attention = get_attr(block, "attention")
            if attention is not None and not get_attr(attention, "no_op", False):
                return total_num_attention_heads(text) // int(attention.n_heads_in_group)
        return 0
    for name in KV_HEAD_ALIASES:  # vLLM: getattr_iter(hf_text_config, aliases, default_factory)
        value = get_attr(text, name)
        if value is not None:
            return int(value)
    return total_num_attention_heads(text)


def derive_max_model_len(r: Resolved) -> tuple[int | None, str | None]:
    """vLLM: ModelArchConfigConvertorBase.derive_max_model_len_and_key — the smallest of the
    length keys the text config has (model_max_length wins when set); (None, None) if none."""
    text = r.hf_text_config
    best: int | None = None
    key: str | None = None
    for name in MAX_LEN_KEYS:
        value = get_attr(text, name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            if best is None or value < best:
                best, key = int(value), name
    model_max = get_attr(text, "model_max_length")
    if model_max:
        best, key = int(model_max), "model_max_length"
    return best, key


def max_length_fields(r: Resolved) -> tuple[tuple[str, int], ...]:
    """The length keys the resolved text config has, as `ModelDescription.max_length_fields`
    (derive_max_model_len_and_key's candidates, + original_max_position_embeddings, LongRoPE's
    default): the class defaults transformers fills in count, as they do for vLLM."""
    out = []
    for name in (*MAX_LEN_KEYS, "original_max_position_embeddings"):
        value = get_attr(r.hf_text_config, name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append((name, int(value)))
    return tuple(out)


def rope_parameter_sets(r: Resolved) -> tuple[RopeScaling, ...]:
    """vLLM: patch_rope_parameters then iter_rope_parameters on hf_text_config — the
    standardized `rope_parameters` (one set per layer type when nested); a config with only a
    `rope_theta` / `rotary_emb_base` gets one default set; no RoPE at all: none."""
    text = r.hf_text_config
    params = get_attr(text, "rope_parameters")
    if not isinstance(params, dict) or not params:
        has_theta = any(get_attr(text, k) is not None for k in ("rope_theta", "rotary_emb_base"))
        return (RopeScaling(),) if has_theta else ()
    nested = all(isinstance(v, dict) or v is None for v in params.values())
    out = []
    for rp in (params.values() if nested else [params]):
        if not rp:
            continue
        rope_type = str(rp.get("rope_type") or rp.get("type") or "default")
        factor = rp.get("factor")
        out.append(RopeScaling(
            rope_type={"su": "longrope", "mrope": "default"}.get(rope_type, rope_type),
            factor=factor if isinstance(factor, int | float) and not isinstance(factor, bool)
            else None))
    return tuple(out)


def sliding_window(r: Resolved) -> int | None:
    """vLLM: ModelConfig.get_sliding_window; 0 means disabled (ModelConfig.__post_init__)."""
    value = get_attr(r.hf_text_config, "sliding_window")
    if isinstance(value, list):  # a per-layer list (old Cohere2/Gemma2 style) has no single value
        return None
    if not value:
        return None
    return int(value)


def layer_types(r: Resolved) -> list[str] | None:
    value = get_attr(r.hf_text_config, "layer_types")
    return list(value) if value is not None else None


def cache_sliding_window(r: Resolved) -> int | None:
    """vLLM: EngineArgs.create_engine_config — CacheConfig.sliding_window is the model's window
    only when layer_types is absent or all "sliding_attention"."""
    types = layer_types(r)
    if types is None or all(t == "sliding_attention" for t in types):
        return sliding_window(r)
    return None


_DTYPE_NAMES = {"bfloat16": "bfloat16", "float16": "float16", "float32": "float32",
                "half": "float16", "float": "float32"}


def config_dtype(r: Resolved) -> str | None:
    """vLLM: ModelArchConfigConvertorBase.get_torch_dtype — `dtype` of the config, else of its
    text, vision or encoder config (the safetensors fallback is the caller's)."""
    for cfg in (r.hf_config, r.hf_text_config, get_attr(r.hf_config, "vision_config"),
                get_attr(r.hf_config, "encoder_config")):
        if cfg is None:
            continue
        value = get_attr(cfg, "dtype")
        if value is not None:
            name = str(value).removeprefix("torch.")
            return _DTYPE_NAMES.get(name, name)
    return None


# --- what vLLM reads from the model class (registry interfaces, kvplan/data) -----------------

def _interfaces(arch: str | None) -> list[str]:
    from kvplan.models.coverage import registry_entry
    entry = registry_entry(arch) if arch else None
    return list(entry["interfaces"]) if entry else []


REGISTRY_VERSION = "0.34.0"


def registry_missing(arch: str | None) -> bool:
    from kvplan.models.coverage import registry_entry
    return arch is not None and registry_entry(arch) is None


def is_attention_free(arch: str | None) -> bool:
    """vLLM: ModelConfig.is_attention_free (the model class implements IsAttentionFree)."""
    return "IsAttentionFree" in _interfaces(arch)


def is_hybrid(arch: str | None, r: Resolved) -> bool:
    """vLLM: ModelConfig.is_hybrid — an IsHybrid class, unless its layer_types are all attention
    (granite-4.0-micro uses the hybrid class with attention layers only)."""
    if "IsHybrid" not in _interfaces(arch):
        return False
    types = get_attr(r.hf_config, "layer_types")
    return types is None or not all(t in ("attention", "full_attention") for t in types)


def has_noops(arch: str | None) -> bool:
    """vLLM: ModelConfig.has_noops (HasNoOps: blocks without attention, e.g. Nemotron-NAS)."""
    return "HasNoOps" in _interfaces(arch)
