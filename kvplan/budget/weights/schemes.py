"""Quantization schemes → bytes per tensor: the scheme a config declares (`quantization_config`,
ModelOpt's `hf_quant_config.json`, or one named by hand), which tensors it covers, and the
safetensors pieces (dtype, bytes) a tensor takes under it. No I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from kvplan.budget.weights.inventories import VirtualTensor
from kvplan.errors import ConfigError
from kvplan.units import cdiv


@dataclass(frozen=True)
class Scheme:
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


UNQUANTIZED = Scheme("none")


@dataclass
class QuantPlan:
    default: Scheme
    excluded: list[str]
    per_module: dict[str, Scheme]  # canonical tail (layers.N....) → scheme (modelopt mixed)
    experts_only: bool = False  # MXFP4 (gpt-oss): only MoE experts are quantized
    method: str = "unquantized"
    warnings: tuple[str, ...] = ()


def _modelopt_scheme(algo: str, group_size: Any = None) -> Scheme | None:
    a = str(algo).upper()
    if a == "FP8" or a == "FP8_PER_TENSOR":
        return Scheme("fp8_tensor", bits=8)
    if a in ("FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO"):
        return Scheme("fp8_channel", bits=8)
    if a in ("NVFP4", "W4A16_NVFP4", "NVFP4_AWQ", "W4A8_NVFP4_FP8"):
        return Scheme("nvfp4", bits=4, group_size=int(group_size or 16))
    if a in ("MXFP4", "W4A16_MXFP4"):
        return Scheme("mxfp4", bits=4, group_size=32)
    if a == "MXFP8":
        return Scheme("mxfp8", bits=8, group_size=32)
    if a in ("INT4_AWQ", "W4A8_AWQ", "W4A16_AWQ"):
        return Scheme("int4_awq", bits=4, group_size=int(group_size or 128))
    if a in ("W8A8_SQ_PER_CHANNEL", "INT8_SQ", "INT8"):
        return Scheme("int8_channel", bits=8)
    return None


def _ct_scheme(weights: Mapping[str, Any]) -> Scheme | None:
    bits = int(weights.get("num_bits", 8))
    typ = str(weights.get("type", "int"))
    strategy = str(weights.get("strategy", "tensor"))
    group = weights.get("group_size")
    if typ == "float" and bits == 8:
        if strategy == "block":
            bs = weights.get("block_structure") or [128, 128]
            return Scheme("fp8_block", bits=8, block=(int(bs[0]), int(bs[1])))
        return Scheme("fp8_channel" if strategy == "channel" else "fp8_tensor", bits=8)
    if typ == "float" and bits == 4:
        return Scheme("nvfp4", bits=4, group_size=int(group or 16))
    if typ == "int" and bits == 8 and strategy in ("channel", "tensor"):
        return Scheme("int8_channel", bits=8)
    if typ == "int":
        return Scheme("ct_int", bits=bits, group_size=int(group or 128),
                       zero_points=not bool(weights.get("symmetric", True)))
    return None


def quant_plan(config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None,
                scheme: str | None) -> QuantPlan:
    if scheme is not None:
        s = scheme.lower().replace("-", "_")
        table = {"bf16": UNQUANTIZED, "bfloat16": UNQUANTIZED, "fp16": UNQUANTIZED, "none": UNQUANTIZED,
                 "fp8": Scheme("fp8_block", bits=8), "fp8_block": Scheme("fp8_block", bits=8),
                 "fp8_tensor": Scheme("fp8_tensor", bits=8), "nvfp4": Scheme("nvfp4", bits=4, group_size=16),
                 "mxfp4": Scheme("mxfp4", bits=4, group_size=32),
                 "awq": Scheme("int4_awq", bits=4), "gptq": Scheme("int_gptq", bits=4, g_idx=True),
                 "int4": Scheme("ct_int", bits=4), "int8": Scheme("int8_channel", bits=8)}
        if s not in table:
            raise ConfigError(f"unknown weight scheme {scheme!r}", hint=", ".join(table))
        d = table[s]
        return QuantPlan(d, ["lm_head"], {}, experts_only=d.kind == "mxfp4",
                          method="unquantized" if d is UNQUANTIZED else d.label())
    qc = config.get("quantization_config")
    if not isinstance(qc, Mapping):
        tc = config.get("text_config")
        qc = tc.get("quantization_config") if isinstance(tc, Mapping) else None
    hq = hf_quant_config.get("quantization") if isinstance(hf_quant_config, Mapping) else None
    if not isinstance(qc, Mapping) and not isinstance(hq, Mapping):
        return QuantPlan(UNQUANTIZED, [], {})
    qc = qc if isinstance(qc, Mapping) else {}
    qm = str(qc.get("quant_method", "modelopt" if hq else "")).lower()
    warnings: list[str] = []
    excluded = [str(x) for x in (qc.get("modules_to_not_convert") or qc.get("ignored_layers")
                                 or qc.get("ignore") or qc.get("exclude_modules") or [])]
    if qm == "fp8":
        bs = qc.get("weight_block_size")
        fp8 = Scheme("fp8_block", bits=8, block=(int(bs[0]), int(bs[1]))) if bs else \
            Scheme("fp8_tensor", bits=8)
        return QuantPlan(fp8, excluded + ["lm_head"], {}, method=f"fp8 ({fp8.label()})")
    if qm in ("fbgemm_fp8",):
        return QuantPlan(Scheme("fp8_channel", bits=8), excluded + ["lm_head"], {},
                          method="fbgemm_fp8 (FP8 per-channel)")
    if qm == "mxfp4":
        return QuantPlan(Scheme("mxfp4", bits=4, group_size=32), excluded, {}, experts_only=True,
                          method="mxfp4 (MoE experts MXFP4, rest unquantized)")
    if qm in ("modelopt", "modelopt_fp4", "modelopt_mixed"):
        src = hq if isinstance(hq, Mapping) else qc
        algo = str(src.get("quant_algo", "FP8" if qm == "modelopt" else "NVFP4"))
        excl = [str(x) for x in (src.get("exclude_modules") or qc.get("ignore") or [])]
        per: dict[str, Scheme] = {}
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
                per[canonical_tail(str(mod))] = sch
            return QuantPlan(UNQUANTIZED, excl + ["lm_head"], per, method="modelopt MIXED_PRECISION "
                              "(per-module FP8 / NVFP4 from quantized_layers)",
                              warnings=tuple(dict.fromkeys(warnings)))
        sch = _modelopt_scheme(algo, src.get("group_size"))
        if sch is None:
            return QuantPlan(UNQUANTIZED, [], {}, method="unquantized",
                              warnings=(f"modelopt quant_algo {algo} not modelled; weights counted "
                                        "unquantized",))
        return QuantPlan(sch, excl + ["lm_head"], {}, method=f"modelopt {algo} ({sch.label()})")
    if qm == "compressed-tensors" or qm == "compressed_tensors":
        groups = qc.get("config_groups") or {}
        chosen: Scheme | None = None
        for g in groups.values():
            w = g.get("weights") if isinstance(g, Mapping) else None
            if isinstance(w, Mapping):
                chosen = _ct_scheme(w)
                if chosen is not None:
                    break
        if chosen is None:
            return QuantPlan(UNQUANTIZED, [], {}, warnings=("compressed-tensors scheme not modelled; "
                                                       "weights counted unquantized",))
        if len(groups) > 1:
            warnings.append("several compressed-tensors config groups: the first one is applied "
                            "to every Linear")
        return QuantPlan(chosen, excluded + ["lm_head"], {},
                          method=f"compressed-tensors ({chosen.label()})", warnings=tuple(warnings))
    if qm in ("awq", "awq_marlin"):
        g = int(qc.get("group_size", qc.get("q_group_size", 128)))
        return QuantPlan(Scheme("int4_awq", bits=int(qc.get("bits", qc.get("w_bit", 4))), group_size=g),
                          excluded + ["lm_head"], {}, method=f"awq int4 g{g}")
    if qm in ("gptq", "gptq_marlin"):
        g = int(qc.get("group_size", 128))
        b = int(qc.get("bits", 4))
        g = g if g > 0 else 1 << 30  # -1 = one group per column
        return QuantPlan(Scheme("int_gptq", bits=b, group_size=g, g_idx=True), excluded + ["lm_head"],
                          {}, method=f"gptq int{b} g{qc.get('group_size', 128)}")
    if qm == "bitsandbytes":
        if qc.get("load_in_8bit"):
            return QuantPlan(Scheme("bnb8", bits=8), excluded + ["lm_head"], {},
                              method="bitsandbytes 8-bit")
        return QuantPlan(Scheme("bnb4", bits=4, group_size=64), excluded + ["lm_head"], {},
                          method="bitsandbytes 4-bit (absmax per 64)")
    return QuantPlan(UNQUANTIZED, [], {}, warnings=(f"quantization method {qm!r} not modelled; "
                                               "weights counted unquantized",))


# checkpoint spellings of MoE expert modules → the names kvplan's virtual tensors use
# (Mixtral / MiniMax: block_sparse_moe.experts.E.w1 = gate, w2 = down, w3 = up)
_EXPERT_WEIGHTS = {"w1": "gate_proj", "w2": "down_proj", "w3": "up_proj"}


# a fused virtual tensor whose checkpoint stores (and quantizes) its parts separately
FUSED_PARTS = {"in_proj_qkvz": ("in_proj_qkv", "in_proj_z"),  # Qwen3.5 GDN
                "qkv_proj": ("q_proj", "k_proj", "v_proj"), "gate_up_proj": ("gate_proj", "up_proj")}


def canonical_tail(name: str) -> str:
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


def scheme_for(vt: VirtualTensor, plan: QuantPlan) -> Scheme:
    if vt.role != "linear":
        return UNQUANTIZED
    if plan.per_module:
        tail = canonical_tail(vt.module)
        sch = plan.per_module.get(tail)
        parent, _, leaf = tail.rpartition(".")
        if sch is None and leaf in FUSED_PARTS:  # the checkpoint quantizes the parts
            parts = {plan.per_module.get(f"{parent}.{p}") for p in FUSED_PARTS[leaf]}
            sch = parts.pop() if len(parts) == 1 else None
        if sch is None and ".experts." in vt.name:  # per-expert entries: layers.N.mlp.experts.E.x
            pre, _, post = tail.partition(".experts.")
            for k, v in plan.per_module.items():
                if k.startswith(pre + ".experts.") and k.endswith("." + post.split(".")[-1]):
                    sch = v
                    break
        return sch or UNQUANTIZED
    if plan.default is UNQUANTIZED:
        return UNQUANTIZED
    if plan.experts_only and ".experts." not in vt.name:
        return UNQUANTIZED
    if "visual." in vt.name:
        return UNQUANTIZED
    if any(_pattern_hit(vt.module, p) for p in plan.excluded):
        return UNQUANTIZED
    return plan.default


def tensor_pieces(vt: VirtualTensor, sch: Scheme, elem_bytes: int) -> list[tuple[str, int]]:
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
