"""DeepSeek-V4 (-Flash / -Pro, DeepseekV4ForCausalLM / -ForConditionalGeneration): every layer
keeps a sliding-window MLA cache; compressed layers add a compressed MLA cache and a compressor
state ring, and the ratio-4 ones a lightning indexer (its K cache and its own compressor ring)."""

from __future__ import annotations

from typing import Any

from kvplan.errors import UnsupportedError
from kvplan.models._common import SPECS_HINT, Cfg, finish, num_layers_of, text_cfg
from kvplan.models.description import FP8_DS_MLA, LayerDescription, ModelDescription
from kvplan.models.families._shared import DSV4, dsv4_layer_caches
from kvplan.models.quant import quantization_info

SLIDING, CSA, HCA = ("sliding_attention", "compressed_sparse_attention",
                     "heavily_compressed_attention")
# transformers: configuration_deepseek_v4.py _COMPRESS_RATIO_TO_LAYER_TYPE / default_compress_rates
_RATIO_TO_TYPE = {0: SLIDING, 4: CSA, 128: HCA}
_DEFAULT_RATES = {CSA: 4, HCA: 128}


def _layer_types(text: Cfg, n: int) -> list[str]:
    """transformers DeepseekV4Config.__post_init__: layer_types, else the legacy
    compress_ratios (0/4/128 per layer, MTP entries past num_hidden_layers), else V4-Pro's
    default (2 × HCA, then HCA/CSA alternating); cut to num_hidden_layers."""
    types = text.get("layer_types")
    if types is None and text.present("compress_ratios"):
        ratios = text.req_list("compress_ratios")
        bad = [r for r in ratios if r not in _RATIO_TO_TYPE]
        if bad:
            raise text.error(f"'{text.field('compress_ratios')}' entries must be 0, 4 or 128, "
                             f"got {bad[:3]}")
        types = [_RATIO_TO_TYPE[r] for r in ratios]
    if types is None:
        types = [HCA] * min(n, 2) + [CSA if i % 2 else HCA for i in range(max(n - 2, 0))]
    if not isinstance(types, list) or len(types) < n or any(t not in (SLIDING, CSA, HCA)
                                                            for t in types[:n]):
        raise text.error(f"'{text.field('layer_types')}' must give one of {SLIDING}, {CSA}, "
                         f"{HCA} for each of the {n} layers")
    return list(types[:n])


def _compress_rates(text: Cfg) -> dict[str, int]:
    rates = dict(_DEFAULT_RATES)
    given = text.get("compress_rates")
    if isinstance(given, dict):
        rates.update({k: int(v) for k, v in given.items()})
    for key, kind in (("compress_rate_csa", CSA), ("compress_rate_hca", HCA)):
        if text.present(key):
            rates[kind] = text.req_int(key)
    return rates


def describe_deepseek_v4(top: Cfg, hf_quant_config: dict[str, Any] | None) -> ModelDescription:
    """vLLM: models/deepseek_v4 (CUDA: nvidia/model.py) — layer i's compress ratio is
    max(1, compress_rates[layer_types[i]]) (attention.py L236–243); MTP layers
    (model.layers.{num_hidden_layers + k}, nvidia/mtp.py) use ratio 1: a SWA cache only."""
    text = text_cfg(top)
    n = num_layers_of(text)
    types = _layer_types(text, n)
    rates = _compress_rates(text)
    head_dim = text.int_default("head_dim", 512)
    window = text.int_default("sliding_window", 128)
    index_dim = text.int_default("index_head_dim", 128)
    layers: list[LayerDescription] = []
    for i, kind in enumerate(types):
        ratio = max(1, rates.get(kind, 0))
        if ratio not in (1, 4, 128):
            # vLLM: CompressorStateCache asserts compress_ratio in [4, 128]
            raise text.error(f"layer {i}: compress ratio {ratio} (vLLM takes 4 or 128)")
        layers += dsv4_layer_caches(i, f"model.layers.{i}.attn", ratio=ratio, head_dim=head_dim,
                                    window=window, index_head_dim=index_dim)
    n_mtp = text.get_int("num_nextn_predict_layers", 0, minimum=0) or 0
    mtp = [d for k in range(n_mtp)
           for d in dsv4_layer_caches(n + k, f"model.layers.{n + k}.attn", ratio=1,
                                      head_dim=head_dim, window=window,
                                      index_head_dim=index_dim)]
    desc = finish(top, text, family=DSV4, layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  num_nextn_predict_layers=n_mtp, mtp_layers=mtp, use_mla=True)
    return desc.model_copy(update={"mla_kv_layout": FP8_DS_MLA})


def describe_deepseek_v41(top: Cfg, hf_quant_config: dict[str, Any] | None) -> ModelDescription:
    """DeepseekV41ForCausalLM (registered in vLLM 0.31–0.34, models/deepseek_v41): refused.

    Its layout differs from V4's in ways a config must pin down (compress ratios 0/1/2,
    compressed caches only on kv_source_layer_ids and indexers only on index_source_layer_ids,
    32-token SWA blocks with bounded replay, one-block CircularBufferSpec compressor rings), and
    no published V4.1 config exists to check a model of it against.
    """
    raise UnsupportedError(
        f"{top.source}: DeepSeek-V4.1 (DeepseekV41ForCausalLM) is not modelled by kvplan: its "
        "KV-source / index-source layer sharing and circular compressor buffers have no "
        "published config to verify against", hint=SPECS_HINT)
