"""DeepSeek V3 / V3.1-NVFP4 / V3.2 and Kimi K2: multi-head latent attention.

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

import pytest

from kvplan.errors import ConfigError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.models.helpers import DELETE, edited, one, real


def _assert_mla(m, layers: int) -> None:
    # kv_lora_rank 512 + qk_rope_head_dim 64 = 576 per token, one latent "head", no V
    assert m.kind_counts() == {"mla": layers}
    assert one(layer.kv_lora_rank for layer in m.layers) == 512
    assert one(layer.qk_rope_head_dim for layer in m.layers) == 64
    assert one(layer.head_size for layer in m.layers) == 576
    assert one(layer.num_kv_heads for layer in m.layers) == 1
    assert one(layer.head_size_v for layer in m.layers) == 0
    assert m.use_mla


def test_deepseek_v3() -> None:
    m = real("deepseek-ai--DeepSeek-V3")
    _assert_mla(m, 61)  # num_hidden_layers 61
    assert one(layer.index_head_dim for layer in m.layers) is None  # no index_topk: not V3.2
    assert m.family == "deepseek_v3"
    # num_nextn_predict_layers 1 → one MLA MTP layer numbered after the 61 decoder layers
    assert m.num_nextn_predict_layers == 1
    assert [(layer.index, layer.name, layer.kind) for layer in m.mtp_layers] == [
        (61, "model.layers.61.self_attn.attn", LayerKind.MLA)]
    q = m.quantization  # quant_method fp8, e4m3 blocks: FP8 weights, no KV dtype
    assert (q.method, q.weight_format, q.kv_cache_dtype) == ("fp8", "FP8", None)


def test_deepseek_v3_1_nvfp4() -> None:
    m = real("nvidia--DeepSeek-V3.1-NVFP4")
    _assert_mla(m, 61)
    # no quantization_config in config.json → hf_quant_config.json: producer modelopt,
    # quant_algo NVFP4 → "modelopt_fp4"; kv_cache_quant_algo FP8 → "fp8_e4m3"
    q = m.quantization
    assert (q.method, q.weight_format, q.kv_cache_dtype, q.source) == (
        "modelopt_fp4", "NVFP4", "fp8_e4m3", "hf_quant_config.json")


def test_deepseek_v3_2_indexer() -> None:
    m = real("deepseek-ai--DeepSeek-V3.2")
    mla = m.model_copy(update={"layers": tuple(x for x in m.layers if x.kind is LayerKind.MLA)})
    _assert_mla(mla, 61)
    # index_topk present → V3.2 (sparse MLA); no index_topk_freq → every layer has an indexer
    # whose K cache rows are index_head_dim 128 fp8 bytes + 128 // 128 · 4 scale bytes = 132
    # (vLLM 0.34 deepseek_v32/attention.py L95–101, deepseek_v2.py L658–667)
    assert m.kind_counts() == {"mla": 61, "mla_indexer": 61}
    indexers = [x for x in m.layers if x.kind is LayerKind.MLA_INDEXER]
    assert indexers[0].name == "model.layers.0.self_attn.indexer.k_cache"
    assert one(x.head_size for x in indexers) == 132
    assert one(layer.index_head_dim for layer in m.layers) == 128
    assert m.family == "deepseek_v32" and m.sparse_mla
    # the MTP layer (index 61) always builds a full indexer
    assert [(layer.index, layer.kind, layer.index_head_dim) for layer in m.mtp_layers] == [
        (61, LayerKind.MLA_INDEXER, 128), (61, LayerKind.MLA, 128)]


def test_kimi_k2() -> None:
    m = real("moonshotai--Kimi-K2-Instruct")
    _assert_mla(m, 61)  # 61 layers, same MLA ranks as DeepSeek V3
    assert m.model_type == "kimi_k2"
    assert m.num_nextn_predict_layers == 0 and m.mtp_layers == ()  # num_nextn_predict_layers 0
    assert m.quantization.method == "fp8"


def test_v3_2_index_topk_freq_skips_indexers() -> None:
    # hand-written: 4 layers, index_topk_freq 2, offset default 2 → skip when
    # max(i - 1, 0) % 2 != 0: i=0 → 0 keep, 1 → 0 keep, 2 → 1 skip, 3 → 2 keep
    config = edited("deepseek-ai--DeepSeek-V3.2", ("num_hidden_layers",), 4,
                    ("index_topk_freq",), 2)
    m = describe_model(config, source="hand-written")
    assert [layer.index_head_dim for layer in m.layers if layer.kind is LayerKind.MLA] == [
        128, 128, None, 128]
    assert [layer.index for layer in m.layers if layer.kind is LayerKind.MLA_INDEXER] == [0, 1, 3]
    assert [layer.index_head_dim for layer in m.mtp_layers] == [128, 128]


def test_sibling_ranks_are_read() -> None:
    # a sibling with kv_lora_rank 256 and rope 32 → 288 per token
    config = edited("deepseek-ai--DeepSeek-V3", ("kv_lora_rank",), 256,
                    ("qk_rope_head_dim",), 32, ("num_hidden_layers",), 27)
    m = describe_model(config, source="sibling")
    assert m.kind_counts() == {"mla": 27}
    assert one(layer.head_size for layer in m.layers) == 288


def test_missing_kv_lora_rank_names_the_field() -> None:
    config = edited("deepseek-ai--DeepSeek-V3", ("kv_lora_rank",), DELETE)
    with pytest.raises(ConfigError, match="'kv_lora_rank'"):
        describe_model(config, source="edited")
