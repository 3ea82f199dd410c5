"""Encoder-decoder speech models (kvplan.models.families.encdec): Whisper from its real configs, Canary and
Cohere ASR from small hand-made dicts (no real config.json of either was found: PROVENANCE.md).

Layer counts and pages are worked out by hand below; the plans equal vLLM's own planner on the
same layer mix (tests/data/golden-oracle-2026, cases a06/a07), every release, ± PR #53499.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvplan.engines.vllm.build import Deployment, build
from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.serialize import contract_dict
from kvplan.engines.vllm.specs import CrossAttentionSpec, FullAttentionSpec
from kvplan.errors import ConfigError, StartupError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from tests.golden import ORACLE_2026, VERSIONS, contract, load
from tests.models.helpers import HF_CONFIGS, edited, of_kind, real

LARGE_V3 = "openai--whisper-large-v3"
SMALL = "openai--whisper-small"


def _l4(**changes: object) -> Deployment:
    base: dict = dict(vllm_version="0.34.0", sm=89, gpu_name="NVIDIA L4",
                      gpu_total_memory_bytes=24 * 2**30, available_kv_bytes=2**30)
    base.update(changes)
    return Deployment(**base)


# ---- describing ---------------------------------------------------------------------------

def test_whisper_large_v3_layers_by_hand() -> None:
    d = real(LARGE_V3)
    # 32 decoder layers, each a self-attention then a cross-attention: 64 KV layers; the 32
    # encoder layers (MMEncoderAttention) have none. 20 heads of 1280 // 20 = 64, no GQA.
    assert len(d.layers) == 64
    assert [x.kind for x in d.layers[:4]] == [LayerKind.FULL_ATTENTION, LayerKind.CROSS_ATTENTION] * 2
    assert len(of_kind(d, LayerKind.CROSS_ATTENTION)) == 32
    assert {(x.num_kv_heads, x.head_size) for x in d.layers} == {(20, 64)}
    assert [x.index for x in d.layers[:4]] == [0, 0, 1, 1]
    assert d.layers[1].name == ".decoder.layers.0.layers.encoder_attn.attn"  # vLLM's own name
    # vLLM's derived length: max_target_positions 448 (no max_position_embeddings in Whisper)
    assert d.max_position_embeddings == 448 and d.dtype == "float16" and d.is_encoder_decoder
    assert any("encoder" in w and "not modelled" in w for w in d.warnings)


def test_whisper_reads_decoder_layers_not_num_hidden_layers() -> None:
    # whisper-small's file carries num_hidden_layers = encoder_layers (attribute map); vLLM's
    # WhisperDecoder builds decoder_layers: 2 decoder layers → 4 KV layers, not 24
    d = describe_model(edited(SMALL, ("decoder_layers",), 2), source="edited")
    assert len(d.layers) == 4
    # 768 // 12 = 64; float32 checkpoint runs in bfloat16 (--dtype auto)
    assert {x.head_size for x in real(SMALL).layers} == {64}


def test_whisper_heads_must_divide_d_model() -> None:
    with pytest.raises(ConfigError, match="divisible"):
        describe_model(edited(SMALL, ("decoder_attention_heads",), 7), source="edited")


CANARY = {  # hand-made: CanaryConfig layout, decoder values of CanaryDecoderConfig's defaults
    "architectures": ["CanaryForConditionalGeneration"], "model_type": "canary",
    "dtype": "bfloat16", "is_encoder_decoder": True,
    "decoder_config": {"model_type": "canary_decoder", "hidden_size": 1024,
                       "num_attention_heads": 8, "num_hidden_layers": 8,
                       "max_position_embeddings": 1024}}
COHERE = {  # hand-made: the NeMo-style layout vLLM's cohere_asr.py reads
    "architectures": ["CohereAsrForConditionalGeneration"], "model_type": "cohere_asr",
    "encoder": {"n_heads": 8, "d_model": 1280},
    "transf_decoder": {"config_dict": {"hidden_size": 1024, "num_attention_heads": 8,
                                       "num_layers": 8, "max_sequence_length": 1024}}}


def test_canary_and_cohere_layers_by_hand() -> None:
    for cfg, first in ((CANARY, "model.decoder.layers.0.self_attn.attn"),
                       (COHERE, "decoder.layers.0.layers.first_sub_layer.attn")):
        d = describe_model(cfg, source="hand-made")
        # 8 decoder layers × (self + cross), 8 heads of 1024 // 8 = 128; max length 1024
        assert len(d.layers) == 16 and len(of_kind(d, LayerKind.CROSS_ATTENTION)) == 8
        assert {(x.num_kv_heads, x.head_size) for x in d.layers} == {(8, 128)}
        assert d.layers[0].name == first and d.max_position_embeddings == 1024


def test_cohere_asr_refusals() -> None:
    with pytest.raises(ConfigError, match="transf_decoder"):
        describe_model({**COHERE, "transf_decoder": {}}, source="hand-made")
    no_layers = {"hidden_size": 1024, "num_attention_heads": 8}  # vLLM has no default for it
    with pytest.raises(ConfigError, match="num_layers"):
        describe_model({**COHERE, "transf_decoder": {"config_dict": no_layers}}, source="hm")
    with pytest.raises(ConfigError, match="same number of kv heads"):
        describe_model({**COHERE, "encoder": {"n_heads": 4}}, source="hand-made")


def test_canary_is_served_from_0_34_only() -> None:
    d = describe_model(CANARY, source="hand-made")
    with pytest.raises(UnsupportedError, match="0.34.0"):
        build(d, _l4(vllm_version="0.33.0"))
    assert build(d, _l4()).block_size == 64


# ---- specs and vLLM's enc-dec rules --------------------------------------------------------

def test_whisper_specs_per_rank_by_hand() -> None:
    res = build(real(LARGE_V3), _l4(tensor_parallel_size=4, block_size=16))
    cross = [p.spec for p in res.layers if isinstance(p.spec, CrossAttentionSpec)]
    full = [p.spec for p in res.layers if type(p.spec) is FullAttentionSpec]
    assert len(cross) == len(full) == 32
    # TP 4: 20 // 4 = 5 heads; page = 16 tokens × 5 × (64 + 64) × 2 B = 20,480
    assert {s.page_size_bytes for s in cross + full} == {20_480}
    assert res.max_model_len == 448


def test_cross_attention_demand_follows_batched_tokens() -> None:
    # L4 (24 GiB): vllm serve defaults 2048 batched tokens; the cross-attention holds
    # cdiv(2048, 64) = 32 blocks per request, self-attention cdiv(448, 64) = 7
    r = plan(build(real(LARGE_V3), _l4()).planner_input)
    assert [(type(g.group.spec).__name__, g.blocks_per_request) for g in r.groups] == [
        ("FullAttentionSpec", 7), ("CrossAttentionSpec", 32)]
    # --max-num-seqs 1: the default is capped at 1 × max_model_len = 448 → cdiv(448, 64) = 7
    r = plan(build(real(LARGE_V3), _l4(max_num_seqs=1)).planner_input)
    assert [g.blocks_per_request for g in r.groups] == [7, 7]


def test_encoder_decoder_startup_refusals() -> None:
    # no chunked prefill: vLLM's SchedulerConfig refuses batched tokens below max_model_len
    with pytest.raises(StartupError, match=r"max_num_batched_tokens \(256\) is smaller"):
        build(real(LARGE_V3), _l4(max_num_batched_tokens=256))
    with pytest.raises(StartupError, match="SupportsPP"):
        build(real(LARGE_V3), _l4(pipeline_parallel_size=2))
    # past max_target_positions: vLLM's max-length check
    with pytest.raises(StartupError, match="max_target_positions=448"):
        build(real(LARGE_V3), _l4(max_model_len=1024))


def test_cross_attention_backends() -> None:
    # FlashInfer has no ENCODER_DECODER support: on SM100 the causal self-attention takes it,
    # the cross-attention falls to FlashAttention
    res = build(real(LARGE_V3), _l4(sm=100))
    assert {(p.kind, p.backend) for p in res.layers} == {
        ("full_attention", "FLASHINFER"), ("cross_attention", "FLASH_ATTN")}
    with pytest.raises(UnsupportedError, match="ENCODER_DECODER"):
        build(real(LARGE_V3), _l4(sm=100, kv_cache_dtype="nvfp4"))


# ---- equal to vLLM's planner ---------------------------------------------------------------

@pytest.mark.parametrize("fix", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(("case", "gib"), [("a06_whisper_large_v3_small_gpu", 1),
                                           ("a07_whisper_large_v3_cross_exceeds", 0.3)])
def test_real_config_plans_like_vllm(case, gib, version, fix) -> None:
    exp = load(ORACLE_2026 / "expected" / f"{case}.{version}{'.patched' if fix else ''}.json")
    dep = _l4(vllm_version=version, with_fix=fix, block_size=16, max_num_batched_tokens=2048,
              available_kv_bytes=int(gib * 2**30))  # the oracle's int(GiB × 2^30)
    got = contract(contract_dict(plan(build(real(LARGE_V3), dep).planner_input),
                                 extra_spec_keys=True))
    assert got == contract(exp)


def test_whisper_small_weights_by_hand() -> None:
    from kvplan.budget.weights import weight_bytes_from_config
    cfg = json.loads((HF_CONFIGS / SMALL / "config.json").read_text())
    # d 768, ffn 3072, 80 mels, vocab 51865, 12 + 12 layers:
    # conv1 768·80·3 + 768 = 185,088; conv2 768·768·3 + 768 = 1,770,240; positions 1500·768 +
    # 448·768 = 1,496,064; tokens 51865·768 = 39,832,320 (proj_out tied);
    # attention 4·768² + 3·768 (no k bias) = 2,361,600; MLP 2·768·3072 + 3072 + 768 = 4,722,432;
    # encoder layer 2,361,600 + 4,722,432 + 2 LN·1,536 = 7,087,104 (× 12 = 85,045,248);
    # decoder layer 2 × 2,361,600 + 4,722,432 + 3 LN·1,536 = 9,450,240 (× 12 = 113,402,880);
    # 2 final LNs 3,072 → 241,734,912 (openai/whisper-small's published count)
    assert weight_bytes_from_config(cfg).parameter_count == 241_734_912


# ---- the CLI --------------------------------------------------------------------------------

def test_cli_check_whisper_on_a_small_gpu() -> None:
    from kvplan.cli import app
    path = HF_CONFIGS / LARGE_V3 / "config.json"
    res = CliRunner().invoke(app, ["check", str(path), "--gpu", "L4", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["fits"] and out["max_model_len"] == 448
    groups = {g["kind"]: g for g in out["groups"]}
    assert set(groups) == {"full_attention", "cross_attention"}
    cross = groups["cross_attention"]
    # 0.34 default block 64; page 64 × 20 × 128 × 2 B = 327,680; cdiv(2048, 64) = 32 blocks
    assert (cross["spec_type"], cross["num_layers"], cross["page_size_bytes"],
            cross["blocks_per_request"]) == ("CrossAttentionSpec", 32, 327_680, 32)
    assert any("encoder" in w and "not modelled" in w for w in out["warnings"])
