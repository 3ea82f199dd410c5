"""The tensors a checkpoint holds, implied by its raw HF config (no safetensors metadata): virtual
tensors for every part (embeddings, attention/MLA, MLP/MoE, Mamba2, gated delta net, MTP, vision,
draft heads) and the families that lay them out their own way (Nemotron-H, NAS, Whisper). No I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvplan.budget.weights.config_view import ConfigView, is_moe_layer, layer_kinds, num_experts
from kvplan.budget.weights.core import _numel
from kvplan.errors import ConfigError
from kvplan.units import cdiv


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



def _attention_tensors(c: ConfigView, p: str, kind: str, hidden: int, in_dim: int,
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


def _moe_tensors(c: ConfigView, p: str, hidden: int, model_type: str) -> list[VirtualTensor]:
    experts = num_experts(c)
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


def _nemotron_h_moe_tensors(c: ConfigView, p: str, hidden: int, experts: int, inter: int
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


def _mamba2_tensors(c: ConfigView, p: str, hidden: int) -> list[VirtualTensor]:
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


def _gdn_tensors(c: ConfigView, p: str, hidden: int) -> list[VirtualTensor]:
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


def _decoder_layer(c: ConfigView, i: int, kind: str, hidden: int, model_type: str, *,
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
    if is_moe_layer(c, i, kind):
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


def _nemotron_h_mtp_tensors(c: ConfigView, pattern: str, hidden: int, model_type: str
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


def _nas_layer(c: ConfigView, p: str, block: Mapping[str, Any], hidden: int, model_type: str
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
        from kvplan.models.resolution.resolved import filled_by_transformers
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
    c = ConfigView(config)
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
    kinds = layer_kinds(c, layers)
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


def _whisper_tensors(c: ConfigView) -> list[VirtualTensor]:
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
