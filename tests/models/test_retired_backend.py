"""Architectures vLLM retired from its registry (_PREVIOUSLY_SUPPORTED_MODELS) that its
Transformers modeling backend still serves (registry.py inspect_model_cls tries
_try_resolve_transformers before _raise_for_unsupported refuses): kvplan plans them as vLLM
does, replayed against vLLM 0.34.0's own output kept as goldens
(tests/data/retired-configs/<ARCH>/vllm-0.34.0.json, tools/confirm_coverage.py --retired; the
real Llama-3.2-90B-Vision config of tests/data/heldout-configs, class-default configs for the
others, three with fields set by hand where the defaults do not build: STATUS.md there).
Only kvplan runs here; the vLLM side is the golden.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.errors import UnsupportedError
from kvplan.models import describe_model
from kvplan.models.resolution.arch_resolution import _release
from kvplan.models.retired import refuse_retired
from tests.models.test_coverage_confirmed import _kvplan, replay

ROOT = Path(__file__).resolve().parents[2]
RETIRED = ROOT / "tests" / "data" / "retired-configs"
GOLDENS = sorted(RETIRED.glob("*/vllm-0.34.0.json"))



def _served_retired() -> set[str]:
    rel = _release("0.34.0")
    assert rel is not None
    backend = set(rel["transformers_backend"]) | set(rel["transformers_backend_models"])
    return {a for a in rel["previously_supported"] if a in backend}


def test_every_served_retired_architecture_is_confirmed() -> None:
    served = _served_retired()
    assert len(served) == 13
    assert {g.parent.name for g in GOLDENS} == served
    status = (RETIRED / "STATUS.md").read_text()
    assert "HAND-MADE" in status and ": no: " not in status


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.parent.name for g in GOLDENS])
def test_kvplan_equals_vllm_on_a_retired_architecture(golden: Path) -> None:
    want = json.loads(golden.read_text())
    config = ROOT / want["config"]
    assert json.loads((config / "config.json").read_text())["architectures"][0] == \
        want["architecture"]
    replay(golden)  # vLLM refused: the flags, or building the model


def test_mllama_cross_attention_layers_are_kv_layers_under_the_language_model() -> None:
    """vLLM's backend gives MllamaTextCrossAttention its own decoder Attention (it dispatches
    through the attention interface), named after the module."""
    cfg = json.loads((ROOT / "tests/data/heldout-configs/meta-llama--Llama-3.2-90B-Vision-Instruct"
                      / "config.json").read_text())
    desc = describe_model(cfg, source="mllama")
    cross = cfg["text_config"]["cross_attention_layers"]
    assert len(desc.layers) == cfg["text_config"]["num_hidden_layers"] == 100
    assert desc.layers[cross[0]].name == f"model.language_model.layers.{cross[0]}.cross_attn.attn"
    assert desc.layers[0].name == "model.language_model.layers.0.self_attn.attn"


def test_retired_architectures_the_backend_does_not_take_are_still_refused() -> None:
    for arch in ("Phi3SmallForCausalLM", "MptForCausalLM", "BaichuanForCausalLM"):
        with pytest.raises(UnsupportedError, match=f"{arch} was supported in vLLM until"):
            refuse_retired("cfg", [arch])
    refuse_retired("cfg", ["MllamaForConditionalGeneration"])  # served: no refusal
    # vLLM tries only the first architecture on the backend
    with pytest.raises(UnsupportedError, match="MptForCausalLM was supported"):
        refuse_retired("cfg", ["MptForCausalLM", "MllamaForConditionalGeneration"])


@pytest.mark.parametrize(("vllm", "first"), [("0.31.0", "0.attn"),
                                             ("0.32.0", "model.layers.0.self_attn.attn"),
                                             ("0.34.0", "model.layers.0.self_attn.attn")])
def test_the_backend_names_layers_by_index_in_0_31(vllm: str, first: str) -> None:
    """vLLM 0.31's models/transformers/base.py _create_attention_instances gives layer i's
    Attention the prefix f"{i}.attn"; 0.32+ the dispatching module's path (read from the
    wheels; the 0.34 name is the golden's)."""
    flags = {"tensor_parallel_size": 1, "max_model_len": 16384, "max_num_batched_tokens": 8192,
             "kv_cache_memory": "40GiB", "vllm": vllm, "gpu": "H100"}
    code, out, stderr = _kvplan(RETIRED / "PersimmonForCausalLM", flags)
    assert code == 0, stderr
    names = out["vllm_contract"]["groups"][0]["layer_names"]
    assert names[0] == first and len(names) == 36
