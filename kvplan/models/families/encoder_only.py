"""Encoder-only pooling models (BERT, RoBERTa, XLM-R, GTE, Nomic BERT, ModernBERT, ColBERT):
every attention layer is EncoderOnlyAttention, which owns no KV cache (kvplan.models.pooling)."""

from __future__ import annotations

from typing import Any

from kvplan.models._common import Cfg, finish, model_dtype, num_layers_of, text_cfg, without_pipeline_parallel
from kvplan.models.description import LayerDescription, LayerKind, ModelDescription
from kvplan.models.quant import quantization_info


def describe_encoder_only(top: Cfg, hf_quant_config: dict[str, Any] | None
                          ) -> ModelDescription:
    """A BERT-style encoder: num_hidden_layers EncoderOnlyAttention layers (no KV cache)."""
    text = text_cfg(top)
    num_layers = num_layers_of(text)
    heads = text.req_int("num_attention_heads")
    hidden = text.req_int("hidden_size")
    head = text.get_int("head_dim", None) or hidden // heads
    layers = [LayerDescription(index=i, name=f"encoder.layer.{i}.attention.attn",
                               kind=LayerKind.ENCODER_ONLY, num_kv_heads=heads, head_size=head)
              for i in range(num_layers)]
    desc = finish(top, text, family="encoder_only", layers=layers,
                  dtype=model_dtype(top, text),
                  quantization=quantization_info(top, text, hf_quant_config))
    # vLLM 0.31–0.34: none of these classes is SupportsPP (bert.py, roberta.py, bert_with_rope.py,
    # modernbert.py, colbert.py: BertEmbeddingModel, RobertaForSequenceClassification,
    # ModernBertModel, ColBERTModel, ...)
    return without_pipeline_parallel(desc, top)
