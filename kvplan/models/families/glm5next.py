"""Zhipu GLM-5.3-Flash (Glm5Next): Kimi delta attention (KDA) layers between sparse MLA layers
whose DSA indexer keeps a kpool-compressed K cache and a one-block tail ring."""

from __future__ import annotations

from typing import Any

from kvplan.models._common import Cfg, attn_name, finish, mla, num_layers_of, text_cfg
from kvplan.models.description import GdnDims, LayerDescription, LayerKind, ModelDescription
from kvplan.models.families._shared import KIMI_K3, KIMI_K3_FLASHKDA, indexer_cache
from kvplan.models.quant import quantization_info
from kvplan.models.resolution.resolved import encoder_cache_note

# transformers: models/glm5_next/configuration_glm5_next.py Glm5NextTextConfig (vLLM 0.32+ reads
# it; 0.31 had its own class with index_kpool 4, which kvplan does not plan)
GLM5_NEXT_DEFAULTS: dict[str, Any] = {
    "num_hidden_layers": 45, "kv_lora_rank": 512, "qk_rope_head_dim": 0, "index_topk": 2048,
    "index_head_dim": 128, "index_kpool": 16, "linear_head_dim": 128, "linear_num_heads": 64,
    "linear_conv_kernel_dim": 4, "linear_lower_bound": -5.0,
    "max_position_embeddings": 1048576}
_LINEAR_ATTN_KEYS = {"head_dim": "linear_head_dim", "num_heads": "linear_num_heads",
                     "short_conv_kernel_size": "linear_conv_kernel_dim",
                     "gate_lower_bound": "linear_lower_bound"}
GLM5_NEXT_INDEXER, KPOOL_TAIL = "GLM5_NEXT_INDEXER", "KPOOL_TAIL"  # vLLM backend names


def _with_defaults(text: Cfg) -> Cfg:
    """The text config as Glm5NextTextConfig.__post_init__ leaves it: class defaults for absent
    fields, linear_attn_config read into the linear_* fields (a null gate bound with safe_gate
    falls back to -5.0), and the default layer map (every fourth layer MLA)."""
    data = dict(text.data)
    used = {k: v for k, v in GLM5_NEXT_DEFAULTS.items() if k not in data}
    data.update(used)
    lac = text.sub("linear_attn_config")
    if lac is not None:
        for key, field in _LINEAR_ATTN_KEYS.items():
            if lac.present(key):
                data[field] = lac.raw(key)
        if lac.get("safe_gate", True) and data["linear_lower_bound"] is None:
            data["linear_lower_bound"] = -5.0
    if data.get("layer_types") is None:
        data["layer_types"] = ["indexed_attention" if i % 4 == 3 else "linear_attention"
                               for i in range(int(data["num_hidden_layers"]))]
    shown = {k: v for k, v in used.items()
             if k not in ("max_position_embeddings",) and not (lac and k.startswith("linear_"))}
    if shown:
        text.warn("absent from config.json, so transformers' Glm5NextTextConfig defaults apply, "
                  "as in vLLM: " + ", ".join(f"{text.field(k)} = {v}" for k, v in shown.items()))
    return Cfg(data, text.source, text.path, text.warnings)


def _mla_layer(i: int, prefix: str, text: Cfg, sparse: bool) -> list[LayerDescription]:
    """vLLM: glm5next/common/attention.py Glm5NextMLAAttention — the Indexer registers its K cache
    (Glm5NextIndexerCache: DeepSeek-V3.2 rows, tokens_per_state = index_kpool) and its tail ring
    (Glm5NextTailCache) before MLAAttention at {prefix}.attn; every MLA layer owns an indexer."""
    rank = text.req_int("kv_lora_rank", "the MLA layers")
    rope = text.req_int("qk_rope_head_dim", "the MLA layers", minimum=0)
    attn = mla(i, attn_name(i, prefix), kv_lora_rank=rank, qk_rope_head_dim=rope,
               index_head_dim=text.req_int("index_head_dim") if sparse else None)
    if not sparse:
        return [attn]
    index_dim = text.req_int("index_head_dim", "the sparse indexer")
    kpool = text.req_int("index_kpool", "the sparse indexer", minimum=2)
    module = attn_name(i, prefix, "self_attn")
    k_cache = indexer_cache(i, module, index_dim).model_copy(
        update={"tokens_per_state": kpool, "backend": GLM5_NEXT_INDEXER})
    tail = LayerDescription(index=i, name=f"{module}.indexer.tail_cache",
                            kind=LayerKind.KPOOL_TAIL, num_kv_heads=2, head_size=index_dim,
                            head_size_v=0, tokens_per_state=kpool, fixed_dtype="bfloat16",
                            backend=KPOOL_TAIL)
    return [k_cache, tail, attn]


def describe_glm5_next(top: Cfg, hf_quant_config: dict[str, Any] | None) -> ModelDescription:
    """vLLM: glm5next/common/model.py Glm5NextDecoderLayer — layer i is KDA iff layer_types[i] ==
    "linear_attention" (Glm5NextLinearAttention at model.layers.{i}.self_attn), else sparse MLA
    (head kv_lora_rank + qk_rope_head_dim). KDA state: kda_state_shape with linear_num_heads ×
    linear_head_dim, conv linear_conv_kernel_dim; the recurrent dtype reads mamba_ssm_cache_dtype
    and FlashKDA prefill (head_dim 128, a gate bound) exports checkpoints, as Kimi-K3's.
    Glm5NextForConditionalGeneration: the same model under language_model. (Glm4v wrapper).
    MTP (common/mtp.py): num_nextn_predict_layers MLA layers at model.layers.{n + k}."""
    text = _with_defaults(text_cfg(top))
    n = num_layers_of(text)
    types = text.req_list("layer_types", "the KDA layer map")
    sparse = text.get("index_topk") is not None  # vLLM: is_v32 = config.index_topk is not None
    lower = text.raw("linear_lower_bound")
    dims = GdnDims(num_k_heads=text.req_int("linear_num_heads", "the KDA layers"),
                   num_v_heads=text.req_int("linear_num_heads", "the KDA layers"),
                   head_k_dim=text.req_int("linear_head_dim", "the KDA layers"),
                   head_v_dim=text.req_int("linear_head_dim", "the KDA layers"),
                   conv_kernel=text.req_int("linear_conv_kernel_dim", "the KDA layers"))
    # vLLM: common/kda.py _resolve_kda_prefill_backend — FlashKDA needs head_dim 128 and a bound
    version = KIMI_K3_FLASHKDA if dims.head_k_dim == 128 and lower is not None else KIMI_K3
    prefix = "language_model.model.layers" if top.sub("text_config") is not None else \
        "model.layers"
    layers: list[LayerDescription] = []
    for i in range(n):
        if i < len(types) and types[i] == "linear_attention":
            layers.append(LayerDescription(index=i, name=f"{prefix}.{i}.self_attn",
                                           kind=LayerKind.KDA, gdn=dims, model_version=version))
        else:
            layers += _mla_layer(i, prefix, text, sparse)
    n_mtp = text.get_int("num_nextn_predict_layers", 0, minimum=0)
    assert n_mtp is not None
    mtp = [d for k in range(n_mtp) for d in _mla_layer(n + k, "model.layers", text, sparse)]
    desc = finish(top, text, family="glm5_next", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  num_nextn_predict_layers=n_mtp, mtp_layers=mtp, use_mla=True,
                  length_defaults={"max_position_embeddings":
                                   GLM5_NEXT_DEFAULTS["max_position_embeddings"]})
    note = encoder_cache_note(desc.architectures)
    return desc.model_copy(update={"sparse_mla": sparse,
                                   "warnings": desc.warnings + ((note,) if note else ())})
