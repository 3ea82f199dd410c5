"""HRM-Text (hierarchical reasoning model, text): a low-level (L) and a high-level (H) stack of
decoder layers run in recurrent cycles; every (cycle step, layer) pair has its own KV cache."""

from __future__ import annotations

from kvplan.models._common import Cfg, attention, finish, text_cfg
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.quant import quantization_info

# transformers' HrmTextConfig defaults (0.31–0.34 read that class)
HRM_DEFAULTS = {"num_hidden_layers": 16, "num_attention_heads": 12, "head_dim": 128,
                "H_cycles": 2, "L_cycles": 3, "max_position_embeddings": 2048}
# vLLM: the engine core turns these off for a model with non-causal (Prefix LM) attention
NON_CAUSAL_NOTE = ("HRM-Text's attention is PrefillPrefixLMAttention (non-causal prefill): vLLM "
                   "turns chunked prefill and prefix caching off when it initializes the KV "
                   "cache (EngineCore._initialize_kv_caches); the KV layout is unchanged")


def describe_hrm_text(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/hrm_text.py — HrmTextModel builds model.L_module and model.H_module, each
    num_layers_per_stack layers (HrmTextConfig: num_hidden_layers when unset). Layer i of a stack
    registers one PrefillPrefixLMAttention per recurrence step it runs at — L at
    h × (L_cycles + 1) + l (h < H_cycles, l < L_cycles), H at h × (L_cycles + 1) + L_cycles —
    named model.{L,H}_module.layers.{step × num_layers_per_stack + i}.self_attn.attn, in that
    order (L stack first, then layer, then step). Multi-head: num_attention_heads KV heads of
    head_dim (HrmTextAttention ignores num_key_value_heads). Not SupportsPP."""
    text = text_cfg(top)
    absent = {k: v for k, v in HRM_DEFAULTS.items() if not text.present(k)}
    if absent:
        text.warn("absent from config.json, so HrmTextConfig's defaults apply: "
                  + ", ".join(f"{text.field(k)} = {v}" for k, v in absent.items()))
        text = Cfg({**text.data, **absent}, text.source, text.path, text.warnings)
    per_stack = text.get_int("num_layers_per_stack", None) or text.req_int("num_hidden_layers")
    heads = text.req_int("num_attention_heads")
    hd = text.req_int("head_dim")
    h_cycles = text.req_int("H_cycles")
    l_cycles = text.req_int("L_cycles")
    steps = {
        "L": [h * (l_cycles + 1) + low for h in range(h_cycles) for low in range(l_cycles)],
        "H": [h * (l_cycles + 1) + l_cycles for h in range(h_cycles)],
    }
    layers: list[LayerDescription] = []
    for stack in ("L", "H"):
        for i in range(per_stack):
            for step in steps[stack]:
                layers.append(attention(
                    i, f"model.{stack}_module.layers.{step * per_stack + i}.self_attn.attn",
                    kv_heads=heads, head_size=hd))
    text.warn(NON_CAUSAL_NOTE)
    desc = finish(top, text, family="hrm_text", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config))
    return desc.model_copy(update={"supports_pipeline_parallel": False})
