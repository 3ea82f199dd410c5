"""DeepSeek V2/V3/V3.1/V3.2, GLM-5 (GlmMoeDsa) and Kimi K2: multi-head latent attention (MLA).

V3.2 and GLM-5 add DeepSeek sparse attention (DSA): sparse MLA plus, on the layers that own one,
a lightning indexer with its own K cache."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    attn_name,
    finish,
    kv_heads_of,
    mla,
    num_layers_of,
    text_cfg,
)
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.families._shared import DEEPSEEK_V2_DEFAULTS, indexer_cache
from kvplan.models.quant import quantization_info


def skip_topk_layers(cfg: Cfg, n: int) -> set[int]:
    """Backbone layers without their own sparse indexer (they reuse an earlier layer's top-k).

    vLLM: model_executor/models/utils.py compute_skip_topk_layers.
    """
    indexer_types = cfg.get("indexer_types")
    if indexer_types is not None:
        if not isinstance(indexer_types, list) or len(indexer_types) != n:
            raise cfg.error(f"'{cfg.field('indexer_types')}' must list one entry per layer")
        return {i for i, t in enumerate(indexer_types) if t == "shared"}
    freq = cfg.get_int("index_topk_freq", 1)
    pattern = cfg.get("index_topk_pattern")
    offset = cfg.get_int("index_skip_topk_offset", 2, minimum=0)
    assert freq is not None and offset is not None
    skip: set[int] = set()
    for i in range(n):
        if pattern is None:
            if max(i - offset + 1, 0) % freq != 0:
                skip.add(i)
        elif 0 <= i < len(pattern) and pattern[i] == "S":
            skip.add(i)
    return skip


_KV_FIELDS = ("num_hidden_layers", "num_attention_heads", "kv_lora_rank", "qk_rope_head_dim",
              "qk_nope_head_dim", "max_position_embeddings")


def _v2_defaults(text: Cfg) -> dict[str, int]:
    """The DeepseekV2Config defaults for the fields config.json leaves out (explicit nulls stay)."""
    if text.get("model_type") != "deepseek_v2":
        return {}
    absent = {k: DEEPSEEK_V2_DEFAULTS[k] for k in _KV_FIELDS if not text.present(k)}
    if absent:
        used = ", ".join(f"{text.field(k)} = {v}" for k, v in absent.items())
        text.warn(f"absent from config.json, so transformers' DeepseekV2Config defaults apply, "
                  f"as in vLLM: {used}")
    return absent


def describe_deepseek(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/deepseek_v2.py DeepseekV2DecoderLayer (MLA when kv_lora_rank is set),
    models/deepseek_v32 (sparse indexer K cache on every layer with an indexer), deepseek_mtp.py
    (num_nextn_predict_layers MLA decoder layers at model.layers.{num_hidden_layers + k})."""
    text = text_cfg(top)
    defaults = _v2_defaults(text)
    if defaults:
        text = Cfg({**text.data, **defaults}, text.source, text.path, text.warnings)
    n = num_layers_of(text)
    model_type = str(text.get("model_type", top.get("model_type", "")))
    rope = text.get_int("qk_rope_head_dim", 0, minimum=0)
    nope = text.get_int("qk_nope_head_dim", 0, minimum=0)
    use_mha = model_type == "deepseek" or (rope == 0 and nope == 0)
    quant = quantization_info(top, text, hf_quant_config)
    if use_mha:
        # DeepseekAttention: plain multi-head attention, head = hidden // heads
        kv = kv_heads_of(text)
        hd = text.req_int("hidden_size") // text.req_int("num_attention_heads")
        layers = [attention(i, attn_name(i), kv_heads=kv, head_size=hd) for i in range(n)]
        return finish(top, text, family="deepseek", layers=layers, quantization=quant)

    rank = text.req_int("kv_lora_rank", "multi-head latent attention")
    rope_dim = text.req_int("qk_rope_head_dim", "multi-head latent attention")
    is_v32 = text.present("index_topk")  # vLLM: is_v32 = hasattr(config, "index_topk")
    index_dim = text.req_int("index_head_dim", "the V3.2 sparse indexer") if is_v32 else None
    skip = skip_topk_layers(text, n) if is_v32 else set()

    def layer(i: int, with_indexer: bool) -> list[LayerDescription]:
        attn = mla(i, attn_name(i), kv_lora_rank=rank, qk_rope_head_dim=rope_dim,
                   index_head_dim=index_dim if with_indexer else None)
        if index_dim is None or not with_indexer:
            return [attn]
        # vLLM: DeepseekV32Attention builds (and registers) its indexer before MLAAttention
        return [indexer_cache(i, attn_name(i, module="self_attn"), index_dim), attn]

    layers = [d for i in range(n) for d in layer(i, i not in skip)]
    n_mtp = text.get_int("num_nextn_predict_layers", 0, minimum=0)
    assert n_mtp is not None
    # MTP layers always build a full indexer (vLLM: deepseek_v32 attention.py is_mtp_layer)
    mtp = [d for k in range(n_mtp) for d in layer(n + k, True)]
    desc = finish(top, text, family="deepseek_v32" if is_v32 else "deepseek_v3", layers=layers,
                  quantization=quant, num_nextn_predict_layers=n_mtp, mtp_layers=mtp,
                  use_mla=True)
    # vLLM: deepseek_v2.py / deepseek_v32 — use_sparse = hasattr(config, "index_topk")
    return desc.model_copy(update={"sparse_mla": True}) if is_v32 else desc
