"""Shared helpers for the config adapters: field access, nested configs, layer patterns.

Everything here reads a plain ``dict`` (a parsed ``config.json``); nothing does I/O or imports
transformers/torch. Field defaults that transformers' configuration classes would fill in are
applied by the family modules, each next to the class it mirrors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan.errors import SPECS_HINT, ConfigError, KvplanError, UnsupportedError
from kvplan.models.description import (
    LayerDescription,
    LayerKind,
    ModelDescription,
    QuantizationInfo,
    RopeScaling,
)
from kvplan.models.resolution.max_len import POSSIBLE_KEYS

_MISSING: Any = object()

# Sub-config keys that hold the language model of a multimodal wrapper.
# vLLM: transformers_utils.config._CONFIG_ATTRS_MAPPING maps llm_config → text_config.
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")


MAX_LAYERS = 10_000  # a layer count beyond this is a typo (and would build a huge layer list)


@dataclass
class Cfg:
    """A config dict plus where it came from, so errors can name the file and the field."""

    data: Mapping[str, Any]
    source: str
    path: str = ""  # dotted prefix of this dict inside config.json, e.g. "text_config."
    warnings: list[str] = field(default_factory=list)

    # --- access -----------------------------------------------------------------------------
    def field(self, key: str) -> str:
        return f"{self.path}{key}"

    def has(self, key: str) -> bool:
        """Present and not null."""
        return self.data.get(key) is not None

    def present(self, key: str) -> bool:
        """Present, even as an explicit null."""
        return key in self.data

    def get(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key, _MISSING)
        return default if value is _MISSING or value is None else value

    def raw(self, key: str, default: Any = None) -> Any:
        """The value as written: an explicit null stays None, absence gives `default`."""
        return self.data.get(key, default)

    def error(self, message: str, hint: str | None = None) -> ConfigError:
        return ConfigError(f"{self.source}: {message}", hint=hint)

    def req(self, key: str, why: str = "") -> Any:
        value = self.data.get(key)
        if value is None:
            what = f" (needed for {why})" if why else ""
            raise self.error(
                f"required field '{self.field(key)}' is missing from config.json{what}",
                hint="Check that the file is the model's own config.json; "
                + SPECS_HINT,
            )
        return value

    def _as_int(self, key: str, value: Any, minimum: int | None) -> int:
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
            raise self.error(f"field '{self.field(key)}' must be an integer, got {value!r}")
        value = int(value)
        if minimum is not None and value < minimum:
            raise self.error(f"field '{self.field(key)}' must be >= {minimum}, got {value}")
        if ("layers" in key or "nextn" in key) and value > MAX_LAYERS:
            raise self.error(f"field '{self.field(key)}' is {value:,}: no model has more than "
                             f"{MAX_LAYERS:,} layers")
        return value

    def req_int(self, key: str, why: str = "", minimum: int | None = 1) -> int:
        return self._as_int(key, self.req(key, why), minimum)

    def get_int(self, key: str, default: int | None, minimum: int | None = 1) -> int | None:
        value = self.data.get(key)
        if value is None:
            return default
        return self._as_int(key, value, minimum)

    def int_default(self, key: str, default: int, why: str = "", minimum: int | None = 1) -> int:
        """An int field transformers would default; note the default when it is used."""
        value = self.get_int(key, None, minimum)
        if value is None:
            self.warn(f"'{self.field(key)}' is absent: used the transformers default {default}"
                      + (f" ({why})" if why else ""))
            return default
        return value

    def req_list(self, key: str, why: str = "") -> list[Any]:
        value = self.req(key, why)
        if not isinstance(value, list):
            raise self.error(f"field '{self.field(key)}' must be a list, got {type(value).__name__}")
        return value

    def sub(self, key: str) -> Cfg | None:
        value = self.data.get(key)
        if isinstance(value, Mapping):
            return Cfg(value, self.source, f"{self.path}{key}.", self.warnings)
        return None

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)


def text_cfg(top: Cfg) -> Cfg:
    """The language-model part of a config: the nested text config of a multimodal wrapper,
    else the config itself. vLLM: ModelConfig.hf_text_config (PretrainedConfig.get_text_config).
    """
    for key in TEXT_CONFIG_KEYS:
        sub = top.sub(key)
        if sub is not None and (sub.has("num_hidden_layers") or sub.has("model_type")):
            return sub
    return top


def layers_prefix(top: Cfg, text: Cfg) -> str:
    """Where vLLM registers the decoder layers: a multimodal wrapper builds its language model
    under `language_model` (init_vllm_registered_model(prefix="language_model"))."""
    return "model.layers" if text is top else "language_model.model.layers"


def note_encoder_cache(top: Cfg) -> None:
    """Add the multimodal encoder-cache note (as the generic path does) to a wrapper's plan."""
    from kvplan.models.coverage import encoder_cache_note  # the registry data: only wrappers

    note = encoder_cache_note(architectures(top))
    if note is not None:
        top.warn(note)


# --- layer patterns -----------------------------------------------------------------------------

def layer_types(cfg: Cfg, num_layers: int, key: str = "layer_types") -> list[str] | None:
    """`layer_types` as a list of strings, checked against num_hidden_layers; None if absent."""
    value = cfg.data.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise cfg.error(f"field '{cfg.field(key)}' must be a list of strings")
    if len(value) < num_layers:
        raise cfg.error(
            f"field '{cfg.field(key)}' has {len(value)} entries but num_hidden_layers is "
            f"{num_layers}")
    return list(value[:num_layers])


def interval_layer_types(num_layers: int, interval: int, *, every: str, other: str) -> list[str]:
    """transformers' `(i + 1) % interval == 0 → every, else other` pattern."""
    return [every if (i + 1) % interval == 0 else other for i in range(num_layers)]


def pattern_list(cfg: Cfg, key: str, num_layers: int) -> list[Any]:
    """A per-layer list field (hybrid_layer_pattern, attn_type_list, ...) of num_layers entries."""
    value = cfg.req_list(key)
    if len(value) < num_layers:
        raise cfg.error(f"field '{cfg.field(key)}' has {len(value)} entries but "
                        f"num_hidden_layers is {num_layers}")
    return list(value[:num_layers])


def model_level_window(sliding_window: int | None, types: Sequence[str] | None) -> int | None:
    """The window every attention layer without its own per-layer window gets.

    vLLM: EngineArgs.create_engine_config sets CacheConfig.sliding_window only when layer_types is
    absent or all "sliding_attention"; Attention.__init__ falls back to it (attention.py L281).
    """
    if sliding_window is None:
        return None
    if types is None or all(t == "sliding_attention" for t in types):
        return sliding_window
    return None


def positive_window(cfg: Cfg, key: str = "sliding_window") -> int | None:
    value = cfg.get_int(key, None, minimum=None)
    if value is None or value <= 0:
        return None
    return value


# --- layer builders ---------------------------------------------------------------------------

def attention(index: int, name: str, *, kv_heads: int, head_size: int,
              head_size_v: int | None = None, window: int | None = None,
              chunk: int | None = None) -> LayerDescription:
    """A KV-cache attention layer: full, sliding window or chunked local."""
    if window is not None:
        kind = LayerKind.SLIDING_WINDOW
    elif chunk is not None:
        kind = LayerKind.CHUNKED_LOCAL
    else:
        kind = LayerKind.FULL_ATTENTION
    return LayerDescription(
        index=index, name=name, kind=kind, num_kv_heads=kv_heads, head_size=head_size,
        head_size_v=head_size_v if head_size_v not in (None, head_size) else None,
        sliding_window=window, attention_chunk_size=chunk)


def no_kv(index: int, name: str) -> LayerDescription:
    return LayerDescription(index=index, name=name, kind=LayerKind.NO_KV)


def mla(index: int, name: str, *, kv_lora_rank: int, qk_rope_head_dim: int,
        index_head_dim: int | None = None, window: int | None = None) -> LayerDescription:
    """A DeepSeek-style MLA layer: one latent vector (kv_lora_rank + rope dim) per token, no V.

    vLLM: MLAAttention.get_kv_cache_spec (num_kv_heads=1, head_size=kv_lora_rank+rope, no V).
    """
    return LayerDescription(
        index=index, name=name,
        kind=LayerKind.SLIDING_WINDOW_MLA if window is not None else LayerKind.MLA,
        num_kv_heads=1, head_size=kv_lora_rank + qk_rope_head_dim, head_size_v=0,
        kv_lora_rank=kv_lora_rank, qk_rope_head_dim=qk_rope_head_dim,
        index_head_dim=index_head_dim, sliding_window=window)


def attn_name(i: int, prefix: str = "model.layers", module: str = "self_attn.attn") -> str:
    return f"{prefix}.{i}.{module}"


def head_dim_of(cfg: Cfg, *, default: int | None = None) -> int:
    """`head_dim`, else the transformers default given, else hidden_size // num_attention_heads.

    vLLM: most attention classes use `getattr(config, "head_dim", None) or hidden // heads`.
    """
    value = cfg.get_int("head_dim", None)
    if value is not None:
        return value
    if default is not None:
        return default
    hidden = cfg.req_int("hidden_size", "the head size (no head_dim given)")
    heads = cfg.req_int("num_attention_heads", "the head size (no head_dim given)")
    return hidden // heads


def kv_heads_of(cfg: Cfg, default: int | None = None) -> int:
    """`num_key_value_heads`; absent → the given transformers default, else num_attention_heads."""
    value = cfg.get_int("num_key_value_heads", None)
    if value is not None:
        heads = cfg.get_int("num_attention_heads", None)
        if heads and value and heads % value:
            # vLLM: grouped-query attention needs whole query groups per KV head
            raise ConfigError(f"{cfg.source}: num_attention_heads ({heads}) is not divisible by "
                              f"num_key_value_heads ({value})",
                              hint="fix the config: every KV head serves the same number of "
                                   "query heads")
        return value
    if default is not None:
        return default
    return cfg.req_int("num_attention_heads", "the KV head count (no num_key_value_heads)")


def num_layers_of(cfg: Cfg) -> int:
    return cfg.req_int("num_hidden_layers", "the layer list")


# --- dtype ------------------------------------------------------------------------------------

FLOAT32_NOTE = ("config dtype is float32: vLLM's --dtype auto runs such checkpoints in bfloat16 "
                "on GPUs that support it (config.model._resolve_auto_dtype)")

_DTYPE_ALIASES = {
    "bfloat16": "bfloat16", "bf16": "bfloat16", "torch.bfloat16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16", "torch.float16": "float16",
    "float32": "float32", "fp32": "float32", "float": "float32", "torch.float32": "float32",
}


def model_dtype(top: Cfg, text: Cfg) -> str:
    """The checkpoint's model dtype.

    vLLM: ModelArchConfigConvertorBase.get_torch_dtype reads `dtype` (transformers 5 name for
    `torch_dtype`) of the config, then of its text config; absent → the safetensors dtype or
    float32, which `--dtype auto` downcasts to bfloat16 on GPUs with bf16 (_resolve_auto_dtype).
    """
    raw = None
    for cfg in (top, text):
        for key in ("dtype", "torch_dtype"):
            if cfg.has(key):
                raw = (cfg, key, cfg.data[key])
                break
        if raw is not None:
            break
    if raw is None:
        top.warn("no 'torch_dtype'/'dtype' in config.json: assumed bfloat16 (vLLM would read the "
                 "safetensors dtype, else float32 downcast to bfloat16 by --dtype auto)")
        return "bfloat16"
    cfg, key, value = raw
    name = _DTYPE_ALIASES.get(str(value).lower())
    if name is None:
        raise cfg.error(f"field '{cfg.field(key)}' = {value!r} is not a model dtype kvplan knows "
                        "(bfloat16, float16, float32)")
    if name == "float32":
        top.warn(FLOAT32_NOTE)
    return name


# --- assembling the description -----------------------------------------------------------------

def architectures(top: Cfg) -> tuple[str, ...]:
    value = top.data.get("architectures") or ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list | tuple) or not all(isinstance(a, str) for a in value):
        raise ConfigError(f"{top.source}: 'architectures' must be a list of class names, got "
                          f"{json_repr(value)}")
    return tuple(value)


def json_repr(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def max_positions(text: Cfg, top: Cfg | None = None) -> int | None:
    """`max_position_embeddings`; absent → what transformers' configuration class defaults it to
    (e.g. Gemma3TextConfig's 131072), resolved lazily: only this rare case imports transformers."""
    value = text.get_int("max_position_embeddings", None)
    if value is not None or top is None:
        return value
    from kvplan.models.resolution.vllm_configs import VLLM_MAX_POSITIONS
    own = VLLM_MAX_POSITIONS.get(str(text.get("model_type") or top.get("model_type")))
    if own is not None:  # vLLM reads the type with its own class: that class's default
        top.warn(f"'{text.field('max_position_embeddings')}' is absent: used vLLM's {own[0]} "
                 f"default max_position_embeddings = {own[1]}")
        return own[1]
    from kvplan.models.resolution.accessors import derive_max_model_len
    from kvplan.models.resolution.resolve import resolve
    try:
        derived, key = derive_max_model_len(resolve(top.data, top.source))
    except KvplanError:
        return None
    if derived is not None:
        top.warn(f"'{text.field('max_position_embeddings')}' is absent: used transformers' "
                 f"default {key} = {derived}")
    return derived


# vLLM: ModelArchConfigConvertorBase.derive_max_model_len_and_key's keys, + longrope's default
MAX_LENGTH_KEYS = (*POSSIBLE_KEYS, "original_max_position_embeddings")


def max_length_fields(text: Cfg) -> tuple[tuple[str, int], ...]:
    return tuple((k, v) for k in MAX_LENGTH_KEYS
                 if isinstance(v := text.data.get(k), int) and not isinstance(v, bool))


def rope_scaling(text: Cfg) -> tuple[RopeScaling, ...]:
    """The RoPE parameter sets as vLLM sees them after patch_rope_parameters (transformers v5
    builds rope_parameters from rope_theta / rope_scaling; a config with neither has no RoPE)."""
    raw = text.data.get("rope_parameters") or text.data.get("rope_scaling")
    if not isinstance(raw, dict):
        has_rope = any(text.data.get(k) is not None for k in ("rope_theta", "rotary_emb_base"))
        return (RopeScaling(),) if has_rope else ()
    nested = raw and all(isinstance(v, dict) or v is None for v in raw.values())
    out = []
    for rp in (raw.values() if nested else [raw]):
        if not rp:
            continue
        rope_type = str(rp.get("rope_type") or rp.get("type") or "default")
        rope_type = {"su": "longrope", "mrope": "default"}.get(rope_type, rope_type)
        factor = rp.get("factor")
        original = rp.get("original_max_position_embeddings")
        out.append(RopeScaling(rope_type=rope_type, factor=factor
                               if isinstance(factor, int | float) and not isinstance(factor, bool)
                               else None,
                               original_max_position_embeddings=original
                               if isinstance(original, int) and not isinstance(original, bool)
                               else None))
    return tuple(out)


def finish(top: Cfg, text: Cfg, *, family: str, layers: Iterable[LayerDescription],
           quantization: QuantizationInfo, mamba_ssm_dtype: str | None = None,
           num_nextn_predict_layers: int = 0, mtp_layers: Iterable[LayerDescription] = (),
           use_mla: bool = False, model_type: str | None = None,
           dtype: str | None = None, model_sliding_window: int | None = None,
           length_defaults: Mapping[str, int] | None = None) -> ModelDescription:
    """The description. `length_defaults`: the length keys a config class kvplan reads by hand
    sets when config.json omits them (e.g. MiniCPM3Config's max_position_embeddings 32768)."""
    lengths = dict(length_defaults or {}) | dict(max_length_fields(text))
    if length_defaults is not None:
        max_pos = lengths.get("max_position_embeddings")
    else:
        max_pos = max_positions(text, top)  # absent → transformers' class default (lazy)
        if max_pos is not None and not lengths:
            lengths["max_position_embeddings"] = max_pos
    is_encoder_decoder = bool(top.get("is_encoder_decoder", False))
    return ModelDescription(
        source=top.source,
        model_type=model_type or str(top.get("model_type", text.get("model_type", ""))),
        architectures=architectures(top),
        family=family,
        dtype=dtype or model_dtype(top, text),
        max_position_embeddings=max_pos,
        layers=tuple(layers),
        quantization=quantization,
        mamba_ssm_dtype=mamba_ssm_dtype,
        num_nextn_predict_layers=num_nextn_predict_layers,
        mtp_layers=tuple(mtp_layers),
        model_sliding_window=model_sliding_window,
        max_length_fields=tuple(lengths.items()),
        rope_scaling=rope_scaling(text),
        use_mla=use_mla,
        is_encoder_decoder=is_encoder_decoder,
        # vLLM's encoder-decoder models are not SupportsPP (ModelConfig.verify_with_parallel_config)
        supports_pipeline_parallel=not is_encoder_decoder,
        warnings=tuple(top.warnings),
    )


def without_pipeline_parallel(desc: ModelDescription, top: Cfg,
                              archs: Iterable[str] | None = None) -> ModelDescription:
    """`desc` with supports_pipeline_parallel False: its vLLM model class is not SupportsPP, so
    ModelConfig.verify_with_parallel_config refuses --pipeline-parallel-size > 1
    (tools/vllm_non_pp.py lists those classes). With `archs`, only when the config's
    architecture (the first listed) is one of them; the adapter's other classes are SupportsPP."""
    first = architectures(top)[:1]
    if archs is not None and not (first and first[0] in set(archs)):
        return desc
    return desc.model_copy(update={"supports_pipeline_parallel": False})


def unsupported_layer_type(cfg: Cfg, key: str, value: Any, family: str) -> UnsupportedError:
    return UnsupportedError(
        f"{cfg.source}: {family}: layer type {value!r} in '{cfg.field(key)}' is not one kvplan "
        "knows how to size", hint=SPECS_HINT)

