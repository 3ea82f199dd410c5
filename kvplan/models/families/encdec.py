"""Encoder-decoder speech models vLLM serves: Whisper, NVIDIA Canary, Cohere ASR.

Only the decoder owns KV cache. Each decoder layer has a causal self-attention (`Attention`,
FullAttentionSpec) and a cross-attention over the encoder output (`CrossAttention`,
CrossAttentionSpec, sized by the scheduler's `max_num_encoder_input_tokens`); the audio
encoder's attention (MMEncoderAttention / Conformer attention) has no KV cache. KV heads are the
decoder's attention heads (no GQA), head size = hidden size // heads in all three model files.
"""

from __future__ import annotations

from kvplan.models._common import Cfg, finish
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.families._plain import class_int
from kvplan.models.quant import quantization_info
from kvplan.models.resolution.max_len import derived_max_model_len

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
    # vLLM's encoder-decoder models are not SupportsPP (ModelConfig.verify_with_parallel_config)
    return desc.model_copy(update={"is_encoder_decoder": True, "supports_pipeline_parallel": False,
                                   "max_position_embeddings": int(derived) if derived else None})


def describe_whisper(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/whisper.py WhisperDecoderLayer — self_attn (Attention) and encoder_attn
    (CrossAttention) with decoder_attention_heads heads of d_model // heads. The max length is
    max_target_positions (WhisperConfig has no max_position_embeddings). Layer names are vLLM's
    (the model is built with prefix "", and the layer lambda appends ".layers")."""
    # decoder_layers, not num_hidden_layers (the attribute map points it at the encoder's)
    return _class_model(top, top, hf_quant_config, "whisper", "WhisperConfig (transformers)",
                        ("decoder_layers", "decoder_attention_heads", "d_model", 4, 6, 384),
                        ("max_target_positions", 448),
                        (".decoder.layers.{}.layers.self_attn.attn",
                         ".decoder.layers.{}.layers.encoder_attn.attn"))


def describe_canary(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/canary.py CanaryDecoderLayer (CohereASRAttention / CrossAttention over
    hf_config.decoder_config). The text config is decoder_config (CanaryConfig.get_text_config):
    its max_position_embeddings is the max length. Defaults: CanaryDecoderConfig."""
    dec = top.sub("decoder_config") or Cfg({}, top.source, "decoder_config.", top.warnings)
    return _class_model(top, dec, hf_quant_config, "canary", "CanaryDecoderConfig (transformers)",
                        ("num_hidden_layers", "num_attention_heads", "hidden_size", 8, 8, 1024),
                        ("max_position_embeddings", 1024),
                        ("model.decoder.layers.{}.self_attn.attn",
                         "model.decoder.layers.{}.encoder_attn.attn"))


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
    layers = _decoder(dec, "vLLM's cohere_asr.py", ("num_layers", "num_attention_heads",
                                                   "hidden_size"), (None, None, None),
                      ("decoder.layers.{}.layers.first_sub_layer.attn",
                       "decoder.layers.{}.layers.second_sub_layer.attn"))
    heads = layers[0].num_kv_heads  # num_layers ≥ 1 (required)
    enc = top.sub("encoder")
    enc_heads = enc.get_int("n_heads", None) if enc is not None else None
    if enc_heads is not None and enc_heads != heads:
        raise top.error(f"encoder.n_heads ({enc_heads}) differs from the decoder's "
                        f"num_attention_heads ({heads}): vLLM asserts 'Encoder and decoder must "
                        "have the same number of kv heads'")
    lengths = {"max_position_embeddings": class_int(top, ("max_position_embeddings",), 1024,
                                                    "CohereAsrConfig (transformers)")}
    return _model(top, top, hf_quant_config, family="cohere_asr", layers=layers,
                  lengths=lengths)


def _class_model(top: Cfg, dec: Cfg, quant: dict | None, family: str, cls: str,
                 fields: tuple[str, str, str, int, int, int], length: tuple[str, int],
                 names: tuple[str, str]) -> ModelDescription:
    """A decoder whose (layers, heads, hidden size) and max-length fields have class defaults."""
    layers = _decoder(dec, cls, fields[:3], fields[3:], names)
    lengths = {length[0]: class_int(dec, (length[0],), length[1], cls)}
    return _model(top, dec, quant, family=family, layers=layers, lengths=lengths)


def _decoder(cfg: Cfg, cls: str, keys: tuple[str, str, str],
             defaults: tuple[int | None, int | None, int | None],
             names: tuple[str, str]) -> list[LayerDescription]:
    """The decoder's KV layers from its (layers, heads, hidden size) fields, each with the
    config class's default (None: required)."""
    n, heads, hidden = (class_int(cfg, (k,), d, cls) for k, d in zip(keys, defaults, strict=True))
    _whole_heads(cfg, hidden, heads, keys[2], keys[1])
    return decoder_layers(n, heads=heads, hidden=hidden, self_name=names[0], cross_name=names[1])


def _whole_heads(cfg: Cfg, hidden: int, heads: int, hidden_key: str, heads_key: str) -> None:
    """vLLM raises 'embed_dim must be divisible by num_heads' (WhisperAttention,
    CohereASRAttention)."""
    if hidden % heads:
        raise cfg.error(f"'{cfg.field(hidden_key)}' ({hidden}) is not divisible by "
                        f"'{cfg.field(heads_key)}' ({heads}): vLLM raises 'embed_dim must be "
                        "divisible by num_heads'")
