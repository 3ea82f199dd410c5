"""Multimodal wrappers vLLM builds around the Qwen3.5 language model: MiniCPM-V 4.6 / 4.7,
MiniCPM-OCR (minicpmv4_6.py: Qwen3_5ForCausalLM at language_model; 4.7 and OCR subclass it),
Intern-S2 Preview (a Qwen3_5MoeForConditionalGeneration subclass) and Intern-S2 Mobius
(interns2_mobius.py: QwenGatedDeltaNetAttention / Qwen3NextAttention by layer_types, its own MoE).

No public config of these checkpoints was found, so the real Qwen3.5-27B text config is put
under each architecture (the branch under test is the dispatch and the config hook, not the
layer math, which tests/models/test_qwen.py covers). None of these architectures is in vLLM's
MODELS_CONFIG_MAP, so the Qwen3.5 hook that copies text_config.mamba_ssm_dtype into
mamba_ssm_cache_dtype (models/config.py Qwen3_5ForConditionalGenerationConfig) does not run:
the GDN recurrent state stays in the model dtype (_mamba_state_dtype with "auto").
"""

from __future__ import annotations

import json

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import MambaSpec
from kvplan.errors import UnsupportedError
from kvplan.models import describe_model
from tests.models.helpers import check_h100_x8, edited, h100_tp8, real

QWEN = "Qwen--Qwen3.5-27B"
WRAPPERS = ["MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration",
            "MiniCPMOcrForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
            "InternS2MobiusForConditionalGeneration"]


def _wrapped(arch: str) -> dict:
    return edited(QWEN, ("architectures",), [arch])


@pytest.mark.parametrize("arch", WRAPPERS)
def test_wrapper_plans_the_qwen3_5_language_model(arch: str) -> None:
    m = describe_model(_wrapped(arch), source=arch)
    # text_config: 64 layers, full_attention_interval 4 → 16 gated-attention + 48 GDN layers
    assert m.kind_counts() == {"full_attention": 16, "gdn": 48}
    assert m.family == "qwen3_5" and m.is_hybrid
    assert any("encoder cache" in w for w in m.warnings)
    spec = next(lp.spec for lp in build(m, h100_tp8()).layers if isinstance(lp.spec, MambaSpec))
    # no mamba_ssm_dtype hook for this architecture: recurrent state in bf16, not the float32
    # text_config.mamba_ssm_dtype names
    assert spec.dtypes == ("bfloat16", "bfloat16")


def test_qwen3_5_itself_keeps_its_hook() -> None:
    spec = next(lp.spec for lp in build(real(QWEN), h100_tp8()).layers
                if isinstance(lp.spec, MambaSpec))
    assert spec.dtypes == ("bfloat16", "float32")  # Qwen3_5ForConditionalGenerationConfig


@pytest.mark.parametrize(("arch", "first"), [("MiniCPMV4_7ForConditionalGeneration", "0.32.0"),
                                             ("MiniCPMOcrForConditionalGeneration", "0.33.0")])
def test_wrapper_needs_the_release_that_registers_it(arch: str, first: str) -> None:
    m = describe_model(_wrapped(arch), source=arch)
    with pytest.raises(UnsupportedError, match=f"from {first} on"):
        build(m, h100_tp8(vllm_version="0.31.0"))
    build(m, h100_tp8(vllm_version=first))


def test_minicpmv4_6_cli_check(tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_wrapped("MiniCPMV4_6ForConditionalGeneration")))
    out = check_h100_x8(path)
    assert {g["kind"] for g in out["groups"]} == {"mamba", "full_attention"}
    assert any("encoder cache" in w for w in out["warnings"])


def test_ming_v3_asr_stays_refused() -> None:
    # ming_v3_asr.py: its language model is BailingMoeV3ForCausalLM, which kvplan has no adapter
    # for; the coverage table refuses it in words
    with pytest.raises(UnsupportedError, match="BailingMoeV3ForCausalLM"):
        describe_model(_wrapped("MingV3ASRForConditionalGeneration"), source="ming")
