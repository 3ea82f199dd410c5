"""DeepSeek-V4-Flash / -Pro (DeepseekV4ForCausalLM) on the CUDA FlashMLA path.

What vLLM does (0.34.0 wheel; 0.31–0.33 build the same specs, and their planners give the same
groups — vLLM's own planner on these specs, research cases dsv4_flash_tp8 0.31/0.32/0.34):
- transformers configuration_deepseek_v4.py: layer_types from compress_ratios
  (0 → sliding, 4 → compressed_sparse, 128 → heavily_compressed), cut to num_hidden_layers;
  models/deepseek_v4/attention.py L236–243: ratio = max(1, compress_rates[type]), MTP layers 1.
- nvidia/model.py L539 _select_dsv4_attn_cls → FlashMLA; attention.py L95
  _resolve_dsv4_kv_cache_dtype: kv auto → fp8 → fp8_ds_mla (584-byte records).
- Per decoder layer, in registration order: ratio 4 → indexer K cache (attention.py L868, 132 B
  per compressed state, tokens_per_state 4) and its compressor ring (compressor.py L179);
  every layer → .swa_cache (sparse_swa.py L120: SlidingWindowMLASpec, block 64, window 128);
  ratio > 1 → the compressed MLA cache (attention.py L817: block = cache block, tokens_per_state
  = ratio) and its compressor ring (fp32, block 4 for C4 / 8 for C128, window 8 / 128).
  All pages are padded to a multiple of 576 (alignment), all layers TP-replicated.
- Phase 1 block: FlashMLA DSV4 [256] + indexer [256] + SWA [MultipleOf(32)] + compressor
  [MultipleOf(1)] → 256. The indexer backend only takes BLHNC / BLNHC layouts
  (backends/mla/indexer.py L303) → kv_cache_planning.py L958 _get_packed_kv_cache_groups.
"""

from __future__ import annotations

import json

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import MLAAttentionSpec, SlidingWindowMLASpec
from kvplan.errors import InputError
from kvplan.models.description import LayerKind
from tests.models.helpers import HF_CONFIGS, check_h100_x8, h100_tp8, real

FLASH, PRO = "deepseek-ai--DeepSeek-V4-Flash", "deepseek-ai--DeepSeek-V4-Pro"


def test_v4_flash_layer_caches() -> None:
    m = real(FLASH)
    # compress_ratios[:43]: 0, 0, then 4 (even 2…42: 21 layers) / 128 (odd 3…41: 20 layers)
    # → 43 SWA caches; 41 compressed MLA caches; 41 + 21 compressor rings; 21 indexers
    assert m.kind_counts() == {"sliding_window_mla": 43, "mla": 41, "compressor_state": 62,
                               "mla_indexer": 21}
    assert [x.name for x in m.layers if x.index == 2] == [
        "model.layers.2.attn.indexer.k_cache", "model.layers.2.attn.indexer.compressor.state_cache",
        "model.layers.2.attn.swa_cache", "model.layers.2.attn",
        "model.layers.2.attn.compressor.state_cache"]
    by_name = {x.name: x for x in m.layers}
    assert by_name["model.layers.3.attn"].tokens_per_state == 128
    # compressor rings: 2 · coff · head_dim with coff = 2 for C4, 1 for C128; window coff · ratio
    c4 = by_name["model.layers.2.attn.compressor.state_cache"]
    c128 = by_name["model.layers.3.attn.compressor.state_cache"]
    idx_ring = by_name["model.layers.2.attn.indexer.compressor.state_cache"]
    assert (c4.head_size, c4.sliding_window, c4.block_size) == (2048, 8, 4)
    assert (c128.head_size, c128.sliding_window, c128.block_size) == (1024, 128, 8)
    assert (idx_ring.head_size, idx_ring.sliding_window) == (512, 8)  # index_head_dim 128
    # num_nextn_predict_layers 1 → layer 43 with ratio 1: its SWA cache only
    assert [(x.name, x.kind) for x in m.mtp_layers] == [
        ("model.layers.43.attn.swa_cache", LayerKind.SLIDING_WINDOW_MLA)]


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.0", "0.34.0"])
def test_v4_flash_pages_on_h100(version) -> None:
    res = build(real(FLASH), h100_tp8(vllm_version=version))
    assert res.kv_cache_dtype == "fp8_ds_mla" and res.block_size == 256
    specs = {lp.name: lp.spec for lp in res.layers}
    swa = specs["model.layers.0.attn.swa_cache"]
    assert isinstance(swa, SlidingWindowMLASpec)
    # SWA cache @64: 64 · 584 = 37,376 → round_up(·, 576) = 37,440
    assert (swa.block_size, swa.sliding_window, swa.page_size_bytes) == (64, 128, 37440)
    c4, c128 = specs["model.layers.2.attn"], specs["model.layers.3.attn"]
    assert isinstance(c4, MLAAttentionSpec) and isinstance(c128, MLAAttentionSpec)
    # C4 @256: 256 / 4 = 64 states · 584 = 37,376 → 37,440; C128: 2 · 584 = 1,168 → 1,728
    assert (c4.block_size, c4.page_size_bytes, c128.page_size_bytes) == (256, 37440, 1728)
    # indexer @256: 64 states · 132 = 8,448 → 8,640
    assert specs["model.layers.2.attn.indexer.k_cache"].page_size_bytes == 8640
    # rings: C4 4 · 2048 · 4 B = 32,768 → 32,832; C128 8 · 1024 · 4 = 32,768 → 32,832;
    # indexer ring 4 · 512 · 4 = 8,192 → 8,640
    assert specs["model.layers.2.attn.compressor.state_cache"].page_size_bytes == 32832
    assert specs["model.layers.3.attn.compressor.state_cache"].page_size_bytes == 32832
    assert specs["model.layers.2.attn.indexer.compressor.state_cache"].page_size_bytes == 8640
    assert len(specs) == 43 + 41 + 62 + 21


def test_bf16_kv_is_refused_as_vllm_does() -> None:
    # attention.py L113: the fp8_ds_mla layout only supports fp8 kv-cache
    with pytest.raises(InputError, match="only supports fp8"):
        build(real(FLASH), h100_tp8(kv_cache_dtype="bfloat16"))


def _check(name: str) -> dict:
    return check_h100_x8(HF_CONFIGS / name / "config.json")


def test_v4_flash_cli_h100_x8() -> None:
    out = _check(FLASH)
    assert out["grouping_path"] == "packed"
    # groups as vLLM's planner makes them (research case dsv4_flash_tp8): SWA caches in two
    # groups (22 / 21 layers), every block-256 cache in one, C4 rings (block 4), C128 rings (8)
    assert [(g["num_layers"], g["block_size_tokens"], g["page_size_bytes"]) for g in
            out["groups"]] == [(22, 64, 22 * 37440), (21, 64, 21 * 37440),
                               (62, 256, 21 * 37440 + 21 * 8640 + 20 * 1728),
                               (42, 4, 21 * 32832 + 21 * 8640), (20, 8, 20 * 32832)]
    # pool stride = the widest group: 786,240 + 181,440 + 34,560 = 1,002,240 B
    assert out["pool_bytes_per_block"] == [1_002_240]
    # blocks per request (16,384 tokens in flight): SWA cdiv(127 + 16384, 64) + 1 = 259 (×2),
    # full-length 262144 / 256 = 1024, C4 rings cdiv(7 + 16384, 4) + 1 = 4099,
    # C128 rings cdiv(127 + 16384, 8) + 1 = 2065 → 7706
    assert [g["blocks_per_request"] for g in out["groups"]] == [259, 259, 1024, 4099, 2065]
    assert out["total_blocks_per_request"] == 7706
    assert out["capacity_log_line"] == ("GPU KV cache size: 1,457,780 tokens, Maximum "
                                        "concurrency for 262,144 tokens per request: 5.56x")


def test_v4_pro_cli_h100_x8() -> None:
    out = _check(PRO)
    # 61 layers: compress_ratios 128, 128, then 4 (even 2…60: 30) / 128 (odd 3…59: 29 + 2 = 31)
    # full-length group: 30 · 37,440 + 30 · 8,640 + 31 · 1,728 = 1,435,968 B
    assert out["pool_bytes_per_block"] == [1_435_968]
    assert [(g["num_layers"], g["block_size_tokens"]) for g in out["groups"]] == [
        (31, 64), (30, 64), (91, 256), (31, 8), (60, 4)]
    assert out["total_blocks_per_request"] == 7706
    # vLLM 0.34.0's own planner on these 243 specs (oracle) logs the same
    assert out["capacity_log_line"] == ("GPU KV cache size: 1,017,449 tokens, Maximum "
                                        "concurrency for 262,144 tokens per request: 3.88x")


def test_dspark_draft_adds_three_swa_caches(tmp_path) -> None:
    # No published DSpark draft config was found (issue-10 research: a test stub only), so the
    # draft here is the V4-Flash config with the DSpark fields set on purpose:
    # architectures DSparkDraftModel, no n_mtp_layers → 3 draft layers (nvidia/dspark.py L106)
    draft = dict(json.loads((HF_CONFIGS / FLASH / "config.json").read_text()),
                 architectures=["DSparkDraftModel"], dspark_target_layer_ids=[40, 41, 42])
    path = tmp_path / "dspark.json"
    path.write_text(json.dumps(draft))
    out = check_h100_x8(HF_CONFIGS / FLASH / "config.json", "--draft", str(path),
                        "--speculative-method", "dspark", "--num-speculative-tokens", "3")
    # draft layers model.layers.43–45 (num_hidden_layers 43 + i), ratio 1 → one SWA cache each
    # (37,440 B @64), joining the SWA groups: 22 + 1 and 21 + 2 → 23 layers each
    assert [(g["num_layers"], g["draft_layers"], g["page_size_bytes"]) for g in
            out["groups"][:2]] == [(23, 1, 23 * 37440), (23, 2, 23 * 37440)]
    # the widest group (block-256 caches) still sets the pool stride; vLLM's planner on the same
    # 170 specs (oracle, 0.31.0 and 0.34.0) gives the same capacity line
    assert out["pool_bytes_per_block"] == [1_002_240]
    assert out["capacity_log_line"] == ("GPU KV cache size: 1,457,780 tokens, Maximum "
                                        "concurrency for 262,144 tokens per request: 5.56x")


def test_v41_is_refused_not_guessed() -> None:
    # hand-made: V4-Flash's file under the V4.1 architecture (no V4.1 config is published)
    from kvplan.errors import UnsupportedError
    from kvplan.models import describe_model
    from tests.models.helpers import edited

    config = edited(FLASH, ("architectures",), ["DeepseekV41ForCausalLM"])
    with pytest.raises(UnsupportedError, match="DeepSeek-V4.1"):
        describe_model(config, source="v41")
