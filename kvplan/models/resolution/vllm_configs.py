"""vLLM's own configuration classes, where they decide what kvplan reads (vLLM is never imported).

vLLM 0.34 registers its own class for some model types (transformers_utils/config.py
`_CONFIG_REGISTRY`, classes in transformers_utils/configs/; `_maybe_register_hf_config` registers
them over transformers' own, so they win for that model type). For the model types below, vLLM's
class differs from transformers' class (or transformers has none) in what kvplan reads: the layer
kinds, the head size, the window, the MLA fields, the maximum length or where the text config is.
Each entry mirrors its vLLM class as data: the `__init__` / field defaults of what kvplan reads and
the class's derivations, applied to config.json before a transformers base class holds the values
(`resolve.resolve`). transformers stays the resolver of record for every other model type.

Every other model type of `_CONFIG_REGISTRY` whose class is vLLM's own is listed in
`VLLM_OWN_CLASSES`: transformers' class of that name (newer transformers releases add some, e.g.
dots3_note, lfm3, flint in 5.25) is never read for it, so kvplan reads such a config the same way
whatever transformers is installed: through a fast adapter (bailing_moe_v3_vl, chatglm,
deepseek_vl_v2, deepseek_v41, dory, flint, inkling*, kimi_linear, kimi_k3*, lfm3*,
nemo_speechlm; a length the config omits is the vLLM class's default, `VLLM_MAX_POSITIONS`), the
fast adapter of its text config's model type (bagel, funaudiochat, isaac, kimi_vl, openvla,
unlimited-ocr: their classes build the text config with the class of its model type), or its raw
fields (`generic.py`); the rest are refused. The types whose vLLM class is transformers' own (hyperclovax, kimi_k25,
minimax_m3_vl, step3p5) or transformers' DeepseekV3Config under another name (kimi_k2,
deepseek_v32: `resolve._VLLM_CONFIG_ALIASES`) stay with transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kvplan.errors import ConfigError

Derive = Callable[[dict[str, Any], str], dict[str, Any]]


@dataclass(frozen=True)
class VllmConfigClass:
    """One vLLM configuration class, as data."""

    name: str  # vLLM's class (transformers_utils/configs/<module>.py)
    defaults: Mapping[str, Any]  # its defaults for the fields kvplan reads
    derive: Derive | None = None  # its __init__ / __post_init__ derivations
    # the transformers class that holds the values (vLLM's class derives from it), by name;
    # None: transformers' PreTrainedConfig, which keeps every field as an attribute
    base: str | None = None
    strict: tuple[tuple[str, type | tuple[type, ...]], ...] = field(default=())  # @strict fields

    def build(self, config: Mapping[str, Any], source: str) -> dict[str, Any]:
        """config.json as vLLM's class holds it: its defaults where absent, its derivations."""
        data = {k: v for k, v in self.defaults.items() if k not in config}
        data.update(config)
        for name, kind in self.strict:  # huggingface_hub's @strict: the field's declared type
            value = data.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, kind)):
                raise ConfigError(f"{source}: vLLM's {self.name} rejects {name}={value!r} "
                                  f"(expected {getattr(kind, '__name__', kind)})")
        return self.derive(data, source) if self.derive else data


def _beam(data: dict[str, Any], source: str) -> dict[str, Any]:
    """vLLM: configs/beam.py BeamConfig.__init__ — layer_types default to sliding attention on
    every layer (and must be full / sliding, one per layer); head_dim None stays None (vLLM's
    get_head_size then takes hidden_size // num_attention_heads); nested RoPE parameters with
    one NoPE type become the one set."""
    n = data["num_hidden_layers"]
    types = data.get("layer_types")
    if types is None:
        types = ["sliding_attention"] * n
    if len(types) != n or any(t not in ("full_attention", "sliding_attention") for t in types):
        raise ConfigError(f"{source}: vLLM would raise ValueError: layer_types must contain one "
                          "valid attention type per layer.")
    mlp = data.get("mlp_layer_types")
    if mlp is None:
        mlp = ["sparse"] * n
    if len(mlp) != n or any(t not in ("dense", "sparse") for t in mlp):
        raise ConfigError(f"{source}: vLLM would raise ValueError: mlp_layer_types must contain "
                          "one 'dense' or 'sparse' entry per layer.")
    rope = data.get("rope_parameters") or {"rope_type": "default", "rope_theta": 10000.0}
    if isinstance(rope, Mapping) and set(rope) <= {"sliding_attention", "full_attention"}:
        rotary = [p for p in rope.values() if p is not None]
        if len(rotary) != 1:
            raise ConfigError(f"{source}: vLLM would raise ValueError: Beam expects RoPE "
                              "parameters for exactly one type.")
        rope = rotary[0]
    return data | {"layer_types": types, "mlp_layer_types": mlp, "rope_parameters": rope}


def _hy_v4(data: dict[str, Any], source: str) -> dict[str, Any]:
    """vLLM: configs/hy_v4.py HYV4Config.__post_init__ — head_dim is the RoPE slice
    (qk_rope_head_dim); layer_types stay None when absent (transformers' class derives
    'indexed_attention' layers instead), "sparse_attention" / "sparse" read as
    "deepseek_sparse_attention"."""
    n = data["num_hidden_layers"]
    out = data | {"qk_head_dim": data["qk_nope_head_dim"] + data["qk_rope_head_dim"],
                  "head_dim": data["qk_rope_head_dim"]}
    if out.get("mlp_layer_types") is None:
        out["mlp_layer_types"] = ["dense"] * min(1, n) + ["sparse"] * max(n - 1, 0)
    if out.get("indexer_types") is None:
        out["indexer_types"] = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared"
                                for i in range(n)]
    if out.get("layer_types") is not None:
        out["layer_types"] = ["deepseek_sparse_attention" if t in ("sparse_attention", "sparse")
                              else t for t in out["layer_types"]]
    return out


def _alpamayo2_super(data: dict[str, Any], source: str) -> dict[str, Any]:
    """vLLM: configs/alpamayo2_super.py Alpamayo2SuperConfig.__init__ — a Qwen3VLConfig whose
    text and vision configs come from `vlm_config` (else the top level), with its image / video
    token ids."""
    nested = dict(data.get("vlm_config") or {})
    out = {k: v for k, v in data.items() if k not in ("text_config", "vision_config")}
    text = nested.pop("text_config", data.get("text_config"))
    vision = nested.pop("vision_config", data.get("vision_config"))
    for key in ("image_token_id", "video_token_id", "vision_start_token_id",
                "vision_end_token_id"):
        if key in nested:
            out.setdefault(key, nested[key])
    if text is not None:
        out["text_config"] = text
    if vision is not None:
        out["vision_config"] = vision
    return out


# vLLM 0.34.0 transformers_utils/configs/beam.py BeamConfig.__init__ defaults
_BEAM = VllmConfigClass("BeamConfig", {
    "vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
    "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 4,
    "head_dim": None, "hidden_act": "silu", "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "sliding_window": 4096,
    "layer_types": None, "mlp_layer_types": None, "moe_intermediate_size": 768,
    "num_experts_per_tok": 8, "num_experts": 128, "norm_topk_prob": True, "n_group": None,
    "topk_group": None, "routed_scaling_factor": 1.0, "final_logit_softcapping": None,
}, _beam)

# vLLM 0.34.0 transformers_utils/configs/hy_v4.py HYV4Config field defaults (@strict)
_HY_V4 = VllmConfigClass("HYV4Config", {
    "vocab_size": 120832, "hidden_size": 2816, "intermediate_size": 6912,
    "moe_intermediate_size": 768, "num_hidden_layers": 34, "num_attention_heads": 32,
    "num_key_value_heads": 32, "head_dim": 256, "hidden_act": "silu",
    "max_position_embeddings": 262144, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
    "attention_bias": False, "n_routed_experts": 256, "n_shared_experts": 1,
    "num_experts_per_tok": 8, "routed_scaling_factor": 2.827, "norm_topk_prob": True,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
    "v_head_dim": 256, "mlp_layer_types": None, "layer_types": None, "index_topk": 2048,
    "index_head_dim": 128, "index_n_heads": 16, "indexer_types": None,
    "enable_lm_head_fp32": True, "enable_ihc": True, "hc_mult": 4, "gated_mla": True,
    "learnable_sink": True, "rope_parameters": None, "num_nextn_predict_layers": 1,
}, _hy_v4, strict=tuple((k, int) for k in (
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "max_position_embeddings", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
    "v_head_dim", "num_nextn_predict_layers")))

# vLLM 0.34.0 transformers_utils/configs/alpamayo2_super.py (a transformers Qwen3VLConfig)
_ALPAMAYO2_SUPER = VllmConfigClass("Alpamayo2SuperConfig", {}, _alpamayo2_super,
                                   base="Qwen3VLConfig")

def _ricursive(data: dict[str, Any], source: str) -> dict[str, Any]:
    """vLLM: configs/ricursive.py RicursiveConfig.__init__ — layer_types default to a full
    attention layer every fifth layer (i % 5 == 4), sliding attention otherwise (full / sliding
    only, one per layer); the RoPE set from rope_theta when none is given."""
    n = data["num_hidden_layers"]
    types = data.get("layer_types")
    if types is None:
        types = ["full_attention" if i % 5 == 4 else "sliding_attention" for i in range(n)]
    if len(types) != n or any(t not in ("full_attention", "sliding_attention") for t in types):
        raise ConfigError(f"{source}: vLLM would raise ValueError: layer_types must contain one "
                          "valid attention type per layer.")
    out = {k: v for k, v in data.items()
           if k not in ("is_hybrid_swa", "hybrid_layer_pattern", "auto_map")}
    out.setdefault("rope_parameters", {"rope_type": "default", "rope_theta": data["rope_theta"]})
    return out | {"layer_types": types}


# vLLM 0.34.0 transformers_utils/configs/ricursive.py RicursiveConfig.__init__ defaults
_RICURSIVE = VllmConfigClass("RicursiveConfig", {
    "vocab_size": 100352, "hidden_size": 5120, "intermediate_size": 40960,
    "num_hidden_layers": 80, "num_attention_heads": 80, "num_key_value_heads": 8,
    "head_dim": 128, "hidden_act": "silu", "max_position_embeddings": 2097152,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "sliding_window": 1024, "layer_types": None,
    "tie_word_embeddings": False,
}, _ricursive)


# model type → vLLM's class, mirrored (vLLM: _CONFIG_REGISTRY)
VLLM_CONFIG_CLASSES: dict[str, VllmConfigClass] = {
    "beam": _BEAM,
    "hy_v4": _HY_V4,
    "alpamayo2_super": _ALPAMAYO2_SUPER,
    "ricursive": _RICURSIVE,
}

# vLLM 0.34.0 _CONFIG_REGISTRY: every model type whose class is vLLM's own (not a transformers
# class), → its class name. transformers' class of the same name is never read for them.
VLLM_OWN_CLASSES: dict[str, str] = {
    "alpamayo2_super": "Alpamayo2SuperConfig", "bagel": "BagelConfig",
    "bailing_moe_v3_vl": "BailingMoeV3VLConfig", "beam": "BeamConfig",
    "chatglm": "ChatGLMConfig", "ultravbert": "ColUltraVBertConfig",
    "colqwen3": "ColQwen3Config", "ops_colqwen3": "OpsColQwen3Config",
    "qwen3_vl_nemotron_embed": "Qwen3VLNemotronEmbedConfig",
    "deepseek_vl_v2": "DeepseekVLV2Config", "dory": "DoryConfig",
    "dots3_note": "Dots3NoteConfig", "k3_dspark": "K3DSparkConfig",
    "funaudiochat": "FunAudioChatConfig", "hy_v4": "HYV4Config", "isaac": "IsaacConfig",
    "kimi_linear": "KimiLinearConfig", "kimi_vl": "KimiVLConfig",
    "muse_spark_dspark": "MuseSparkDSparkConfig", "muse_spark_text": "MuseSparkTextConfig",
    "muse_spark_vision": "MuseSparkVisionConfig", "muse_spark_audio": "MuseSparkAudioConfig",
    "muse_spark": "MuseSparkConfig", "kimi_k3": "KimiK3Config", "kimi_k31": "KimiK3Config",
    "lfm3": "Lfm3Config", "lfm3_audio": "Lfm3AudioConfig", "lfm3_vl": "Lfm3VlConfig",
    "RefinedWeb": "RWConfig", "RefinedWebModel": "RWConfig",
    "midashenglm": "MiDashengLMConfig", "minimax_m3_mtp": "MiniMaxM3MTPConfig",
    "ming_v3_asr": "MingV3ASRConfig", "moondream3": "Moondream3Config",
    "nemo_speechlm": "Nemotron3_5TranscribeConfig", "eagle": "EAGLEConfig",
    "speculators": "SpeculatorsConfig", "openvla": "OpenVLAConfig", "ovis": "OvisConfig",
    "ultravox": "UltravoxConfig", "step3_vl": "Step3VLConfig", "step3_text": "Step3TextConfig",
    "step5": "Step5Config", "step5_vl": "Step5VLConfig", "ricursive": "RicursiveConfig",
    "unlimited-ocr": "UnlimitedOCRConfig", "unlimited_ocr": "UnlimitedOCRConfig",
    "deepseek_v41": "DeepseekV41Config", "flint": "FlintConfig",
    "inkling_mm_model": "InklingMMConfig", "inkling_model": "InklingModelConfig",
}

# vLLM 0.34.0: the max_position_embeddings default of vLLM's own classes that kvplan reads through
# a fast adapter (not mirrored above), for a config.json that omits it (the class's __init__ /
# field default; transformers' class of the same name, where there is one, is not what vLLM reads)
VLLM_MAX_POSITIONS: dict[str, tuple[str, int]] = {
    "dory": ("DoryConfig", 8192), "dots3_note": ("Dots3NoteConfig", 4096),
    "kimi_linear": ("KimiLinearConfig", 4096), "lfm3": ("Lfm3Config", 128000),
    "flint": ("FlintConfig", 262144), "minimax_m3_mtp": ("MiniMaxM3MTPConfig", 524288),
    "muse_spark_dspark": ("MuseSparkDSparkConfig", 131072), "k3_dspark": ("K3DSparkConfig", 4096),
}
