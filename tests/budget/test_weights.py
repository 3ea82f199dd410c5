"""Weight bytes: exact from real safetensors files, estimated from real configs."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from kvplan.budget.weights import (
    Placement,
    ShardKind,
    classify_tensor,
    config_virtual_tensors,
    count_parameters,
    weight_bytes_from_config,
    weight_bytes_from_safetensors,
)
from kvplan.errors import ConfigError
from kvplan.units import GiB

CONFIGS = Path(__file__).parent.parent / "data" / "hf-configs"
PROFILES = Path(__file__).parents[2] / "kvplan" / "data" / "vllm-memory-profiles.jsonl"


def cfg(name: str, file: str = "config.json") -> dict:
    return json.loads((CONFIGS / name / file).read_text())


def read_header(path: Path) -> dict:
    """A safetensors file starts with a u64 little-endian header length, then that much JSON."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n].decode("utf-8"))


def data_bytes(path: Path) -> int:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return len(raw) - 8 - n


# --------------------------------------------------------------------------------------------
# (a) exact bytes from safetensors headers

V, H, FF, KV, HD, HEADS = 100, 16, 40, 2, 4, 4  # vocab 100 → padded to 128 rows for TP


def _layer(i: int) -> dict[str, np.ndarray]:
    p = f"model.layers.{i}"
    f16 = np.float16
    return {
        f"{p}.input_layernorm.weight": np.ones(H, f16),
        f"{p}.post_attention_layernorm.weight": np.ones(H, f16),
        f"{p}.self_attn.q_proj.weight": np.ones((HEADS * HD, H), f16),
        f"{p}.self_attn.k_proj.weight": np.ones((KV * HD, H), f16),
        f"{p}.self_attn.v_proj.weight": np.ones((KV * HD, H), f16),
        f"{p}.self_attn.o_proj.weight": np.ones((H, HEADS * HD), f16),
        f"{p}.self_attn.o_proj.bias": np.ones(H, np.float32),
        f"{p}.mlp.gate_proj.weight": np.ones((FF, H), f16),
        f"{p}.mlp.up_proj.weight": np.ones((FF, H), f16),
        f"{p}.mlp.down_proj.weight": np.ones((H, FF), f16),
    }


@pytest.fixture()
def tiny_checkpoint(tmp_path: Path) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
    shard1 = {"model.embed_tokens.weight": np.ones((V, H), np.float16), **_layer(0), **_layer(1)}
    shard2 = {**_layer(2), **_layer(3), "model.norm.weight": np.ones(H, np.float16),
              "lm_head.weight": np.ones((V, H), np.float16),
              # an FP8-style checkpoint piece: per-tensor scalar scale and int8/uint8/int32 payloads
              "model.layers.3.mlp.down_proj.weight_scale": np.ones((), np.float32),
              "model.layers.3.mlp.down_proj.input_scale": np.ones((1,), np.float32),
              "model.layers.2.mlp.experts.0.qweight": np.ones((H, FF // 8), np.int32),
              "model.layers.2.mlp.gate.weight": np.ones((8, H), np.uint8)}
    save_file(shard1, str(tmp_path / "model-00001-of-00002.safetensors"),
              metadata={"format": "pt"})
    save_file(shard2, str(tmp_path / "model-00002-of-00002.safetensors"))
    headers = {p.name: read_header(p) for p in sorted(tmp_path.glob("*.safetensors"))}
    for p in tmp_path.glob("*.safetensors"):
        assert sum(b - a for a, b in (v["data_offsets"] for k, v in headers[p.name].items()
                                      if k != "__metadata__")) == data_bytes(p)
    return headers, {**shard1, **shard2}


def test_exact_bytes_from_real_safetensors_files(tiny_checkpoint):
    headers, tensors = tiny_checkpoint
    wb = weight_bytes_from_safetensors(headers)
    assert not wb.estimated
    assert wb.total_bytes == sum(a.nbytes for a in tensors.values())
    by_dtype: dict[str, int] = {}
    names = {np.dtype(np.float16): "F16", np.dtype(np.float32): "F32", np.dtype(np.int32): "I32",
             np.dtype(np.uint8): "U8"}
    for a in tensors.values():
        by_dtype[names[a.dtype]] = by_dtype.get(names[a.dtype], 0) + a.nbytes
    assert wb.bytes_by_dtype == by_dtype
    assert wb.num_tensors == len(tensors)
    assert wb.num_layers == 4
    assert not wb.tied_embeddings
    assert "__metadata__" in headers["model-00001-of-00002.safetensors"]
    assert wb.parameter_count is None  # packed int32 payload: element count is not a param count
    assert wb.loaded_bytes == wb.total_bytes and wb.extra_bytes == 0


def test_tp_split_by_name(tiny_checkpoint):
    headers, t = tiny_checkpoint
    wb = weight_bytes_from_safetensors(headers, num_kv_heads=KV)

    def nb(*names):
        return sum(t[n].nbytes for n in names)

    layer_names = [n for n in t if n.startswith("model.layers.")]
    kv = [n for n in layer_names if ".k_proj." in n or ".v_proj." in n]
    replicated = [n for n in layer_names if "norm" in n or n.endswith("o_proj.bias")
                  or n.endswith(("weight_scale", "input_scale")) or ".mlp.gate." in n]
    sharded = [n for n in layer_names if n not in kv and n not in replicated]
    assert wb.kv_proj_bytes == nb(*kv)
    assert wb.replicated_bytes == nb(*replicated, "model.norm.weight")
    assert wb.sharded_bytes == nb(*sharded)
    assert wb.vocab_bytes == nb("model.embed_tokens.weight", "lm_head.weight")
    assert wb.per_rank_bytes(1) == wb.total_bytes
    # TP=4: vocab 100 rows → padded 128 → 32 rows per rank (2 B × 16 per row); sharded / 4;
    # k/v split over min(4, 2 KV heads) = 2; replicated whole
    row = H * 2
    expected = (2 * 32 * row + -(-nb(*sharded) // 4) + nb(*kv) // 2
                + nb(*replicated, "model.norm.weight"))
    assert wb.per_rank_bytes(4) == expected


def test_pp_split_and_tied_embeddings(tiny_checkpoint, tmp_path):
    headers, t = tiny_checkpoint
    wb = weight_bytes_from_safetensors(headers)
    r0 = wb.per_rank_bytes(1, pp_size=2, pp_rank=0)
    r1 = wb.per_rank_bytes(1, pp_size=2, pp_rank=1)
    assert r0 + r1 == wb.total_bytes
    first = sum(a.nbytes for n, a in t.items() if n.startswith(("model.layers.0.", "model.layers.1.")))
    assert r0 == first + t["model.embed_tokens.weight"].nbytes
    assert wb.per_rank_bytes(1, pp_size=2, pp_rank=0, pp_partition="1,3") == (
        t["model.embed_tokens.weight"].nbytes
        + sum(a.nbytes for n, a in t.items() if n.startswith("model.layers.0.")))
    assert wb.max_per_rank_bytes(1, pp_size=2) == max(r0, r1)
    # Tied: no lm_head tensor; the last PP stage loads its own copy of the embedding.
    tied = {n: a for n, a in t.items() if n != "lm_head.weight"}
    save_file(tied, str(tmp_path / "tied.safetensors"))
    wt = weight_bytes_from_safetensors({"tied.safetensors": read_header(tmp_path / "tied.safetensors")})
    assert wt.tied_embeddings
    emb = t["model.embed_tokens.weight"].nbytes
    assert wt.per_rank_bytes(1) == wt.total_bytes
    assert (wt.per_rank_bytes(1, pp_size=2, pp_rank=0) + wt.per_rank_bytes(1, pp_size=2, pp_rank=1)
            == wt.total_bytes + emb)


def test_mtp_layers_past_num_hidden_layers_are_not_loaded(tiny_checkpoint):
    headers, t = tiny_checkpoint
    wb = weight_bytes_from_safetensors(headers, num_layers=3)
    layer3 = sum(a.nbytes for n, a in t.items() if n.startswith("model.layers.3."))
    assert wb.extra_bytes == layer3
    assert wb.per_rank_bytes(1) == wb.total_bytes - layer3
    assert wb.per_rank_bytes(1, include_extra=True) == wb.total_bytes


def test_malformed_headers():
    with pytest.raises(ConfigError):
        weight_bytes_from_safetensors({})
    with pytest.raises(ConfigError):
        weight_bytes_from_safetensors({"a": {"x": {"dtype": "F16", "shape": [2]}}})
    with pytest.raises(ConfigError):
        weight_bytes_from_safetensors({"a": {"x": {"dtype": "F16", "shape": [2],
                                                   "data_offsets": [8, 4]}}})
    wb = weight_bytes_from_safetensors({"a": {"x": {"dtype": "F16", "shape": [3],
                                                    "data_offsets": [0, 4]}}})
    assert wb.total_bytes == 4 and any("do not match" in w for w in wb.warnings)


@pytest.mark.parametrize(("name", "shape", "place", "shard"), [
    ("model.embed_tokens.weight", (10, 4), Placement.EMBED, ShardKind.VOCAB),
    ("lm_head.weight", (10, 4), Placement.HEAD, ShardKind.VOCAB),
    ("model.norm.weight", (4,), Placement.HEAD, ShardKind.REPLICATED),
    ("model.layers.3.self_attn.q_proj.weight", (4, 4), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.self_attn.q_proj.bias", (4,), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.self_attn.k_proj.weight", (4, 4), Placement.LAYER, ShardKind.KV_HEADS),
    ("model.layers.3.self_attn.v_proj.bias", (4,), Placement.LAYER, ShardKind.KV_HEADS),
    ("model.layers.3.self_attn.o_proj.weight", (4, 4), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.self_attn.o_proj.bias", (4,), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.self_attn.q_norm.weight", (4,), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.input_layernorm.weight", (4,), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.self_attn.q_a_proj.weight", (4, 4), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.self_attn.kv_a_proj_with_mqa.weight", (4, 4), Placement.LAYER,
     ShardKind.REPLICATED),
    ("model.layers.3.self_attn.kv_b_proj.weight", (4, 4), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.self_attn.q_proj.weight_scale_inv", (2, 2), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.self_attn.q_proj.input_scale", (), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.mlp.gate.weight", (8, 4), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.mlp.gate.e_score_correction_bias", (8,), Placement.LAYER,
     ShardKind.REPLICATED),
    ("model.layers.3.mlp.experts.7.down_proj.weight", (4, 4), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.mlp.experts.gate_up_proj_blocks", (8, 4, 2, 16), Placement.LAYER,
     ShardKind.SHARDED),
    ("model.layers.3.mlp.experts.down_proj_bias", (8, 4), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.mlp.router.weight", (8, 4), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.mlp.shared_experts.gate_proj.weight", (4, 4), Placement.LAYER,
     ShardKind.SHARDED),
    ("model.layers.3.mlp.shared_expert_gate.weight", (1, 4), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.mixer.in_proj.weight", (4, 4), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.mixer.A_log", (4,), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.mixer.norm.weight", (4,), Placement.LAYER, ShardKind.SHARDED),
    ("model.layers.3.linear_attn.norm.weight", (4,), Placement.LAYER, ShardKind.REPLICATED),
    ("model.layers.3.self_attn.sinks", (4,), Placement.LAYER, ShardKind.SHARDED),
    ("model.language_model.layers.3.mlp.down_proj.weight", (4, 4), Placement.LAYER,
     ShardKind.SHARDED),
    ("mtp.layers.0.mlp.up_proj.weight", (4, 4), Placement.EXTRA, ShardKind.SHARDED),
    ("visual.blocks.0.attn.qkv.weight", (12, 4), Placement.OTHER, ShardKind.SHARDED),
    ("model.rotary_emb.inv_freq", (4,), Placement.OTHER, ShardKind.REPLICATED),
])
def test_classification(name, shape, place, shard):
    p, _, s = classify_tensor(name, shape)
    assert (p, s) == (place, shard)


# --------------------------------------------------------------------------------------------
# (b) parameter counts from real configs vs the totals the model families publish

PUBLISHED = [
    ("meta-llama--Llama-3.1-8B", 8.03e9, None),
    ("meta-llama--Llama-3.1-70B", 70.6e9, None),
    ("Qwen--Qwen3-8B", 8.2e9, None),
    ("Qwen--Qwen3-30B-A3B", 30.5e9, None),
    ("Qwen--Qwen2.5-7B", 7.61e9, None),
    ("mistralai--Mistral-7B-v0.1", 7.24e9, None),
    ("deepseek-ai--DeepSeek-V3", 671e9, 685e9),  # + 14B MTP module = 685B in the checkpoint
    ("moonshotai--Kimi-K2-Instruct", 1.04e12, None),
    ("openai--gpt-oss-20b", 20.9e9, None),
    ("Qwen--Qwen3-Next-80B-A3B-Thinking", 80e9, None),
    ("nvidia--MiniMax-M2.5-NVFP4", 230e9, None),
    ("XiaomiMiMo--MiMo-V2-Flash", 309e9, None),
    ("nvidia--Nemotron-H-56B-Base-8K", 56e9, None),
    ("Qwen--Qwen3.5-397B-A17B", 397e9, None),
]


@pytest.mark.parametrize(("name", "published", "checkpoint"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_parameter_count_matches_published_total(name, published, checkpoint):
    pc = count_parameters(cfg(name))
    assert abs(pc.total / published - 1) < 0.02, (pc.total, published)
    if checkpoint:
        assert abs(pc.checkpoint_total / checkpoint - 1) < 0.02
        assert 13e9 < pc.extra < 15e9  # DeepSeek's MTP module (layer 61 + its embed/head copies)
    wb = weight_bytes_from_config(cfg(name))
    assert wb.estimated and "estimate" in wb.method
    assert wb.parameter_count == pc.total


def test_llama_8b_exact_count_and_bf16_bytes():
    pc = count_parameters(cfg("meta-llama--Llama-3.1-8B"))
    assert pc.total == 8_030_261_248
    assert pc.embedding == pc.lm_head == 128256 * 4096
    assert pc.attention == 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024)
    assert pc.mlp == 32 * 3 * 4096 * 14336
    assert pc.norms == 65 * 4096
    assert pc.experts == pc.router == pc.extra == 0
    wb = weight_bytes_from_config(cfg("meta-llama--Llama-3.1-8B"))
    assert wb.total_bytes == 2 * pc.total
    assert wb.bytes_by_dtype == {"BF16": 2 * pc.total}


def test_moe_breakdowns():
    q = count_parameters(cfg("Qwen--Qwen3-30B-A3B"))
    assert q.experts == 48 * 128 * 3 * 2048 * 768
    assert q.router == 48 * 128 * 2048
    ds = count_parameters(cfg("deepseek-ai--DeepSeek-V3"))
    assert ds.experts == 58 * 256 * 3 * 7168 * 2048  # first_k_dense_replace = 3
    assert ds.mlp == 3 * 3 * 7168 * 18432 + 58 * 3 * 7168 * 2048  # dense layers + shared experts
    mla = (7168 * 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 * 128 * 256 + 128 * 128 * 7168)
    assert ds.attention == 61 * mla
    g = count_parameters(cfg("openai--gpt-oss-20b"))
    assert g.experts == 24 * 32 * (2880 * 5760 + 5760 + 2880 * 2880 + 2880)


def test_nested_text_config_and_mtp_and_vision():
    pc = count_parameters(cfg("Qwen--Qwen3.5-27B"))
    assert 26.5e9 < pc.total < 28.5e9
    assert pc.other > 0.2e9  # vision tower (estimated as a ViT)
    assert pc.extra > 0  # mtp_num_hidden_layers = 1
    no_vis = count_parameters(cfg("Qwen--Qwen3.5-27B"), include_vision=False)
    assert no_vis.total == pc.total - pc.other


def test_fields_transformers_defaults_are_not_required():
    # {"model_type": "llama"} alone: LlamaConfig's defaults are the Llama-2-7B shape — hidden 4096,
    # 32 layers, 32 heads, intermediate 11008, vocab 32000, untied head. Per layer
    # 4·4096² (q,k,v,o) + 3·4096·11008 (gate, up, down) + 2·4096 (norms) = 202,383,360;
    # × 32 = 6,476,267,520; + 2·32000·4096 (embedding + head) + 4096 (final norm) = 6,738,415,616
    assert count_parameters({"model_type": "llama"}).total == 6_738_415_616


def test_every_config_can_be_estimated():
    for d in sorted(p for p in CONFIGS.iterdir() if p.is_dir()):
        c = json.loads((d / "config.json").read_text())
        hq = json.loads((d / "hf_quant_config.json").read_text()) \
            if (d / "hf_quant_config.json").exists() else None
        method = "eagle3" if "EAGLE3" in d.name else "dflash" if "DFlash" in d.name else None
        wb = weight_bytes_from_config(c, hf_quant_config=hq, draft_method=method)
        assert wb.total_bytes > 0 and wb.estimated, d.name
        assert wb.per_rank_bytes(8) < wb.per_rank_bytes(1)


def test_missing_fields_are_config_errors():
    with pytest.raises(ConfigError):
        count_parameters({"model_type": "no_such_model_type"})
    with pytest.raises(ConfigError):
        count_parameters([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        weight_bytes_from_config(cfg("meta-llama--Llama-3.1-8B"), scheme="fp3")


# --------------------------------------------------------------------------------------------
# bytes by quantization scheme (hand-computed on a small config)

TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
# per layer: q 256x256, k 128x256, v 128x256, o 256x256, gate/up 512x256, down 256x512
LINEARS = [(256, 256), (128, 256), (128, 256), (256, 256), (512, 256), (512, 256), (256, 512)] * 2
LINEAR_N = sum(o * i for o, i in LINEARS)
OTHER_N = 2 * 1000 * 256 + 5 * 256  # embed + lm_head + 4 layer norms + final norm


def _cdiv(a, b):
    return -(-a // b)


def test_scheme_bytes_bf16_and_fp8():
    assert weight_bytes_from_config(TINY).total_bytes == 2 * (LINEAR_N + OTHER_N)
    fp8 = dict(TINY, quantization_config={"quant_method": "fp8", "weight_block_size": [128, 128]})
    scales = sum(_cdiv(o, 128) * _cdiv(i, 128) for o, i in LINEARS) * 4
    wb = weight_bytes_from_config(fp8)
    assert wb.total_bytes == LINEAR_N + scales + 2 * OTHER_N
    assert wb.bytes_by_dtype["F8_E4M3"] == LINEAR_N
    assert wb.bytes_by_dtype["F32"] == scales
    per_tensor = dict(TINY, quantization_config={"quant_method": "fp8"})
    assert weight_bytes_from_config(per_tensor).total_bytes == LINEAR_N + 8 * 14 + 2 * OTHER_N


def test_scheme_bytes_nvfp4_mxfp4_awq_gptq():
    n = len(LINEARS)
    nvfp4 = weight_bytes_from_config(TINY, hf_quant_config={"quantization": {
        "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}})
    assert nvfp4.total_bytes == LINEAR_N // 2 + LINEAR_N // 16 + 8 * n + 2 * OTHER_N
    awq = dict(TINY, quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128})
    groups = sum((i // 128) * o for o, i in LINEARS)
    assert weight_bytes_from_config(awq).total_bytes == (
        LINEAR_N // 2 + groups // 2 + groups * 2 + 2 * OTHER_N)
    gptq = dict(TINY, quantization_config={"quant_method": "gptq", "bits": 4, "group_size": 128})
    g_idx = sum(4 * i for _, i in LINEARS)
    assert weight_bytes_from_config(gptq).total_bytes == (
        LINEAR_N // 2 + groups // 2 + groups * 2 + g_idx + 2 * OTHER_N)
    mx = dict(TINY, quantization_config={"quant_method": "mxfp4"})  # experts only: dense = bf16
    assert weight_bytes_from_config(mx).total_bytes == 2 * (LINEAR_N + OTHER_N)
    assert weight_bytes_from_config(TINY, scheme="nvfp4").total_bytes == nvfp4.total_bytes


def test_excluded_modules_stay_unquantized():
    fp8 = dict(TINY, quantization_config={"quant_method": "fp8",
                                          "modules_to_not_convert": ["model.layers.*.self_attn"]})
    mlp = [(512, 256), (512, 256), (256, 512)] * 2
    attn_n = LINEAR_N - sum(o * i for o, i in mlp)
    mlp_n = sum(o * i for o, i in mlp)
    assert weight_bytes_from_config(fp8).total_bytes == mlp_n + 8 * 6 + 2 * (attn_n + OTHER_N)


def test_real_quantized_checkpoints():
    # gpt-oss-20b: MXFP4 experts (0.5 B + one e8m0 scale per 32), everything else bf16;
    # the published checkpoint is 13.8 GB.
    g = weight_bytes_from_config(cfg("openai--gpt-oss-20b"))
    assert abs(g.total_bytes / 13.76e9 - 1) < 0.03
    assert "mxfp4" in g.method
    # DeepSeek-V3 FP8 with 128x128 block scales: 1 byte per linear parameter, bf16 embeddings,
    # norms and routers, fp32 scales: just over 1 byte per parameter of the 685B checkpoint
    ds = weight_bytes_from_config(cfg("deepseek-ai--DeepSeek-V3"))
    pc = count_parameters(cfg("deepseek-ai--DeepSeek-V3"))
    assert 1.0 < ds.total_bytes / pc.checkpoint_total < 1.02
    assert ds.bytes_by_dtype["F32"] == sum(  # scale_inv per 128x128 block, fp32
        4 * -(-o // 128) * -(-i // 128) * vt.count
        for vt in config_virtual_tensors(cfg("deepseek-ai--DeepSeek-V3"))[0]
        if vt.role == "linear" for o, i in [vt.shape])
    # Llama-3.1-70B ModelOpt FP8 (hf_quant_config.json): linears 1 B, lm_head excluded
    m = weight_bytes_from_config(cfg("nvidia--Llama-3.1-70B-Instruct-FP8"),
                                 hf_quant_config=cfg("nvidia--Llama-3.1-70B-Instruct-FP8",
                                                     "hf_quant_config.json"))
    lp = count_parameters(cfg("nvidia--Llama-3.1-70B-Instruct-FP8"))
    linear = lp.attention + lp.mlp
    assert m.total_bytes == linear + 8 * 80 * 7 + 2 * (lp.total - linear)
    # ModelOpt NVFP4 DeepSeek with excluded MLA projections: between 0.5 and 1 B per parameter
    nv = weight_bytes_from_config(cfg("nvidia--DeepSeek-V3.1-NVFP4"),
                                  hf_quant_config=cfg("nvidia--DeepSeek-V3.1-NVFP4",
                                                      "hf_quant_config.json"))
    assert 0.5 * pc.checkpoint_total < nv.total_bytes < 0.7 * pc.checkpoint_total
    # ModelOpt MIXED_PRECISION (FP8 attention/GDN, NVFP4 MLP) nested under language_model
    mixed = weight_bytes_from_config(cfg("nvidia--Qwen3.6-27B-NVFP4"),
                                     hf_quant_config=cfg("nvidia--Qwen3.6-27B-NVFP4",
                                                         "hf_quant_config.json"))
    assert "MIXED" in mixed.method and {"F8_E4M3", "U8", "BF16"} <= set(mixed.bytes_by_dtype)
    bf16 = weight_bytes_from_config(cfg("Qwen--Qwen3.5-27B"))
    assert 0.4 < mixed.total_bytes / bf16.total_bytes < 0.6


def _logged_weights() -> list[dict]:
    return [json.loads(line) for line in PROFILES.read_text().splitlines()
            if '"vllm_version": "0.19.0"' in line]


@pytest.mark.parametrize(("model", "config"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama--Llama-3.1-8B"),
    ("Qwen/Qwen2.5-7B-Instruct", "Qwen--Qwen2.5-7B"),
    ("Qwen/Qwen3-8B", "Qwen--Qwen3-8B"),
    ("Qwen/Qwen3-30B-A3B", "Qwen--Qwen3-30B-A3B"),
])
def test_per_rank_estimate_matches_vllm_logged_weights(model, config):
    wb = weight_bytes_from_config(cfg(config))
    rows = [r for r in _logged_weights() if r["model"] == model]
    assert rows
    for r in rows:
        pp = r["flags"].get("pipeline_parallel_size") or 1
        est = wb.max_per_rank_bytes(r["tp"], pp_size=pp) / GiB
        assert abs(est / r["weights_gib"] - 1) < 0.01, (r["tp"], pp, est, r["weights_gib"])


def test_draft_heads_use_the_same_functions():
    c = cfg("SafeAILab--EAGLE3-LLaMA3.1-8B-draft-training-config")
    pc = count_parameters(c, draft_method="eagle3")
    h, dv, v = 4096, 32000, 128256
    attn = 2 * h * 4096 + 2 * 2 * h * 1024 + 4096 * h  # q/k/v take 2·hidden inputs
    expected = attn + 3 * h * 14336 + 3 * h * h + dv * h + dv + v + 3 * h
    assert pc.total == expected
    assert pc.embedding == 0  # shared with the target
    wb = weight_bytes_from_config(c, draft_method="eagle3")
    assert wb.total_bytes == 2 * (expected - dv - v) + 8 * dv + v  # fp16, int64 d2t, bool t2d
    d = cfg("z-lab--Qwen3.8-27B-DFlash2")
    dflash = count_parameters(d, draft_method="dflash")
    assert dflash.embedding == dflash.lm_head == 0
    h = d["hidden_size"]
    assert dflash.other == h * len(d["dflash_config"]["target_layer_ids"]) * h + h  # fc + its norm
    tensors, warnings, layers = config_virtual_tensors(d, draft_method="dflash")
    assert layers == d["num_hidden_layers"] and any("shared" in w for w in warnings)
    with pytest.raises(ConfigError):
        count_parameters(d, draft_method="medusa")
