"""ChatGLM2/3 and GLM-4 (model_type chatglm, ChatGLMModel / ChatGLMForConditionalGeneration).

Transformers has no class for it; vLLM registers its own ChatGLMConfig
(vllm/transformers_utils/configs/chatglm.py), whose defaults are applied here by hand.
"""

from __future__ import annotations

import json

from kvplan.errors import UnsupportedError
from kvplan.models._common import Cfg
from kvplan.models.description import ModelDescription
from kvplan.models.families._plain import class_int, class_lengths, plain_model, uniform_layers

_CLS = "ChatGLMConfig (vLLM transformers_utils/configs/chatglm.py)"


def describe_chatglm(top: Cfg, hf_quant_config: dict | None) -> ModelDescription:
    """vLLM: models/chatglm.py GLMAttention — KV heads = multi_query_group_num when
    multi_query_attention, else num_attention_heads; head size = hidden_size // heads
    (kv_channels is not read)."""
    if top.has("vision_config"):
        # vLLM: chatglm.py ChatGLMForCausalLM.__init__ raises for a config with vision_config
        overrides = json.dumps({"architectures": ["GLM4VForCausalLM"]})
        raise UnsupportedError(
            f"{top.source}: this ChatGLM config has a vision_config (GLM-4V): vLLM refuses it as "
            f"ChatGLM and serves it only with --hf-overrides '{overrides}', which kvplan does "
            "not plan", hint="describe the language model with `kvplan check --specs FILE.json`")
    # attribute_map: num_hidden_layers → num_layers, n_head_kv → multi_query_group_num; the
    # alias, when given, is set last and wins.
    n = class_int(top, ("num_hidden_layers", "num_layers"), 28, _CLS)
    heads = class_int(top, ("num_attention_heads",), 32, _CLS)
    hidden = class_int(top, ("hidden_size",), 4096, _CLS)
    if bool(top.get("multi_query_attention", False)):
        kv = class_int(top, ("n_head_kv", "multi_query_group_num"), 1, _CLS)
    else:
        kv = heads
    head_size = hidden // heads
    kv_channels = top.get_int("kv_channels", None)
    if kv_channels is not None and kv_channels != head_size:
        top.warn(f"kv_channels {kv_channels} differs from hidden_size // num_attention_heads "
                 f"{head_size}: vLLM's GLMAttention uses the latter as the head size")
    # ChatGLMConfig: max_position_embeddings = seq_length (default 2048)
    seq_length = class_int(top, ("seq_length",), 2048, _CLS)
    lengths = class_lengths(top, {"seq_length": seq_length,
                                  "max_position_embeddings": seq_length})
    layers = uniform_layers(n, "transformer.encoder.layers.{}.self_attention.attn",
                            kv_heads=kv, head_size=head_size)
    return plain_model(top, top, hf_quant_config, family="chatglm", layers=layers,
                       lengths=lengths)
