"""Architectures whose vLLM model class is not SupportsPP: vLLM refuses --pipeline-parallel-size > 1
for them (ModelConfig.verify_with_parallel_config: NotImplementedError "Pipeline parallelism is not
supported for this model. Supported models implement the `SupportsPP` interface."), and so does
kvplan's build, from `ModelDescription.supports_pipeline_parallel`, which their adapters set.

The list is vLLM 0.34.0's own answer: tools/vllm_non_pp.py asks
`vllm.model_executor.models.interfaces.supports_pp` of every registered class in the e2e venv
(118 architectures are not SupportsPP, most of them draft heads; the classes below are the same in
0.31–0.33). Each case uses a config from tests/data (a published one where the folder has one,
else the transformers-defaults config of tests/data/coverage-configs); the Mamba2, Voyage and
Nemotron-H wrapper cases edit a real config's architecture, the one field they turn on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.engines.vllm.build import build
from kvplan.errors import StartupError
from kvplan.models import describe_model
from kvplan.models.description import ModelDescription
from tests.models.helpers import HF_CONFIGS, edited, h100_tp8, read_config, real

COVERAGE = Path(__file__).resolve().parents[1] / "data" / "coverage-configs"
REAL_COVERAGE = Path(__file__).resolve().parents[1] / "data" / "coverage-real-configs"


def _coverage(arch: str) -> ModelDescription:
    return describe_model(json.loads((COVERAGE / arch / "config.json").read_text()), source=arch)


def _renamed(name: str, arch: str) -> ModelDescription:
    return describe_model(edited(name, ("architectures",), [arch]), source=f"{name} as {arch}")


def _nemotron_wrapper(arch: str) -> ModelDescription:
    # the wrapper layout vLLM reads (llm_config) around the real Nemotron-3-Nano text config, as in
    # tests/models/test_nemotron_h_wrappers.py
    text, _ = read_config("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    config: dict[str, Any] = {"architectures": [arch], "model_type": arch,
                              "torch_dtype": "bfloat16", "llm_config": text,
                              "vision_config": {"patch_size": 16}}
    return describe_model(config, source=arch)


NOT_SUPPORTS_PP = {
    # encoder_only.py: roberta.py RobertaForSequenceClassification (XLM-R)
    "XLMRobertaForSequenceClassification": lambda: real("BAAI--bge-reranker-v2-m3"),
    # encoder_only.py: modernbert.py ModernBertModel / ...ForSequenceClassification
    "ModernBertModel": lambda: _coverage("ModernBertModel"),
    "ModernBertForSequenceClassification": lambda: _coverage("ModernBertForSequenceClassification"),
    # gemma.py describe_gemma3n: gemma3n_mm.py Gemma3nForConditionalGeneration
    "Gemma3nForConditionalGeneration": lambda: real("handmade--gemma-3n-defaults"),
    # gemma.py describe_gemma2_3: gemma3.py Gemma3Model (the embedding model)
    "Gemma3TextModel": lambda: _coverage("Gemma3TextModel"),
    # the transformers path (no fast adapter): diffusion_gemma.py
    "DiffusionGemmaForBlockDiffusion": lambda: _coverage("DiffusionGemmaForBlockDiffusion"),
    # qwen.py describe_qwen_dense: voyage.py VoyageQwen3BidirectionalEmbedModel
    "VoyageQwen3BidirectionalEmbedModel": lambda: _renamed("Qwen--Qwen3-8B",
                                                           "VoyageQwen3BidirectionalEmbedModel"),
    # mamba.py describe_nemotron_h: nano_nemotron_vl.py NemotronH_Nano_VL_V2 (all four names)
    "NemotronH_Nano_VL_V2": lambda: _nemotron_wrapper("NemotronH_Nano_VL_V2"),
    "NemotronH_Nano_Omni_Reasoning_V3": lambda: _nemotron_wrapper("NemotronH_Nano_Omni_Reasoning_V3"),
    "NemotronH_Omni_Reasoning_V3": lambda: _nemotron_wrapper("NemotronH_Omni_Reasoning_V3"),
    "NemotronH_Super_Omni_Reasoning_V3": lambda: _nemotron_wrapper(
        "NemotronH_Super_Omni_Reasoning_V3"),
}

# the same adapters' SupportsPP classes keep pipeline parallelism
SUPPORTS_PP = {
    "Qwen3ForCausalLM": lambda: real("Qwen--Qwen3-8B"),
    "Gemma3ForCausalLM": lambda: describe_model(json.loads(
        (REAL_COVERAGE / "google--gemma-3-1b-it" / "config.json").read_text()),
        source="gemma-3-1b-it"),
    "NemotronHForCausalLM": lambda: real("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"),
    "Nemotron3_5TranscribeForConditionalGeneration": lambda: _nemotron_wrapper(
        "Nemotron3_5TranscribeForConditionalGeneration"),
}


@pytest.mark.parametrize("arch", sorted(NOT_SUPPORTS_PP))
def test_not_supports_pp_refuses_pipeline_parallel(arch: str) -> None:
    m = NOT_SUPPORTS_PP[arch]()
    assert m.architectures[:1] == (arch,)
    assert not m.supports_pipeline_parallel
    with pytest.raises(StartupError, match="SupportsPP"):
        build(m, h100_tp8(max_model_len=4096, tensor_parallel_size=1, pipeline_parallel_size=2))
    build(m, h100_tp8(max_model_len=4096, tensor_parallel_size=1))  # PP 1 still plans


@pytest.mark.parametrize("arch", sorted(SUPPORTS_PP))
def test_supports_pp_keeps_pipeline_parallel(arch: str) -> None:
    m = SUPPORTS_PP[arch]()
    assert m.architectures[:1] == (arch,)
    assert m.supports_pipeline_parallel
    build(m, h100_tp8(max_model_len=4096, tensor_parallel_size=1, pipeline_parallel_size=2))


def _mamba(arch: str, model_type: str) -> dict[str, Any]:
    # hand-made: the Mamba / Mamba2 configs' own defaults (transformers MambaConfig /
    # Mamba2Config) with a small hidden size — only the architecture matters here
    return {"architectures": [arch], "model_type": model_type, "hidden_size": 768,
            "num_hidden_layers": 4, "vocab_size": 50280, "torch_dtype": "bfloat16",
            "head_dim": 64, "num_heads": 24, "expand": 2, "n_groups": 1}


def test_mamba2_is_not_supports_pp_but_mamba1_is() -> None:
    # vLLM: mamba2.py Mamba2ForCausalLM lacks SupportsPP; mamba.py MambaForCausalLM (also
    # FalconMamba's class) has it
    assert not describe_model(_mamba("Mamba2ForCausalLM", "mamba2"),
                              source="mamba2").supports_pipeline_parallel
    for arch, model_type in (("MambaForCausalLM", "mamba"),
                             ("FalconMambaForCausalLM", "falcon_mamba")):
        assert describe_model(_mamba(arch, model_type), source=arch).supports_pipeline_parallel


def test_the_refusal_is_a_plan_through_the_cli() -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["check", str(HF_CONFIGS / "BAAI--bge-reranker-v2-m3"),
                                   "--gpu", "H100", "-pp", "2", "--json"])
    assert res.exit_code == 1, res.output  # vLLM refuses at start-up
    plan = json.loads(res.stdout)
    assert plan["failure_cause"] == "config"
    assert "Pipeline parallelism is not supported for this model" in plan["error_message"]
