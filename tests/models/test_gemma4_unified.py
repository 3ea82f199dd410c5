"""Gemma4UnifiedForConditionalGeneration (encoder-free Gemma 4): the KV cache is its language
model's, the same Gemma4ForCausalLM as Gemma4ForConditionalGeneration's.

vLLM 0.34.0: registry.py L434 → gemma4_unified.py L225 Gemma4UnifiedForConditionalGeneration
(registered in 0.31–0.34 alike); L298–304 builds the text model with init_vllm_registered_model(
hf_config=config.text_config, architectures=["Gemma4ForCausalLM"]) and no vision/audio tower
(no encoder cache); models/config.py L1559 gives it the same Gemma4Config hook.

No published Gemma4Unified config was found (issue-10 research: fragments only), so the config
here is the real gemma-4-26B-A4B one with only `architectures` changed, on purpose.
"""

from __future__ import annotations

import json

from kvplan.models import describe_model
from tests.models.helpers import check_h100_x8, edited, real

GEMMA4 = "google--gemma-4-26B-A4B"


def _unified() -> dict:
    return edited(GEMMA4, ("architectures",), ["Gemma4UnifiedForConditionalGeneration"])


def test_unified_has_the_language_model_layers_of_gemma4() -> None:
    m = describe_model(_unified(), source="unified")
    assert m.family == "gemma4"
    assert m.layers == real(GEMMA4).layers  # 25 sliding (8 × 256, window 1024) + 5 full (2 × 512)


def test_unified_cli_h100_x8(tmp_path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(_unified()))
    out = check_h100_x8(cfg)
    # full: 2 KV heads / 8 → 1 (replicated) · 64 · (512 + 512) · 2 B = 131,072 B; sliding: 1 head
    # · (256 + 256) · 2 = 1,024 B/token → the largest kernel block within the 131,072-byte budget
    # (attention.py L686 _largest_kernel_block_within) = 128 → 131,072 B
    assert [(g["kind"], g["num_layers"], g["block_size_tokens"], g["page_size_bytes"])
            for g in out["groups"]] == [("sliding_window", 5, 128, 131072)] * 5 + [
        ("full_attention", 5, 64, 131072)]
    assert out["padding_layer_warnings"] == []  # 25 sliding = 5 groups of 5
    # full 262144 / 64 = 4096 blocks; sliding cdiv(1023 + 16384, 128) + 1 = 137 per group
    assert out["total_blocks_per_request"] == 4096 + 5 * 137
    assert out["pool_bytes_per_block"] == [5 * 131072]
