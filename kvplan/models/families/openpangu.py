"""openPangu (PanguEmbedded, PanguProMoEV2, PanguUltraMoE): plain, attention-sink or MLA layers.

vLLM: models/openpangu.py OpenPanguDecoderLayer picks one attention for every layer from the
config (the checkpoint's remote config class; kvplan reads config.json, where `hasattr` means the
key is present):
  * MLA (qk_nope_head_dim, qk_rope_head_dim, v_head_dim and kv_lora_rank all present):
    OpenPanguMLAAttention → MLAAttention (kv_lora_rank + qk_rope_head_dim latent);
  * else attention sinks (param_sink_number > 0): OpenPanguSinkAttention → StaticSinkAttention,
    whose get_kv_cache_spec is a SinkFullAttentionSpec (K: qk_rope_dim + qk_nope_dim, V:
    v_channels, sink_len param_sink_number) whatever its sliding window;
  * else OpenPanguEmbeddedAttention: plain Attention (head_dim or hidden // heads), with the
    window `interleaved_sliding_window` gives (an int: every layer; a list: layer % len).
MTP (pangu_ultra_moe only; openpangu_mtp.py): num_nextn_predict_layers more decoder layers at
model.layers.{num_hidden_layers + k}, built like the others.
"""

from __future__ import annotations

from kvplan.errors import UnsupportedError
from kvplan.models._common import (
    SPECS_HINT,
    Cfg,
    attention,
    attn_name,
    finish,
    head_dim_of,
    kv_heads_of,
    layer_types,
    mla,
    model_level_window,
    num_layers_of,
    positive_window,
    text_cfg,
)
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.quant import quantization_info

MLA_KEYS = ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank")


def _window(cfg: Cfg, index: int, fallback: int | None) -> int | None:
    """vLLM: OpenPanguEmbeddedAttention / OpenPanguSinkAttention — `interleaved_sliding_window`
    (int: every layer; list: entry layer_idx % len); absent → Attention's model-level window."""
    if not cfg.present("interleaved_sliding_window"):
        return fallback
    value = cfg.raw("interleaved_sliding_window")
    if isinstance(value, list) and value:
        value = value[index % len(value)]
    if value is None:
        return None  # a null window: full attention
    if isinstance(value, bool) or not isinstance(value, int):
        raise cfg.error(f"field '{cfg.field('interleaved_sliding_window')}' must be an int or a "
                        f"list of ints, got {value!r}")
    return value


def describe_openpangu(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/openpangu.py (0.31–0.34 alike) PanguEmbeddedForCausalLM,
    PanguProMoEV2ForCausalLM and PanguUltraMoEForCausalLM."""
    text = text_cfg(top)
    n = num_layers_of(text)
    if text.get("is_causal", True) is False:
        raise UnsupportedError(
            f"{top.source}: openPangu with is_causal false runs encoder-only (bidirectional) "
            "attention, a pooling model with no KV cache for generation", hint=SPECS_HINT)
    use_mla = all(text.present(k) for k in MLA_KEYS)
    sink_len = text.get_int("param_sink_number", 0, minimum=0) or 0
    model_window = model_level_window(positive_window(text), layer_types(text, n))

    if use_mla:
        rank = text.req_int("kv_lora_rank", "multi-head latent attention")
        rope = text.req_int("qk_rope_head_dim", "multi-head latent attention", minimum=0)

        def layer(i: int) -> LayerDescription:
            return mla(i, attn_name(i), kv_lora_rank=rank, qk_rope_head_dim=rope)
    elif sink_len > 0:
        kv = kv_heads_of(text)
        head = (text.req_int("qk_rope_dim", "the sink attention head size", minimum=0)
                + text.req_int("qk_nope_dim", "the sink attention head size", minimum=0))
        v = text.req_int("v_channels", "the sink attention value size")

        def layer(i: int) -> LayerDescription:
            return LayerDescription(index=i, name=attn_name(i), kind=LayerKind.SINK_FULL_ATTENTION,
                                    num_kv_heads=kv, head_size=head,
                                    head_size_v=v if v != head else None, sink_len=sink_len)
    else:
        kv = kv_heads_of(text)
        hd = head_dim_of(text)

        def layer(i: int) -> LayerDescription:
            return attention(i, attn_name(i), kv_heads=kv, head_size=hd,
                             window=_window(text, i, model_window))

    n_mtp = 0
    if str(text.get("model_type", "")) == "pangu_ultra_moe":  # vLLM: SpeculativeConfig
        n_mtp = text.get_int("num_nextn_predict_layers", 0, minimum=0) or 0
    return finish(top, text, family="openpangu", layers=[layer(i) for i in range(n)],
                  quantization=quantization_info(top, text, hf_quant_config),
                  num_nextn_predict_layers=n_mtp, mtp_layers=[layer(n + k) for k in range(n_mtp)],
                  use_mla=use_mla, model_sliding_window=model_window)
