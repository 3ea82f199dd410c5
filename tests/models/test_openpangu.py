"""openPangu (PanguEmbeddedForCausalLM, PanguProMoEV2ForCausalLM, PanguUltraMoEForCausalLM).

vLLM 0.34.0 models/openpangu.py (same in 0.31–0.33) OpenPanguDecoderLayer: MLA when the four MLA
fields are present, else StaticSinkAttention when param_sink_number > 0 (SinkFullAttentionSpec,
static_sink_attention.py get_kv_cache_spec), else plain Attention with interleaved_sliding_window.
Real config: FreedomIntelligence--openPangu-Embedded-7B (plain). No published sink or MLA
config was found offline: the sink and MLA configs below are hand-made, to exercise those paths.
"""

from __future__ import annotations

import json

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.serialize import contract_dict
from kvplan.errors import UnsupportedError
from kvplan.models import describe_model
from tests.golden import ORACLE_2026, VERSIONS, contract, load
from tests.models.helpers import HF_CONFIGS, check_h100_x8, h100_tp8, one, real

EMBEDDED_7B = "FreedomIntelligence--openPangu-Embedded-7B"

# hand-made: 6 layers of static-sink attention (the fields OpenPanguSinkAttention reads)
SINK = {"architectures": ["PanguProMoEV2ForCausalLM"], "num_hidden_layers": 6,
        "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
        "qk_nope_dim": 128, "qk_rope_dim": 64, "v_channels": 128, "param_sink_number": 128,
        "interleaved_sliding_window": [4096, None], "max_position_embeddings": 131072,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16"}
# hand-made: MLA (the fields OpenPanguMLAAttention reads) with one MTP layer
MLA = {"architectures": ["PanguUltraMoEForCausalLM"], "model_type": "pangu_ultra_moe",
       "num_hidden_layers": 4, "hidden_size": 7680, "num_attention_heads": 128,
       "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
       "qk_rope_head_dim": 64, "v_head_dim": 128, "num_nextn_predict_layers": 1,
       "max_position_embeddings": 131072, "rope_theta": 25600000.0, "torch_dtype": "bfloat16"}


def test_embedded_7b_is_plain_full_attention() -> None:
    m = real(EMBEDDED_7B)
    assert m.family == "openpangu"
    # 34 layers, num_key_value_heads 8, head = hidden 4096 / 32 heads = 128, no window
    assert m.kind_counts() == {"full_attention": 34}
    assert one((x.num_kv_heads, x.head_size, x.sliding_window) for x in m.layers) == (8, 128, None)


def test_embedded_7b_cli_h100_x8() -> None:
    # its config class is the checkpoint's own code (auto_map): vLLM needs --trust-remote-code
    out = check_h100_x8(HF_CONFIGS / EMBEDDED_7B / "config.json", "--max-model-len", "32768",
                        "--trust-remote-code")
    # per rank 8 / 8 = 1 KV head · (128 + 128) · 2 B = 512 B/token; 0.34's default block 64
    # (CacheConfig.DEFAULT_BLOCK_SIZE, FlashAttention takes it) → 32,768 B pages; 34 layers in
    # one group; 32768 / 64 = 512 blocks per request
    assert [(g["kind"], g["num_layers"], g["block_size_tokens"], g["page_size_bytes"])
            for g in out["groups"]] == [("full_attention", 34, 64, 32768)]
    assert out["total_blocks_per_request"] == 512
    # 40 GiB / (34 · 32,768 B) = 38,550 blocks (floor of 38,550.59)
    assert out["num_blocks"] == 38550


def test_interleaved_window_list() -> None:
    cfg = json.loads((HF_CONFIGS / EMBEDDED_7B / "config.json").read_text())
    cfg["interleaved_sliding_window"] = [4096, 4096, None]  # layer i gets entry i % 3
    m = describe_model(cfg, source="hand")
    assert [x.sliding_window for x in m.layers[:6]] == [4096, 4096, None, 4096, 4096, None]


def test_sink_layers() -> None:
    m = describe_model(SINK, source="sink")
    # every layer: SinkFullAttentionSpec, K 64 + 128 = 192, V 128, 128 sink tokens; the window
    # list does not reach the spec (StaticSinkAttention.get_kv_cache_spec ignores it)
    assert m.kind_counts() == {"sink_full_attention": 6}
    assert one((x.num_kv_heads, x.head_size, x.head_size_v, x.sink_len) for x in m.layers) == (
        8, 192, 128, 128)


@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_sink_plans_like_vllm(version: str, fix: bool) -> None:
    # golden-oracle-2026 case a07: the same six sink layers given to vLLM's own planner
    exp = load(ORACLE_2026 / "expected" / f"a07_openpangu_sink_tp8.{version}"
               f"{'.patched' if fix else ''}.json")
    res = build(describe_model(SINK, source="sink"),
                h100_tp8(vllm_version=version, with_fix=fix, max_model_len=131072, block_size=16))
    assert contract(contract_dict(plan(res.planner_input), extra_spec_keys=True)) == contract(exp)


def test_sink_refusals() -> None:
    m = describe_model(SINK, source="sink")
    # 8 KV heads over TP 16: OpenPanguSinkAttention raises (no replication)
    with pytest.raises(UnsupportedError, match="less than tensor parallel size 16"):
        build(m, h100_tp8(tensor_parallel_size=16, max_model_len=131072))
    # 128 sink tokens over 48-token blocks: SinkFullAttentionManager asserts 128 % 48 == 0
    with pytest.raises(UnsupportedError, match="not a whole number of 48-token blocks"):
        build(m, h100_tp8(max_model_len=131072, block_size=48))


def test_mla_layers_and_mtp() -> None:
    m = describe_model(MLA, source="mla")
    # MLA wins over everything: latent 512 + rope 64 = 576 per token, one "head"
    assert m.use_mla and m.kind_counts() == {"mla": 4}
    assert one((x.kv_lora_rank, x.qk_rope_head_dim, x.head_size) for x in m.layers) == (512, 64, 576)
    # pangu_ultra_moe's MTP module: model.layers.4 (num_hidden_layers + 0)
    assert [x.name for x in m.mtp_layers] == ["model.layers.4.self_attn.attn"]


def test_non_causal_is_refused() -> None:
    with pytest.raises(UnsupportedError, match="is_causal"):
        describe_model({**SINK, "param_sink_number": 0, "is_causal": False}, source="enc")
