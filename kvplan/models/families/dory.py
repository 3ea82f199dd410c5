"""Dory (vLLM 0.33+): a normalized latent recurrent transformer whose blocks are attention-only or
MLP-only, with a recurrent middle section that may run several loops, each with its own KV cache."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    finish,
    layer_types,
    model_level_window,
    no_kv,
    num_layers_of,
    text_cfg,
    unsupported_layer_type,
)
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.quant import quantization_info

# vLLM: transformers_utils/configs/dory.py DoryConfig defaults (vLLM's own configuration class)
DORY_DEFAULTS = {"num_hidden_layers": 72, "num_key_value_heads": 4, "head_dim": 256,
                 "max_position_embeddings": 8192, "sliding_window": 1024, "n_input_layers": 0,
                 "n_output_layers": 0, "n_recurrent_loops": 1}
# vLLM: dory.py DoryForCausalLM raises this ValueError for any other tensor-parallel size
TP_REFUSAL = "Dory currently supports tensor_parallel_size=1 only"


def _default_layer_types(n: int) -> list[str]:
    """DoryConfig.__post_init__: MLP blocks at odd positions; attention at the even ones, full
    where i % 8 == 6, else sliding."""
    return ["mlp" if i % 2 else "full_attention" if i % 8 == 6 else "sliding_attention"
            for i in range(n)]


def describe_dory(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/dory.py — DoryBackbone builds num_hidden_layers blocks at backbone.layers.{i};
    an attention block (DoryAttention, num_key_value_heads × head_dim; per-layer sliding_window
    on "sliding_attention" blocks) registers one Attention per recurrent loop when
    recurrent_kv_cache_mode is "per_loop" and the block is in the recurrent section
    (n_input_layers ≤ i < n_input_layers + n_recurrent_layers), named
    backbone.layers.{loop × num_hidden_layers + i}.mixer.attn; otherwise one, at loop 0. MLP
    blocks (DoryMLP) have no cache. The class is not SupportsPP and refuses TP > 1."""
    text = text_cfg(top)
    absent = {k: v for k, v in DORY_DEFAULTS.items() if not text.present(k)}
    if absent:
        text.warn("absent from config.json, so vLLM's DoryConfig defaults apply: "
                  + ", ".join(f"{text.field(k)} = {v}" for k, v in absent.items()))
        text = Cfg({**text.data, **absent}, text.source, text.path, text.warnings)
    n = num_layers_of(text)
    types = layer_types(text, n) or _default_layer_types(n)
    kv = text.req_int("num_key_value_heads")
    hd = text.req_int("head_dim")
    window = text.get_int("sliding_window", None)
    n_in = text.req_int("n_input_layers", minimum=0)
    n_out = text.req_int("n_output_layers", minimum=0)
    n_rec = text.get_int("n_recurrent_layers", n - n_in - n_out, minimum=0)
    loops = text.req_int("n_recurrent_loops")
    per_loop = text.get("recurrent_kv_cache_mode", "per_loop") == "per_loop"
    if n_in + (n_rec or 0) + n_out != n:  # DoryConfig.validate_architecture
        raise text.error("Dory input, recurrent, and output layers must sum to "
                         "num_hidden_layers")
    layers: list[LayerDescription] = []
    for i, t in enumerate(types):
        if t == "mlp":
            layers.append(no_kv(i, f"backbone.layers.{i}.mixer"))
            continue
        if t not in ("sliding_attention", "full_attention"):
            raise unsupported_layer_type(text, "layer_types", t, "dory")
        copies = loops if per_loop and n_in <= i < n_in + (n_rec or 0) else 1
        for loop in range(copies):
            layers.append(attention(i, f"backbone.layers.{loop * n + i}.mixer.attn",
                                    kv_heads=kv, head_size=hd,
                                    window=window if t == "sliding_attention" else None))
    desc = finish(top, text, family="dory", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(window, types))
    return desc.model_copy(update={"supports_pipeline_parallel": False,
                                   "tensor_parallel_refusal": TP_REFUSAL})
