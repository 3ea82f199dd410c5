"""Differential test: for every real config in tests/data/hf-configs, the fields kvplan's adapters
read equal what transformers' configuration class yields through vLLM's generic accessors
(`kvplan.models.resolution.accessors`). Where they legitimately differ, `REASONS` names why.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvplan.errors import UnsupportedError
from kvplan.models import describe_draft, describe_model
from kvplan.models._common import Cfg
from kvplan.models.description import LayerKind, ModelDescription
from kvplan.models.drafts import detect_method
from kvplan.models.resolution import accessors as acc
from kvplan.models.resolution.resolve import resolve
from kvplan.models.resolution.vllm_configs import VLLM_CONFIG_CLASSES, VLLM_OWN_CLASSES
from tests.models.helpers import HF_CONFIGS, read_config

ALL = sorted(p.parent.name for p in HF_CONFIGS.glob("*/config.json"))

# (config folder, field) → why kvplan's value is not the generic accessor's. Each reason is the
# vLLM model code that departs from ModelConfig's generic numbers.
REASONS: dict[tuple[str, str], str] = {
    **{(name, "kinds"): "Qwen3-Next / Qwen3.5 gated delta nets: layer_types 'linear_attention' "
       "layers are GDN state layers (models/qwen3_next.py), not attention"
       for name in ALL if "Qwen3.5" in name or "Qwen3-Next" in name or "Qwen3.6" in name},
    ("nvidia--Nemotron-H-56B-Base-8K", "kinds"):
        "Nemotron-H: 'linear_attention' layers are Mamba2 mixers and 'mlp' layers own no cache "
        "(models/nemotron_h.py)",
    ("moonshotai--Kimi-Linear-48B-A3B-Instruct", "max_len"):
        "Kimi-Linear: the description keeps KimiLinearConfig's max_position_embeddings 4096; "
        "vLLM's derived length is model_max_length 1048576, which wins in "
        "derive_max_model_len_and_key (kvplan.models.resolution.max_len applies that rule at build time)",
    ("moonshotai--Kimi-Linear-48B-A3B-Instruct", "kinds"):
        "Kimi-Linear: 'linear_attention' layers are KDA state layers (models/kimi_linear.py)",
    **{(name, "kinds"): "Nemotron-3: 'linear_attention' layers are Mamba2 mixers "
       "(models/nemotron_h.py)" for name in ALL if "Nemotron-3" in name},
    **{(name, "kinds"): "DeepSeek-V4: every layer type keeps a 64-token sliding-window MLA cache "
       "first (models/deepseek_v4/sparse_swa.py); compressed_sparse / heavily_compressed layers "
       "add compressed MLA, indexer and ring caches beside it" for name in ALL
       if "DeepSeek-V4" in name},
    ("nvidia--MiniMax-M3-NVFP4", "kinds"):
        "MiniMax-M3: 'minimax_m3_sparse' layers are full attention with a bf16 indexer side "
        "cache (models/minimax_m3.py)",
    ("handmade--GLM-5.3-Flash", "kinds"):
        "GLM-5.3-Flash: 'linear_attention' layers are KDA state layers (models/glm5next "
        "common/model.py _is_kda_layer)",
    **{("handmade--Inkling", check): "Inkling: vLLM reads it with its own InklingMMConfig "
       "(models/inkling/configs.py), not transformers' InklingConfig: local_layer_ids layers use "
       "swa_num_key_value_heads and sliding_window_size, and the length comes from "
       "model_max_length at build time (kvplan.models.resolution.max_len)"
       for check in ("max_len", "layer_heads", "layer_window", "kinds", "model_window")},
    ("google--gemma-4-26B-A4B", "kinds"):
        "Gemma 4: the last num_kv_shared_layers layers read an earlier layer's cache "
        "(kv_sharing_target_layer_name) and own none",
    ("handmade--gemma-3n-defaults", "kinds"):
        "Gemma 3n: the last num_kv_shared_layers layers read an earlier layer's cache "
        "(models/gemma3n.py kv_sharing_target_layer_name) and own none",
    ("handmade--flint-defaults", "kinds"):
        "Flint: vLLM reads it with its own FlintConfig (transformers_utils/configs, registered for "
        "model_type flint), whose absent layer_types means all full attention; transformers "
        "5.24's FlintConfig derives a sliding pattern instead (vllm_accessors_0.34.0.json: all full)",
    ("XiaomiMiMo--MiMo-V2-Flash", "layer_heads"):
        "MiMo-V2: sliding layers use swa_num_key_value_heads / swa_head_dim "
        "(models/mimo_v2_flash.py), the generic accessors give the full layers' numbers",
    ("XiaomiMiMo--MiMo-V2-Flash", "layer_window"):
        "MiMo-V2: vLLM's model code reads sliding_window_size (128); transformers' "
        "MiMoV2FlashConfig stores sliding_window = sliding_window_size + 1 (129)",
    **{("XiaomiMiMo--MiMo-V2.5-Pro-FP4-DFlash", check):
       "DFlash drafts take their layer kinds and window from dflash_config.use_swa / "
       "swa_window_size (models/qwen3_dflash.py), which Qwen3Config does not read"
       for check in ("layer_window", "kinds")},
    ("XiaomiMiMo--MiMo-V2.5-Pro-FP4-DFlash", "model_window"):
        "a draft shares the target's CacheConfig, so its own config sets no model-level window",
    **{(name, "kinds"): "LFM2 / LFM2-MoE / LFM3: layer_types 'conv' layers are ShortConv state "
       "layers (models/lfm2.py, lfm2_moe.py, lfm3.py)" for name in ALL if "-LFM" in name},
    **{(name, "kinds"): "OLMo Hybrid: 'linear_attention' layers are gated delta nets "
       "(models/olmo_hybrid.py)" for name in ALL if "Olmo-Hybrid" in name},
    ("kvplan-handmade--Zamba2-2.7B-like", "kinds"):
        "Zamba2: every layer is a Mamba2 mixer; 'hybrid' layers add a shared block's attention, "
        "which vLLM registers before the mixers (models/zamba2.py)",
    **{(name, "kinds"): "ZAYA1: each 'hybrid' layer is a CCA state layer and an attention layer "
       "(models/zaya.py)" for name in ALL if "ZAYA1" in name},
    ("z-lab--Qwen3.8-27B-DFlash2", "model_window"):
        "a draft shares the target's CacheConfig, so its own config sets no model-level window",
}


def _kind_of(layer_type: str) -> set[LayerKind]:
    return {"full_attention": {LayerKind.FULL_ATTENTION},
            "sliding_attention": {LayerKind.SLIDING_WINDOW, LayerKind.SLIDING_WINDOW_MLA},
            "indexed_attention": {LayerKind.MLA},
            # transformers' Llama4TextConfig: no_rope_layers → chunked local attention
            "chunked_attention": {LayerKind.CHUNKED_LOCAL}}.get(layer_type, set())


def _describe(name: str) -> tuple[ModelDescription, dict[str, Any]]:
    config, quant = read_config(name)
    if detect_method(Cfg(config, name)) is not None:
        return describe_draft(config, source=name, hf_quant_config=quant), config
    return describe_model(config, source=name, hf_quant_config=quant), config


# model types transformers has no configuration class for: vLLM reads them with a config class of
# its own or the checkpoint's remote code; their fast adapters are checked by hand-worked tests
# (tests/config/test_<family>.py) instead
NO_TRANSFORMERS_CLASS = {"chatglm", "internlm2", "nemotron-nas", "deepseek_vl_v2", "kimi_k3",
                         "lfm3_audio", "PanguEmbedded"}
# vLLM's own classes kvplan does not mirror (vLLM: _CONFIG_REGISTRY wins): transformers' class of
# that name (kimi_linear, dory, lfm3, flint, inkling_mm_model, ...) is not what vLLM reads
NO_TRANSFORMERS_CLASS |= set(VLLM_OWN_CLASSES) - set(VLLM_CONFIG_CLASSES)
# caches a decoder layer owns beside its attention (vLLM registers them as layers of their own)
SIDE_CACHES = {LayerKind.MLA_INDEXER, LayerKind.COMPRESSOR_STATE, LayerKind.KPOOL_TAIL}


@pytest.mark.parametrize("name", ALL)
def test_adapter_fields_equal_transformers_resolution(name: str) -> None:
    m, config = _describe(name)
    if config.get("model_type") in NO_TRANSFORMERS_CLASS:
        with pytest.raises(UnsupportedError, match="no configuration class|with its own"):
            resolve(config, name)
        return
    r = resolve(config, name)
    # one entry per decoder layer: its first cache (DSA indexers, DeepSeek-V4's compressed and
    # ring caches are extra layers of the same decoder layer)
    primary: dict[int, Any] = {}
    for layer in m.layers:
        if layer.kind not in SIDE_CACHES:
            primary.setdefault(layer.index, layer)
    layers = list(primary.values())
    # layer count: vLLM ModelConfig.get_total_num_hidden_layers
    assert len(layers) == acc.num_hidden_layers(r)
    # dtype: get_torch_dtype (config → text config); absent in both → kvplan's bf16 assumption
    dtype = acc.config_dtype(r)
    assert m.dtype == (dtype or "bfloat16")
    # max_position_embeddings: derive_max_model_len_and_key on hf_text_config
    if (name, "max_len") not in REASONS:
        assert m.max_position_embeddings == acc.derive_max_model_len(r)[0]
    # CacheConfig.sliding_window (EngineArgs.create_engine_config)
    if (name, "model_window") not in REASONS:
        assert m.model_sliding_window == acc.cache_sliding_window(r)
    per_layer = acc.per_layer_text_configs(r)
    types = acc.layer_types(r)
    mla = acc.is_deepseek_mla(r)
    for i, layer in enumerate(layers):  # position in the stack (a draft's index is offset)
        cfg = per_layer[i] if per_layer is not None else None
        if not layer.kind.is_attention:
            continue
        if (name, "layer_heads") not in REASONS:
            # KV heads: get_total_num_kv_heads (1 latent head for MLA: get_num_kv_heads)
            assert layer.num_kv_heads == (1 if mla else acc.total_num_kv_heads(r, cfg)), i
            # head size: get_head_size (kv_lora_rank + qk_rope_head_dim for MLA)
            assert layer.head_size == acc.head_size(r, cfg), i
        if layer.sliding_window is not None and (name, "layer_window") not in REASONS:
            assert layer.sliding_window == acc.sliding_window(r), i
    if types is not None and (name, "kinds") not in REASONS:
        for i, layer in enumerate(layers):
            assert layer.kind in _kind_of(types[i]), (i, types[i])


def test_every_reason_names_a_real_config() -> None:
    assert {name for name, _ in REASONS} <= set(ALL)
