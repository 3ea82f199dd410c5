"""Cosmos3 Edge: a SigLIP2 vision tower over a dense text model that vLLM runs as Nemotron-H
attention and MLP layers, interleaved."""

from __future__ import annotations

from kvplan.models._common import (
    Cfg,
    attention,
    finish,
    model_level_window,
    no_kv,
    note_encoder_cache,
    num_layers_of,
    positive_window,
)
from kvplan.models.description import LayerDescription, ModelDescription
from kvplan.models.quant import quantization_info

# transformers' Cosmos3EdgeTextConfig defaults (vLLM 0.33+ reads it; 0.31–0.32's own class, a
# NemotronHConfig, has the same ones)
TEXT_DEFAULTS = {"num_hidden_layers": 28, "num_key_value_heads": 8, "head_dim": 128,
                 "hidden_size": 2048, "num_attention_heads": 16,
                 "max_position_embeddings": 131072}
# the wrapper builds its language model under `language_model` (Cosmos3EdgeForCausalLM → model)
PREFIX = "language_model.model.layers"


def describe_cosmos3_edge(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/cosmos3_edge.py — the text config's num_hidden_layers N decoder blocks become
    2N Nemotron-H layers, ["full_attention", "mlp"] × N (0.33+: _to_nemotron_h_config; 0.31–0.32:
    the config class's hybrid_override_pattern "*-" × N): attention at language_model.model.
    layers.{2i}.mixer.attn (NemotronHAttention: num_key_value_heads × head_dim, else hidden_size
    // num_attention_heads; the config's sliding_window if set), an MLP with no cache at
    {2i + 1}. The vision tower's encoder cache is not modelled."""
    # Cosmos3EdgeConfig: text_config absent → the text class's defaults
    text = top.sub("text_config")
    if text is None:
        text = Cfg({}, top.source, "text_config.", top.warnings)
    absent = {k: v for k, v in TEXT_DEFAULTS.items() if not text.present(k)}
    if absent:
        text.warn("absent from config.json, so Cosmos3EdgeTextConfig's defaults apply: "
                  + ", ".join(f"{text.field(k)} = {v}" for k, v in absent.items()))
        text = Cfg({**text.data, **absent}, text.source, text.path, text.warnings)
    n = num_layers_of(text)
    kv = text.req_int("num_key_value_heads")
    hd = text.get_int("head_dim", None) or (text.req_int("hidden_size")
                                            // text.req_int("num_attention_heads"))
    window = positive_window(text)
    layers: list[LayerDescription] = []
    for i in range(n):
        layers.append(attention(2 * i, f"{PREFIX}.{2 * i}.mixer.attn", kv_heads=kv,
                                head_size=hd, window=window))
        layers.append(no_kv(2 * i + 1, f"{PREFIX}.{2 * i + 1}.mixer"))
    note_encoder_cache(top)
    return finish(top, text, family="cosmos3_edge", layers=layers,
                  quantization=quantization_info(top, text, hf_quant_config),
                  model_sliding_window=model_level_window(window, None))
