"""MiniCPM3 (model_type minicpm3): an MLA-shaped config that vLLM serves as plain attention.

No published config.json of openbmb/MiniCPM3-4B could be found (tests/data/hf-configs/PROVENANCE.md,
"Not found"): these configs are hand-written and lean on transformers 5.20.2's MiniCPM3Config
defaults (models/minicpm3/configuration_minicpm3.py), which its docstring says are MiniCPM3-4B's.
Expected numbers from vLLM 0.34.0 model_executor/models/minicpm3.py MiniCPM3Attention (L52-135).
"""

from __future__ import annotations

from kvplan.models import describe_model
from tests.models.helpers import one

BARE = {"architectures": ["MiniCPM3ForCausalLM"], "model_type": "minicpm3",
        "torch_dtype": "bfloat16"}


def test_minicpm3_defaults_plan_as_multi_head_attention() -> None:
    m = describe_model(BARE, source="hand-written")
    # MiniCPM3Config: num_hidden_layers 62, all full attention
    assert m.kind_counts() == {"full_attention": 62}
    # minicpm3.py L126-133: Attention(num_local_heads, qk_head_dim, num_kv_heads=num_local_heads)
    # → 40 KV heads (num_attention_heads 40) of qk_nope 64 + qk_rope 32 = 96 for K and for V
    # (V is zero-padded from v_head_dim to 96, L172-174); not the class's head_dim (= 32, the
    # rotary part) and not MLA (minicpm3 is not in is_deepseek_mla's list)
    assert one(layer.num_kv_heads for layer in m.layers) == 40
    assert one(layer.head_size for layer in m.layers) == 96
    assert one(layer.head_size_v for layer in m.layers) is None
    assert not m.use_mla and one(layer.kv_lora_rank for layer in m.layers) is None
    assert m.layers[0].name == "model.layers.0.self_attn.attn"
    assert m.max_position_embeddings == 32768  # MiniCPM3Config default
    assert any("num_hidden_layers" in w and "62" in w for w in m.warnings)


def test_minicpm3_reads_its_dims() -> None:
    # a smaller hand-written sibling: 4 layers, 8 heads, nope 32 + rope 16 = 48 per head;
    # num_key_value_heads 2 is ignored (vLLM passes num_kv_heads = num heads)
    config = {**BARE, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
              "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "max_position_embeddings": 4096}
    m = describe_model(config, source="hand-written")
    assert m.kind_counts() == {"full_attention": 4}
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 48
    assert m.max_position_embeddings == 4096 and m.warnings == ()
