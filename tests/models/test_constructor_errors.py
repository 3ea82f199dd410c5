"""vLLM's model class fails while it is built on a Hugging Face-format config that lacks a field
only vLLM's Mistral-format reading gives (kvplan.models.resolution.constructor): the real held-out
Voxtral-Mini-3B-2507 config.json, which vLLM 0.34.0's start-up code (the e2e harness,
/work/shared/vllm-e2e/vllm_e2e.py at TP 1, 40 GiB, 8192 batched tokens, --max-model-len 32768)
refuses at the model stage with AttributeError: 'VoxtralEncoderConfig' object has no attribute
'downsample_factor' (voxtral.py VoxtralForConditionalGeneration.__init__)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import kvplan
from kvplan.models import describe_model

ROOT = Path(__file__).resolve().parents[2]
VOXTRAL = ROOT / "tests" / "data" / "heldout-configs" / "mistralai--Voxtral-Mini-3B-2507"
FLAGS = dict(tensor_parallel_size=1, max_num_batched_tokens=8192, kv_cache_memory="40GiB",
             gpu="H100", vllm="0.34.0")
VLLM_SAYS = "'VoxtralEncoderConfig' object has no attribute 'downsample_factor'"  # the harness


def test_hf_format_voxtral_is_refused_in_vllms_words() -> None:
    plan = kvplan.check(str(VOXTRAL), max_model_len=32768, **FLAGS)
    assert plan.refused_at_startup and not plan.fits
    assert (plan.error_type, plan.error_message) == ("AttributeError", VLLM_SAYS)


def test_the_length_check_comes_first() -> None:
    # vLLM's ModelConfig refuses a length past the derived 131072 before it builds the model
    plan = kvplan.check(str(VOXTRAL), max_model_len=262144, **FLAGS)
    assert plan.refused_at_startup and plan.error_type == "ValueError"
    assert "derived max_model_len" in (plan.error_message or "")


def test_a_mistral_format_folder_is_planned(tmp_path: Path) -> None:
    # consolidated*.safetensors and params.json beside config.json: vLLM reads params.json
    # (repo_utils.is_mistral_model_repo), and its class builds
    folder = tmp_path / "voxtral"
    shutil.copytree(VOXTRAL, folder)
    mistral = Path(__file__).parents[1] / "data" / "mistral-format" / "handmade--voxtral-audio"
    for name in ("params.json", "consolidated.safetensors"):
        shutil.copy(mistral / name, folder / name)
    plan = kvplan.check(str(folder), max_model_len=32768, **FLAGS)
    assert not plan.refused_at_startup and plan.fits
    assert any(w.startswith("vLLM reads this model in Mistral format: params.json")
               for w in plan.warnings)
    (folder / "consolidated.safetensors").unlink()  # params.json alone is not Mistral format
    assert kvplan.check(str(folder), max_model_len=32768, **FLAGS).refused_at_startup


def test_only_a_config_without_the_field_is_marked() -> None:
    cfg = json.loads((VOXTRAL / "config.json").read_text())
    assert describe_model(cfg, source="x").hf_format_constructor_error == (
        "AttributeError", VLLM_SAYS)
    cfg["audio_config"]["downsample_factor"] = 4
    assert describe_model(cfg, source="x").hf_format_constructor_error is None
