"""MiniMax-M2 (full attention) and MiniMax-M3 (sparse attention).

MiniMax-Text-01 / M1 (MiniMaxText01ForCausalLM, MiniMaxM1ForCausalLM, MiniMaxForCausalLM) are not
here: vLLM 0.31-0.34 list them in _PREVIOUSLY_SUPPORTED_MODELS (until 0.23.0) and refuse them;
kvplan.models.retired does too."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    head_dim_of,
    kv_heads_of,
    layer_types,
    model_level_window,
    num_layers_of,
    pattern_list,
    positive_window,
    text_cfg,
    unsupported_layer_type,
)
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.quant import quantization_info


def describe_minimax_m2(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/minimax_m2.py MiniMaxM2DecoderLayer — every layer is MiniMaxM2Attention
    (attn_window_size None → the model-level window); `attn_type_list` is not read. The
    checkpoint's `num_mtp_modules` are recorded, but vLLM 0.34 has no MiniMax-M2 MTP drafter
    (config/speculative.py hf_config_override has no minimax_m2 branch)."""
    text = text_cfg(top)
    n = num_layers_of(text)
    if text.has("attn_type_list"):
        kinds = pattern_list(text, "attn_type_list", n)
        if any(int(k) != 1 for k in kinds):
            text.warn("attn_type_list marks some layers as linear attention, but vLLM's "
                      "MiniMaxM2 model builds full attention on every layer; planned as full")
    kv = kv_heads_of(text)
    hd = head_dim_of(text)
    window = model_level_window(positive_window(text), layer_types(text, n))
    layers = [attention(i, attn_name(i), kv_heads=kv, head_size=hd, window=window)
              for i in range(n)]
    n_mtp = 0
    if text.get("use_mtp", True):
        n_mtp = text.get_int("num_mtp_modules", 0, minimum=0) or 0
    return finish(top, text, family="minimax_m2", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  num_nextn_predict_layers=n_mtp, model_sliding_window=window)


def describe_minimax_m3_sparse(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """MiniMax-M3 (MiniMaxM3SparseForCausalLM, or its VL wrapper with a text_config): GQA layers,
    the "minimax_m3_sparse" ones with a block-sparse backend and an indexer side cache.

    vLLM: models/minimax_m3/nvidia/model.py — _sparse_attention_layer_ids (layer_types[i] ==
    "minimax_m3_sparse", L191); MiniMaxM3SparseAttention registers `{prefix}.attn` (L1014) after
    its indexer's `{prefix}.attn.index_cache` (common/indexer.py L396), a FullAttentionSpec like
    the full layers' (L1042) on MiniMaxM3SparseBackend (kernel block [128]); the index cache is
    MLAAttentionSpec(index_head_dim, bf16 by default: attention_config.indexer_kv_dtype).
    transformers MiniMaxM3VLTextConfig maps sparse_attention_config → index_head_dim
    (sparse_index_dim) and layer_types (sparse_attention_freq). The VL wrapper puts the text
    model under `language_model.` (nvidia/model.py L1895).
    """
    text = text_cfg(top)
    n = num_layers_of(text)
    sparse_cfg = text.sub("sparse_attention_config")
    types = layer_types(text, n)
    if types is None and sparse_cfg is not None and sparse_cfg.present("sparse_attention_freq"):
        types = ["minimax_m3_sparse" if f else "full_attention"
                 for f in pattern_list(sparse_cfg, "sparse_attention_freq", n)]
    types = types or ["full_attention"] * n
    index_dim = text.get_int("index_head_dim", None)
    if index_dim is None and sparse_cfg is not None:
        index_dim = sparse_cfg.get_int("sparse_index_dim", None)
    index_dim = index_dim or 128  # MiniMaxM3VLTextConfig.index_head_dim default
    kv, hd = kv_heads_of(text), head_dim_of(text)
    is_vl = top.sub("text_config") is not None
    prefix = "language_model.model.layers" if is_vl else "model.layers"

    def sparse(i: int, name: str) -> list[LayerDescription]:
        return [LayerDescription(
                    index=i, name=f"{name}.index_cache", kind=LayerKind.MLA_INDEXER,
                    num_kv_heads=1, head_size=index_dim, head_size_v=0, index_head_dim=index_dim,
                    fixed_dtype="bfloat16", backend="MINIMAX_M3_INDEXER"),
                attention(i, name, kv_heads=kv, head_size=hd).model_copy(
                    update={"backend": "MINIMAX_M3_SPARSE"})]

    layers: list[LayerDescription] = []
    for i, kind in enumerate(types):
        name = attn_name(i, prefix)
        if kind == "minimax_m3_sparse":
            layers += sparse(i, name)
        elif kind == "full_attention":
            layers.append(attention(i, name, kv_heads=kv, head_size=hd))
        else:
            raise unsupported_layer_type(text, "layer_types", kind, "minimax_m3")
    # MTP (nvidia/mtp.py MiniMaxM3MultiTokenPredictor): num_mtp_modules layers at
    # model.layers.{k}, each a forced-sparse MiniMaxM3DecoderLayer (L55–60). Only the VL
    # wrapper's target names (language_model.…) leave those names free, so only it gets them.
    n_mtp = (text.get_int("num_mtp_modules", 0, minimum=0) or 0) if is_vl else 0
    mtp = [d for k in range(n_mtp) for d in sparse(n + k, attn_name(k))]
    return finish(top, text, family="minimax_m3", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  num_nextn_predict_layers=n_mtp, mtp_layers=mtp)
