"""The transformers-resolved generic decoder: any model whose KV layout is plain attention.

For every config the fast adapters do not cover: transformers' configuration class resolves it
(defaults, derived fields, aliases, the nested text config), vLLM's generic accessors
(`kvplan.models.resolution.accessors`) give the layer count, KV heads, head size and windows, and each layer
becomes a full or sliding-window attention layer as vLLM's `Attention` would build it. Anything
else (MLA, state-space layers, layers without attention) is refused, naming what is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kvplan.errors import ConfigError, KvplanError, UnsupportedError
from kvplan.models import coverage
from kvplan.models._common import (
    FLOAT32_NOTE,
    SPECS_HINT,
    TEXT_CONFIG_KEYS,
    Cfg,
    architectures,
    attention,
    attn_name,
    mla,
    text_cfg,
)
from kvplan.models.coverage import ENCODER_CACHE_NOTE as ENCODER_CACHE_NOTE  # re-exported
from kvplan.models.coverage import encoder_cache_note
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.quant import quantization_info
from kvplan.models.resolution import accessors as acc
from kvplan.models.resolution.resolve import Resolved, resolve

FAMILY = "transformers"


# text-config fields that mean the KV layout is not plain per-layer attention
_NOT_PLAIN = (
    ("num_kv_shared_layers", "cross-layer KV sharing (kv_sharing_target_layer_name)"),
    ("attention_chunk_size", "chunked local attention"),
    ("layers_block_type", "a hybrid of attention and state-space blocks"),
    ("hybrid_override_pattern", "a hybrid of attention and state-space blocks"),
    ("attn_type_list", "a hybrid of softmax and linear attention"),
    ("block_configs", "per-block attention settings (some blocks without attention)"),
)


# vLLM's attention-layer names where they are not `model.layers.{i}.self_attn.attn`, by the
# (text) model type: the prefixes the model class passes down to its `Attention`
# (prefix=f"{prefix}.attn"); on the Transformers backend (models/transformers/base.py
# _create_attention_instances) the attention module's path in transformers' base model, with
# the base model renamed `model` (`_recursive_replace(self.model, prefix="model")`)
_LAYER_NAMES = {
    "gpt2": ("transformer.h", "attn.attn"),  # gpt2.py: GPT2Model(prefix="transformer"), .h, .attn
    "gptj": ("transformer.h", "attn.attn"),  # gpt_j.py: GPTJModel(prefix="transformer"), .h, .attn
    "falcon": ("transformer.h", "self_attention.attn"),  # falcon.py: .h, .self_attention
    "bloom": ("transformer.h", "self_attention.attn"),  # bloom.py: .h, .self_attention
    "opt": ("model.decoder.layers", "self_attn.attn"),  # opt.py: OPTModel → OPTDecoder(.decoder)
    "gpt_bigcode": ("model.h", "attn.attn"),  # Transformers backend: GPTBigCodeModel.h[i].attn
    "gpt_neox": ("model.layers", "attention.attn"),  # Transformers backend: .layers[i].attention
}


def vllm_layer_name(text_model_type: str, i: int) -> str:
    """The name vLLM gives layer i's attention on the generic path (see _LAYER_NAMES)."""
    prefix, module = _LAYER_NAMES.get(text_model_type, ("model.layers", "self_attn.attn"))
    return attn_name(i, prefix, module)


def resolved_text_dict(r: Resolved) -> dict[str, Any]:
    """The resolved text config as a plain dict (transformers' defaults and derived fields)."""
    data: dict[str, Any] = r.hf_text_config.to_dict()
    return data


def with_resolved_text(top: Cfg, r: Resolved) -> Cfg:
    """`top` with its text config replaced by the resolved one, for a fast adapter to read."""
    data = dict(top.data)
    key = r.text_key
    if key is None:
        return Cfg(data | resolved_text_dict(r), top.source, top.path, top.warnings)
    if key not in TEXT_CONFIG_KEYS:
        key = "text_config"
        for k in TEXT_CONFIG_KEYS:
            data.pop(k, None)
    data[key] = resolved_text_dict(r)
    return Cfg(data, top.source, top.path, top.warnings)


def filled_by_transformers(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """`config` with the fields its (text) config leaves to transformers' defaults filled in,
    the values it states kept; None when transformers cannot resolve it."""
    try:
        r = resolve(config, "config.json")
    except KvplanError:
        return None
    data = dict(config)
    key = r.text_key
    if key is None:
        for k, v in resolved_text_dict(r).items():
            if data.get(k) is None:
                data[k] = v
        return data
    value = data.get(key)
    raw: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
    if key not in ("text_config", "llm_config"):
        key = "text_config"
    data[key] = {**resolved_text_dict(r), **{k: v for k, v in raw.items() if v is not None}}
    return data


def describe_resolved(top: Cfg, hf_quant_config: dict | None,
                      fast: Mapping[str, Callable[[Cfg, dict | None], ModelDescription]]
                      | None = None, *, raw_fields: bool = False) -> ModelDescription:
    """Plan a config no fast adapter covers, through transformers.

    `fast` maps model types to fast adapters: a multimodal wrapper whose resolved text config is
    a family kvplan has a fast adapter for is planned by that adapter, fed the resolved text
    config (so fields transformers defaults, like LLaVA's num_hidden_layers, are filled).
    """
    r = resolve(top.data, top.source, raw_fields=raw_fields)
    archs = architectures(top)
    note = encoder_cache_note(archs)
    if fast is not None and r.text_key is not None and r.text_model_type in fast:
        desc = fast[r.text_model_type](with_resolved_text(top, r), hf_quant_config)
        warnings = desc.warnings + ((note,) if note else ())
        update: dict[str, Any] = {"warnings": warnings}
        if served_by_transformers_backend(archs[0] if archs else None):
            update["transformers_backend"] = True
            # a TransformersMultiModal* class: the text model's layers sit at the base model's
            # `language_model` (see backend_layer_names)
            update["layers"] = tuple(
                layer.model_copy(update={"name": "model.language_model." +
                                         layer.name.removeprefix("model.")})
                if layer.name.startswith("model.layers.") else layer for layer in desc.layers)
        return desc.model_copy(update=update)
    return _generic(top, r, hf_quant_config, note)


# vLLM: SpeculativeConfig.hf_config_override — architectures kvplan plans through transformers
# whose method "mtp" drafter is num_nextn_predict_layers copies of the target's own decoder layer,
# numbered after it (mtp_start_layer_idx = num_hidden_layers) under the target's layer names
# (glm4_moe_mtp.py Glm4MoeMultiTokenPredictor: model.layers.<n + k>.self_attn.attn)
OWN_LAYER_MTP = frozenset({"Glm4MoeForCausalLM"})
# model types whose drafter names its layers mtp.layers.<k> and takes layer k's kind and window
# from mtp_layer_types / mtp_sliding_windows, else the target's layer_types / sliding_windows /
# sliding_window (exaone_moe_mtp.py ExaoneMoeMTP: num_nextn_predict_layers, default 1;
# exaone_moe.py ExaoneMoeAttention(is_mtp=True))
MTP_LAYERS_MTP = frozenset({"exaone_moe"})


def _mtp_layers(arch: str | None, r: Resolved, n: int, name_of: Callable[[int], str],
                model_window: int | None) -> tuple[int, list[LayerDescription]]:
    """(num_nextn_predict_layers, the MTP layers) of a model planned through transformers."""
    cfg = r.hf_text_config
    kv, hd = acc.total_num_kv_heads(r, None), acc.head_size(r, None)
    if arch in OWN_LAYER_MTP:
        k_n = int(acc.get_attr(cfg, "num_nextn_predict_layers", 0) or 0)
        return k_n, [attention(n + k, name_of(n + k), kv_heads=kv, head_size=hd,
                               window=model_window) for k in range(k_n)]
    if r.text_model_type in MTP_LAYERS_MTP or r.model_type in MTP_LAYERS_MTP:
        k_n = int(acc.get_attr(cfg, "num_nextn_predict_layers", 1) or 0)
        types = acc.get_attr(cfg, "mtp_layer_types") or acc.get_attr(cfg, "layer_types") or []
        windows = (acc.get_attr(cfg, "mtp_sliding_windows")
                   or acc.get_attr(cfg, "sliding_windows"))
        out = []
        for k in range(k_n):
            window = None
            if k < len(types) and types[k] != "full_attention":
                window = windows[k] if windows is not None else acc.get_attr(cfg, "sliding_window")
            out.append(attention(n + k, f"mtp.layers.{k}.self_attn.attn", kv_heads=kv,
                                 head_size=hd, window=window))
        return k_n, out
    return 0, []


def _what(r: Resolved, archs: tuple[str, ...]) -> str:
    return f"model_type {r.text_model_type or r.model_type!r} (architectures: {', '.join(archs) or 'none'})"


def _generic(top: Cfg, r: Resolved, hf_quant_config: dict | None, note: str | None
             ) -> ModelDescription:
    archs = architectures(top)
    what = _what(r, archs)
    arch = archs[0] if archs else None
    use_mla = acc.is_deepseek_mla(r)
    if use_mla and not _native_mla(arch):
        raise UnsupportedError(f"{top.source}: {what} uses multi-head latent attention (MLA); "
                               "kvplan has no adapter for this MLA family yet", hint=SPECS_HINT)
    if acc.is_attention_free(arch) or acc.is_hybrid(arch, r) or acc.has_noops(arch):
        raise UnsupportedError(f"{top.source}: {what}: vLLM's model class has state-space or "
                               "attention-free layers (IsAttentionFree / IsHybrid / HasNoOps); "
                               "kvplan has no adapter for this family yet", hint=SPECS_HINT)
    if acc.registry_missing(arch):
        top.warn(f"{arch} is not in vLLM {acc.REGISTRY_VERSION}'s model registry: vLLM would run "
                 "it on its Transformers backend (model_impl auto), if at all")
    if getattr(r.hf_config, "is_encoder_decoder", False):
        raise UnsupportedError(f"{top.source}: {what} is an encoder-decoder model; kvplan plans "
                               "decoders only", hint=SPECS_HINT)
    # vLLM names a config without `architectures` by its base model class
    # (transformers_utils/config.py get_config: MODEL_MAPPING_NAMES[model_type])
    backend_arch = arch if arch is not None else base_model_architecture(r.model_type)
    on_backend = served_by_transformers_backend(backend_arch)
    refusal = no_interface_refusal(on_backend, acc.layer_types(r), acc.num_hidden_layers(r))
    if refusal is not None:
        return _refused_by_backend(top, r, hf_quant_config, refusal)
    for field, layout in _NOT_PLAIN:
        if acc.get_attr(r.hf_text_config, field):
            raise UnsupportedError(f"{top.source}: {what} sets {field!r}: its layers use "
                                   f"{layout}, which the generic transformers path does not plan; "
                                   "kvplan has no adapter for this family yet", hint=SPECS_HINT)
    n = acc.num_hidden_layers(r)
    if n <= 0:
        raise UnsupportedError(f"{top.source}: {what}: the transformers config gives no layer "
                               "count (num_hidden_layers), so this is not a decoder vLLM plans "
                               "like plain attention", hint=SPECS_HINT)
    types = acc.layer_types(r)
    if types is not None:
        other = sorted(set(types) - {"full_attention", "sliding_attention"})
        if other:
            raise UnsupportedError(
                f"{top.source}: {what} has layer kinds {', '.join(map(repr, other))} in "
                "layer_types; the generic transformers path plans only full and sliding-window "
                "attention, and kvplan has no adapter for this family yet", hint=SPECS_HINT)
        if len(types) < n:
            raise ConfigError(f"{top.source}: layer_types has {len(types)} entries but the "
                              f"model has {n} layers")
    per_layer_cfgs = acc.per_layer_text_configs(r)
    window = acc.sliding_window(r)
    model_window = acc.cache_sliding_window(r)
    from kvplan.models.resolution.layer_names import sliding_window_rule
    per_layer_rule, window_offset = sliding_window_rule(archs)
    per_layer_window = (per_layer_rule if per_layer_rule is not None
                        else coverage.uses_per_layer_window(arch))
    # vLLM's module path of each attention layer (tools/vllm_layer_names.py), e.g. Falcon's
    # transformer.h.{}.self_attention.attn; the Llama-style path when not known
    from kvplan.models.resolution.layer_names import attention_layer_pattern
    pattern = attention_layer_pattern(archs)

    encoder = bidirectional_on_backend(arch is not None and on_backend, r)
    if encoder:
        pattern = _BERT_ATTENTION

    backend_names = (None if pattern or encoder or not on_backend
                     else backend_layer_names(r))

    def name_of(i: int) -> str:
        if backend_names is not None:
            return backend_names(i)
        return pattern.format(i) if pattern else vllm_layer_name(r.text_model_type, i)
    if types is not None and len(set(types[:n])) > 1 and not per_layer_window:
        top.warn(f"layer_types mixes sliding and full attention, but vLLM's model code for "
                 f"{arch} has no per-layer window: every layer is planned as full attention")
    layers: list[LayerDescription] = []
    for i in range(n if not use_mla else 0):
        cfg = per_layer_cfgs[i] if per_layer_cfgs is not None else None
        kv = acc.total_num_kv_heads(r, cfg)
        hd = acc.head_size(r, cfg)
        if kv <= 0 or hd <= 0:
            raise UnsupportedError(f"{top.source}: {what}: layer {i} has no attention KV heads "
                                   "or head size in the transformers config; kvplan has no "
                                   "adapter for this family yet", hint=SPECS_HINT)
        # vLLM: Attention.__init__ — per_layer_sliding_window, else CacheConfig.sliding_window
        layer_window = model_window
        if types is not None and types[i] == "sliding_attention" and per_layer_window:
            # vLLM's class may widen it (Cohere2: window + 1, commandr.py)
            layer_window = window + window_offset if window is not None else None
        if encoder:  # vLLM: EncoderOnlyAttention (no KV cache)
            layers.append(LayerDescription(index=i, name=name_of(i),
                                           kind=LayerKind.ENCODER_ONLY, num_kv_heads=kv,
                                           head_size=hd))
            continue
        layers.append(attention(i, name_of(i), kv_heads=kv, head_size=hd,
                                window=layer_window))
    if use_mla:
        # vLLM: ModelConfig.use_mla (is_deepseek_mla) → MLAAttention on every decoder layer,
        # get_kv_cache_spec: MLAAttentionSpec(num_kv_heads=1, head_size=kv_lora_rank +
        # qk_rope_head_dim) — the model class's own layer list was not read
        rank = int(acc.get_attr(r.hf_text_config, "kv_lora_rank"))
        rope = int(acc.get_attr(r.hf_text_config, "qk_rope_head_dim", 0) or 0)
        layers = [mla(i, name_of(i), kv_lora_rank=rank,
                      qk_rope_head_dim=rope) for i in range(n)]
    n_mtp, mtp_layers = (0, []) if use_mla else _mtp_layers(arch, r, n, name_of, model_window)
    max_len, _ = acc.derive_max_model_len(r)
    text = text_cfg(top)
    dtype = acc.config_dtype(r)
    if dtype is None:
        top.warn("no 'dtype'/'torch_dtype' in config.json: assumed bfloat16 (vLLM would read the "
                 "safetensors dtype, else float32 downcast to bfloat16 by --dtype auto)")
        dtype = "bfloat16"
    elif dtype not in ("bfloat16", "float16", "float32"):
        raise ConfigError(f"{top.source}: config dtype {dtype!r} is not a model dtype kvplan "
                          "knows (bfloat16, float16, float32)")
    elif dtype == "float32":
        top.warn(FLOAT32_NOTE)
    if note:
        top.warn(note)
    top.warn(f"no fast kvplan adapter for {what}: planned through transformers' "
             f"{type(r.hf_text_config).__name__} and vLLM's generic accessors as "
             + ("multi-head latent attention on every layer (kv_lora_rank + qk_rope_head_dim)"
                if use_mla else "plain attention"))
    return ModelDescription(
        source=top.source,
        model_type=r.model_type,
        architectures=archs,
        family=FAMILY,
        dtype=dtype,
        max_position_embeddings=max_len,
        layers=tuple(layers),
        quantization=quantization_info(top, text, hf_quant_config),
        model_sliding_window=model_window,
        # vLLM's max-length rule reads the resolved config (class defaults included)
        max_length_fields=acc.max_length_fields(r),
        rope_scaling=acc.rope_parameter_sets(r),
        is_encoder_decoder=bool(getattr(r.hf_config, "is_encoder_decoder", False)),
        use_mla=use_mla,
        transformers_backend=on_backend,
        num_nextn_predict_layers=n_mtp,
        mtp_layers=tuple(mtp_layers),
        warnings=tuple(top.warnings),
    )


# layer kinds whose transformers module does not dispatch through the attention interface
# (ALL_ATTENTION_FUNCTIONS): transformers' Bamba mamba mixers and MiniMax lightning attention
# label their layers "linear_attention" (BambaConfig / MiniMaxConfig layer_types)
_NO_ATTENTION_INTERFACE = frozenset({"linear_attention"})


# transformers' BERT-style encoders, whose layers build their self-attention with
# `is_causal=config.is_decoder` (e.g. modeling_ernie.py ErnieLayer); the module that dispatches
# is `encoder.layer[i].attention.self` of the base model vLLM names `model`
_BERT_STYLE = frozenset({"bert", "bert-generation", "camembert", "data2vec-text", "electra",
                         "ernie", "roberta", "roberta-prelayernorm", "roc_bert", "xlm-roberta",
                         "xlm-roberta-xl", "xmod"})
_BERT_ATTENTION = "model.encoder.layer.{}.attention.self.attn"


def bidirectional_on_backend(on_backend: bool, r: Resolved) -> bool:
    """Whether vLLM's Transformers backend (`on_backend`: it builds the model) builds
    EncoderOnlyAttention for this model: a module of the model has is_causal False and the model
    is not multimodal (vLLM: models/transformers/base.py Base._get_attn_cls)."""
    return (on_backend and r.text_key is None
            and r.text_model_type in _BERT_STYLE
            and not acc.get_attr(r.hf_text_config, "is_decoder"))


def backend_layer_names(r: Resolved) -> Callable[[int], str]:
    """The names the Transformers backend gives layer i's attention: the dispatching module's
    path in the transformers base model, which vLLM builds as `model`
    (models/transformers/base.py `_recursive_replace(self.model, prefix="model")`, then
    `_create_attention_instances`: f"{attn_prefix}.attn"). A multimodal base model keeps its
    text model at `language_model` (transformers 5.x `...Model.language_model`); Mllama's
    cross-attention decoder layers dispatch from `cross_attn` (modeling_mllama.py
    MllamaCrossAttentionDecoderLayer), the others from `self_attn`."""
    prefix, module = _LAYER_NAMES.get(r.text_model_type, ("model.layers", "self_attn.attn"))
    if r.text_key is not None:  # hf_config is not hf_text_config: a TransformersMultiModal* class
        prefix = "model.language_model." + prefix.removeprefix("model.")
    cross = acc.get_attr(r.hf_text_config, "cross_attention_layers") or ()
    cross_layers = frozenset(i for i in cross if isinstance(i, int))

    def name(i: int) -> str:
        return attn_name(i, prefix, "cross_attn.attn" if i in cross_layers else module)
    return name


def base_model_architecture(model_type: str | None) -> str | None:
    """The architecture vLLM gives a config that names none: transformers' base model class of
    the model type (vLLM: transformers_utils/config.py get_config, MODEL_MAPPING_NAMES)."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    name = MODEL_MAPPING_NAMES.get(model_type) if model_type else None
    return name if isinstance(name, str) else None


def served_by_transformers_backend(arch: str | None) -> bool:
    """Whether vLLM builds `arch` as one of its Transformers* classes: named as one, or not in
    its registry with a backend-compatible transformers class (registry.py
    _try_resolve_transformers; data of the latest release, see kvplan.models.retired)."""
    if arch is None:
        return False
    entry = coverage.registry_entry(arch)
    if entry is not None:
        return bool(entry["module"] == "transformers")
    from kvplan.models.resolution.arch_resolution import transformers_backend_serves
    return bool(transformers_backend_serves(arch, None))


def no_interface_refusal(on_backend: bool, types: list[str] | None, n: int) -> str | None:
    """vLLM's refusal when a decoder layer of a Transformers-backend model has no module that
    dispatches through the attention interface (vLLM: models/transformers/base.py
    Base._create_attention_instances, the first such layer of the rank; None: every layer
    has attention, or `on_backend` False: the model is not on the Transformers backend)."""
    if not types or not on_backend:
        return None
    for i in range(min(n, len(types))):
        if types[i] in _NO_ATTENTION_INTERFACE:
            return (f"Layer {i} ({types[i]}) does not dispatch through the Transformers "
                    "attention interface and vLLM has no other way to handle it.")
    return None


def _refused_by_backend(top: Cfg, r: Resolved, hf_quant_config: dict | None,
                        refusal: str) -> ModelDescription:
    """A description with no layers whose model construction vLLM refuses (the start-up
    checks before it, e.g. the max-length rule, still run on its lengths)."""
    top.warn("vLLM's Transformers modeling backend cannot build this model (a layer without "
             "attention): vLLM refuses it when it constructs the model")
    return ModelDescription(
        source=top.source, model_type=r.model_type, architectures=architectures(top),
        family=FAMILY, dtype=acc.config_dtype(r) or "bfloat16",
        max_position_embeddings=acc.derive_max_model_len(r)[0], layers=(),
        quantization=quantization_info(top, text_cfg(top), hf_quant_config),
        max_length_fields=acc.max_length_fields(r), rope_scaling=acc.rope_parameter_sets(r),
        model_init_refusal=refusal, transformers_backend=True, warnings=tuple(top.warnings))


def _native_mla(arch: str | None) -> bool:
    """Whether vLLM's own class for `arch` builds MLAAttention layers (its registry entry's
    sources use MLAAttention / MultiHeadLatentAttention; the Transformers backend, which picks
    its attention class at run time, is not counted)."""
    entry = coverage.registry_entry(arch) if arch else None
    return entry is not None and "mla" in entry["features"] and entry["module"] != "transformers"
