"""EXAONE (model_type exaone): the checkpoint's remote ExaoneConfig, read by hand.

Expected numbers worked out by hand from the config and vLLM 0.34.0
model_executor/models/exaone.py (ExaoneAttention L104-176, ExaoneModel L291-).
Only EXAONE 3.0's config as transformers printed it was found (see PROVENANCE); EXAONE 3.5 shares
its model_type, class and vLLM model file.
"""

from __future__ import annotations

from kvplan.models import describe_model
from tests.models.helpers import DELETE, edited, one, real

EXAONE = "LGAI-EXAONE--EXAONE-3.0-7.8B-Instruct"


def test_exaone_3_0_7_8b() -> None:
    m = real(EXAONE)
    # num_layers 32 (ExaoneConfig attribute_map num_hidden_layers → num_layers), all full
    assert m.kind_counts() == {"full_attention": 32}
    assert m.family == "exaone"
    # exaone.py L247-249: num_key_value_heads 8; L134-136: no head_dim → 4096 // 32 = 128
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128
    # ExaoneForCausalLM.transformer (L401) → h.{i} (L322) → attn (L254) → attention (L214) → attn
    assert m.layers[0].name == "transformer.h.0.attn.attention.attn"
    assert m.max_position_embeddings == 4096  # rope_scaling null → no factor
    assert m.dtype == "bfloat16" and m.warnings == ()


def test_exaone_defaults_and_head_dim() -> None:
    # ExaoneConfig: num_key_value_heads None → num_attention_heads; max_position_embeddings
    # default 2048; exaone.py reads head_dim when the config has one (hand-edited: 96)
    config = edited(EXAONE, ("num_key_value_heads",), DELETE,
                    ("max_position_embeddings",), DELETE, ("head_dim",), 96)
    m = describe_model(config, source="edited")
    assert one(layer.num_kv_heads for layer in m.layers) == 32
    assert one(layer.head_size for layer in m.layers) == 96
    assert m.max_position_embeddings == 2048


def test_llama3_rope_is_not_multiplied_but_linear_is() -> None:
    # EXAONE 3.5 ships rope_scaling llama3 (factor 8): vLLM's _get_and_verify_max_len leaves
    # llama3 unscaled; a linear factor 2 doubles 4096 → 8192
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}
    m = describe_model(edited(EXAONE, ("rope_scaling",), llama3), source="edited")
    assert m.max_position_embeddings == 4096
    m = describe_model(edited(EXAONE, ("rope_scaling",), {"type": "linear", "factor": 2.0}),
                       source="edited")
    assert m.max_position_embeddings == 8192
