"""How the weight estimate reads a raw HF config: the text config with the standard field names
(families whose config class names or defaults them otherwise), each layer's kind, and which
layers hold a MoE block. No I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.models._common import TEXT_CONFIG_KEYS


class ConfigView:
    """Field access on the text config with fallback to the top level."""

    def __init__(self, config: Mapping[str, Any]):
        if not isinstance(config, Mapping):
            raise ConfigError("the model config must be a JSON object")
        self.top = config
        self.text = _with_standard_names(next(
            (config[k] for k in TEXT_CONFIG_KEYS if isinstance(config.get(k), Mapping)), config))

    def with_fields(self, **fields: Any) -> ConfigView:
        """A copy whose text config has `fields` replaced (one layer's own values)."""
        copy = ConfigView(self.top)
        copy.text = {**self.text, **fields}
        return copy

    def get(self, *keys: str, default: Any = None) -> Any:
        for k in keys:
            if k in self.text and self.text[k] is not None:
                return self.text[k]
        for k in keys:
            if k in self.top and self.top[k] is not None:
                return self.top[k]
        return default

    def req(self, *keys: str) -> Any:
        v = self.get(*keys)
        if v is None:
            raise ConfigError(f"config has no {' / '.join(keys)}",
                              hint="weights cannot be estimated without it; give the checkpoint's "
                                   "safetensors files instead")
        return v


_MINICPM3_DEFAULTS = {"num_hidden_layers": 62, "hidden_size": 2560, "num_attention_heads": 40,
                      "intermediate_size": 6400, "vocab_size": 73448, "kv_lora_rank": 256,
                      "q_lora_rank": 768, "qk_nope_head_dim": 64, "qk_rope_head_dim": 32,
                      "tie_word_embeddings": True}


_INTERNLM2_DEFAULTS = {"num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
                       "intermediate_size": 11008, "vocab_size": 103168}


def _with_standard_names(text: Mapping[str, Any]) -> Mapping[str, Any]:
    """The text config with the standard field names this estimate reads, for families whose
    config class (vLLM's own or remote code) names them otherwise or defaults them differently."""
    model_type = str(text.get("model_type", ""))
    extra: dict[str, Any] = {}
    if model_type == "chatglm":
        # vLLM ChatGLMConfig (transformers_utils/configs/chatglm.py) defaults; models/chatglm.py:
        # query_key_value has bias add_bias_linear or add_qkv_bias, dense_h_to_4h is gated (2 ×)
        heads = int(text.get("num_attention_heads") or 32)
        hidden = int(text.get("hidden_size") or 4096)
        mqa = bool(text.get("multi_query_attention"))
        extra = {"num_hidden_layers": text.get("num_layers") or 28, "hidden_size": hidden,
                 "num_attention_heads": heads,
                 "num_key_value_heads": (text.get("multi_query_group_num") or 1) if mqa else heads,
                 "head_dim": hidden // heads, "vocab_size": text.get("padded_vocab_size") or 65024,
                 "intermediate_size": text.get("ffn_hidden_size") or 13696,
                 "attention_bias": bool(text.get("add_bias_linear")),
                 "qkv_bias": bool(text.get("add_bias_linear") or text.get("add_qkv_bias"))}
    elif model_type == "minicpm3":
        # transformers MiniCPM3Config defaults; v_head_dim None → hidden_size // heads
        extra = {k: v for k, v in _MINICPM3_DEFAULTS.items() if k not in text}
        extra["v_head_dim"] = text.get("v_head_dim") or (
            int(text.get("hidden_size") or 2560) // int(text.get("num_attention_heads") or 40))
    elif model_type == "deepseek_v2":
        # transformers DeepseekV2Config defaults (also DeepSeek-VL2's language_config in vLLM)
        from kvplan.models.families._shared import DEEPSEEK_V2_DEFAULTS
        extra = {k: v for k, v in DEEPSEEK_V2_DEFAULTS.items() if k not in text}
    elif model_type == "internlm2":
        # remote InternLM2Config defaults; vLLM internlm2.py: wqkv/wo bias=False
        extra = {k: v for k, v in _INTERNLM2_DEFAULTS.items() if text.get(k) is None}
        extra.update(attention_bias=False, bias=False)
    elif model_type == "exaone":
        # remote ExaoneConfig defaults (num_layers 32, hidden 2048, intermediate 4 × hidden)
        hidden = int(text.get("hidden_size") or 2048)
        extra = {"num_hidden_layers": text.get("num_layers") or 32, "hidden_size": hidden,
                 "num_attention_heads": text.get("num_attention_heads") or 32,
                 "vocab_size": text.get("vocab_size") or 102400,
                 "intermediate_size": text.get("intermediate_size") or 4 * hidden}
    return {**text, **extra} if extra else text


def layer_kinds(c: ConfigView, num_layers: int) -> list[str]:
    """Per layer: 'attention', 'sliding', 'gdn', 'mamba2', 'mlp_only' (NemotronH '-'), 'moe_only'."""
    pattern = c.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == num_layers:
        table = {"M": "mamba2", "*": "attention", "-": "mlp_only", "E": "moe_only"}
        return [table.get(ch, "attention") for ch in pattern]
    types = c.get("layer_types")
    if isinstance(types, list) and len(types) == num_layers:
        out = []
        for t in types:
            t = str(t)
            if t in ("linear_attention", "gated_deltanet", "gdn"):
                out.append("gdn")
            elif t in ("mamba", "mamba2"):
                out.append("mamba2")
            elif "sliding" in t or t in ("chunked_attention", "local"):
                out.append("sliding")
            else:
                out.append("attention")
        return out
    interval = c.get("full_attention_interval")
    if interval and c.get("linear_num_value_heads"):
        return ["attention" if (i + 1) % int(interval) == 0 else "gdn" for i in range(num_layers)]
    hybrid = c.get("hybrid_layer_pattern")  # MiMo-V2: 1 = sliding window, 0 = full
    if isinstance(hybrid, list) and len(hybrid) == num_layers:
        return ["sliding" if int(x) == 1 else "attention" for x in hybrid]
    return ["attention"] * num_layers


def num_experts(c: ConfigView) -> int:
    return int(c.get("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts",
                     default=0) or 0)


def is_moe_layer(c: ConfigView, i: int, kind: str) -> bool:
    if kind == "moe_only":
        return True
    if kind in ("mlp_only", "mamba2") and c.get("hybrid_override_pattern"):
        return False
    if num_experts(c) <= 0:
        return False
    if c.get("enable_moe_block") is False:
        return False
    mlp_only = c.get("mlp_only_layers") or []
    if i in mlp_only:
        return False
    k = c.get("first_k_dense_replace")
    freq = c.get("moe_layer_freq")
    if isinstance(freq, list):
        return i < len(freq) and bool(freq[i])
    if k is not None and i < int(k):
        return False
    if freq is not None and int(freq) > 1 and i % int(freq) != 0:
        return False
    step = c.get("decoder_sparse_step")
    if step is not None and int(step) > 1 and (i + 1) % int(step) != 0:
        return False
    return True
