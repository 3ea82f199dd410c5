"""vLLM 0.34's drafters on DFlash's Qwen3 backbone (Qwen3 DSpark, Qwen3-Omni DSpark, XPress, Muse
Glimmer's assistant) and the extract_hidden_states cache, after a real Qwen3-8B target.

No published config of these drafters was found; the draft configs here are hand-made from vLLM
0.34's model code and transformers' config classes (named next to each). Every expected number
is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import UnsupportedError
from kvplan.models import describe_draft
from kvplan.models.description import LayerKind
from kvplan.models.drafts import hidden_state_draft, is_draft_architecture
from tests.models.helpers import HF_CONFIGS, one, read_config, real

TARGET = HF_CONFIGS / "Qwen--Qwen3-8B"  # 36 layers, 8 KV heads × 128, bf16, hidden 4096


def _qwen3_draft(arch: str, **extra):
    # a 5-layer Qwen3 drafter as qwen3_dspark.py / qwen3_xpress.py read it (fields of
    # Qwen3Config + dflash_config, markov_rank for DSpark): 8 KV heads × head_dim 128
    return {"architectures": [arch], "model_type": "qwen3", "dtype": "bfloat16",
            "hidden_size": 4096, "num_hidden_layers": 5, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "block_size": 16,
            "markov_rank": 256,
            "dflash_config": {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33]},
            **extra}


@pytest.mark.parametrize(("arch", "method"), [
    ("Qwen3DSparkModel", "dspark"), ("Qwen3OmniDSparkModel", "dspark"),
    ("DSparkDraftModel", "dspark"),  # qwen3 model_type: vLLM renames it Qwen3DSparkModel
    ("Qwen3XPressModel", "dflash"), ("DFlashQwen3XPressModel", "dflash"),
])
def test_dflash_backbone_drafters(arch: str, method: str) -> None:
    d = describe_draft(_qwen3_draft(arch), source="hand", target=real("Qwen--Qwen3-8B"))
    # Qwen3Config without use_sliding_window: all-full layer_types, no use_swa → 5 full layers
    assert d.kind_counts() == {"full_attention": 5}
    assert one((layer.num_kv_heads, layer.head_size) for layer in d.layers) == (8, 128)
    # numbered after the 36 target layers: model.layers.36 ... 40
    assert [layer.index for layer in d.layers] == [36, 37, 38, 39, 40]
    assert d.layers[0].name == "model.layers.36.self_attn.attn"
    assert d.draft_method == method


def test_qwen3_dspark_swa_layers_follow_dflash_rules() -> None:
    cfg = _qwen3_draft("Qwen3DSparkModel", layer_types=["sliding_attention", "full_attention"] * 2
                       + ["full_attention"], num_hidden_layers=5, sliding_window=4096,
                       use_sliding_window=True)
    d = describe_draft(cfg, source="hand", target=real("Qwen--Qwen3-8B"))
    # layer_types given: layers 0 and 2 sliding (window 4096, the top-level one), the rest full
    assert [layer.sliding_window for layer in d.layers] == [4096, None, 4096, None, None]


def test_muse_glimmer_assistant_takes_its_config_class_defaults() -> None:
    cfg = {"architectures": ["MuseGlimmerAssistantModel"], "model_type": "muse_glimmer_assistant"}
    d = describe_draft(cfg, source="hand", target=real("Qwen--Qwen3-8B"))
    # MuseGlimmerAssistantConfig: 5 layers, all sliding_attention, window 2048, 8 KV × 128
    assert d.kind_counts() == {"sliding_window": 5}
    assert one(layer.sliding_window for layer in d.layers) == 2048
    assert one((layer.num_kv_heads, layer.head_size) for layer in d.layers) == (8, 128)
    assert d.draft_method == "dflash"


def test_drafters_are_refused_as_targets_and_unmodelled_dspark_kinds_say_so() -> None:
    for arch in ("Qwen3DSparkModel", "Qwen3XPressModel", "MuseGlimmerAssistantModel",
                 "ExtractHiddenStatesModel", "Gemma4DSparkModel", "K3DSparkModel"):
        assert is_draft_architecture((arch,)), arch
    with pytest.raises(UnsupportedError, match="only DeepSeek-V4's DSpark"):
        describe_draft({**_qwen3_draft("K3DSparkModel"), "model_type": "k3_dspark"},
                       source="hand")


def test_extract_hidden_states_layer() -> None:
    config, _ = read_config("Qwen--Qwen3-8B")
    d = hidden_state_draft(real("Qwen--Qwen3-8B"), config,
                           {"eagle_aux_hidden_state_layer_ids": [1, 17, 33]})
    # ExtractHiddenStatesModel: cache_only_layers.{36}, heads = 3 aux layers, head = hidden 4096
    (layer,) = d.layers
    assert (layer.name, layer.kind) == ("cache_only_layers.36", LayerKind.HIDDEN_STATE)
    assert (layer.num_kv_heads, layer.head_size) == (3, 4096)
    with pytest.raises(UnsupportedError, match="eagle_aux_hidden_state_layer_ids"):
        hidden_state_draft(real("Qwen--Qwen3-8B"), config, {})


# --- through the CLI -------------------------------------------------------------------------

FLAGS = ["--kv-cache-memory", "20GiB", "--max-model-len", "40960", "--json"]


def _check(args: list[str]) -> dict:
    res = CliRunner().invoke(app, ["check", str(TARGET), *args, *FLAGS])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _write(tmp_path: Path, cfg: dict) -> str:
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    return str(tmp_path)


@pytest.mark.parametrize("how", ["--draft", "--speculative-config"])
def test_cli_qwen3_dspark_joins_the_full_group(tmp_path: Path, how: str) -> None:
    path = _write(tmp_path, _qwen3_draft("Qwen3DSparkModel"))
    args = (["--draft", path, "--num-speculative-tokens", "16"] if how == "--draft" else
            ["--speculative-config", json.dumps({"method": "dspark", "model": path,
                                                 "num_speculative_tokens": 16})])
    out = _check(args)
    # 36 + 5 full layers, 8·(128+128)·2 B = 4096 B/token/layer, 0.34 block 64:
    # pool 41·64·4096 = 10,747,904 B per block; 40960 / 64 = 640 blocks per request
    (group,) = out["groups"]
    assert (group["num_layers"], group["draft_layers"]) == (41, 5)
    assert out["pool_bytes_per_block"] == [41 * 64 * 4096] == [10_747_904]
    assert group["blocks_per_request"] == 640
    assert out["total_bytes_needed"] == [640 * 10_747_904]


def test_cli_extract_hidden_states(tmp_path: Path) -> None:
    spec = {"method": "extract_hidden_states", "num_speculative_tokens": 1,
            "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": [1, 17, 33]}}}
    out = _check(["--speculative-config", json.dumps(spec)])
    # one uniform-type group (golden f27): 36 full layers × 64 × 4096 B + the hidden-state layer
    # 64 × 3 × 4096 × 2 B = 9,437,184 + 1,572,864 = 11,010,048 B per block; 640 blocks/request
    (group,) = out["groups"]
    assert (group["num_layers"], group["draft_layers"]) == (37, 1)
    assert out["pool_bytes_per_block"] == [11_010_048]
    assert out["total_bytes_needed"] == [640 * 11_010_048]


def test_cli_extract_hidden_states_without_aux_ids_is_one_error() -> None:
    res = CliRunner().invoke(app, ["check", str(TARGET), "--speculative-config",
                                   '{"method": "extract_hidden_states", "num_speculative_tokens": 1}',
                                   *FLAGS[:-1]])
    assert res.exit_code == 2
    assert "eagle_aux_hidden_state_layer_ids" in res.stderr and "Traceback" not in res.output


def test_xpress_is_served_from_0_33_on(tmp_path: Path) -> None:
    # vLLM's registry has Qwen3XPressModel from 0.33.0 on (absent in 0.31.0 / 0.32.0)
    path = _write(tmp_path, _qwen3_draft("Qwen3XPressModel"))
    args = ["check", str(TARGET), "--draft", path, "--num-speculative-tokens", "15", *FLAGS[:-1]]
    res = CliRunner().invoke(app, [*args, "--vllm", "0.32.0"])
    assert res.exit_code == 2 and "vLLM 0.32.0 does not serve Qwen3XPressModel" in res.stderr
    assert CliRunner().invoke(app, [*args, "--vllm", "0.33.0"]).exit_code == 0


def test_cli_muse_glimmer_assistant_is_a_sliding_group(tmp_path: Path) -> None:
    path = _write(tmp_path, {"architectures": ["MuseGlimmerAssistantModel"],
                             "model_type": "muse_glimmer_assistant"})
    out = _check(["--speculative-config", json.dumps(
        {"method": "dflash", "model": path, "num_speculative_tokens": 15})])
    # the 5 draft layers (window 2048, 8 KV × 128 bf16: 4096 B/token) form the one sliding
    # group; every page is 64 tokens × 4096 B = 262,144 B like the target's full layers
    (swa,) = [g for g in out["groups"] if g["draft_layers"]]
    assert (swa["num_layers"], swa["draft_layers"]) == (5, 5)
    assert swa["page_size_bytes"] == 64 * 4096
    assert "sliding" in swa["kind"]
