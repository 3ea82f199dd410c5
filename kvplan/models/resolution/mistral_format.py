"""A Mistral-format checkpoint's `params.json` as vLLM 0.34 reads it (data, no vLLM import).

vLLM picks the config format before anything else (transformers_utils/config.py get_config,
config_format "auto"): a folder or hub repo with consolidated*.safetensors
(repo_utils.is_mistral_model_repo) and a params.json is read in Mistral format
(MistralConfigParser.parse → configs/mistral.py adapt_config_dict, with config.json's raw dict, if
any, as defaults); `--config-format mistral|hf` forces one. The functions below port those steps
as dict transformations, each naming the vLLM function it mirrors; a vLLM `PreTrainedConfig`
built from a dict (`PreTrainedConfig.from_dict`) stays that dict here. vLLM's asserts and
ValueErrors on a malformed params.json are `ConfigError`s in its words.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from typing import Any

from kvplan.errors import ConfigError

__all__ = ["DEFAULT_MAX_POSITIONS", "PARAMS_FILE", "adapt_config_dict", "parse_params",
           "safetensors_dtype"]

PARAMS_FILE = "params.json"
# vLLM: config.py _maybe_retrieve_max_pos_from_hf / _remap_general_mistral_args default
DEFAULT_MAX_POSITIONS = 128_000

# vLLM: config.py _SAFETENSORS_TO_TORCH_DTYPE (the floating dtypes a model dtype is read from)
_SAFETENSORS_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
}
# torch.promote_types order among floats (common_broadcastable_dtype picks the dtype every other
# casts to without loss; for a float mix that is the widest one)
_FLOAT_RANK = {"float8_e4m3fn": 0, "float8_e5m2": 0, "float16": 1, "bfloat16": 1,
               "float32": 2, "float64": 3}


def _fail(message: str) -> ConfigError:
    return ConfigError(f"vLLM cannot read this Mistral-format params.json: {message}",
                       hint="vLLM reads params.json when consolidated*.safetensors sits beside "
                            "it; --config-format hf reads config.json instead")


def _check(cond: Any, message: str) -> None:
    if not cond:
        raise _fail(message)


# --------------------------------------------------------------------------------------------
# MistralConfigParser.parse (vllm/transformers_utils/config.py)


def parse_params(params: Mapping[str, Any], hf_config: Mapping[str, Any] | None,
                 safetensors_dtypes: Iterable[str] | None = None,
                 hf_max_positions: int | None = None) -> dict[str, Any]:
    """vLLM: config.py MistralConfigParser.parse — params.json (+ config.json's raw dict as
    defaults, + the consolidated*.safetensors dtypes when params.json has no `dtype`) → the
    config dict vLLM builds its model from. `hf_max_positions`: the text config's
    max_position_embeddings of config.json read through transformers (when params.json lacks
    it; None → config.json's raw value)."""
    config = copy.deepcopy(dict(params))
    if config.get("max_position_embeddings") is None:
        config["max_position_embeddings"] = _max_pos_from_hf(hf_config, hf_max_positions)
    if config.get("dtype") is None and safetensors_dtypes:
        dtype = safetensors_dtype(safetensors_dtypes)
        if dtype is not None:
            config["dtype"] = dtype
    return adapt_config_dict(config, dict(hf_config or {}))


def _max_pos_from_hf(hf_config: Mapping[str, Any] | None, resolved: int | None) -> int:
    """vLLM: config.py _maybe_retrieve_max_pos_from_hf — config.json's text config
    max_position_embeddings (read with config_format "hf"), else 128000 (no config.json, or a
    falsy value)."""
    if hf_config is None:
        return DEFAULT_MAX_POSITIONS
    value: Any = resolved
    if value is None:
        text = hf_config.get("text_config")
        value = (text if isinstance(text, Mapping) else hf_config).get("max_position_embeddings")
    return value if isinstance(value, int) and not isinstance(value, bool) and value else \
        DEFAULT_MAX_POSITIONS


def safetensors_dtype(dtypes: Iterable[str]) -> str | None:
    """vLLM: MistralConfigParser.parse — the safetensors tensors' dtypes mapped with
    _SAFETENSORS_TO_TORCH_DTYPE, then utils/torch_utils.common_broadcastable_dtype (the first
    dtype, in order of appearance, every other one casts to; among floats the widest)."""
    names = [_SAFETENSORS_DTYPES[d] for d in dtypes if d in _SAFETENSORS_DTYPES]
    floats = [n for n in names if n in _FLOAT_RANK]
    if not floats:
        return names[0] if names else None
    top = max(_FLOAT_RANK[n] for n in floats)
    # float16 with bfloat16 and nothing wider: neither casts to the other, vLLM's max() keeps the
    # first of its set; kvplan keeps the first seen
    return next(n for n in floats if _FLOAT_RANK[n] == top)


# --------------------------------------------------------------------------------------------
# adapt_config_dict and its helpers (vllm/transformers_utils/configs/mistral.py)


def adapt_config_dict(config: dict[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py adapt_config_dict (mutates `config`, as vLLM does)."""
    config = _remap_general_mistral_args(config)
    config = _remap_mistral_sliding_window(config)
    if config.get("quantization"):
        config = _remap_mistral_quantization_args(config)
    is_mla = bool(config.get("qk_nope_head_dim"))
    if is_mla:
        config = _remap_mistral_mla_args(config)
    moe = config.get("moe")
    is_moe = bool(moe)
    is_mistral_large_3 = is_moe and ((moe or {}).get("num_shared_experts") or 0) > 0
    is_dsa = bool(config.get("dsa"))
    if config.get("model_type") == "mamba":
        config["architectures"] = ["Mamba2ForCausalLM"]
    elif is_dsa:
        _check(is_mla and is_mistral_large_3, "Mistral DSA requires MLA + MoE.")
        config = _remap_moe_args(config)
        config = _remap_mistral_large_4_args(config)
        config["model_type"] = "mistral_large_4"
        config["architectures"] = ["MistralLarge4ForCausalLM"]
    elif is_moe and is_mistral_large_3:
        config = _remap_moe_args(config)
        config["model_type"] = "deepseek_v3"
        config["architectures"] = ["MistralLarge3ForCausalLM"]
        _check("llama_4_scaling" in config, "MistralLarge3 expect llama4 scaling config.")
        _check_llama_4_scaling(config)
    elif is_moe:
        config["architectures"] = ["MixtralForCausalLM"]
    else:
        config["architectures"] = ["MistralForCausalLM"]

    if config.get("yarn"):
        config = _remap_mistral_yarn_args(config)
    if config.get("llama_4_scaling"):
        _check_llama_4_scaling(config)

    multimodal = config.get("multimodal") or {}
    is_vision = multimodal.get("vision_encoder_args") or config.get("vision_encoder")
    is_audio = bool((multimodal.get("whisper_model_args") or {}).get("encoder_args"))
    _check(not (is_vision and is_audio), "Vision and audio are mutually exclusive")
    if is_vision:
        config = _remap_mistral_vision_args(config)
    if is_audio:
        config = _remap_mistral_audio_args(config)

    for k, v in defaults.items():
        config.setdefault(k, copy.deepcopy(v))
    return config


def _check_llama_4_scaling(config: Mapping[str, Any]) -> None:
    keys = ["original_max_position_embeddings", "beta"]
    scaling = config.get("llama_4_scaling") or {}
    _check(all(k in scaling for k in keys),
           f"llama_4_scaling config should define the keys: {','.join(keys)}")


def _remap_general_mistral_args(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_general_mistral_args."""
    config_mapping = {
        "dim": "hidden_size",
        "norm_eps": "rms_norm_eps",
        "n_kv_heads": "num_key_value_heads",
        "n_layers": "num_hidden_layers",
        "n_heads": "num_attention_heads",
        "hidden_dim": "intermediate_size",
    }
    top_level_mapping_with_default = {
        "model_type": ("model_type", "transformer"),
        "hidden_act": ("activation", "silu"),
        "tie_word_embeddings": ("tied_embeddings", False),
        "max_seq_len": ("max_seq_len", config.get("max_position_embeddings", 128_000)),
        "max_position_embeddings": ("max_position_embeddings", 128_000),
        "dtype": ("dtype", config.get("dtype")),
    }
    for key, new_key in config_mapping.items():
        if key in config:
            config[new_key] = config.pop(key)
    for new_key, (key, default_value) in top_level_mapping_with_default.items():
        config[new_key] = config.pop(key, default_value)
    return config


def _remap_mistral_sliding_window(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_mistral_sliding_window — a list → layer_types + one
    window; an int → every layer sliding (unless layer_types is set)."""
    sliding_window = config.get("sliding_window")
    if sliding_window:
        if isinstance(sliding_window, list):
            pattern_repeats = config["num_hidden_layers"] // len(sliding_window)
            layer_types = sliding_window * pattern_repeats
            config["layer_types"] = ["full_attention" if t is None else "sliding_attention"
                                     for t in layer_types]
            _check(len(set(sliding_window) - {None}) <= 1, str(sliding_window))
            config["sliding_window"] = next(filter(None, sliding_window), None)
        elif isinstance(sliding_window, int) and config.get("layer_types") is None:
            config["layer_types"] = ["sliding_attention"] * config["num_hidden_layers"]
        else:
            raise _fail(f"Unsupported sliding_window type: {sliding_window}")
    return config


def _remap_mistral_quantization_args(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_mistral_quantization_args — fp8_e4m3 → an fp8
    quantization_config; compressed-tensors passed through."""
    quantization = config.pop("quantization", {}) or {}
    if quantization.get("qformat_weight") == "fp8_e4m3":
        qscheme_act = quantization.get("qscheme_act")
        qscheme_weight = quantization.get("qscheme_weight")
        _check(qscheme_act in ("NO_SCALES", "TENSOR", "BLOCK", None),
               "Only NO_SCALES, TENSOR (default) and BLOCK are supported for qscheme_act")
        _check((qscheme_act == "BLOCK") == (qscheme_weight == "BLOCK"),
               "BLOCK quantization must be used for both weights and activations")
        is_dynamic = qscheme_act in ("NO_SCALES", "BLOCK")
        config["quantization_config"] = {
            "quant_method": "fp8",
            "activation_scheme": "dynamic" if is_dynamic else "static",
        }
        if qscheme_weight == "BLOCK":
            config["quantization_config"]["weight_block_size"] = [
                quantization["block_size_out"], quantization["block_size_in"]]
    elif str(quantization.get("quant_method", "")).lower().replace("_", "-") == \
            "compressed-tensors":
        quantization["quant_method"] = "compressed-tensors"
        config["quantization_config"] = quantization
    else:
        raise _fail(f"Found unknown quantization='{quantization}' in config")
    return config


def _remap_mistral_yarn_args(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_mistral_yarn_args — `yarn` → rope_parameters."""
    yarn_config_map = {
        "factor": ("factor", float),
        "original_max_position_embeddings": ("original_max_position_embeddings", int),
        "beta": ("beta_fast", float),
        "alpha": ("beta_slow", float),
    }
    yarn_config = dict(config.get("yarn") or {})
    rope: dict[str, Any] = {"rope_type": "yarn", "mscale_all_dim": 1}
    config["rope_parameters"] = rope
    rope_theta = config.pop("rope_theta", None)
    if rope_theta:
        rope["rope_theta"] = rope_theta
    for old_name, (new_name, cast) in yarn_config_map.items():
        if old_name in yarn_config:
            rope[new_name] = cast(yarn_config.pop(old_name))
    if not yarn_config.pop("apply_scale", True):
        rope["attention_factor"] = 1.0
    _check(len(yarn_config) == 0, f"Unparsed yarn config: {yarn_config}")
    # vLLM pops from the params' own `yarn` dict: what remains there is an empty dict
    config["yarn"] = yarn_config
    return config


def _remap_mistral_vision_args(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_mistral_vision_args — a Pixtral wrapper
    (PixtralForConditionalGeneration, model type "pixtral") around the text config."""
    vision_config = config.pop("multimodal") if config.get("multimodal") else \
        config.pop("vision_encoder")
    quant_config = config.get("quantization_config")
    out: dict[str, Any] = {
        "model_type": "pixtral",
        "architectures": ["PixtralForConditionalGeneration"],
        "text_config": config,
        "vision_config": vision_config,
    }
    if quant_config:
        out["quantization_config"] = quant_config
    return out


def _remap_mistral_audio_args(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_mistral_audio_args — a Voxtral wrapper around the text
    config, with a WhisperConfig audio config (the KV-relevant fields; WhisperConfig's own
    defaults for the rest are transformers')."""
    whisper_args = config["multimodal"].pop("whisper_model_args")
    encoder_args = whisper_args["encoder_args"]
    downsample_factor = whisper_args["downsample_args"]["downsample_factor"]
    causal = bool(encoder_args.get("causal"))
    if causal:
        block_pool_size = downsample_factor
        config["projection_size"] = downsample_factor * encoder_args["dim"]
    else:
        block_pool_size = 1
    audio_encoding = encoder_args["audio_encoding_args"]
    quant_config = config.get("quantization_config")
    audio: dict[str, Any] = {
        "model_type": "whisper",
        "num_mel_bins": audio_encoding["num_mel_bins"],
        "window_size": audio_encoding["window_size"],
        "sampling_rate": audio_encoding["sampling_rate"],
        "hop_length": audio_encoding["hop_length"],
        "downsample_factor": downsample_factor,
        "d_model": encoder_args["dim"],
        "encoder_layers": encoder_args["n_layers"],
        "encoder_ffn_dim": encoder_args["hidden_dim"],
        "encoder_attention_heads": encoder_args["n_heads"],
        "encoder_head_dim": encoder_args["head_dim"],
        "vocab_size": encoder_args["vocab_size"],
        "is_encoder_decoder": False,
        "is_causal": encoder_args.get("causal", False),
        "sliding_window": encoder_args.get("sliding_window", None),
        "block_pool_size": block_pool_size,
        "pos_embed": encoder_args.get("pos_embed", "sinusoidal"),
        "global_log_mel_max": audio_encoding.get("global_log_mel_max"),
        "max_position_embeddings": block_pool_size * config["max_position_embeddings"],
    }
    if (max_source_positions := encoder_args.get("max_source_positions")) is not None:
        audio["max_source_positions"] = max_source_positions
    out: dict[str, Any] = {
        "model_type": "voxtral",
        "architectures": ["VoxtralRealtimeGeneration" if causal
                          else "VoxtralForConditionalGeneration"],
        "text_config": config,
        "audio_config": audio,
    }
    if quant_config:
        out["quantization_config"] = quant_config
    return out


def _remap_moe_args(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_moe_args — the `moe` block as DeepSeek-V3 fields."""
    moe_config_map = {
        "route_every_n": "moe_layer_freq",
        "first_k_dense_replace": "first_k_dense_replace",
        "num_experts_per_tok": "num_experts_per_tok",
        "num_experts": "n_routed_experts",
        "expert_hidden_dim": "moe_intermediate_size",
        "routed_scale": "routed_scaling_factor",
        "num_shared_experts": "n_shared_experts",
        "num_expert_groups": "n_group",
        "num_expert_groups_per_tok": "topk_group",
    }
    moe = config.get("moe", {})
    for old_name, new_name in moe_config_map.items():
        if old_name in moe:
            config[new_name] = moe.pop(old_name)
    config["topk_method"] = None
    config["norm_topk_prob"] = True
    config["scoring_func"] = "softmax"
    return config


def _remap_mistral_mla_args(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_mistral_mla_args — an MLA model without `moe` gets one
    dense-as-MoE block (so it is read as Mistral Large 3)."""
    if not config.get("moe"):
        config["moe"] = {
            "num_experts": 1,
            "first_k_dense_replace": config.get("num_hidden_layers"),
            "route_every_n": 1,
            "num_shared_experts": 1,
            "expert_hidden_dim": config.get("intermediate_size"),
            "num_experts_per_tok": 1,
            "routed_scale": 1.0,
            "renorm_strategy": "WEIGHTS",
            "use_load_balancing_bias": False,
            "num_expert_groups": 1,
            "num_expert_groups_per_tok": 1,
        }
    return config


def _expand_layer_pattern(pattern: list[Any], num_layers: int) -> list[Any]:
    """vLLM: configs/mistral.py _expand_layer_pattern."""
    _check(pattern, "Per-layer patterns must not be empty.")
    return (pattern * math.ceil(num_layers / len(pattern)))[:num_layers]


# vLLM: configs/mistral.py _DSA_KEY_ALIASES
_DSA_KEY_ALIASES = {
    "topk": "index_topk", "n_heads": "index_n_heads", "head_dim": "index_head_dim",
    "rope_head_dim": "index_rope_head_dim", "nope": "index_nope",
    "match_nope": "indexer_match_nope", "ssmax_scaling": "indexer_ssmax_scaling",
    "norm_eps": "indexer_norm_eps", "sharing": "index_sharing",
}


def _normalize_dsa_keys(dsa: Mapping[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _normalize_dsa_keys."""
    out = dict(dsa)
    for key, prefixed in _DSA_KEY_ALIASES.items():
        if key not in out:
            continue
        value = out.pop(key)
        _check(out.get(prefixed, value) == value,
               f"Conflicting dsa keys: {key}={value!r}, {prefixed}={out.get(prefixed)!r}")
        out[prefixed] = value
    return out


def _remap_mistral_large_4_args(config: dict[str, Any]) -> dict[str, Any]:
    """vLLM: configs/mistral.py _remap_mistral_large_4_args — per-layer NoPE, KV-sharing and
    index-sharing patterns expanded; the DSA indexer fields at top level."""
    num_layers = config["num_hidden_layers"]
    nope = config.pop("nope", None)
    config["nope_layer_flags"] = (
        _expand_layer_pattern([v == "nope" for v in nope.split(",")], num_layers)
        if nope else [False] * num_layers)
    kv_sharing = config.pop("kv_sharing", None) or {}
    _check(set(kv_sharing) <= {"source_layers_str"}, f"Unsupported kv_sharing config: {kv_sharing}")
    if source_layers_str := kv_sharing.get("source_layers_str"):
        sources = [int(v) for v in source_layers_str.split(",")]
    else:
        sources = list(range(num_layers))
    _check(len(sources) == num_layers, "kv_sharing: one source per layer")
    for layer, source in enumerate(sources):
        _check(source <= layer and sources[source] == source,
               f"Layer {layer} must share KV with an earlier, non-sharing layer")
        _check(config["nope_layer_flags"][layer] == config["nope_layer_flags"][source],
               "kv_sharing: a layer and its source differ in NoPE")
    config["kv_source_layers"] = sources
    dsa = _normalize_dsa_keys(config.pop("dsa"))
    for key in ("index_topk", "index_n_heads", "index_head_dim", "indexer_norm_eps",
                "indexer_ssmax_scaling"):
        _check(key in dsa, f"dsa.{key} is missing")
        config[key] = dsa.pop(key)
    _check(dsa.pop("index_rope_head_dim", None) in (None, -1, config.get("qk_rope_head_dim")),
           "dsa.index_rope_head_dim differs from qk_rope_head_dim")
    _check(not dsa.pop("index_nope", False), "index_nope is not supported")
    config["indexer_nope_layer_flags"] = (
        list(config["nope_layer_flags"]) if dsa.pop("indexer_match_nope", False)
        else [False] * num_layers)
    _check(dsa.pop("fp8_indexer", True), "Only the FP8 indexer cache is supported")
    config["fp8_kv_cache"] = dsa.pop("fp8_kv_cache", False)
    index_sharing = dsa.pop("index_sharing", None)
    config["index_sharing"] = (_expand_layer_pattern(index_sharing.split(","), num_layers)
                               if index_sharing else ["full"] * num_layers)
    _check(set(config["index_sharing"]) <= {"full", "shared"}, "index_sharing: full|shared")
    _check(config["index_sharing"][0] == "full", "index_sharing: the first layer is full")
    _check(not dsa, f"Unparsed dsa config: {dsa}")
    if (mtp := config.pop("mtp", None)) is not None:
        config["mtp_config"] = mtp
    return config
