"""MiMo-V2-Flash: hybrid_layer_pattern of sliding-window (1) and full (0) layers with their own
head counts and a V head smaller than K.

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

from kvplan.models import mtp_draft
from kvplan.models.description import LayerKind
from tests.models.helpers import indices, of_kind, one, real


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


# ---- vLLM's specs for MiMo-V2-Flash on H100 ×8 (0.34.0 wheel, file:line) --------------------
# models/mimo_v2.py L420 is_compressed_softmax_layer (pattern 1) → MiMoV2Attention with the swa_*
# fields, else the full ones; L323–353: K 192 ≠ V 128 → FLASH_ATTN_DIFFKV (FA3 on SM90, FA4 on
# SM10x), else TRITON_ATTN_DIFFKV; L418 clears cache_config.sliding_window (0.32+), so full layers
# get no window; layers/attention/attention.py L705 FullAttentionSpec(head_size 192,
# head_size_v 128). The sink bias (L314) is a parameter, not KV.
# Per rank at TP 8: full 4 KV heads → max(1, 4 // 8) = 1 (replicated), SWA 8 // 8 = 1.
# Page @64: 1 · 64 · (192 + 128) · 2 B = 40,960 B for both kinds (SW block: attention.py L686
# _largest_kernel_block_within prefers a divisor of 64 within the 64-token page budget → 64).
# kv_cache_planning.py L462 _get_kv_cache_groups_uniform_page_size: buckets full (9) and SWA
# (39); 39 ≥ 1.5 · 9 → group_size 9 (L568); SWA splits into cdiv(39, 9) = 5 groups, and
# 9 − 39 % 9 = 6 → "Add 6 padding layers, may waste at most 15.38% KV cache memory" (L584;
# 6 / 39 = 15.38%) — the line the issue quotes from MiMo-V2.6's start-up log.


def test_mimo_v2_flash_cli_h100_x8_adds_6_padding_layers() -> None:
    from tests.models.helpers import HF_CONFIGS, check_h100_x8

    out = check_h100_x8(HF_CONFIGS / "XiaomiMiMo--MiMo-V2-Flash" / "config.json")
    assert out["padding_layer_warnings"] == [
        "Add 6 padding layers, may waste at most 15.38% KV cache memory"]
    assert [(g["kind"], g["num_layers"]) for g in out["groups"]] == [
        ("full_attention", 9), *[("sliding_window", n) for n in (8, 8, 8, 8, 7)]]
    assert {(g["block_size_tokens"], g["page_size_bytes"]) for g in out["groups"]} == {
        (64, 40960)}
    # one pool block = 9 layers · 40,960 B = 368,640 B
    assert out["pool_bytes_per_block"] == [368640]
    # full: 262,144 / 64 = 4096 blocks; SWA: cdiv(min(128 − 1 + 16,384, 262,144), 64) + 1 = 259
    # (kv_cache_interface.py L932) per group → 4096 + 5 · 259 = 5391 blocks
    assert out["total_blocks_per_request"] == 5391
    assert out["total_bytes_needed"] == [5391 * 368640]


def test_mimo_v2_diff_kv_takes_flash_attention_on_sm100() -> None:
    # FlashInfer is SM10x's first choice for causal layers, but MiMo's DiffKV layers pick
    # FLASH_ATTN_DIFFKV (models/mimo_v2.py L339–346); elsewhere (e.g. SM80) TRITON_ATTN_DIFFKV
    from kvplan.engines.vllm.build import build
    from tests.models.helpers import h100_tp8

    m = real("XiaomiMiMo--MiMo-V2-Flash")
    for sm, backend in ((100, "FLASH_ATTN"), (90, "FLASH_ATTN"), (80, "TRITON_ATTN")):
        res = build(m, h100_tp8(sm=sm))
        assert {lp.backend for lp in res.layers} == {backend}


def test_mimo_v2_fp8_kv_needs_a_flash_attention_that_takes_it() -> None:
    # flash_attn_diffkv.py FlashAttentionDiffKVImpl.__init__ asks fa_utils.
    # flash_attn_supports_kv_cache_dtype with the layer's sinks: on SM90 the SWA layers (192/128
    # with add_swa_attention_sink_bias) are upgraded FA3 → FA4, which takes quantized K/V only at
    # 512/512 → NotImplementedError (the 0.34 e2e golden MiMo-V2-Flash@fp8); SM100 runs FA4 at
    # 192/128; fp8_e5m2 never; SM80 runs TRITON_ATTN_DIFFKV, which has no such check
    import pytest

    from kvplan.engines.vllm.build import build
    from kvplan.errors import StartupError
    from tests.models.helpers import h100_tp8

    m = real("XiaomiMiMo--MiMo-V2-Flash")
    assert any(layer.has_sinks for layer in m.layers)
    assert not any(layer.has_sinks for layer in of_kind(m, LayerKind.FULL_ATTENTION))
    with pytest.raises(StartupError, match="Unsupported FP8 Diff-KV configuration"):
        build(m, h100_tp8(sm=90, kv_cache_dtype="fp8"))
    with pytest.raises(StartupError, match="Unsupported FP8 Diff-KV configuration"):
        build(m, h100_tp8(sm=100, kv_cache_dtype="fp8_e5m2"))
    for sm in (100, 80):
        assert build(m, h100_tp8(sm=sm, kv_cache_dtype="fp8")).layers
    # without sinks the SM90 layers stay on FA3, which takes fp8
    no_sinks = m.model_copy(update={"layers": tuple(
        layer.model_copy(update={"has_sinks": False}) for layer in m.layers)})
    assert build(no_sinks, h100_tp8(sm=90, kv_cache_dtype="fp8")).layers


def test_mimo_v2_omni_is_mimo_v2_under_language_model() -> None:
    """vLLM: mimo_v2_omni.py MiMoV2OmniForCausalLM builds MiMoV2FlashForCausalLM at
    language_model (vision / audio towers hold no KV cache). The MiMo-V2-Flash config with the
    Omni architecture (the --hf-overrides public MiMo-V2.5 recipes use) exercises that branch."""
    from kvplan.engines.vllm.build import build
    from kvplan.models import describe_model
    from tests.models.helpers import edited, h100_tp8

    flash = real("XiaomiMiMo--MiMo-V2-Flash")
    omni = describe_model(edited("XiaomiMiMo--MiMo-V2-Flash", ("architectures",),
                                 ["MiMoV2OmniForCausalLM"]), source="omni")
    assert omni.layers[0].name == "language_model.model.layers.0.self_attn.attn"
    assert [x.model_copy(update={"name": ""}) for x in omni.layers] == [
        x.model_copy(update={"name": ""}) for x in flash.layers]
    # the MTP drafter (MiMoV2OmniMTP = MiMoV2MTP) keeps its own names
    assert [x.name for x in omni.mtp_layers] == ["model.mtp.layers.0.self_attn.attn"]
    assert any("encoder cache" in w for w in omni.warnings)
    # the same specs (Diff-KV backends included), so the same blocks and pages as MiMo-V2-Flash
    a, b = build(flash, h100_tp8(block_size=16)), build(omni, h100_tp8(block_size=16))
    assert [(p.kind, p.backend, p.spec) for p in a.layers] == [
        (p.kind, p.backend, p.spec) for p in b.layers]


def test_mimo_v2_omni_cli_check(tmp_path) -> None:
    import json

    from tests.models.helpers import check_h100_x8, edited

    path = tmp_path / "config.json"
    path.write_text(json.dumps(edited("XiaomiMiMo--MiMo-V2-Flash", ("architectures",),
                                      ["MiMoV2OmniForCausalLM"])))
    out = check_h100_x8(path, "--block-size", "16")
    # 9 full layers (4 KV heads / 8 ranks → 1) and 39 SWA layers (8 / 8 = 1), K 192 + V 128:
    # one 16-token page = 16 · 1 · (192 + 128) · 2 B = 10,240 B for every group
    assert {g["page_size_bytes"] for g in out["groups"]} == {10_240}
    assert any("encoder cache" in w for w in out["warnings"])
