"""Encoder-decoder speech models vLLM serves: Whisper, NVIDIA Canary, Cohere ASR.

Only the decoder owns KV cache. Each decoder layer has a causal self-attention (`Attention`,
FullAttentionSpec) and a cross-attention over the encoder output (`CrossAttention`,
CrossAttentionSpec, sized by the scheduler's `max_num_encoder_input_tokens`); the audio
encoder's attention (MMEncoderAttention / Conformer attention) has no KV cache. KV heads are the
decoder's attention heads (no GQA), head size = hidden size // heads in all three model files.
"""

from __future__ import annotations

from kvplan.models._common import Cfg, finish
from kvplan.models._plain import class_int
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.max_len import derived_max_model_len
from kvplan.models.quant import quantization_info

ENCODER_NOTE = ("encoder-decoder: the decoder's self- and cross-attention KV cache is planned; "
                "the audio encoder's activations and vLLM's encoder cache "
                "(encoder_cache_size = max_num_batched_tokens) are not modelled")


def decoder_layers(num_layers: int, *, heads: int, hidden: int, self_name: str,
                   cross_name: str) -> list[LayerDescription]:
    """Per decoder layer: self-attention, then cross-attention (vLLM registers them in that
    order); both with `heads` KV heads of hidden // heads (vLLM: WhisperAttention /
    CohereASRAttention — num_kv_heads = heads, head_dim = embed_dim // heads)."""
    head_size = hidden // heads
    out = []
    for i in range(num_layers):
        for kind, name in ((LayerKind.FULL_ATTENTION, self_name),
                           (LayerKind.CROSS_ATTENTION, cross_name)):
            out.append(LayerDescription(index=i, name=name.format(i), kind=kind,
                                        num_kv_heads=heads, head_size=head_size))
    return out


def _model(top: Cfg, text: Cfg, quant: dict | None, *, family: str,
           layers: list[LayerDescription], lengths: dict[str, int]) -> ModelDescription:
    top.warn(ENCODER_NOTE)
    desc = finish(top, text, family=family, layers=layers, length_defaults=lengths,
                  quantization=quantization_info(top, text, quant))
    derived, _ = derived_max_model_len(desc)
    return desc.model_copy(update={"is_encoder_decoder": True, "max_position_embeddings":
                                   int(derived) if derived else None})


def describe_whisper(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/whisper.py WhisperDecoderLayer — self_attn (Attention) and encoder_attn
    (CrossAttention) with decoder_attention_heads heads of d_model // heads. The max length is
    max_target_positions (WhisperConfig has no max_position_embeddings). Layer names are vLLM's
    (the model is built with prefix "", and the layer lambda appends ".layers")."""
    cls = "WhisperConfig (transformers)"
    n = class_int(top, ("decoder_layers",), 4, cls)  # not num_hidden_layers: the encoder's
    heads = class_int(top, ("decoder_attention_heads",), 6, cls)
    hidden = class_int(top, ("d_model",), 384, cls)
    _whole_heads(top, hidden, heads, "d_model", "decoder_attention_heads")
    lengths = {"max_target_positions": class_int(top, ("max_target_positions",), 448, cls)}
    layers = decoder_layers(n, heads=heads, hidden=hidden,
                            self_name=".decoder.layers.{}.layers.self_attn.attn",
                            cross_name=".decoder.layers.{}.layers.encoder_attn.attn")
    return _model(top, top, hf_quant_config, family="whisper", layers=layers, lengths=lengths)


def describe_canary(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/canary.py CanaryDecoderLayer (CohereASRAttention / CrossAttention over
    hf_config.decoder_config). The text config is decoder_config (CanaryConfig.get_text_config):
    its max_position_embeddings is the max length. Defaults: CanaryDecoderConfig."""
    cls = "CanaryDecoderConfig (transformers)"
    dec = top.sub("decoder_config") or Cfg({}, top.source, "decoder_config.", top.warnings)
    n = class_int(dec, ("num_hidden_layers",), 8, cls)
    heads = class_int(dec, ("num_attention_heads",), 8, cls)
    hidden = class_int(dec, ("hidden_size",), 1024, cls)
    _whole_heads(dec, hidden, heads, "hidden_size", "num_attention_heads")
    lengths = {"max_position_embeddings": class_int(dec, ("max_position_embeddings",), 1024, cls)}
    layers = decoder_layers(n, heads=heads, hidden=hidden,
                            self_name="model.decoder.layers.{}.self_attn.attn",
                            cross_name="model.decoder.layers.{}.encoder_attn.attn")
    return _model(top, dec, hf_quant_config, family="canary", layers=layers, lengths=lengths)


def describe_cohere_asr(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/cohere_asr.py CohereASRDecoderLayer — first_sub_layer (Attention) and
    second_sub_layer (CrossAttention) from the NeMo-style transf_decoder.config_dict
    (hidden_size, num_attention_heads, num_layers; no defaults: vLLM reads them with .get).
    CohereAsrModelArchConfigConvertor.get_total_num_kv_heads asserts encoder.n_heads equals the
    decoder's heads. The max length comes from the top-level keys (CohereAsrConfig's
    max_position_embeddings, default 1024)."""
    tdec = top.sub("transf_decoder")
    dec = tdec.sub("config_dict") if tdec is not None else None
    if dec is None:
        raise top.error("required field 'transf_decoder.config_dict' is missing from "
                        "config.json (vLLM's cohere_asr.py reads the decoder from it)")
    n = dec.req_int("num_layers", "the decoder layers")
    heads = dec.req_int("num_attention_heads", "the decoder KV heads")
    hidden = dec.req_int("hidden_size", "the decoder head size")
    _whole_heads(dec, hidden, heads, "hidden_size", "num_attention_heads")
    enc = top.sub("encoder")
    enc_heads = enc.get_int("n_heads", None) if enc is not None else None
    if enc_heads is not None and enc_heads != heads:
        raise top.error(f"encoder.n_heads ({enc_heads}) differs from the decoder's "
                        f"num_attention_heads ({heads}): vLLM asserts 'Encoder and decoder must "
                        "have the same number of kv heads'")
    lengths = {"max_position_embeddings": class_int(top, ("max_position_embeddings",), 1024,
                                                    "CohereAsrConfig (transformers)")}
    layers = decoder_layers(n, heads=heads, hidden=hidden,
                            self_name="decoder.layers.{}.layers.first_sub_layer.attn",
                            cross_name="decoder.layers.{}.layers.second_sub_layer.attn")
    return _model(top, top, hf_quant_config, family="cohere_asr", layers=layers,
                  lengths=lengths)


def _whole_heads(cfg: Cfg, hidden: int, heads: int, hidden_key: str, heads_key: str) -> None:
    """vLLM raises 'embed_dim must be divisible by num_heads' (WhisperAttention,
    CohereASRAttention)."""
    if hidden % heads:
        raise cfg.error(f"'{cfg.field(hidden_key)}' ({hidden}) is not divisible by "
                        f"'{cfg.field(heads_key)}' ({heads}): vLLM raises 'embed_dim must be "
                        "divisible by num_heads'")
