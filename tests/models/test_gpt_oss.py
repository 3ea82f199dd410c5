"""gpt-oss-20b: 128-token sliding window on even layers, full attention on odd ones.

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.models.helpers import edited, indices, of_kind, one, real


def test_gpt_oss_20b() -> None:
    m = real("openai--gpt-oss-20b")
    # 24 layers; vLLM: sliding_window (128) on layer_idx % 2 == 0 → 12 SW (0, 2, ..., 22)
    # and 12 full (1, 3, ..., 23) — the same as the config's layer_types
    assert m.kind_counts() == {"sliding_window": 12, "full_attention": 12}
    assert indices(m, LayerKind.SLIDING_WINDOW) == list(range(0, 24, 2))
    assert one(layer.sliding_window for layer in of_kind(m, LayerKind.SLIDING_WINDOW)) == 128
    # 8 KV heads, head_dim 64; the attention sinks are per-head logits, not KV: plain layers
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 64
    assert one(layer.sink_len for layer in m.layers) is None
    assert m.layers[0].name == "model.layers.0.attn.attn"
    # quantization_config quant_method mxfp4 → MXFP4 weights, no KV dtype
    q = m.quantization
    assert (q.method, q.weight_format, q.kv_cache_dtype) == ("mxfp4", "MXFP4", None)
    # the file has no torch_dtype: bfloat16 assumed, and said so
    assert m.dtype == "bfloat16"
    assert any("torch_dtype" in w for w in m.warnings)


def test_gpt_oss_layer_types_disagreeing_with_vllm_is_noted() -> None:
    # hand-edited layer_types (all full) → vLLM ignores them; the even/odd pattern is kept
    config = edited("openai--gpt-oss-20b", ("layer_types",), ["full_attention"] * 24)
    m = describe_model(config, source="edited")
    assert m.kind_counts() == {"sliding_window": 12, "full_attention": 12}
    assert any("even-sliding/odd-full" in w for w in m.warnings)
