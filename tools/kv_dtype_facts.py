"""Read, from vLLM's own source of each release, the facts that decide whether an fp8 / nvfp4 KV
cache runs on a GPU, and write them as JSON (tests/data/vllm-kv-dtype-facts.json). The test
`tests/budget/test_kv_dtype_support.py` holds kvplan's support table
(`kvplan.budget.kv_dtype_support`) against these facts for every catalogue GPU and release.

Development tool, never a dependency: it reads the oracle venvs' site-packages as text (vLLM
cannot be imported there without a GPU stack) and records each fact with the file it came from.

    python tools/kv_dtype_facts.py [/work/oracle] > tests/data/vllm-kv-dtype-facts.json
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

RELEASES = ("0.31.0", "0.32.0", "0.33.0", "0.34.0")


def _site(oracle: Path, release: str) -> Path:
    found = sorted((oracle / f".venv-{release}" / "lib").glob("python3*/site-packages/vllm"))
    if not found:
        raise SystemExit(f"no vLLM {release} under {oracle}")
    return found[0]


def _body(text: str, name: str) -> str:
    """The source of `def name(...)` up to the next def/class at its indentation or less."""
    m = re.search(rf"^(\s*)def {name}\(", text, re.M)
    if not m:
        return ""
    indent = len(m.group(1))
    rest = text[m.end():]
    end = re.search(rf"^\s{{0,{indent}}}(?:def |class |@)", rest, re.M)
    return text[m.start(): m.end() + (end.start() if end else len(rest))]


def _dtypes(text: str, cls: str) -> list[str]:
    m = re.search(rf"class {cls}\b.*?supported_kv_cache_dtypes[^=]*=\s*\[(.*?)\]", text, re.S)
    return re.findall(r'"([^"]+)"', m.group(1)) if m else []


def _cc(body: str) -> list[list[int]]:
    """The capabilities in the body's return statement (comments name others)."""
    code = body.split("return", 1)[-1]
    return [[int(a), int(b)] for a, b in re.findall(r"DeviceCapability\(\s*(\d+),\s*(\d+)\s*\)",
                                                     code)]


def facts(site: Path) -> dict:  # type: ignore[type-arg]
    be = site / "v1" / "attention" / "backends"
    fi = (be / "flashinfer.py").read_text()
    fa = (be / "flash_attn.py").read_text()
    fa_utils = (be / "fa_utils.py").read_text()
    tr = (be / "triton_attn.py").read_text()
    rocm = (site / "platforms" / "rocm.py").read_text()
    cfg = (site / "config" / "vllm.py").read_text()
    fa2 = re.search(r"def _nvfp4_kv_on_fa2\(\).*?for f in \(([\d,\s]+)\)", fi, re.S)
    supports = _body(fi, "supports_kv_cache_dtype")
    combination = _body(fi, "supports_combination")
    fa_support = _body(fa_utils, "flash_attn_supports_kv_cache_dtype")
    impl = tr.split("class TritonAttentionImpl", 1)[-1]
    triton_init = _body(impl, "__init__")
    rocm_fp8 = _body(rocm, "supports_fp8")
    return {
        "flashinfer": {
            "file": "v1/attention/backends/flashinfer.py",
            "kv_cache_dtypes": _dtypes(fi, "FlashInferBackend"),
            "compute_capability_range": _cc(_body(fi, "supports_compute_capability")),
            "nvfp4_trtllm_family": 100 if "is_device_capability_family(100)" in supports
            else None,
            "nvfp4_fa2_families": [int(x) for x in fa2.group(1).replace(" ", "").split(",")
                                   if x] if fa2 else [],
            "nvfp4_fa2_plain_only": 'return kv_cache_dtype == "nvfp4"' in supports,
            "nvfp4_fa2_refuses_head_size_64": "head_size == 64" in combination,
            "nvfp4_fa2_refuses_sinks": "has_sink" in combination and "NVFP4" in combination,
            "xqa_decode_reads_nvfp4_family": 120 if re.search(
                r"not self\.nvfp4_fa2 or current_platform\.is_device_capability_family\(120\)",
                fi) else None,
        },
        "flash_attn": {
            "file": "v1/attention/backends/flash_attn.py, fa_utils.py",
            "kv_cache_dtypes": _dtypes(fa, "FlashAttentionBackend"),
            "compute_capability_min": (_cc(_body(fa, "supports_compute_capability")) or [[0, 0]])[0],
            "fp8_needs_fa3_on_sm90": "fa_version == 3" in fa_support
            and "is_device_capability_family(90)" in fa_support,
            "fp8_fa4_on_sm100": "fa_version == 4" in fa_support
            and "is_device_capability_family(100)" in fa_support,
            "fp8_e5m2_refused": 'kv_cache_dtype == "fp8_e5m2"' in fa_support,
        },
        "triton_attn": {
            "file": "v1/attention/backends/triton_attn.py",
            "kv_cache_dtypes": _dtypes(tr, "TritonAttentionBackend"),
            "fp8_needs_capability": 89 if "has_device_capability(89)" in triton_init else None,
        },
        "rocm": {
            "file": "platforms/rocm.py",
            "supports_fp8": re.sub(r"\s+", " ", rocm_fp8.split("return", 1)[-1]).strip()
            if rocm_fp8 else None,
        },
        "mla": {
            "file": "config/vllm.py",
            "validate_nvfp4_kv_cache_with_mla": "def validate_nvfp4_kv_cache_with_mla" in cfg,
        },
    }


def main(argv: list[str]) -> None:
    oracle = Path(argv[1]) if len(argv) > 1 else Path("/work/oracle")
    out = {"source": "vLLM's own source of each release, read as text by tools/kv_dtype_facts.py",
           "releases": {r: facts(_site(oracle, r)) for r in RELEASES}}
    sys.stdout.write(json.dumps(out, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(sys.argv)
