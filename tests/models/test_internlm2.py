"""InternLM2 / 2.5 (model_type internlm2): the checkpoint's remote InternLM2Config, read by hand.

No published config.json of internlm/internlm2_5-7b-chat could be found
(tests/data/hf-configs/PROVENANCE.md, "Not found"): these configs are hand-written to exercise the
adapter; defaults are those of the remote configuration_internlm2.py (num_hidden_layers 32,
num_attention_heads 32, hidden_size 4096, num_key_value_heads None → heads,
max_position_embeddings 2048). Expected numbers from vLLM 0.34.0
model_executor/models/internlm2.py InternLM2Attention (L90-158).
"""

from __future__ import annotations

from kvplan.models import describe_model
from tests.models.helpers import one

BASE = {"architectures": ["InternLM2ForCausalLM"], "model_type": "internlm2",
        "torch_dtype": "bfloat16"}


def test_internlm2_gqa_and_dynamic_rope() -> None:
    config = {**BASE, "num_key_value_heads": 8, "max_position_embeddings": 32768,
              "rope_scaling": {"type": "dynamic", "factor": 2.0}, "head_dim": 64}
    m = describe_model(config, source="hand-written")
    # 32 layers (class default), all full
    assert m.kind_counts() == {"full_attention": 32}
    # internlm2.py L209: num_key_value_heads 8; L119: hidden 4096 // 32 heads = 128
    # (a head_dim field is not read by vLLM here)
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128
    assert m.layers[0].name == "model.layers.0.attention.attn"
    # _get_and_verify_max_len: "dynamic" is not exempt → 32768 × 2.0 = 65536
    assert m.max_position_embeddings == 65536


def test_internlm2_defaults() -> None:
    # no num_key_value_heads → num_attention_heads 32; max_position_embeddings default 2048
    m = describe_model(BASE, source="hand-written")
    assert one(layer.num_kv_heads for layer in m.layers) == 32
    assert m.max_position_embeddings == 2048
    assert any("no maximum length" in w and "2048" in w for w in m.warnings)
