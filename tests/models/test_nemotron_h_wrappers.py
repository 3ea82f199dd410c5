"""The Nemotron-H decoder behind other architectures: NemotronHPuzzleForCausalLM, the multimodal
wrappers NemotronH_Nano_VL_V2 / NemotronH_{Nano,Super,}_Omni_Reasoning_V3 and
Nemotron3_5TranscribeForConditionalGeneration.

vLLM 0.34.0: registry.py L191 maps NemotronHPuzzleForCausalLM to nemotron_h.NemotronHForCausalLM
(layer kinds from hybrid_override_pattern, heads from the model-wide fields); nano_nemotron_vl.py
L989–993 and nemotron3_5_transcribe.py L506–510 build NemotronHForCausalLM from
config.text_config (llm_config, vLLM's _CONFIG_ATTRS_MAPPING / Nemotron3_5TranscribeConfig) under
the prefix `language_model`. models/config.py L1589–1596 gives all of them the Nemotron-H
mamba_ssm_cache_dtype hook; 0.31–0.33 give it to NemotronH_Nano_VL_V2 only (the Omni V3 names are
registered there, their SSM state follows --mamba-ssm-cache-dtype auto = the model dtype).

No published config.json of these wrappers was found (the search tools return fragments only), so
the configs here are hand-made on purpose: the real NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 config as
the text model, inside the wrapper layout vLLM reads.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from kvplan.engines.vllm.build import build
from kvplan.engines.vllm.specs import MambaSpec
from kvplan.errors import UnsupportedError
from kvplan.models import describe_model
from kvplan.models.coverage import ENCODER_CACHE_NOTE
from kvplan.models.description import LayerKind, Mamba2Dims
from tests.models.helpers import HF_CONFIGS, check_h100_x8, edited, h100_tp8, indices, read_config

NANO = "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
WRAPPERS = ("NemotronH_Nano_VL_V2", "NemotronH_Nano_Omni_Reasoning_V3",
            "NemotronH_Omni_Reasoning_V3", "NemotronH_Super_Omni_Reasoning_V3",
            "Nemotron3_5TranscribeForConditionalGeneration")


def _wrapped(arch: str, key: str = "llm_config") -> dict[str, Any]:
    text, _ = read_config(NANO)
    # the published wrappers carry their configuration class as remote code (auto_map)
    return {"architectures": [arch], "model_type": arch, "torch_dtype": "bfloat16",
            "auto_map": {"AutoConfig": "configuration.Config"},
            key: text, "vision_config": {"patch_size": 16}}


def test_puzzle_is_planned_as_nemotron_h() -> None:
    config = edited(NANO, ("architectures",), ["NemotronHPuzzleForCausalLM"],
                    ("model_type",), "nemotron_h_puzzle")
    # block_configs only size the MLP / MoE blocks (nemotron_h.py L683 _get_max_n_routed_experts)
    config["block_configs"] = [{"block_type": "moe", "n_routed_experts": 64}]
    m = describe_model(config, source="puzzle")
    assert m.family == "nemotron_h"
    # pattern "MEMEM*" + 4 × "EMEMEM*" + "EMEMEMEM*" + "EMEMEMEME" (52 chars):
    # M = 3 + 4·3 + 4 + 4 = 23, E = 2 + 4·3 + 4 + 5 = 23, * = 1 + 4 + 1 = 6
    assert m.kind_counts() == {"mamba2": 23, "no_kv": 23, "full_attention": 6}
    # "*" at 5, then 5 + 7k (k = 1..4) = 12, 19, 26, 33, then 33 + 9 = 42
    assert indices(m, LayerKind.FULL_ATTENTION) == [5, 12, 19, 26, 33, 42]
    assert m.layers[5].name == "model.layers.5.mixer.attn"
    assert m.mamba_ssm_dtype == "float32"


@pytest.mark.parametrize("arch", WRAPPERS)
def test_wrappers_plan_the_text_model_under_language_model(arch: str) -> None:
    m = describe_model(_wrapped(arch), source=arch)
    assert m.family == "nemotron_h" and m.architectures == (arch,)
    assert m.kind_counts() == {"mamba2": 23, "no_kv": 23, "full_attention": 6}
    attn = m.layers[5]
    # num_key_value_heads 2, head_dim 128 (the text config's)
    assert (attn.num_kv_heads, attn.head_size) == (2, 128)
    assert attn.name == "language_model.model.layers.5.mixer.attn"
    assert m.layers[0].name == "language_model.model.layers.0.mixer"
    # mamba_num_heads 64 × mamba_head_dim 64 = 4096; ssm_state_size 128; conv 4; n_groups 8
    assert m.layers[0].mamba2 == Mamba2Dims(intermediate_size=4096, state_size=128,
                                            conv_kernel=4, n_groups=8, num_heads=64, head_dim=64)
    assert ENCODER_CACHE_NOTE in m.warnings


def test_text_config_key_reads_the_same_model() -> None:
    a = describe_model(_wrapped("NemotronH_Nano_VL_V2", "text_config"), source="vl")
    b = describe_model(_wrapped("NemotronH_Nano_VL_V2"), source="vl")
    assert a.layers == b.layers


def _mamba_spec(arch: str, version: str) -> MambaSpec:
    m = describe_model(_wrapped(arch), source=arch)
    specs = {lp.name: lp.spec for lp in build(m, h100_tp8(vllm_version=version)).layers}
    spec = specs["language_model.model.layers.0.mixer"]
    assert isinstance(spec, MambaSpec)
    return spec


def test_ssm_dtype_hook_per_release() -> None:
    # TP 8: conv (3, (4096 + 2·8·128) / 8 = 768) bf16 = 4,608 B; ssm (64/8 = 8, 64, 128)
    # = 65,536 values: fp32 262,144 B (hook: the text config's float32), bf16 131,072 B (auto)
    assert _mamba_spec("NemotronH_Omni_Reasoning_V3", "0.34.0").dtypes == ("bfloat16", "float32")
    assert _mamba_spec("NemotronH_Omni_Reasoning_V3", "0.34.0").state_content_size_bytes \
        == 4_608 + 262_144
    old = _mamba_spec("NemotronH_Omni_Reasoning_V3", "0.33.0")
    assert old.dtypes == ("bfloat16", "bfloat16")
    assert old.state_content_size_bytes == 4_608 + 131_072
    # NemotronH_Nano_VL_V2 has the hook in every release
    assert _mamba_spec("NemotronH_Nano_VL_V2", "0.31.0").dtypes == ("bfloat16", "float32")


def test_transcribe_is_refused_before_0_34() -> None:
    m = describe_model(_wrapped("Nemotron3_5TranscribeForConditionalGeneration"), source="asr")
    with pytest.raises(UnsupportedError, match="from 0.34.0 on"):
        build(m, h100_tp8(vllm_version="0.33.0"))


def test_vl_cli_h100_x8_equals_the_text_model(tmp_path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(_wrapped("NemotronH_Nano_VL_V2")))
    out = check_h100_x8(cfg, "--trust-remote-code")
    plain = check_h100_x8(HF_CONFIGS / NANO / "config.json")
    # natural Mamba page per rank 4,608 + 262,144 = 266,752 B (see above)
    assert {g["natural_page_size_bytes"] for g in out["groups"] if g["kind"] == "mamba"} == {
        266_752}
    for key in ("num_groups", "pool_bytes_per_block", "total_blocks_per_request",
                "total_bytes_needed"):
        assert out[key] == plain[key]
    assert out["groups"][0]["layers"].startswith("language_model.model.layers.")
