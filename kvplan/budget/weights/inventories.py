"""Weight bytes estimated from the raw HF config (no safetensors metadata): virtual tensors for
every part (embeddings, attention/MLA, MLP/MoE, Mamba2, gated delta net, MTP, vision, draft heads),
parameter counts, and bytes from the quantization the config declares. No I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from kvplan.budget.weights.core import (
    Placement,
    ShardKind,
    WeightBytes,
    WeightGroup,
    _Frozen,
    _numel,
    classify_tensor,
)
from kvplan.errors import ConfigError
from kvplan.models._common import TEXT_CONFIG_KEYS
from kvplan.units import cdiv, dtype_size_bytes


@dataclass(frozen=True)
class VirtualTensor:
    """One (or `count` identical) checkpoint tensor(s) implied by the config."""

    name: str  # checkpoint-style name, e.g. model.layers.3.self_attn.q_proj.weight
    shape: tuple[int, ...]  # (out, in) for linears
    role: str  # linear | embed | lm_head | norm | param | router
    count: int = 1

    @property
    def numel(self) -> int:
        return _numel(self.shape) * self.count

    @property
    def module(self) -> str:
        return self.name.rsplit(".", 1)[0]


class _Cfg:
    """Field access on the text config with fallback to the top level."""

    def __init__(self, config: Mapping[str, Any]):
        if not isinstance(config, Mapping):
            raise ConfigError("the model config must be a JSON object")
        self.top = config
        self.text = _with_standard_names(next(
            (config[k] for k in TEXT_CONFIG_KEYS if isinstance(config.get(k), Mapping)), config))

    def with_fields(self, **fields: Any) -> _Cfg:
        """A copy whose text config has `fields` replaced (one layer's own values)."""
        copy = _Cfg(self.top)
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
        from kvplan.models.deepseek import DEEPSEEK_V2_DEFAULTS
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


def _layer_kinds(c: _Cfg, num_layers: int) -> list[str]:
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


def _num_experts(c: _Cfg) -> int:
    return int(c.get("n_routed_experts", "num_experts", "num_local_experts", "moe_num_experts",
                     default=0) or 0)


def _is_moe_layer(c: _Cfg, i: int, kind: str) -> bool:
    if kind == "moe_only":
        return True
    if kind in ("mlp_only", "mamba2") and c.get("hybrid_override_pattern"):
        return False
    if _num_experts(c) <= 0:
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


def _attention_tensors(c: _Cfg, p: str, kind: str, hidden: int, in_dim: int,
                       model_type: str) -> list[VirtualTensor]:
    heads = int(c.req("num_attention_heads", "n_head", "num_heads"))
    out: list[VirtualTensor] = []
    lin = "linear"
    kv_lora = c.get("kv_lora_rank")
    if kv_lora:  # MLA
        nope = int(c.req("qk_nope_head_dim"))
        rope = int(c.req("qk_rope_head_dim"))
        v_dim = int(c.get("v_head_dim", default=nope))
        q_lora = c.get("q_lora_rank")
        if q_lora:
            out += [VirtualTensor(f"{p}.self_attn.q_a_proj.weight", (int(q_lora), in_dim), lin),
                    VirtualTensor(f"{p}.self_attn.q_a_layernorm.weight", (int(q_lora),), "norm"),
                    VirtualTensor(f"{p}.self_attn.q_b_proj.weight",
                                  (heads * (nope + rope), int(q_lora)), lin)]
        else:
            out.append(VirtualTensor(f"{p}.self_attn.q_proj.weight", (heads * (nope + rope), in_dim),
                                     lin))
        out += [VirtualTensor(f"{p}.self_attn.kv_a_proj_with_mqa.weight", (int(kv_lora) + rope, in_dim),
                              lin),
                VirtualTensor(f"{p}.self_attn.kv_a_layernorm.weight", (int(kv_lora),), "norm"),
                VirtualTensor(f"{p}.self_attn.kv_b_proj.weight", (heads * (nope + v_dim), int(kv_lora)),
                              lin),
                VirtualTensor(f"{p}.self_attn.o_proj.weight", (hidden, heads * v_dim), lin)]
        if c.get("index_head_dim") and c.get("index_n_heads"):  # DeepSeek V3.2 sparse indexer
            ih, inh = int(c.get("index_head_dim")), int(c.get("index_n_heads"))
            out += [VirtualTensor(f"{p}.self_attn.indexer.wq_b.weight", (inh * ih, int(q_lora or in_dim)),
                                  lin),
                    VirtualTensor(f"{p}.self_attn.indexer.wk.weight", (ih, in_dim), lin),
                    VirtualTensor(f"{p}.self_attn.indexer.k_norm.weight", (ih,), "norm"),
                    VirtualTensor(f"{p}.self_attn.indexer.k_norm.bias", (ih,), "norm"),
                    VirtualTensor(f"{p}.self_attn.indexer.weights_proj.weight", (inh, in_dim), "param")]
        return out
    kv_heads = int(c.get("num_key_value_heads", "n_head_kv", default=heads))
    head_dim = int(c.get("head_dim", "attention_head_dim", default=hidden // heads))
    v_head = int(c.get("v_head_dim", default=head_dim))
    if kind == "sliding" and c.get("swa_num_attention_heads"):
        heads = int(c.get("swa_num_attention_heads"))
        kv_heads = int(c.get("swa_num_key_value_heads", default=kv_heads))
        head_dim = int(c.get("swa_head_dim", default=head_dim))
        v_head = int(c.get("swa_v_head_dim", default=v_head))
    k_eq_v = False
    if kind == "attention" and c.get("global_head_dim"):  # Gemma 4 global layers
        head_dim = v_head = int(c.get("global_head_dim"))
        kv_heads = int(c.get("num_global_key_value_heads", default=kv_heads))
        k_eq_v = bool(c.get("attention_k_eq_v"))
    gate = bool(c.get("attn_output_gate", default=model_type == "qwen3_next"))
    q_out = heads * head_dim * (2 if gate else 1)
    bias = bool(c.get("attention_bias", "bias", default=False))
    qkv_bias = bias or model_type.startswith(("qwen2", "qwen1")) or bool(c.get("qkv_bias"))
    out += [VirtualTensor(f"{p}.self_attn.q_proj.weight", (q_out, in_dim), lin),
            VirtualTensor(f"{p}.self_attn.k_proj.weight", (kv_heads * head_dim, in_dim), lin)]
    if not k_eq_v:
        out.append(VirtualTensor(f"{p}.self_attn.v_proj.weight", (kv_heads * v_head, in_dim), lin))
    out.append(VirtualTensor(f"{p}.self_attn.o_proj.weight", (hidden, heads * v_head), lin))
    if qkv_bias:
        out += [VirtualTensor(f"{p}.self_attn.q_proj.bias", (q_out,), "param"),
                VirtualTensor(f"{p}.self_attn.k_proj.bias", (kv_heads * head_dim,), "param")]
        if not k_eq_v:
            out.append(VirtualTensor(f"{p}.self_attn.v_proj.bias", (kv_heads * v_head,), "param"))
    if bias:
        out.append(VirtualTensor(f"{p}.self_attn.o_proj.bias", (hidden,), "param"))
    if model_type.startswith(("qwen3", "gemma3", "gemma4", "olmo2", "minimax_m2")) or c.get("use_qk_norm"):
        out += [VirtualTensor(f"{p}.self_attn.q_norm.weight", (head_dim,), "norm"),
                VirtualTensor(f"{p}.self_attn.k_norm.weight", (head_dim,), "norm")]
    if model_type == "gpt_oss" or (kind == "sliding" and c.get("add_swa_attention_sink_bias")) or (
            kind == "attention" and c.get("add_full_attention_sink_bias")):
        out.append(VirtualTensor(f"{p}.self_attn.sinks", (heads,), "param"))
    return out


def _mlp_tensors(p: str, hidden: int, inter: int, *, gated: bool, bias: bool,
                 prefix: str = "mlp") -> list[VirtualTensor]:
    out = []
    if gated:
        out += [VirtualTensor(f"{p}.{prefix}.gate_proj.weight", (inter, hidden), "linear"),
                VirtualTensor(f"{p}.{prefix}.up_proj.weight", (inter, hidden), "linear")]
    else:
        out.append(VirtualTensor(f"{p}.{prefix}.up_proj.weight", (inter, hidden), "linear"))
    out.append(VirtualTensor(f"{p}.{prefix}.down_proj.weight", (hidden, inter), "linear"))
    if bias:
        out += [VirtualTensor(f"{p}.{prefix}.up_proj.bias", (inter,), "param"),
                VirtualTensor(f"{p}.{prefix}.down_proj.bias", (hidden,), "param")]
        if gated:
            out.append(VirtualTensor(f"{p}.{prefix}.gate_proj.bias", (inter,), "param"))
    return out


def _moe_tensors(c: _Cfg, p: str, hidden: int, model_type: str) -> list[VirtualTensor]:
    experts = _num_experts(c)
    inter = int(c.get("moe_intermediate_size", "expert_intermediate_size", default=0) or
                c.req("intermediate_size"))
    out = [VirtualTensor(f"{p}.mlp.gate.weight", (experts, hidden), "router")]
    if model_type == "gpt_oss":
        out = [VirtualTensor(f"{p}.mlp.router.weight", (experts, hidden), "router"),
               VirtualTensor(f"{p}.mlp.router.bias", (experts,), "router"),
               VirtualTensor(f"{p}.mlp.experts.gate_up_proj", (2 * inter, hidden), "linear", experts),
               VirtualTensor(f"{p}.mlp.experts.gate_up_proj_bias", (2 * inter,), "param", experts),
               VirtualTensor(f"{p}.mlp.experts.down_proj", (hidden, inter), "linear", experts),
               VirtualTensor(f"{p}.mlp.experts.down_proj_bias", (hidden,), "param", experts)]
        return out
    if c.get("hybrid_override_pattern"):
        return out + _nemotron_h_moe_tensors(c, p, hidden, experts, inter)
    if c.get("topk_method") == "noaux_tc" or c.get("use_routing_bias"):
        out.append(VirtualTensor(f"{p}.mlp.gate.e_score_correction_bias", (experts,), "router"))
    out += [VirtualTensor(f"{p}.mlp.experts.gate_proj.weight", (inter, hidden), "linear", experts),
            VirtualTensor(f"{p}.mlp.experts.up_proj.weight", (inter, hidden), "linear", experts),
            VirtualTensor(f"{p}.mlp.experts.down_proj.weight", (hidden, inter), "linear", experts)]
    n_shared = c.get("n_shared_experts", "num_shared_experts")
    shared_inter = c.get("shared_expert_intermediate_size", "shared_intermediate_size")
    if n_shared:
        out += _mlp_tensors(p, hidden, int(n_shared) * inter, gated=True, bias=False,
                            prefix="mlp.shared_experts")
    elif shared_inter:
        out += _mlp_tensors(p, hidden, int(shared_inter), gated=True, bias=False,
                            prefix="mlp.shared_expert")
        if model_type.startswith(("qwen2_moe", "qwen3_next", "qwen3_5")):
            out.append(VirtualTensor(f"{p}.mlp.shared_expert_gate.weight", (1, hidden), "router"))
    return out


def _nemotron_h_moe_tensors(c: _Cfg, p: str, hidden: int, experts: int, inter: int
                            ) -> list[VirtualTensor]:
    """vLLM: models/nemotron_h.py NemotronHMoE — non-gated experts (activation_without_mul) on
    moe_latent_size inputs when set (fc1/fc2_latent_proj around them), non-gated shared experts
    of n_shared_experts × moe_shared_expert_intermediate_size, an e_score_correction_bias."""
    latent = c.get("moe_latent_size")
    width = int(latent) if latent is not None else hidden
    bias = bool(c.get("mlp_bias"))
    out = [VirtualTensor(f"{p}.mixer.gate.e_score_correction_bias", (experts,), "router"),
           VirtualTensor(f"{p}.mixer.experts.up_proj.weight", (inter, width), "linear", experts),
           VirtualTensor(f"{p}.mixer.experts.down_proj.weight", (width, inter), "linear", experts)]
    if latent is not None:
        out += [VirtualTensor(f"{p}.mixer.fc1_latent_proj.weight", (width, hidden), "linear"),
                VirtualTensor(f"{p}.mixer.fc2_latent_proj.weight", (hidden, width), "linear")]
    n_shared = int(c.get("n_shared_experts", default=0) or 0)
    if n_shared:
        shared = n_shared * int(c.get("moe_shared_expert_intermediate_size", default=inter))
        out += _mlp_tensors(p, hidden, shared, gated=False, bias=bias,
                            prefix="mixer.shared_experts")
    return out


def _mamba2_tensors(c: _Cfg, p: str, hidden: int) -> list[VirtualTensor]:
    heads = int(c.req("mamba_num_heads", "num_heads"))
    head_dim = int(c.req("mamba_head_dim", "head_dim"))
    d_inner = heads * head_dim
    groups = int(c.get("n_groups", default=1))
    state = int(c.req("ssm_state_size", "state_size"))
    kernel = int(c.get("conv_kernel", "d_conv", default=4))
    conv_dim = d_inner + 2 * groups * state
    out = [VirtualTensor(f"{p}.mixer.in_proj.weight", (2 * d_inner + 2 * groups * state + heads, hidden),
                         "linear"),
           VirtualTensor(f"{p}.mixer.conv1d.weight", (conv_dim, 1, kernel), "param"),
           VirtualTensor(f"{p}.mixer.dt_bias", (heads,), "param"),
           VirtualTensor(f"{p}.mixer.A_log", (heads,), "param"),
           VirtualTensor(f"{p}.mixer.D", (heads,), "param"),
           VirtualTensor(f"{p}.mixer.norm.weight", (d_inner,), "param"),
           VirtualTensor(f"{p}.mixer.out_proj.weight", (hidden, d_inner), "linear")]
    if c.get("use_conv_bias", default=True):
        out.append(VirtualTensor(f"{p}.mixer.conv1d.bias", (conv_dim,), "param"))
    if c.get("mamba_proj_bias"):
        out += [VirtualTensor(f"{p}.mixer.in_proj.bias", (2 * d_inner + 2 * groups * state + heads,),
                              "param"),
                VirtualTensor(f"{p}.mixer.out_proj.bias", (hidden,), "param")]
    return out


def _gdn_tensors(c: _Cfg, p: str, hidden: int) -> list[VirtualTensor]:
    nk = int(c.req("linear_num_key_heads"))
    nv = int(c.req("linear_num_value_heads"))
    dk = int(c.req("linear_key_head_dim"))
    dv = int(c.req("linear_value_head_dim"))
    kernel = int(c.get("linear_conv_kernel_dim", default=4))
    key_dim, value_dim = nk * dk, nv * dv
    return [VirtualTensor(f"{p}.linear_attn.in_proj_qkvz.weight", (2 * key_dim + 2 * value_dim, hidden),
                          "linear"),
            VirtualTensor(f"{p}.linear_attn.in_proj_ba.weight", (2 * nv, hidden), "linear"),
            VirtualTensor(f"{p}.linear_attn.conv1d.weight", (2 * key_dim + value_dim, 1, kernel), "param"),
            VirtualTensor(f"{p}.linear_attn.dt_bias", (nv,), "param"),
            VirtualTensor(f"{p}.linear_attn.A_log", (nv,), "param"),
            VirtualTensor(f"{p}.linear_attn.norm.weight", (dv,), "norm"),
            VirtualTensor(f"{p}.linear_attn.out_proj.weight", (hidden, value_dim), "linear")]


def _decoder_layer(c: _Cfg, i: int, kind: str, hidden: int, model_type: str, *,
                   prefix: str = "model.layers", in_dim: int | None = None) -> list[VirtualTensor]:
    p = f"{prefix}.{i}"
    blocks = c.get("block_configs")
    if isinstance(blocks, list) and i < len(blocks) and isinstance(blocks[i], Mapping):
        return _nas_layer(c, p, blocks[i], hidden, model_type)
    out: list[VirtualTensor] = []
    nemotron_h = bool(c.get("hybrid_override_pattern"))
    if kind == "mamba2":
        out += _mamba2_tensors(c, p, hidden)
    elif kind == "gdn":
        out += _gdn_tensors(c, p, hidden)
    elif kind in ("attention", "sliding"):
        out += _attention_tensors(c, p, kind, hidden, in_dim or hidden, model_type)
    if nemotron_h:  # one mixer per block and one norm
        if kind == "mlp_only":
            out += _mlp_tensors(p, hidden, int(c.req("intermediate_size")), gated=False,
                                bias=bool(c.get("mlp_bias")), prefix="mixer")
        elif kind == "moe_only":
            out += _moe_tensors(c, p, hidden, model_type)
        out.append(VirtualTensor(f"{p}.norm.weight", (hidden,), "norm"))
        return out
    if _is_moe_layer(c, i, kind):
        out += _moe_tensors(c, p, hidden, model_type)
        if model_type.startswith("gemma4"):  # Gemma 4: a dense MLP next to the MoE block
            out += _mlp_tensors(p, hidden, int(c.req("intermediate_size")), gated=True, bias=False,
                                prefix="dense_mlp")
    else:
        inter = c.get("intermediate_size", "ffn_hidden_size", "n_inner", default=4 * hidden)
        gated = str(c.get("hidden_act", "hidden_activation", "activation_function",
                          default="silu")) not in ("relu2", "gelu_new_nogate", "gelu")
        out += _mlp_tensors(p, hidden, int(inter), gated=gated, bias=bool(c.get("mlp_bias")))
    n_norms = 4 if model_type.startswith(("gemma2", "gemma3", "gemma4")) else 2
    names = ["input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
             "post_feedforward_layernorm"][:n_norms]
    out += [VirtualTensor(f"{p}.{n}.weight", (hidden,), "norm") for n in names]
    return out


def _nemotron_h_mtp_tensors(c: _Cfg, pattern: str, hidden: int, model_type: str
                            ) -> list[VirtualTensor]:
    """vLLM: models/nemotron_h_mtp.py NemotronHMultiTokenPredictor — one layer per character of
    mtp_hybrid_override_pattern ('*' attention, 'E' MoE) at mtp.layers.i; the first of a step
    adds enorm, hnorm and eh_proj (2 × hidden → hidden), the last a final_layernorm; the
    embedding and LM head are the target's."""
    kinds = {"*": "attention", "E": "moe_only", "-": "mlp_only", "M": "mamba2"}
    last = len(pattern) - 1
    out: list[VirtualTensor] = []
    for i, char in enumerate(pattern):
        p = f"mtp.layers.{i}"
        out += _decoder_layer(c, i, kinds.get(char, "attention"), hidden, model_type,
                              prefix="mtp.layers")
        if i == 0:
            out += [VirtualTensor(f"{p}.enorm.weight", (hidden,), "norm"),
                    VirtualTensor(f"{p}.hnorm.weight", (hidden,), "norm"),
                    VirtualTensor(f"{p}.eh_proj.weight", (hidden, 2 * hidden), "linear")]
        if i == last:
            out.append(VirtualTensor(f"{p}.final_layernorm.weight", (hidden,), "norm"))
    return out


def _nas_layer(c: _Cfg, p: str, block: Mapping[str, Any], hidden: int, model_type: str
               ) -> list[VirtualTensor]:
    """vLLM: models/nemotron_nas.py DeciLMDecoderLayer — attention and input_layernorm unless
    the block's attention is no_op (num_attention_heads // n_heads_in_group KV heads); a gated
    Llama MLP of _ffn_mult_to_intermediate_size(ffn_mult) (else ffn.intermediate_size) and
    post_attention_layernorm unless its ffn is no_op."""
    attn = block.get("attention") or {}
    ffn = block.get("ffn") or {}
    out: list[VirtualTensor] = []
    if not attn.get("no_op"):
        heads = int(c.req("num_attention_heads"))
        kv = heads // int(attn.get("n_heads_in_group") or 1)
        out += _attention_tensors(c.with_fields(num_key_value_heads=kv), p, "attention", hidden,
                                  hidden, model_type)
        out.append(VirtualTensor(f"{p}.input_layernorm.weight", (hidden,), "norm"))
    if not ffn.get("no_op"):
        if ffn.get("ffn_mult") is not None:
            # _ffn_mult_to_intermediate_size: int(2 * ffn_mult * hidden / 3) up to a multiple of 256
            inter = cdiv(int(2 * float(ffn["ffn_mult"]) * hidden / 3), 256) * 256
        else:
            inter = int(ffn.get("intermediate_size") or c.req("intermediate_size"))
        out += _mlp_tensors(p, hidden, inter, gated=True, bias=bool(c.get("mlp_bias")))
        out.append(VirtualTensor(f"{p}.post_attention_layernorm.weight", (hidden,), "norm"))
    return out


def _vision_tensors(vc: Mapping[str, Any], out_hidden: int) -> list[VirtualTensor]:
    """A rough ViT: depth × (qkv, proj, 2-matrix MLP, 2 norms) + a patch embed and a projector."""
    h = vc.get("hidden_size") or vc.get("embed_dim") or vc.get("width")
    depth = vc.get("depth") or vc.get("num_hidden_layers") or vc.get("num_layers") or vc.get("layers")
    if not (isinstance(h, int) and isinstance(depth, int)):
        return []
    inter = int(vc.get("intermediate_size") or vc.get("mlp_dim") or 4 * h)
    patch = int(vc.get("patch_size") or 14)
    chans = int(vc.get("in_channels") or vc.get("num_channels") or 3)
    temporal = int(vc.get("temporal_patch_size") or 1)
    merge = int(vc.get("spatial_merge_size") or 1)
    out_dim = int(vc.get("out_hidden_size") or out_hidden)
    v = "visual"
    out = [VirtualTensor(f"{v}.patch_embed.proj.weight", (h, chans * temporal * patch * patch), "param")]
    out += [VirtualTensor(f"{v}.blocks.0.attn.qkv.weight", (3 * h, h), "linear", depth),
            VirtualTensor(f"{v}.blocks.0.attn.proj.weight", (h, h), "linear", depth),
            VirtualTensor(f"{v}.blocks.0.mlp.fc1.weight", (inter, h), "linear", depth),
            VirtualTensor(f"{v}.blocks.0.mlp.fc2.weight", (h, inter), "linear", depth),
            VirtualTensor(f"{v}.blocks.0.norm1.weight", (2 * h,), "norm", depth)]
    mh = h * merge * merge
    out += [VirtualTensor(f"{v}.merger.mlp.0.weight", (mh, mh), "linear"),
            VirtualTensor(f"{v}.merger.mlp.2.weight", (out_dim, mh), "linear")]
    return out


def config_virtual_tensors(config: Mapping[str, Any], *, draft_method: str | None = None,
                           include_vision: bool = True) -> tuple[list[VirtualTensor], list[str], int]:
    """`_config_virtual_tensors`; a field the config leaves to transformers' defaults (LLaVA's
    text_config has no hidden_size) is read from transformers' configuration class (lazily)."""
    try:
        return _config_virtual_tensors(config, draft_method=draft_method,
                                       include_vision=include_vision)
    except ConfigError:
        from kvplan.models.resolved import filled_by_transformers
        filled = filled_by_transformers(config) if isinstance(config, Mapping) else None
        if filled is None:
            raise
        return _config_virtual_tensors(filled, draft_method=draft_method,
                                       include_vision=include_vision)


def _config_virtual_tensors(config: Mapping[str, Any], *, draft_method: str | None = None,
                            include_vision: bool = True
                            ) -> tuple[list[VirtualTensor], list[str], int]:
    """The tensors a checkpoint of this config holds, as implied by the config.

    Returns (tensors, warnings, number of decoder layers the model loads). `draft_method`
    ('eagle', 'eagle3', 'dflash') adds the head's fusion layer and drops the embedding (and for
    EAGLE-1/DFlash the LM head), which vLLM shares with the target.
    """
    c = _Cfg(config)
    warnings: list[str] = []
    model_type = str(c.get("model_type", default="")).lower()
    if model_type == "whisper":
        return _whisper_tensors(c), warnings, int(c.req("decoder_layers"))
    hidden = int(c.req("hidden_size", "n_embd", "d_model"))
    layers = int(c.req("num_hidden_layers", "n_layer", "num_layers"))
    vocab = int(c.req("vocab_size"))
    tie = c.get("tie_word_embeddings")
    if tie is None:
        tie = False
        warnings.append("tie_word_embeddings is not stated; assumed untied (separate LM head)")
    kinds = _layer_kinds(c, layers)
    t: list[VirtualTensor] = []
    method = (draft_method or "").lower() or None
    if method not in (None, "eagle", "eagle3", "dflash", "mtp"):
        raise ConfigError(f"unknown draft method {draft_method!r}", hint="eagle, eagle3, dflash, mtp")
    if method is None or method == "mtp":
        t.append(VirtualTensor("model.embed_tokens.weight", (vocab, hidden), "embed"))
    else:
        warnings.append(f"{method} head: embed_tokens is shared with the target (not counted)")
    for i, kind in enumerate(kinds):
        in_dim = 2 * hidden if method == "eagle3" and i == 0 else None
        t += _decoder_layer(c, i, kind, hidden, model_type, in_dim=in_dim)
    t.append(VirtualTensor("model.norm.weight", (hidden,), "norm"))
    if method == "eagle3":
        aux = c.get("eagle_aux_hidden_state_layer_ids")
        n_aux = len(aux) if isinstance(aux, list) and aux else 3
        target_h = int(c.get("target_hidden_size", default=hidden))
        t.append(VirtualTensor("model.fc.weight", (hidden, n_aux * target_h), "linear"))
        dv = int(c.get("draft_vocab_size", default=vocab))
        t.append(VirtualTensor("lm_head.weight", (dv, hidden), "lm_head"))
        if dv != vocab:
            t += [VirtualTensor("d2t", (dv,), "int64"), VirtualTensor("t2d", (vocab,), "bool")]
    elif method == "eagle":
        t.append(VirtualTensor("model.fc.weight", (hidden, 2 * hidden), "linear"))
        warnings.append("eagle head: lm_head is shared with the target (not counted)")
    elif method == "dflash":
        dcfg = c.get("dflash_config") or {}
        ids = dcfg.get("target_layer_ids") if isinstance(dcfg, Mapping) else None
        n_ids = len(ids) if isinstance(ids, list) and ids else int(c.get("num_target_layers", default=1))
        t += [VirtualTensor("model.fc.weight", (hidden, n_ids * hidden), "linear"),
              VirtualTensor("model.hidden_norm.weight", (hidden,), "norm")]
        warnings.append("dflash head: lm_head is shared with the target (not counted)")
    elif not tie:
        t.append(VirtualTensor("lm_head.weight", (vocab, hidden), "lm_head"))

    # MTP modules shipped in the checkpoint (not loaded for the target; the MTP drafter loads them).
    n_mtp = int(c.get("num_nextn_predict_layers", default=0) or 0)
    mtp_pattern = c.get("mtp_hybrid_override_pattern")
    if n_mtp and method is None and isinstance(mtp_pattern, str) and mtp_pattern:
        t += _nemotron_h_mtp_tensors(c, n_mtp * mtp_pattern, hidden, model_type)
    elif n_mtp and method is None:
        for j in range(n_mtp):
            i = layers + j
            p = f"model.layers.{i}"
            kind = "attention"
            mtp_layer = _decoder_layer(c, i, kind, hidden, model_type)
            t += mtp_layer
            t += [VirtualTensor(f"{p}.enorm.weight", (hidden,), "norm"),
                  VirtualTensor(f"{p}.hnorm.weight", (hidden,), "norm"),
                  VirtualTensor(f"{p}.eh_proj.weight", (hidden, 2 * hidden), "linear"),
                  VirtualTensor(f"{p}.shared_head.norm.weight", (hidden,), "norm"),
                  VirtualTensor(f"{p}.embed_tokens.weight", (vocab, hidden), "embed"),
                  VirtualTensor(f"{p}.shared_head.head.weight", (vocab, hidden), "lm_head")]
    n_mtp2 = int(c.get("mtp_num_hidden_layers", default=0) or 0)
    if n_mtp2 and method is None:
        for j in range(n_mtp2):
            t += _decoder_layer(c, j, "attention", hidden, model_type, prefix="mtp.layers")
        t += [VirtualTensor("mtp.fc.weight", (hidden, 2 * hidden), "linear"),
              VirtualTensor("mtp.pre_fc_norm_embedding.weight", (hidden,), "norm"),
              VirtualTensor("mtp.pre_fc_norm_hidden.weight", (hidden,), "norm"),
              VirtualTensor("mtp.norm.weight", (hidden,), "norm")]
        if c.get("mtp_use_dedicated_embeddings"):
            t.append(VirtualTensor("mtp.embed_tokens.weight", (vocab, hidden), "embed"))
    if c.get("use_mtp") and c.get("num_mtp_modules"):
        warnings.append(f"{c.get('num_mtp_modules')} MTP module(s) in the checkpoint are not counted")
    vc = config.get("vision_config")
    if include_vision and isinstance(vc, Mapping) and method is None:
        vis = _vision_tensors(vc, hidden)
        if vis:
            t += vis
            warnings.append("vision tower estimated as a plain ViT (approximate)")
        else:
            warnings.append("vision_config present but its size is not estimated")
    return t, warnings, layers


def _whisper_tensors(c: _Cfg) -> list[VirtualTensor]:
    """WhisperForConditionalGeneration's checkpoint (transformers modeling_whisper): conv stem,
    learned encoder/decoder positions, pre-LN layers (attention k_proj without bias), the
    decoder's cross-attention; proj_out is tied to the token embedding."""
    d = int(c.req("d_model"))
    vocab, mels = int(c.req("vocab_size")), int(c.get("num_mel_bins", default=80))
    t = [VirtualTensor("model.encoder.conv1.weight", (d, mels, 3), "param"),
         VirtualTensor("model.encoder.conv1.bias", (d,), "param"),
         VirtualTensor("model.encoder.conv2.weight", (d, d, 3), "param"),
         VirtualTensor("model.encoder.conv2.bias", (d,), "param"),
         VirtualTensor("model.encoder.embed_positions.weight",
                       (int(c.get("max_source_positions", default=1500)), d), "param"),
         VirtualTensor("model.decoder.embed_tokens.weight", (vocab, d), "embed"),
         VirtualTensor("model.decoder.embed_positions.weight",
                       (int(c.get("max_target_positions", default=448)), d), "param")]

    def attn(p: str) -> list[VirtualTensor]:
        return [VirtualTensor(f"{p}.{n}_proj.weight", (d, d), "linear") for n in "qkvo"] + [
            VirtualTensor(f"{p}.{n}_proj.bias", (d,), "param") for n in "qvo"]

    for side in ("encoder", "decoder"):
        ffn = int(c.req(f"{side}_ffn_dim"))
        for i in range(int(c.req(f"{side}_layers"))):
            p = f"model.{side}.layers.{i}"
            t += attn(f"{p}.self_attn")
            norms = ["self_attn_layer_norm", "final_layer_norm"]
            if side == "decoder":
                t += attn(f"{p}.encoder_attn")
                norms.append("encoder_attn_layer_norm")
            t += [VirtualTensor(f"{p}.fc1.weight", (ffn, d), "linear"),
                  VirtualTensor(f"{p}.fc1.bias", (ffn,), "param"),
                  VirtualTensor(f"{p}.fc2.weight", (d, ffn), "linear"),
                  VirtualTensor(f"{p}.fc2.bias", (d,), "param")]
            t += [VirtualTensor(f"{p}.{n}.{w}", (d,), "norm") for n in norms
                  for w in ("weight", "bias")]
        t += [VirtualTensor(f"model.{side}.layer_norm.{w}", (d,), "norm")
              for w in ("weight", "bias")]
    return t


class ParamCounts(_Frozen):
    total: int  # parameters the target loads
    embedding: int
    lm_head: int
    attention: int  # attention / MLA / Mamba / GDN mixers
    mlp: int  # dense MLPs and shared experts
    experts: int  # routed experts
    router: int
    norms: int
    other: int  # vision tower, fusion layers, ...
    extra: int  # MTP modules in the checkpoint (not loaded for the target)

    @property
    def checkpoint_total(self) -> int:
        return self.total + self.extra


def count_parameters(config: Mapping[str, Any], *, draft_method: str | None = None,
                     include_vision: bool = True) -> ParamCounts:
    """Parameter counts by part, from the raw HF config dict (nested text_config handled)."""
    tensors, _, layers = config_virtual_tensors(config, draft_method=draft_method,
                                                include_vision=include_vision)
    parts = dict.fromkeys(("embedding", "lm_head", "attention", "mlp", "experts", "router", "norms",
                           "other", "extra"), 0)
    for vt in tensors:
        place, _, _ = classify_tensor(vt.name, vt.shape, layers)
        if place is Placement.EXTRA:
            parts["extra"] += vt.numel
            continue
        if place is Placement.OTHER:  # vision tower, projector
            parts["other"] += vt.numel
        elif vt.role == "embed":
            parts["embedding"] += vt.numel
        elif vt.role == "lm_head":
            parts["lm_head"] += vt.numel
        elif vt.role == "norm":
            parts["norms"] += vt.numel
        elif vt.role == "router":
            parts["router"] += vt.numel
        elif ".fc." in vt.name or vt.role in ("int64", "bool"):
            parts["other"] += vt.numel
        elif ".experts." in vt.name:
            parts["experts"] += vt.numel
        elif re.search(r"\.(mlp|mixer)\.(shared_experts?\.|dense_)?(gate|up|down)_proj|\.dense_mlp\."
                       r"|_latent_proj\.", vt.name):
            parts["mlp"] += vt.numel
        else:
            parts["attention"] += vt.numel
    total = sum(v for k, v in parts.items() if k != "extra")
    return ParamCounts(total=total, **parts)


# --------------------------------------------------------------------------------------------
# Quantization schemes → bytes per tensor


@dataclass(frozen=True)
class _Scheme:
    kind: str  # none | fp8_block | fp8_tensor | fp8_channel | nvfp4 | mxfp4 | mxfp8 | int4_awq |
    #            int_gptq | ct_int | int8_channel | bnb4 | bnb8
    bits: int = 16
    group_size: int = 128
    block: tuple[int, int] = (128, 128)
    zero_points: bool = False
    g_idx: bool = False

    def label(self) -> str:
        return {"none": "unquantized", "fp8_block": f"FP8 + {self.block[0]}x{self.block[1]} block "
                "scales", "fp8_tensor": "FP8 per-tensor", "fp8_channel": "FP8 per-channel",
                "nvfp4": "NVFP4 (fp8 scale per 16)", "mxfp4": "MXFP4 (e8m0 scale per 32)",
                "mxfp8": "MXFP8 (e8m0 scale per 32)", "int4_awq": f"AWQ int4 g{self.group_size}",
                "int_gptq": f"GPTQ int{self.bits} g{self.group_size}",
                "ct_int": f"int{self.bits} g{self.group_size}", "int8_channel": "int8 per-channel",
                "bnb4": "bitsandbytes 4-bit", "bnb8": "bitsandbytes 8-bit"}[self.kind]


_NONE = _Scheme("none")


@dataclass
class _QuantPlan:
    default: _Scheme
    excluded: list[str]
    per_module: dict[str, _Scheme]  # canonical tail (layers.N....) → scheme (modelopt mixed)
    experts_only: bool = False  # MXFP4 (gpt-oss): only MoE experts are quantized
    method: str = "unquantized"
    warnings: tuple[str, ...] = ()


def _modelopt_scheme(algo: str, group_size: Any = None) -> _Scheme | None:
    a = str(algo).upper()
    if a == "FP8" or a == "FP8_PER_TENSOR":
        return _Scheme("fp8_tensor", bits=8)
    if a in ("FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"):
        return _Scheme("fp8_channel", bits=8)
    if a in ("NVFP4", "W4A16_NVFP4", "NVFP4_AWQ", "W4A8_NVFP4_FP8"):
        return _Scheme("nvfp4", bits=4, group_size=int(group_size or 16))
    if a in ("MXFP4", "W4A16_MXFP4"):
        return _Scheme("mxfp4", bits=4, group_size=32)
    if a == "MXFP8":
        return _Scheme("mxfp8", bits=8, group_size=32)
    if a in ("INT4_AWQ", "W4A8_AWQ", "W4A16_AWQ"):
        return _Scheme("int4_awq", bits=4, group_size=int(group_size or 128))
    if a in ("W8A8_SQ_PER_CHANNEL", "INT8_SQ", "INT8"):
        return _Scheme("int8_channel", bits=8)
    return None


def _ct_scheme(weights: Mapping[str, Any]) -> _Scheme | None:
    bits = int(weights.get("num_bits", 8))
    typ = str(weights.get("type", "int"))
    strategy = str(weights.get("strategy", "tensor"))
    group = weights.get("group_size")
    if typ == "float" and bits == 8:
        if strategy == "block":
            bs = weights.get("block_structure") or [128, 128]
            return _Scheme("fp8_block", bits=8, block=(int(bs[0]), int(bs[1])))
        return _Scheme("fp8_channel" if strategy == "channel" else "fp8_tensor", bits=8)
    if typ == "float" and bits == 4:
        return _Scheme("nvfp4", bits=4, group_size=int(group or 16))
    if typ == "int" and bits == 8 and strategy in ("channel", "tensor"):
        return _Scheme("int8_channel", bits=8)
    if typ == "int":
        return _Scheme("ct_int", bits=bits, group_size=int(group or 128),
                       zero_points=not bool(weights.get("symmetric", True)))
    return None


def _quant_plan(config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None,
                scheme: str | None) -> _QuantPlan:
    if scheme is not None:
        s = scheme.lower().replace("-", "_")
        table = {"bf16": _NONE, "bfloat16": _NONE, "fp16": _NONE, "none": _NONE,
                 "fp8": _Scheme("fp8_block", bits=8), "fp8_block": _Scheme("fp8_block", bits=8),
                 "fp8_tensor": _Scheme("fp8_tensor", bits=8), "nvfp4": _Scheme("nvfp4", bits=4, group_size=16),
                 "mxfp4": _Scheme("mxfp4", bits=4, group_size=32),
                 "awq": _Scheme("int4_awq", bits=4), "gptq": _Scheme("int_gptq", bits=4, g_idx=True),
                 "int4": _Scheme("ct_int", bits=4), "int8": _Scheme("int8_channel", bits=8)}
        if s not in table:
            raise ConfigError(f"unknown weight scheme {scheme!r}", hint=", ".join(table))
        d = table[s]
        return _QuantPlan(d, ["lm_head"], {}, experts_only=d.kind == "mxfp4",
                          method="unquantized" if d is _NONE else d.label())
    qc = config.get("quantization_config")
    if not isinstance(qc, Mapping):
        tc = config.get("text_config")
        qc = tc.get("quantization_config") if isinstance(tc, Mapping) else None
    hq = hf_quant_config.get("quantization") if isinstance(hf_quant_config, Mapping) else None
    if not isinstance(qc, Mapping) and not isinstance(hq, Mapping):
        return _QuantPlan(_NONE, [], {})
    qc = qc if isinstance(qc, Mapping) else {}
    qm = str(qc.get("quant_method", "modelopt" if hq else "")).lower()
    warnings: list[str] = []
    excluded = [str(x) for x in (qc.get("modules_to_not_convert") or qc.get("ignored_layers")
                                 or qc.get("ignore") or qc.get("exclude_modules") or [])]
    if qm == "fp8":
        bs = qc.get("weight_block_size")
        fp8 = _Scheme("fp8_block", bits=8, block=(int(bs[0]), int(bs[1]))) if bs else \
            _Scheme("fp8_tensor", bits=8)
        return _QuantPlan(fp8, excluded + ["lm_head"], {}, method=f"fp8 ({fp8.label()})")
    if qm in ("fbgemm_fp8",):
        return _QuantPlan(_Scheme("fp8_channel", bits=8), excluded + ["lm_head"], {},
                          method="fbgemm_fp8 (FP8 per-channel)")
    if qm == "mxfp4":
        return _QuantPlan(_Scheme("mxfp4", bits=4, group_size=32), excluded, {}, experts_only=True,
                          method="mxfp4 (MoE experts MXFP4, rest unquantized)")
    if qm in ("modelopt", "modelopt_fp4", "modelopt_mixed"):
        src = hq if isinstance(hq, Mapping) else qc
        algo = str(src.get("quant_algo", "FP8" if qm == "modelopt" else "NVFP4"))
        excl = [str(x) for x in (src.get("exclude_modules") or qc.get("ignore") or [])]
        per: dict[str, _Scheme] = {}
        if algo.upper() == "MIXED_PRECISION":
            layers = src.get("quantized_layers") or qc.get("quantized_layers") or {}
            for mod, spec in layers.items():
                if not isinstance(spec, Mapping):
                    continue
                sch = _modelopt_scheme(spec.get("quant_algo", ""), spec.get("group_size"))
                if sch is None:
                    warnings.append(f"modelopt algo {spec.get('quant_algo')} not modelled "
                                    f"({mod}); counted unquantized")
                    continue
                per[_canonical_tail(str(mod))] = sch
            return _QuantPlan(_NONE, excl + ["lm_head"], per, method="modelopt MIXED_PRECISION "
                              "(per-module FP8 / NVFP4 from quantized_layers)",
                              warnings=tuple(dict.fromkeys(warnings)))
        sch = _modelopt_scheme(algo, src.get("group_size"))
        if sch is None:
            return _QuantPlan(_NONE, [], {}, method="unquantized",
                              warnings=(f"modelopt quant_algo {algo} not modelled; weights counted "
                                        "unquantized",))
        return _QuantPlan(sch, excl + ["lm_head"], {}, method=f"modelopt {algo} ({sch.label()})")
    if qm == "compressed-tensors" or qm == "compressed_tensors":
        groups = qc.get("config_groups") or {}
        chosen: _Scheme | None = None
        for g in groups.values():
            w = g.get("weights") if isinstance(g, Mapping) else None
            if isinstance(w, Mapping):
                chosen = _ct_scheme(w)
                if chosen is not None:
                    break
        if chosen is None:
            return _QuantPlan(_NONE, [], {}, warnings=("compressed-tensors scheme not modelled; "
                                                       "weights counted unquantized",))
        if len(groups) > 1:
            warnings.append("several compressed-tensors config groups: the first one is applied "
                            "to every Linear")
        return _QuantPlan(chosen, excluded + ["lm_head"], {},
                          method=f"compressed-tensors ({chosen.label()})", warnings=tuple(warnings))
    if qm in ("awq", "awq_marlin"):
        g = int(qc.get("group_size", qc.get("q_group_size", 128)))
        return _QuantPlan(_Scheme("int4_awq", bits=int(qc.get("bits", qc.get("w_bit", 4))), group_size=g),
                          excluded + ["lm_head"], {}, method=f"awq int4 g{g}")
    if qm in ("gptq", "gptq_marlin"):
        g = int(qc.get("group_size", 128))
        b = int(qc.get("bits", 4))
        g = g if g > 0 else 1 << 30  # -1 = one group per column
        return _QuantPlan(_Scheme("int_gptq", bits=b, group_size=g, g_idx=True), excluded + ["lm_head"],
                          {}, method=f"gptq int{b} g{qc.get('group_size', 128)}")
    if qm == "bitsandbytes":
        if qc.get("load_in_8bit"):
            return _QuantPlan(_Scheme("bnb8", bits=8), excluded + ["lm_head"], {},
                              method="bitsandbytes 8-bit")
        return _QuantPlan(_Scheme("bnb4", bits=4, group_size=64), excluded + ["lm_head"], {},
                          method="bitsandbytes 4-bit (absmax per 64)")
    return _QuantPlan(_NONE, [], {}, warnings=(f"quantization method {qm!r} not modelled; "
                                               "weights counted unquantized",))


# checkpoint spellings of MoE expert modules → the names kvplan's virtual tensors use
# (Mixtral / MiniMax: block_sparse_moe.experts.E.w1 = gate, w2 = down, w3 = up)
_EXPERT_WEIGHTS = {"w1": "gate_proj", "w2": "down_proj", "w3": "up_proj"}


# a fused virtual tensor whose checkpoint stores (and quantizes) its parts separately
_FUSED_PARTS = {"in_proj_qkvz": ("in_proj_qkv", "in_proj_z"),  # Qwen3.5 GDN
                "qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def _canonical_tail(name: str) -> str:
    m = re.search(r"(?:^|\.)((?:layers|mtp)\.\d+\..*|mtp\..*|lm_head.*)$", name)
    tail = m.group(1) if m else name
    if ".block_sparse_moe." in tail:
        tail = tail.replace(".block_sparse_moe.", ".mlp.")
        head, _, last = tail.rpartition(".")
        if ".experts." in tail and last in _EXPERT_WEIGHTS:
            tail = f"{head}.{_EXPERT_WEIGHTS[last]}"
    return tail


def _name_variants(module: str) -> list[str]:
    tail = module[len("model."):] if module.startswith("model.") else module
    return [module, tail, f"model.language_model.{tail}", f"language_model.model.{tail}",
            f"language_model.{tail}", f"model.language_model.model.{tail}"]


def _pattern_hit(module: str, pattern: str) -> bool:
    for name in _name_variants(module):
        if pattern.startswith("re:"):
            if re.match(pattern[3:], name):
                return True
        elif any(ch in pattern for ch in "*?["):
            if fnmatchcase(name, pattern) or fnmatchcase(name, pattern.rstrip("*") + "*"):
                return True
        elif name == pattern or name.startswith(pattern + ".") or name.endswith("." + pattern):
            return True
    return False


def _scheme_for(vt: VirtualTensor, plan: _QuantPlan) -> _Scheme:
    if vt.role != "linear":
        return _NONE
    if plan.per_module:
        tail = _canonical_tail(vt.module)
        sch = plan.per_module.get(tail)
        parent, _, leaf = tail.rpartition(".")
        if sch is None and leaf in _FUSED_PARTS:  # the checkpoint quantizes the parts
            parts = {plan.per_module.get(f"{parent}.{p}") for p in _FUSED_PARTS[leaf]}
            sch = parts.pop() if len(parts) == 1 else None
        if sch is None and ".experts." in vt.name:  # per-expert entries: layers.N.mlp.experts.E.x
            pre, _, post = tail.partition(".experts.")
            for k, v in plan.per_module.items():
                if k.startswith(pre + ".experts.") and k.endswith("." + post.split(".")[-1]):
                    sch = v
                    break
        return sch or _NONE
    if plan.default is _NONE:
        return _NONE
    if plan.experts_only and ".experts." not in vt.name:
        return _NONE
    if "visual." in vt.name:
        return _NONE
    if any(_pattern_hit(vt.module, p) for p in plan.excluded):
        return _NONE
    return plan.default


def _tensor_pieces(vt: VirtualTensor, sch: _Scheme, elem_bytes: int) -> list[tuple[str, int]]:
    """(safetensors dtype, bytes) pieces one virtual tensor takes under a scheme (× count)."""
    n = vt.count
    if vt.role == "int64":
        return [("I64", 8 * vt.numel)]
    if vt.role == "bool":
        return [("BOOL", vt.numel)]
    dt = {2: "BF16", 4: "F32", 1: "U8"}.get(elem_bytes, "BF16")
    if sch.kind == "none" or len(vt.shape) != 2:
        return [(dt, vt.numel * elem_bytes)]
    out_f, in_f = vt.shape
    numel = out_f * in_f
    k = sch.kind
    if k == "fp8_block":
        bo, bi = sch.block
        return [("F8_E4M3", numel * n), ("F32", cdiv(out_f, bo) * cdiv(in_f, bi) * 4 * n)]
    if k == "fp8_tensor":
        return [("F8_E4M3", numel * n), ("F32", 8 * n)]  # weight_scale + input_scale
    if k == "fp8_channel":
        return [("F8_E4M3", numel * n), (dt, out_f * elem_bytes * n)]
    if k == "nvfp4":
        g = sch.group_size
        return [("U8", cdiv(numel, 2) * n), ("F8_E4M3", out_f * cdiv(in_f, g) * n),
                ("F32", 8 * n)]  # weight_scale_2 + input_scale
    if k == "mxfp4":
        return [("U8", cdiv(numel, 2) * n + out_f * cdiv(in_f, 32) * n)]  # blocks + e8m0 scales
    if k == "mxfp8":
        return [("F8_E4M3", numel * n), ("U8", out_f * cdiv(in_f, 32) * n)]  # + e8m0 scales
    groups = cdiv(in_f, sch.group_size)
    if k == "int4_awq":
        return [("I32", cdiv(numel * sch.bits, 8) * n + cdiv(groups * out_f * sch.bits, 8) * n),
                ("F16", groups * out_f * 2 * n)]
    if k == "int_gptq":
        packed = cdiv(numel * sch.bits, 8) + cdiv(groups * out_f * sch.bits, 8)
        return [("I32", (packed + (4 * in_f if sch.g_idx else 0)) * n),
                ("F16", groups * out_f * 2 * n)]
    if k == "ct_int":
        zp = cdiv(groups * out_f * sch.bits, 8) if sch.zero_points else 0
        return [("I32", (cdiv(numel * sch.bits, 8) + zp) * n), (dt, groups * out_f * elem_bytes * n)]
    if k == "int8_channel":
        return [("I8", numel * n), (dt, out_f * elem_bytes * n)]
    if k == "bnb4":
        return [("U8", cdiv(numel, 2) * n), ("F32", cdiv(numel, 64) * 4 * n)]
    if k == "bnb8":
        return [("I8", numel * n), ("F32", out_f * 4 * n)]
    return [(dt, vt.numel * elem_bytes)]


def weight_bytes_from_config(config: Mapping[str, Any], *,
                             hf_quant_config: Mapping[str, Any] | None = None,
                             scheme: str | None = None, draft_method: str | None = None,
                             dtype: str | None = None, include_vision: bool = True) -> WeightBytes:
    """Estimate checkpoint bytes from the raw HF config dict (no safetensors metadata at hand).

    Bytes follow the quantization the config declares (`quantization_config`, or ModelOpt's
    `hf_quant_config.json` passed as `hf_quant_config`), or an explicit `scheme` ('bf16', 'fp8',
    'nvfp4', 'mxfp4', 'awq', 'gptq', 'int4', 'int8'). Unquantized tensors take the model dtype.
    """
    tensors, warnings, layers = config_virtual_tensors(config, draft_method=draft_method,
                                                       include_vision=include_vision)
    c = _Cfg(config)
    model_dtype = dtype or c.get("torch_dtype", "dtype", default="bfloat16")
    try:
        elem = dtype_size_bytes(str(model_dtype))
    except Exception:
        elem = 2
        warnings.append(f"model dtype {model_dtype!r} unknown; 2 bytes per parameter assumed")
    plan = _quant_plan(config, hf_quant_config, scheme)
    warnings += list(plan.warnings)
    kv_heads = c.get("num_key_value_heads")
    if c.get("kv_lora_rank"):
        kv_heads = None  # MLA: no k/v projections
    by_dtype: dict[str, int] = {}
    agg: dict[tuple[Placement, int | None, ShardKind], list[int]] = {}
    vocab_groups: list[WeightGroup] = []
    n_loaded = n_extra = 0
    n_tensors = 0
    for vt in tensors:
        sch = _scheme_for(vt, plan)
        pieces = _tensor_pieces(vt, sch, elem)
        nbytes = sum(b for _, b in pieces)
        for d, b in pieces:
            by_dtype[d] = by_dtype.get(d, 0) + b
        place, layer, shard = classify_tensor(vt.name, vt.shape, layers)
        n_tensors += vt.count * len(pieces)
        if place is Placement.EXTRA:
            n_extra += vt.numel
        else:
            n_loaded += vt.numel
        if shard is ShardKind.VOCAB:
            vocab_groups.append(WeightGroup(placement=place, layer=layer, shard=shard,
                                            num_bytes=nbytes, vocab_rows=vt.shape[0]))
        else:
            slot = agg.setdefault((place, layer, shard), [0, 0])
            slot[0] += nbytes
            slot[1] += vt.count
    groups = vocab_groups + [WeightGroup(placement=p, layer=la, shard=s, num_bytes=v[0],
                                         num_tensors=v[1]) for (p, la, s), v in agg.items()]
    groups.sort(key=lambda g: (list(Placement).index(g.placement), g.layer or -1, g.shard.value))
    tie = bool(c.get("tie_word_embeddings", default=False)) and draft_method is None
    what = f"draft head ({draft_method}) " if draft_method else ""
    return WeightBytes(
        total_bytes=sum(by_dtype.values()), bytes_by_dtype=dict(sorted(by_dtype.items())),
        groups=tuple(groups), num_layers=layers,
        num_kv_heads=int(kv_heads) if kv_heads else None, tied_embeddings=tie,
        parameter_count=n_loaded, extra_parameter_count=n_extra, num_tensors=n_tensors,
        estimated=True,
        method=f"{what}estimate from config.json parameter counts; bytes by {plan.method}, "
               f"unquantized tensors {model_dtype}",
        warnings=tuple(dict.fromkeys(warnings)),
    )
