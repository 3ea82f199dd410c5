"""Layer builders and constants that more than one family (or a draft head, or the generic
decoder) uses. Not a family: families import from here, never from each other, so each adapter
module stays loadable on its own (the registry in `kvplan.models` imports one by name)."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    head_dim_of,
    kv_heads_of,
    layer_types,
    model_level_window,
    num_layers_of,
    positive_window,
)
from kvplan.models.description import GdnDims, LayerDescription, LayerKind


def llama_layers(cfg: Cfg, *, window_default: int | None = None, kv_default: int | None = None,
                 first_index: int = 0, is_draft: bool = False,
                 target_window: int | None = None,
                 ) -> tuple[list[LayerDescription], int | None]:
    """LlamaAttention layers (vLLM: models/llama.py LlamaAttention.__init__).

    A `layer_types` entry "sliding_attention" gives that layer `sliding_window`; every other layer
    gets the model-level window (set only when layer_types is absent or all sliding).
    `first_index` numbers the layers from there (a draft head's layers follow the target's:
    vLLM start_layer_id); `layer_types` stays draft-relative (vLLM: config.target_layer_count).
    A draft head (`is_draft`) shares the target's CacheConfig, so its fallback is the target's
    model-level window `target_window`, not one from the draft config.
    Returns the layers and the model-level window.
    """
    n = num_layers_of(cfg)
    kv = kv_heads_of(cfg, kv_default)
    hd = head_dim_of(cfg)
    if cfg.present("sliding_window"):
        sw = positive_window(cfg)
    else:
        sw = window_default
    types = layer_types(cfg, n)
    fallback = target_window if is_draft else model_level_window(sw, types)
    layers = []
    for i in range(n):
        window = fallback
        if types is not None and types[i] == "sliding_attention":
            window = sw
        idx = first_index + i
        layers.append(attention(idx, attn_name(idx), kv_heads=kv, head_size=hd,
                                window=window))
    return layers, fallback


def gdn_dims(cfg: Cfg) -> GdnDims:
    """vLLM: layers/mamba/gdn/qwen_gdn_linear_attn.py QwenGatedDeltaNetAttention.__init__."""
    why = "the gated delta net state"
    return GdnDims(
        num_k_heads=cfg.req_int("linear_num_key_heads", why),
        num_v_heads=cfg.req_int("linear_num_value_heads", why),
        head_k_dim=cfg.req_int("linear_key_head_dim", why),
        head_v_dim=cfg.req_int("linear_value_head_dim", why),
        conv_kernel=cfg.req_int("linear_conv_kernel_dim", why),
    )


# vLLM: DeepseekV32Indexer.quant_block_size — one fp32 scale (4 bytes) per 128 fp8 values
INDEXER_QUANT_BLOCK = 128


def indexer_cache(index: int, prefix: str, index_head_dim: int) -> LayerDescription:
    """The indexer's K cache, `{prefix}.indexer.k_cache`.

    vLLM: deepseek_v32/attention.py DeepseekV32Indexer (head_dim = index_head_dim +
    index_head_dim // 128 * 4, dtype uint8) → deepseek_v2.py DeepseekV32IndexerCache.
    """
    return LayerDescription(
        index=index, name=f"{prefix}.indexer.k_cache", kind=LayerKind.MLA_INDEXER,
        num_kv_heads=1, head_size=index_head_dim + index_head_dim // INDEXER_QUANT_BLOCK * 4,
        head_size_v=0, index_head_dim=index_head_dim, fixed_dtype="uint8")


# transformers DeepseekV2Config defaults (models/deepseek_v2/configuration_deepseek_v2.py), which
# vLLM also applies to DeepSeek-VL2's language_config (configs/deepseek_vl2.py DeepseekVLV2TextConfig)
DEEPSEEK_V2_DEFAULTS = {
    "num_hidden_layers": 32, "num_attention_heads": 32, "kv_lora_rank": 512, "q_lora_rank": 1536,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "max_position_embeddings": 2048, "n_routed_experts": 64, "n_shared_experts": 2,
    "moe_intermediate_size": 1407, "first_k_dense_replace": 0}


DSV4 = "deepseek_v4"


# vLLM: v1/attention/backends/mla/sparse_swa.py DeepseekV4SWACache(block_size=64)
SWA_CACHE_BLOCK = 64


# vLLM: models/deepseek_v4/compressor.py CompressorStateCache — block 4 (C4) / 8 (C128)
COMPRESSOR_BLOCK = {4: 4, 128: 8}


def dsv4_layer_caches(index: int, prefix: str, *, ratio: int, head_dim: int,
                      window: int, index_head_dim: int) -> list[LayerDescription]:
    """The KV-cache layers one DeepseekV4DecoderLayer registers, in vLLM's order.

    vLLM (models/deepseek_v4/attention.py DeepseekV4Attention.__init__): the indexer first
    (ratio 4: its K cache, then its compressor's state ring), then `.swa_cache`
    (DeepseekV4SWACache), then the layer itself (a compressed MLA cache when ratio > 1,
    get_kv_cache_spec L817), then its compressor's state ring (compressor.py L297).
    """
    out: list[LayerDescription] = []

    def ring(name: str, dim: int) -> LayerDescription:
        # CompressorStateCache: state_dim = 2 · coff · head_dim (kv + score), coff = 1 + (r == 4),
        # window coff · ratio, fp32
        coff = 1 + (ratio == 4)
        return LayerDescription(index=index, name=name, kind=LayerKind.COMPRESSOR_STATE,
                                num_kv_heads=1, head_size=2 * coff * dim, head_size_v=0,
                                sliding_window=coff * ratio, block_size=COMPRESSOR_BLOCK[ratio])

    if ratio == 4:
        out.append(LayerDescription(
            index=index, name=f"{prefix}.indexer.k_cache", kind=LayerKind.MLA_INDEXER,
            num_kv_heads=1, head_size=index_head_dim + index_head_dim // INDEXER_QUANT_BLOCK * 4,
            head_size_v=0, index_head_dim=index_head_dim, tokens_per_state=ratio,
            model_version=DSV4, fixed_dtype="uint8"))
        out.append(ring(f"{prefix}.indexer.compressor.state_cache", index_head_dim))
    out.append(LayerDescription(
        index=index, name=f"{prefix}.swa_cache", kind=LayerKind.SLIDING_WINDOW_MLA,
        num_kv_heads=1, head_size=head_dim, head_size_v=0, sliding_window=window,
        block_size=SWA_CACHE_BLOCK, model_version=DSV4))
    if ratio > 1:
        out.append(LayerDescription(
            index=index, name=prefix, kind=LayerKind.MLA, num_kv_heads=1, head_size=head_dim,
            head_size_v=0, tokens_per_state=ratio, model_version=DSV4))
        out.append(ring(f"{prefix}.compressor.state_cache", head_dim))
    return out


KIMI_K3, KIMI_K3_FLASHKDA = "kimi_k3", "kimi_k3_flashkda"  # LayerDescription.model_version
