"""vLLM's own configuration classes (vLLM 0.34 `_CONFIG_REGISTRY`) win over transformers' class of
the same model type: kvplan's mirrors (kvplan/models/resolution/vllm_configs.py) give vLLM's plan.

The hand-made configs in tests/data/vllm-own-configs (PROVENANCE.md) leave fields to the class or
use the forms its __init__ rewrites; their goldens are vLLM 0.34.0's own start-up code
(/work/shared/vllm-e2e). The class-default configs are replayed by test_coverage_confirmed.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models import describe_model
from kvplan.models.resolution import accessors as acc
from kvplan.models.resolution.resolve import has_config_class, resolve
from kvplan.models.resolution.vllm_configs import VLLM_CONFIG_CLASSES, VLLM_OWN_CLASSES

ROOT = Path(__file__).resolve().parents[2]
OWN = ROOT / "tests" / "data" / "vllm-own-configs"
GOLDENS = sorted(OWN.glob("*/vllm-0.34.0.json"))


def test_there_are_goldens() -> None:
    assert {g.parent.name for g in GOLDENS} == {
        "alpamayo-nested", "beam-min", "beam-mixed", "hyv4-min", "ricursive-min"}


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.parent.name for g in GOLDENS])
def test_kvplan_equals_vllm(golden: Path) -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    want = json.loads(golden.read_text())
    f = want["flags"]
    res = CliRunner().invoke(app, [
        "check", str(ROOT / want["config"]), "-tp", str(f["tensor_parallel_size"]),
        "--max-model-len", str(f["max_model_len"]),
        "--max-num-batched-tokens", str(f["max_num_batched_tokens"]),
        "--kv-cache-memory", f["kv_cache_memory"], "--vllm", f["vllm"], "--gpu", f["gpu"],
        "--json"], env={"HF_HUB_OFFLINE": "1"})
    assert res.exit_code in (0, 1), res.stderr
    got = json.loads(res.stdout)["vllm_contract"]
    assert got["fits"] == want["fits"]
    assert [{k: g[k] for k in ("spec_type", "block_size", "num_layers", "page_size_bytes",
                               "layer_names")} for g in got["groups"]] == want["groups"]
    assert got["num_blocks"] == want["num_blocks"]
    assert got["max_concurrency"] == pytest.approx(want["max_concurrency"], rel=1e-9)
    assert got["max_model_len_after_planning"] == want["max_model_len_after_planning"]


def test_beam_head_dim_null_is_vllms_hidden_size_over_heads() -> None:
    # transformers' BeamConfig rejects head_dim null (strict int); vLLM's keeps it and
    # ModelConfig.get_head_size falls back to hidden_size // num_attention_heads
    r = resolve({"model_type": "beam", "head_dim": None, "hidden_size": 3072,
                 "num_attention_heads": 24}, "x")
    assert acc.head_size(r) == 128
    assert acc.num_hidden_layers(r) == 24 and acc.sliding_window(r) == 4096
    assert acc.layer_types(r) == ["sliding_attention"] * 24
    assert acc.derive_max_model_len(r) == (32768, "max_position_embeddings")


def test_beam_refuses_what_vllms_class_refuses() -> None:
    with pytest.raises(ConfigError, match="layer_types must contain one valid attention type"):
        resolve({"model_type": "beam", "num_hidden_layers": 2,
                 "layer_types": ["sliding_attention"]}, "x")


def test_hyv4_is_plain_mla_without_layer_types() -> None:
    r = resolve({"model_type": "hy_v4"}, "x")
    assert acc.layer_types(r) is None  # transformers' class derives 'indexed_attention' layers
    assert acc.is_deepseek_mla(r) and acc.head_size(r) == 512 + 64
    assert r.hf_text_config.head_dim == 64  # HYV4Config: head_dim is the RoPE slice


def test_hyv4_with_dsa_layers_is_refused() -> None:
    cfg = {"model_type": "hy_v4", "architectures": ["HYV4ForCausalLM"], "dtype": "bfloat16",
           "num_hidden_layers": 2, "layer_types": ["full_attention", "sparse_attention"]}
    with pytest.raises(UnsupportedError, match="layer kinds"):
        describe_model(cfg, source="x")


def test_alpamayo2_super_reads_the_text_config_under_vlm_config() -> None:
    text = json.loads((OWN / "alpamayo-nested" / "config.json").read_text())
    r = resolve(text, "x")
    assert r.model_type == "alpamayo2_super" and r.text_model_type == "qwen3_vl_text"
    assert acc.num_hidden_layers(r) == 36 and acc.total_num_kv_heads(r) == 8


def test_vllm_own_types_never_use_transformers_class() -> None:
    # dots3_note: vLLM's Dots3NoteConfig; transformers 5.25 has a class of that name too
    assert not has_config_class("dots3_note")
    with pytest.raises(UnsupportedError, match="its own Dots3NoteConfig"):
        resolve({"model_type": "dots3_note"}, "x")
    assert set(VLLM_CONFIG_CLASSES) <= set(VLLM_OWN_CLASSES)
    assert all(has_config_class(t) for t in VLLM_CONFIG_CLASSES)


def test_a_fast_adapters_missing_length_is_vllms_class_default(tmp_path: Path) -> None:
    # DoryForCausalLM's class-default config without max_position_embeddings: vLLM 0.34.0's
    # harness derives 8192 from vLLM's DoryConfig (transformers 5.25 has a DoryConfig too)
    import kvplan

    cfg = json.loads((ROOT / "tests/data/coverage-configs/DoryForCausalLM/config.json").read_text())
    cfg.pop("max_position_embeddings")
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    plan = kvplan.check(str(tmp_path), tensor_parallel_size=1, max_model_len=32768,
                        max_num_batched_tokens=8192, kv_cache_memory="40GiB", gpu="H100",
                        vllm="0.34.0")
    assert plan.refused_at_startup
    assert (plan.error_message or "").startswith(
        "User-specified max_model_len (32768) is greater than the derived max_model_len "
        "(max_position_embeddings=8192.0 or model_max_length=None in model's config.json).")
