"""Quantization facts a checkpoint declares: method, weight format, checkpoint KV-cache dtype."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import UnsupportedError
from kvplan.models._common import Cfg
from kvplan.models.description import QuantizationInfo

# vLLM: utils.torch_utils.MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP
_MODELOPT_KV = {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}


def _modelopt_method(algo: str) -> str:
    # vLLM: ModelOpt*Config.override_quantization_method (layers/quantization/modelopt.py)
    if algo == "MIXED_PRECISION":
        return "modelopt_mixed"
    if "MXFP8" in algo:
        return "modelopt_mxfp8"
    if "NVFP4" in algo or "FP4" in algo:
        return "modelopt_fp4"
    return "modelopt"


def _normalize(qc: dict[str, Any], where: str, cfg: Cfg) -> tuple[str | None, str | None]:
    """(vLLM quantization method, ModelOpt quant_algo) for a quantization config."""
    # vLLM: ModelArchConfigConvertorBase._normalize_quantization_config — a ModelOpt
    # hf_quant_config.json (producer modelopt) gets its quant_method from quant_algo.
    producer = qc.get("producer")
    inner = qc.get("quantization") if isinstance(qc.get("quantization"), Mapping) else None
    algo: str | None = None
    if inner is not None:
        algo = None if inner.get("quant_algo") is None else str(inner["quant_algo"]).upper()
    elif qc.get("quant_algo") is not None:
        algo = str(qc["quant_algo"]).upper()
    is_modelopt_file = (isinstance(producer, Mapping) and producer.get("name") == "modelopt") or (
        inner is not None and "modelopt_quant_config" in inner)
    method = str(qc.get("quant_method") or "").lower().replace("compressed_tensors",
                                                             "compressed-tensors")
    if is_modelopt_file and inner is not None and algo is not None:
        if algo not in ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4",
                        "MIXED_PRECISION"):
            raise UnsupportedError(f"{cfg.source}: {where}: unknown ModelOpt quant_algo {algo!r}")
        method = "modelopt"
    if method.startswith("modelopt") and algo is not None:
        method = _modelopt_method(algo)
    return (method or None), algo


def _kv_dtype_modelopt(qc: dict[str, Any], cfg: Cfg) -> str | None:
    """vLLM: utils.torch_utils.get_kv_cache_quant_algo_string (modelopt branch)."""
    inner = qc.get("quantization", qc)
    if not isinstance(inner, Mapping):
        inner = qc
    kv = (inner.get("kv_cache_scheme") or qc.get("kv_cache_scheme")
          or inner.get("kv_cache_quant_algo") or qc.get("kv_cache_quant_algo"))
    if kv is None:
        return None
    if isinstance(kv, Mapping):
        if kv.get("dynamic") is False and kv.get("num_bits") == 8 and kv.get("type") == "float":
            kv = "fp8"
        elif kv.get("num_bits") == 4 and kv.get("type") == "float":
            kv = "nvfp4"
        else:
            cfg.warn(f"unknown ModelOpt kv_cache_scheme {dict(kv)!r}: vLLM falls back to 'auto'")
            return None
    if isinstance(kv, str):
        mapped = _MODELOPT_KV.get(kv.lower())
        if mapped is None:
            cfg.warn(f"unknown ModelOpt kv_cache_quant_algo {kv!r}: vLLM falls back to 'auto'")
        return mapped
    return None


def _weight_format(method: str | None, algo: str | None, qc: Mapping[str, Any]) -> str | None:
    if method is None:
        return None
    if method.startswith("modelopt"):
        return algo
    if method == "fp8":
        return "FP8"
    if method in ("mxfp4", "gpt_oss_mxfp4"):
        return "MXFP4"
    if method in ("mxfp8",):
        return "MXFP8"
    if method in ("awq", "gptq", "awq_marlin", "gptq_marlin", "auto_gptq", "auto_awq",
                  "moe_wna16"):
        bits = qc.get("bits", qc.get("w_bit"))
        return f"INT{bits}" if bits is not None else None
    if method == "bitsandbytes":
        if qc.get("load_in_4bit"):
            return "INT4" if qc.get("bnb_4bit_quant_type") != "nf4" else "NF4"
        if qc.get("load_in_8bit"):
            return "INT8"
        return None
    if method == "compressed-tensors":
        formats = set()
        groups = qc.get("config_groups") or {}
        if isinstance(groups, Mapping):
            for group in groups.values():
                weights = group.get("weights") if isinstance(group, Mapping) else None
                if not isinstance(weights, Mapping):
                    continue
                bits, typ = weights.get("num_bits"), weights.get("type")
                if typ == "float" and bits == 8:
                    formats.add("FP8")
                elif typ == "float" and bits == 4:
                    formats.add("NVFP4" if weights.get("group_size") == 16 else "FP4")
                elif typ == "int" and bits is not None:
                    formats.add(f"INT{bits}")
        if len(formats) == 1:
            return formats.pop()
        return "MIXED" if formats else None
    return None


def quantization_info(top: Cfg, text: Cfg, hf_quant_config: Mapping[str, Any] | None
                      ) -> QuantizationInfo:
    """Quantization from config.json's `quantization_config` or, when that is absent, the
    separate hf_quant_config.json (vLLM: transformers_utils.config.get_config, ModelOpt ≤0.29)."""
    qc: Any = None
    where = ""
    if isinstance(top.data.get("quantization_config"), Mapping):
        qc, where = top.data["quantization_config"], "config.json quantization_config"
    elif isinstance(hf_quant_config, Mapping):
        qc, where = hf_quant_config, "hf_quant_config.json"
    elif isinstance(top.data.get("compression_config"), Mapping):
        qc, where = top.data["compression_config"], "config.json compression_config"
    elif text is not top and isinstance(text.data.get("quantization_config"), Mapping):
        qc, where = text.data["quantization_config"], f"config.json {text.path}quantization_config"
    if qc is None:
        return QuantizationInfo()
    qc = dict(qc)
    declared_kv = _declared_kv_quant_algo(qc)
    method, algo = _normalize(qc, where, top)
    kv: str | None = None
    if method is not None and method.startswith("modelopt"):
        # vLLM: utils.torch_utils.resolve_kv_cache_dtype_string (kv "auto" → checkpoint's)
        kv = _kv_dtype_modelopt(qc, top)
    elif method == "compressed-tensors" and isinstance(qc.get("kv_cache_scheme"), Mapping):
        # vLLM: Attention.__init__ (attention.py L308): the quant config's kv_cache_scheme turns
        # kv_cache_dtype "auto" into "fp8"; only CompressedTensorsConfig carries one, and
        # validate_kv_cache_scheme accepts 8-bit float only.
        scheme = qc["kv_cache_scheme"]
        if scheme.get("type") != "float" or scheme.get("num_bits") != 8:
            raise UnsupportedError(
                f"{top.source}: {where}: kv_cache_scheme {dict(scheme)!r} — vLLM supports "
                "num_bits=8, type=float only")
        kv = "fp8"
    return QuantizationInfo(method=method, weight_format=_weight_format(method, algo, qc),
                            kv_cache_dtype=kv, source=where, kv_cache_quant_algo=declared_kv)


def _declared_kv_quant_algo(qc: Mapping[str, Any]) -> str | None:
    """The KV quantization a quantization config declares, as written: `kv_cache_quant_algo`
    (nested under `quantization` in hf_quant_config.json, or flat), or "FP8" for an 8-bit float
    `kv_cache_scheme` (SGLang: ModelOptFp8Config.from_config, CompressedTensorsConfig)."""
    nested = qc.get("quantization")
    inner: Mapping[str, Any] = nested if isinstance(nested, Mapping) else qc
    compressed = str(qc.get("quant_method", "")).lower() == "compressed-tensors"
    for section in (inner, qc):
        scheme = section.get("kv_cache_scheme")
        if isinstance(scheme, Mapping):
            if scheme.get("type") != "float" or scheme.get("num_bits") != 8:
                return None
            # SGLang: CompressedTensorsConfig.kv_cache_quant_algo declares FP8 only for what
            # CompressedTensorsKVCacheMethod.is_supported_scheme loads — static symmetric
            # per-tensor scales; ModelOpt's from_config takes any 8-bit float scheme
            if compressed and not (scheme.get("strategy") == "tensor"
                                   and scheme.get("symmetric", True)
                                   and not scheme.get("dynamic", False)):
                return None
            return "FP8"
        algo = section.get("kv_cache_quant_algo")
        if isinstance(algo, str) and algo.strip():
            return algo.strip().upper()
    return None
