"""MiniMax-M2.5 NVFP4 (real config, all full attention); MiniMax-Text-01 / M1 refused as vLLM
0.31-0.34 refuse them (hand-written config with Text-01's attn_type_list).

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

import pytest

from kvplan.errors import UnsupportedError
from kvplan.models import describe_model, mtp_draft
from tests.models.helpers import one, real


def test_minimax_m2_5_nvfp4() -> None:
    m = real("nvidia--MiniMax-M2.5-NVFP4")
    # attn_type_list: 62 × 1 (softmax), and vLLM's MiniMaxM2 builds full attention everywhere
    assert m.kind_counts() == {"full_attention": 62}
    # 8 KV heads, head_dim 128; sliding_window null
    assert one(layer.num_kv_heads for layer in m.layers) == 8
    assert one(layer.head_size for layer in m.layers) == 128
    assert one(layer.sliding_window for layer in m.layers) is None
    # quantization_config (wins over hf_quant_config.json): quant_method modelopt, quant_algo
    # NVFP4 → "modelopt_fp4"; kv_cache_scheme {dynamic false, 8 bits, float} → "fp8_e4m3"
    q = m.quantization
    assert (q.method, q.weight_format, q.kv_cache_dtype, q.source) == (
        "modelopt_fp4", "NVFP4", "fp8_e4m3", "config.json quantization_config")
    # num_mtp_modules 3 are recorded, but vLLM 0.34 has no MiniMax-M2 MTP drafter
    assert m.num_nextn_predict_layers == 3 and m.mtp_layers == ()
    try:
        mtp_draft(m)
    except UnsupportedError as exc:
        assert "MiniMaxM2" in exc.message
    else:
        raise AssertionError("expected UnsupportedError")
    assert m.warnings == ()


@pytest.mark.parametrize("arch", ["MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM"])
def test_minimax_text_01_and_m1_are_refused_as_vllm_does(arch: str) -> None:
    # vLLM 0.31, 0.32, 0.33 and 0.34 all list these in registry.py _PREVIOUSLY_SUPPORTED_MODELS
    # ("0.23.0") and none in their model tables: ModelRegistry._raise_for_unsupported raises
    # "Model architecture X was supported in vLLM until v0.23.0, and is not supported anymore"
    # (hand-written MiniMax-Text-01-style config: 8 layers, attn_type_list 7 × 0 then 1)
    config = {"architectures": [arch], "model_type": "minimax_text_01",
              "torch_dtype": "bfloat16", "num_hidden_layers": 8, "hidden_size": 6144,
              "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128,
              "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1]}
    with pytest.raises(UnsupportedError) as exc:
        describe_model(config, source="hand-written")
    assert (f"model architecture {arch} was supported in vLLM until v0.23.0, and is not "
            "supported anymore") in exc.value.message
    assert "<= 0.23.0" in (exc.value.hint or "")


@pytest.mark.parametrize("model_type", ["minimax_text_01", "minimax_m1"])
def test_a_bare_minimax_model_type_is_refused_too(model_type: str) -> None:
    # the remote-code MiniMax-Text-01 / M1 model types without `architectures`
    config = {"model_type": model_type, "torch_dtype": "bfloat16", "num_hidden_layers": 4,
              "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}
    with pytest.raises(UnsupportedError, match="not supported anymore"):
        describe_model(config, source="hand-written")


LINEAR_LAYER_1 = ("Layer 1 (linear_attention) does not dispatch through the Transformers "
                  "attention interface and vLLM has no other way to handle it.")


@pytest.mark.parametrize("archs", [["MiniMaxForCausalLM"], None])
def test_transformers_minimax_is_built_by_the_backend_which_refuses_it(archs: list | None
                                                                       ) -> None:
    # transformers' own MiniMax (model type "minimax"): MiniMaxForCausalLM is retired from
    # vLLM's registry but backend compatible, and a config without `architectures` becomes
    # MiniMaxModel (MODEL_MAPPING_NAMES), also on the backend; its lightning-attention layers
    # do not dispatch through the attention interface, so vLLM refuses while building the model
    # (vLLM 0.34.0's harness on this config at --max-model-len 8192: this ValueError, from
    # TransformersMoEEmbeddingModel; the class-default config: tests/data/retired-configs)
    config = {"model_type": "minimax", "torch_dtype": "bfloat16", "num_hidden_layers": 4,
              "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}
    if archs:
        config["architectures"] = archs
    desc = describe_model(config, source="hand-written")
    assert desc.layers == ()
    assert desc.model_init_refusal == LINEAR_LAYER_1


def test_registry_of_every_release_retires_them() -> None:
    # the 0.34.0 registry data kvplan ships (the oracle venvs of 0.31-0.33 hold the same entries)
    from kvplan.models.coverage import previously_supported

    for arch in ("MiniMaxText01ForCausalLM", "MiniMaxM1ForCausalLM", "MiniMaxForCausalLM"):
        assert previously_supported(arch) == "0.23.0"
