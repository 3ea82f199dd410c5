"""MiMo-V2-Flash: hybrid_layer_pattern of sliding-window (1) and full (0) layers with their own
head counts and a V head smaller than K.

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

from kvplan.config import mtp_draft
from kvplan.model import LayerKind
from tests.config.helpers import indices, of_kind, one, real


def test_mimo_v2_flash() -> None:
    m = real("XiaomiMiMo--MiMo-V2-Flash")
    # hybrid_layer_pattern (48): 0 at 0, 5, 11, 17, 23, 29, 35, 41, 47 → 9 full + 39 SWA
    assert m.kind_counts() == {"full_attention": 9, "sliding_window": 39}
    assert indices(m, LayerKind.FULL_ATTENTION) == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    full = of_kind(m, LayerKind.FULL_ATTENTION)
    # full: num_key_value_heads 4, head_dim 192, v_head_dim 128, no window
    assert one((layer.num_kv_heads, layer.head_size, layer.head_size_v, layer.sliding_window)
               for layer in full) == (4, 192, 128, None)
    swa = of_kind(m, LayerKind.SLIDING_WINDOW)
    # SWA: swa_num_key_value_heads 8, swa_head_dim 192, swa_v_head_dim 128,
    # sliding_window_size 128 (its attention sink bias holds no KV)
    assert one((layer.num_kv_heads, layer.head_size, layer.head_size_v, layer.sliding_window)
               for layer in swa) == (8, 192, 128, 128)
    # quantization_config fp8 (e4m3, 128×128 blocks)
    assert (m.quantization.method, m.quantization.weight_format) == ("fp8", "FP8")
    assert m.model_sliding_window is None
    # vLLM's MiMo-V2 MTP: one SWA-configured layer after the 48 decoder layers
    draft = mtp_draft(m)
    assert draft.draft_method == "mtp" and draft.num_target_layers == 48
    assert [(layer.index, layer.name, layer.kind, layer.num_kv_heads, layer.sliding_window)
            for layer in draft.layers] == [
        (48, "model.mtp.layers.0.self_attn.attn", LayerKind.SLIDING_WINDOW, 8, 128)]
