"""Draft heads: DFlash (MiMo-V2.5-Pro), DFlash2 (z-lab Qwen3.8-27B), EAGLE3 (SafeAILab training
config), EAGLE (hand-written), and MTP modules of the target itself.

Every expected number is worked out from the config by hand in the comment next to it.
"""

from __future__ import annotations

import pytest

from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models import describe_draft, describe_model, mtp_draft
from kvplan.models.description import LayerKind
from tests.models.helpers import edited, one, read_config, real


def _draft(name: str, **kwargs):
    config, quant = read_config(name)
    return describe_draft(config, source=name, hf_quant_config=quant, **kwargs)


def test_mimo_dflash_use_swa_without_layer_types() -> None:
    d = _draft("XiaomiMiMo--MiMo-V2.5-Pro-FP4-DFlash")
    # model_type qwen3 without layer_types / use_sliding_window → Qwen3Config derives all-full
    # layer_types; dflash_config.use_swa on an all-full list → every one of the 5 layers SWA,
    # window dflash_config.swa_window_size 1024 (the top-level sliding_window is nulled)
    assert d.kind_counts() == {"sliding_window": 5}
    assert one(layer.sliding_window for layer in d.layers) == 1024
    # num_key_value_heads 8, head_dim 128
    assert one((layer.num_kv_heads, layer.head_size) for layer in d.layers) == (8, 128)
    # no target given → numbered after num_target_layers 70: model.layers.70 ... 74
    assert [layer.index for layer in d.layers] == [70, 71, 72, 73, 74]
    assert d.layers[0].name == "model.layers.70.self_attn.attn"
    assert (d.draft_method, d.family, d.num_target_layers) == ("dflash", "dflash", 70)
    assert any("no target model given" in w for w in d.warnings)


def test_dflash2_after_qwen3_5_target() -> None:
    target = real("Qwen--Qwen3.5-27B")
    d = _draft("z-lab--Qwen3.8-27B-DFlash2", target=target)
    # layer_types: 5 × sliding_attention; no swa_window_size → top-level sliding_window 2048
    # (kept: use_sliding_window true)
    assert d.kind_counts() == {"sliding_window": 5}
    assert one(layer.sliding_window for layer in d.layers) == 2048
    assert one((layer.num_kv_heads, layer.head_size) for layer in d.layers) == (8, 128)
    # the 64-layer target → draft layers 64 ... 68 (num_target_layers 64 agrees: no warning)
    assert [layer.index for layer in d.layers] == [64, 65, 66, 67, 68]
    assert (d.draft_method, d.family, d.num_target_layers) == ("dflash", "dflash2", 64)
    assert d.dtype == "bfloat16"
    assert d.warnings == ()


def _hand_dflash(**extra):
    # hand-written 2-layer Qwen3 DFlash head: 4 KV heads × head_dim 64
    return {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "dtype": "bfloat16",
            "num_hidden_layers": 2, "hidden_size": 1024, "num_attention_heads": 16,
            "num_key_value_heads": 4, "head_dim": 64, "num_target_layers": 10,
            "dflash_config": {"target_layer_ids": [1, 8]}, **extra}


def test_dflash_window_sources() -> None:
    # use_swa, no swa_window_size, sliding_window 512 but no use_sliding_window → Qwen3Config
    # nulls it → vLLM raises: no window
    config = _hand_dflash(sliding_window=512, dflash_config={"use_swa": True})
    with pytest.raises(ConfigError, match="swa_window_size"):
        describe_draft(config, source="hand-written")
    # with use_sliding_window the top-level 512 is kept and used on both layers
    d = describe_draft({**config, "use_sliding_window": True}, source="hand-written")
    assert one(layer.sliding_window for layer in d.layers) == 512
    # swa_window_size wins over sliding_window
    config["dflash_config"] = {"use_swa": True, "swa_window_size": 256}
    d = describe_draft({**config, "use_sliding_window": True}, source="hand-written")
    assert one(layer.sliding_window for layer in d.layers) == 256
    # mixed layer_types without use_swa → per layer: [sliding, full]
    config = _hand_dflash(layer_types=["sliding_attention", "full_attention"],
                          use_sliding_window=True, sliding_window=128)
    d = describe_draft(config, source="hand-written")
    assert [layer.kind for layer in d.layers] == [LayerKind.SLIDING_WINDOW,
                                                  LayerKind.FULL_ATTENTION]


def test_full_draft_layers_inherit_the_targets_model_window() -> None:
    # Mistral 7B target: CacheConfig.sliding_window 4096, shared with the drafter, so a DFlash
    # layer without a window of its own (no use_swa, no layer_types) gets 4096 too
    target = real("mistralai--Mistral-7B-v0.1")
    d = describe_draft(_hand_dflash(), source="hand-written", target=target)
    assert one(layer.sliding_window for layer in d.layers) == 4096
    # the 32-layer target wins over num_target_layers 10 (noted)
    assert [layer.index for layer in d.layers] == [32, 33]
    assert any("num_target_layers=10" in w for w in d.warnings)


def test_eagle3_training_config() -> None:
    target = real("meta-llama--Llama-3.1-8B")
    d = _draft("SafeAILab--EAGLE3-LLaMA3.1-8B-draft-training-config", target=target)
    # architectures LlamaForCausalLM, but draft_vocab_size 32000 → EAGLE-3
    assert d.draft_method == "eagle3"
    # num_hidden_layers 1: full attention, 8 KV heads, 4096 / 32 = 128, after the 32 target
    # layers → model.layers.32.self_attn.attn
    assert [(layer.index, layer.name, layer.kind, layer.num_kv_heads, layer.head_size)
            for layer in d.layers] == [
        (32, "model.layers.32.self_attn.attn", LayerKind.FULL_ATTENTION, 8, 128)]
    # torch_dtype float16, but vLLM runs the draft at the target's bfloat16 (noted)
    assert d.dtype == "bfloat16"
    assert any("float16" in w for w in d.warnings)
    assert d.num_target_layers == 32


def test_eagle_methods_and_wrappers() -> None:
    head = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
            "num_hidden_layers": 1, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "num_target_layers": 32}
    # hand-written EAGLE-1 head: EagleLlamaForCausalLM architecture → method eagle
    d = describe_draft({**head, "architectures": ["EagleLlamaForCausalLM"]}, source="hand-written")
    assert (d.draft_method, d.layers[0].index, d.layers[0].num_kv_heads) == ("eagle", 32, 8)
    # explicit method for a plain Llama head
    d = describe_draft(head, source="hand-written", method="eagle3")
    assert d.draft_method == "eagle3"
    # vLLM EAGLEConfig wrapper: model_type "eagle", head under "model", method eagle3
    wrapped = {"model_type": "eagle", "method": "eagle3", "model": head}
    d = describe_draft(wrapped, source="hand-written")
    assert d.draft_method == "eagle3" and d.kind_counts() == {"full_attention": 1}
    # nothing to detect the method from
    with pytest.raises(UnsupportedError, match="speculative method"):
        describe_draft(head, source="hand-written")


def test_draft_architecture_is_refused_as_a_target() -> None:
    config, _ = read_config("z-lab--Qwen3.8-27B-DFlash2")
    with pytest.raises(UnsupportedError, match="draft head"):
        describe_model(config, source="dflash2")


# --- MTP ---------------------------------------------------------------------------------

def test_mtp_qwen3_5() -> None:
    d = mtp_draft(real("Qwen--Qwen3.5-27B"))
    # mtp_num_hidden_layers 1: a full-attention decoder layer like the target's full layers
    # (4 KV heads × 256), numbered after the 64 target layers
    assert [(layer.index, layer.name, layer.kind, layer.num_kv_heads, layer.head_size)
            for layer in d.layers] == [
        (64, "mtp.layers.0.self_attn.attn", LayerKind.FULL_ATTENTION, 4, 256)]
    assert (d.draft_method, d.num_target_layers) == ("mtp", 64)


def test_mtp_deepseek_v3_and_v3_2() -> None:
    d = mtp_draft(real("deepseek-ai--DeepSeek-V3"))
    # num_nextn_predict_layers 1: an MLA layer (512 + 64) at model.layers.61
    assert [(layer.index, layer.name, layer.kind, layer.head_size) for layer in d.layers] == [
        (61, "model.layers.61.self_attn.attn", LayerKind.MLA, 576)]
    assert d.use_mla
    d = mtp_draft(real("deepseek-ai--DeepSeek-V3.2"))
    assert one(layer.index_head_dim for layer in d.layers) == 128


def test_mtp_module_count() -> None:
    # a sibling with 2 MTP modules → layers 61, 62; asking for 1 keeps the first
    m = describe_model(edited("deepseek-ai--DeepSeek-V3", ("num_nextn_predict_layers",), 2),
                       source="edited")
    assert [layer.index for layer in mtp_draft(m).layers] == [61, 62]
    assert [layer.index for layer in mtp_draft(m, 1).layers] == [61]
    with pytest.raises(UnsupportedError, match="carries 2"):
        mtp_draft(m, 3)
    # Kimi K2: num_nextn_predict_layers 0
    with pytest.raises(UnsupportedError, match="no MTP modules"):
        mtp_draft(real("moonshotai--Kimi-K2-Instruct"))


def test_mtp_nemotron_h() -> None:
    # a Nemotron-H sibling with num_nextn_predict_layers 1 and the default MTP pattern "*E":
    # one attention layer (8 KV heads × 128) at mtp.layers.0.mixer.attn, after 118 layers
    m = describe_model(edited("nvidia--Nemotron-H-56B-Base-8K", ("num_nextn_predict_layers",), 1),
                       source="edited")
    d = mtp_draft(m)
    assert [(layer.index, layer.name, layer.num_kv_heads, layer.head_size)
            for layer in d.layers] == [(118, "mtp.layers.0.mixer.attn", 8, 128)]


def test_mtp_glm4_moe_through_transformers() -> None:
    # zai-org/GLM-4.5 (heldout-configs-2; no fast adapter: planned through transformers'
    # Glm4MoeConfig): num_nextn_predict_layers 1 → vLLM's Glm4MoeMTP builds one Glm4MoeDecoderLayer
    # at model.layers.92 (num_hidden_layers 92), 8 KV heads × head_dim 128 like the target's layers
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "heldout-configs-2" / "zai-org--GLM-4.5"
    m = describe_model(json.loads((path / "config.json").read_text()), source=str(path))
    assert (m.family, m.num_nextn_predict_layers, len(m.layers)) == ("transformers", 1, 92)
    d = mtp_draft(m)
    assert [(layer.index, layer.name, layer.kind, layer.num_kv_heads, layer.head_size)
            for layer in d.layers] == [
        (92, "model.layers.92.self_attn.attn", LayerKind.FULL_ATTENTION, 8, 128)]
    # the same model with num_nextn_predict_layers 0 carries no MTP module (absent, the key takes
    # Glm4MoeConfig's default 1, as vLLM's getattr on the config object does)
    config = json.loads((path / "config.json").read_text())
    config["num_nextn_predict_layers"] = 0
    with pytest.raises(UnsupportedError, match="no MTP modules"):
        mtp_draft(describe_model(config, source="edited"))


def test_mtp_exaone_moe_through_transformers() -> None:
    # coverage-configs ExaoneMoeForCausalLM (no num_nextn_predict_layers: ExaoneMoeMTP's getattr
    # default 1): one layer mtp.layers.0, of layer_types[0]'s kind (sliding_attention) with the
    # model's sliding_window 4096 (no sliding_windows / mtp_* lists), numbered after 32 layers.
    # vLLM 0.34 (tools/vllm_e2e_ext.py, --max-model-len 2048, MTP k=1) groups it with the target's
    # sliding layers: 5120 blocks, as kvplan plans it
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "data" / "coverage-configs" / "ExaoneMoeForCausalLM"
    m = describe_model(json.loads((path / "config.json").read_text()), source=str(path))
    d = mtp_draft(m)
    assert [(layer.index, layer.name, layer.kind, layer.sliding_window) for layer in d.layers] == [
        (32, "mtp.layers.0.self_attn.attn", LayerKind.SLIDING_WINDOW, 4096)]
    # the target's attention shape
    assert one((layer.num_kv_heads, layer.head_size) for layer in d.layers) == (
        m.layers[0].num_kv_heads, m.layers[0].head_size)
