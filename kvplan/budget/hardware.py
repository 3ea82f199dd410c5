"""GPU catalogue: the runtime-reported total memory, architecture and KV-dtype gates per GPU.

The rows come from the packaged `data/gpus.csv`: the shared reference data (every measured number
is cited there) plus kvplan's columns — the vendor's memory capacity, a typical on-demand price
per GPU-hour, nvidia-smi's memory.total in MiB (SGLang's figure), and their sources.
`total_memory_bytes` is what `cudaMemGetInfo` / `hipMemGetInfo` reports (vLLM's figure), not the
marketing "80 GB". Rows without a citable measurement get a *nominal* total
derived from the vendor's capacity (`nominal_total_bytes`, `total_memory_nominal=True`); the
derivation is in docs/gpu-catalogue.md. Nothing here talks to a GPU or calls nvidia-smi.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
from functools import cache
from importlib import resources

from kvplan.errors import InputError
from kvplan.frozen import FrozenStrict
from kvplan.units import format_gib, parse_size_bytes


class Gpu(FrozenStrict):
    """One catalogue row. `resolved_from` says how a looked-up name was mapped to this row."""

    name: str
    aliases: tuple[str, ...] = ()
    vendor: str  # "NVIDIA" | "AMD"
    arch: str  # e.g. "Hopper (sm90)", "CDNA3 (gfx942)"
    compute_capability: tuple[int, int] | str  # (9, 0) on NVIDIA; gfx target ("gfx942") on AMD
    total_memory_bytes: int | None = None  # runtime total (cudaMemGetInfo); None = not measured
    source: str | None = None  # where total_memory_bytes comes from
    # Hardware FP8 / NVFP4 (the catalogue's fp8/nvfp4 columns say "native ..."). Whether vLLM
    # serves a KV dtype on this GPU, and how, is `kv_dtype_support` (per release).
    supports_fp8_kv: bool = False
    supports_nvfp4_kv: bool = False
    fp8_note: str = ""
    nvfp4_note: str = ""
    notes: str = ""
    resolved_from: str | None = None
    # kvplan's columns: vendor capacity (GB as printed; HBM/GDDR capacities are binary), whether
    # ECC on GDDR memory takes 1/16 of it, and a typical on-demand price per GPU-hour
    total_memory_nominal: bool = False  # total_memory_bytes is derived, not measured
    nominal_basis: str = ""  # how, when it is nominal
    spec_memory_gb: float | None = None
    spec_memory_source: str | None = None
    gddr_ecc: bool = False
    usd_per_hour: float | None = None
    usd_per_hour_source: str | None = None
    # what nvidia-smi reports as memory.total (MiB): SGLang sizes its memory defaults from this
    # figure (utils.get_device_memory_capacity), vLLM from the runtime's total above
    nvidia_smi_total_mib: int | None = None
    nvidia_smi_total_source: str | None = None

    @property
    def is_nvidia(self) -> bool:
        return self.vendor.upper() == "NVIDIA"

    @property
    def is_amd(self) -> bool:
        return self.vendor.upper() == "AMD"

    @property
    def total_memory_gib(self) -> str | None:
        return None if self.total_memory_bytes is None else format_gib(self.total_memory_bytes)


# --------------------------------------------------------------------------------------------
# Loading


def _parse_cc(text: str) -> tuple[int, int] | str:
    t = text.strip()
    m = re.fullmatch(r"(\d+)\.(\d+)", t)
    if m:
        return int(m.group(1)), int(m.group(2))
    return t


# The runtime reports a little less than the vendor's capacity (driver reserve, page tables):
# measured / capacity over the catalogue's measured rows is 0.976-0.996 on NVIDIA (median 0.989;
# this is the lower quartile, so a nominal total rarely overstates) and 0.9997-0.9999 on AMD.
# ECC on GDDR6 (A10, L4, L40S, T4 ...) keeps 1/16 of the capacity for check bits.
RUNTIME_SHARE_OF_CAPACITY = {"NVIDIA": 0.983, "AMD": 0.999}
GDDR_ECC_SHARE = 15 / 16


def nominal_total_bytes(vendor: str, spec_memory_gb: float, *, gddr_ecc: bool = False) -> int:
    """The runtime total a GPU of this capacity would report, floored to whole MiB."""
    share = RUNTIME_SHARE_OF_CAPACITY.get(vendor.upper(), RUNTIME_SHARE_OF_CAPACITY["NVIDIA"])
    raw = spec_memory_gb * 2**30 * (GDDR_ECC_SHARE if gddr_ecc else 1.0) * share
    return int(raw // 2**20) * 2**20


def nominal_memory_note(gpu: Gpu) -> str:
    """How a nominal total was derived (for `check` notes and `kvplan gpus`)."""
    return (f"nominal total {format_gib(gpu.total_memory_bytes or 0)} GiB = {gpu.nominal_basis}, "
            "not measured; pass --gpu-memory with the runtime total to be exact")


def _nominal_basis(vendor: str, spec_gb: float, ecc: bool) -> str:
    share = RUNTIME_SHARE_OF_CAPACITY.get(vendor.upper(), RUNTIME_SHARE_OF_CAPACITY["NVIDIA"])
    return (f"vendor capacity {spec_gb:g} GB" + (" × 15/16 (ECC on GDDR)" if ecc else "")
            + f" × {share} (runtime reserve)")


def _row_to_gpu(row: dict[str, str]) -> Gpu:
    total = row["total_memory_bytes"].strip()
    spec = row.get("spec_memory_gb", "").strip()
    ecc = row.get("gddr_ecc", "").strip().lower() == "yes"
    gib = row.get("nominal_total_gib", "").strip()
    nominal: int | None = None
    basis = ""
    if not total and gib:  # a GiB-level runtime report (vLLM/PyTorch text), not exact bytes
        nominal = int(float(gib) * 2**30)
        basis = f"a GiB-level runtime report ({gib} GiB, see the row notes)"
    elif not total and spec:
        nominal = nominal_total_bytes(row["vendor"], float(spec), gddr_ecc=ecc)
        basis = _nominal_basis(row["vendor"], float(spec), ecc)
    price = row.get("usd_per_hour", "").strip()
    return Gpu(
        name=row["name"].strip(),
        aliases=tuple(a.strip() for a in row["aliases"].split(";") if a.strip()),
        vendor=row["vendor"].strip(),
        arch=row["arch"].strip(),
        compute_capability=_parse_cc(row["compute_capability"]),
        total_memory_bytes=int(total) if total else nominal,
        total_memory_nominal=not total and nominal is not None,
        nominal_basis=basis,
        source=row["total_memory_source"].strip() or None,
        spec_memory_gb=float(spec) if spec else None,
        spec_memory_source=row.get("spec_memory_source", "").strip() or None,
        gddr_ecc=ecc,
        usd_per_hour=float(price) if price else None,
        usd_per_hour_source=row.get("usd_per_hour_source", "").strip() or None,
        nvidia_smi_total_mib=int(smi) if (smi := row.get("nvidia_smi_total_mib", "").strip())
        else None,
        nvidia_smi_total_source=row.get("nvidia_smi_total_source", "").strip() or None,
        supports_fp8_kv=row["fp8"].strip().lower().startswith("native"),
        supports_nvfp4_kv=row["nvfp4"].strip().lower().startswith("native"),
        fp8_note=row["fp8"].strip(),
        nvfp4_note=row["nvfp4"].strip(),
        notes=row["notes"].strip(),
    )


@cache
def _catalogue() -> tuple[Gpu, ...]:
    text = resources.files("kvplan").joinpath("data", "gpus.csv").read_text(encoding="utf-8")
    return tuple(_row_to_gpu(r) for r in csv.DictReader(io.StringIO(text)))


VENDORS = ("nvidia", "amd")


def parse_vendors(value: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """--vendor nvidia,amd → ["nvidia", "amd"] (case-insensitive); unknown → InputError."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    out = [v.strip().lower() for v in items if v.strip()]
    bad = [v for v in out if v not in VENDORS]
    if bad or not out:
        raise InputError(f"--vendor {','.join(bad) if bad else repr(value)}: unknown vendor",
                         hint=f"use {' or '.join(VENDORS)} (comma-separated)")
    return list(dict.fromkeys(out))


def list_gpus() -> list[Gpu]:
    """Every catalogue row, in file order."""
    return list(_catalogue())


# --------------------------------------------------------------------------------------------
# Lookup

_VENDOR_WORDS = ("nvidia", "geforce", "tesla", "amd", "instinct", "radeon")


def normalize_gpu_name(text: str) -> str:
    """'NVIDIA H100-80G' → 'h10080gb': lower case, vendor words and punctuation dropped."""
    s = str(text).lower()
    s = re.sub(r"(\d)\s*g(?:i?b)?\b", r"\1gb", s)  # 80G / 80 GB / 80GiB → 80gb
    for w in _VENDOR_WORDS:
        s = re.sub(rf"\b{w}\b", " ", s)
    return re.sub(r"[^a-z0-9]", "", s)


# Short or ambiguous names typed by people → (catalogue name, note when it is a choice).
_H100_AMBIG = "ambiguous (H100 SXM 80GB, H100 PCIe 80GB, H100 NVL 94GB); the SXM part is the most common"
_A100_AMBIG = ("ambiguous (A100 SXM/PCIe, 40GB/80GB); the SXM 80GB part is the most common")
_SHORT_ALIASES: dict[str, tuple[str, str | None]] = {
    "h100": ("NVIDIA H100 SXM 80GB", _H100_AMBIG),
    "h10080gb": ("NVIDIA H100 SXM 80GB", "ambiguous (SXM or PCIe 80GB); chose SXM, the most common"),
    "h100sxm": ("NVIDIA H100 SXM 80GB", None),
    "h100sxm80gb": ("NVIDIA H100 SXM 80GB", None),
    "h100hbm3": ("NVIDIA H100 SXM 80GB", None),
    "h100pcie": ("NVIDIA H100 PCIe 80GB", None),
    "h100pcie80gb": ("NVIDIA H100 PCIe 80GB", None),
    "h100nvl": ("NVIDIA H100 NVL 94GB", None),
    "h200": ("NVIDIA H200 141GB (SXM)", "ambiguous (H200 SXM or H200 NVL); chose SXM, the most common"),
    "h200sxm": ("NVIDIA H200 141GB (SXM)", None),
    "h200141gb": ("NVIDIA H200 141GB (SXM)", None),
    "h200sxm141gb": ("NVIDIA H200 141GB (SXM)", None),
    "h20": ("NVIDIA H20 96GB", "ambiguous (H20 96GB or 141GB); chose the original 96GB part"),
    "h2096gb": ("NVIDIA H20 96GB", None),
    "h20141gb": ("NVIDIA H20 141GB", None),
    "gh200": ("NVIDIA GH200 96GB", "ambiguous (GH200 96GB HBM3 or 144GB HBM3e); chose 96GB"),
    "gh200144gb": ("NVIDIA GH200 144GB", None),
    "b200": ("NVIDIA B200", None),
    "b300": ("NVIDIA B300", None),
    "gb200": ("NVIDIA GB200", None),
    "a100": ("NVIDIA A100 SXM 80GB", _A100_AMBIG),
    "a10080gb": ("NVIDIA A100 SXM 80GB", "ambiguous (SXM or PCIe 80GB); chose SXM, the most common"),
    "a10040gb": ("NVIDIA A100 SXM 40GB", "ambiguous (SXM or PCIe 40GB); chose SXM, the most common"),
    "a100sxm": ("NVIDIA A100 SXM 80GB", "ambiguous (SXM 40GB or 80GB); chose 80GB"),
    "a100sxm4": ("NVIDIA A100 SXM 80GB", "ambiguous (SXM4 40GB or 80GB); chose 80GB"),
    "a100sxm80gb": ("NVIDIA A100 SXM 80GB", None),
    "a100sxm480gb": ("NVIDIA A100 SXM 80GB", None),
    "a100sxm40gb": ("NVIDIA A100 SXM 40GB", None),
    "a100sxm440gb": ("NVIDIA A100 SXM 40GB", None),
    "a100pcie": ("NVIDIA A100 PCIe 80GB", "ambiguous (PCIe 40GB or 80GB); chose 80GB"),
    "a100pcie80gb": ("NVIDIA A100 PCIe 80GB", None),
    "a100pcie40gb": ("NVIDIA A100 PCIe 40GB", None),
    "a10g": ("NVIDIA A10G", None),
    "a10": ("NVIDIA A10", None),
    "l4": ("NVIDIA L4", None),
    "l40s": ("NVIDIA L40S", None),
    "l40": ("NVIDIA L40", None),
    "4090": ("NVIDIA GeForce RTX 4090", None),
    "rtx4090": ("NVIDIA GeForce RTX 4090", None),
    "5090": ("NVIDIA GeForce RTX 5090", None),
    "rtx5090": ("NVIDIA GeForce RTX 5090", None),
    "3090": ("NVIDIA GeForce RTX 3090", None),
    "rtx3090": ("NVIDIA GeForce RTX 3090", None),
    "rtxpro6000": ("NVIDIA RTX PRO 6000 Blackwell 96GB", None),
    "rtxpro6000blackwell": ("NVIDIA RTX PRO 6000 Blackwell 96GB", None),
    "pro6000": ("NVIDIA RTX PRO 6000 Blackwell 96GB", None),
    "rtx6000ada": ("NVIDIA RTX 6000 Ada", None),
    "6000ada": ("NVIDIA RTX 6000 Ada", None),
    "v100": ("NVIDIA V100 16GB", "ambiguous (V100 16GB or 32GB); chose 16GB, the common cloud part"),
    "v10016gb": ("NVIDIA V100 16GB", None),
    "v10032gb": ("NVIDIA V100 32GB", None),
    "t4": ("NVIDIA T4", None),
    "gb10": ("NVIDIA DGX Spark (GB10)", None),
    "dgxspark": ("NVIDIA DGX Spark (GB10)", None),
    "spark": ("NVIDIA DGX Spark (GB10)", None),
    "mi300x": ("AMD Instinct MI300X", None),
    "mi300": ("AMD Instinct MI300X", None),
    "mi325x": ("AMD Instinct MI325X", None),
    "mi355x": ("AMD Instinct MI355X", None),
    "mi250x": ("AMD Instinct MI250X", None),
    "mi250": ("AMD Instinct MI250X", "MI250 and MI250X GCDs both carry 64 GB; the MI250X row is used"),
}


@cache
def _index() -> dict[str, tuple[Gpu, str | None]]:
    """normalized key → (row, ambiguity note). Exact names and CSV aliases first."""
    by_name = {g.name: g for g in _catalogue()}
    index: dict[str, tuple[Gpu, str | None]] = {}
    for g in _catalogue():
        for text in (g.name, *g.aliases):
            key = normalize_gpu_name(text)
            if key in index and index[key][0].name != g.name:
                raise AssertionError(f"GPU alias {text!r} names two catalogue rows")
            index.setdefault(key, (g, None))
    for raw, (name, note) in _SHORT_ALIASES.items():
        key = normalize_gpu_name(raw)
        if key in index and index[key][0].name != name:
            raise AssertionError(f"short GPU alias {raw!r} contradicts the catalogue")
        if note is not None or key not in index:  # an ambiguity note wins over a plain alias
            index[key] = (by_name[name], note)
    return index


def gpu_lookup_keys() -> dict[str, str]:
    """Every accepted normalized name → catalogue name (for `--help` texts and tests)."""
    return {k: g.name for k, (g, _) in _index().items()}


def lookup_gpu(name: str) -> Gpu:
    """Find a GPU by name or alias, forgivingly ('h100', 'H100-80GB', 'a100-80gb', 'MI300X').

    Case, spaces, punctuation and vendor words do not matter. An ambiguous short name resolves to
    the most common SKU and `resolved_from` says so. Unknown → `InputError` listing close matches.
    """
    text = str(name).strip()
    key = normalize_gpu_name(text)
    if not key:
        raise InputError("empty GPU name", hint="e.g. --gpu h100, --gpu a100-80gb, --gpu mi300x")
    hit = _index().get(key)
    if hit is None:
        raise InputError(f"unknown GPU {text!r}", hint=_suggest(key))
    gpu, note = hit
    if text == gpu.name:
        return gpu
    how = f"{text!r} → {gpu.name}"
    if note:
        how += f" ({note})"
    return gpu.model_copy(update={"resolved_from": how})


def _suggest(key: str) -> str:
    keys = gpu_lookup_keys()
    close = difflib.get_close_matches(key, list(keys), n=8, cutoff=0.5)
    names: list[str] = []
    for k in close:
        if keys[k] not in names:
            names.append(keys[k])
    tail = "or give the memory yourself with --gpu-memory (e.g. --gpu-memory 80GiB)"
    if names:
        return "close matches: " + ", ".join(names[:5]) + "; " + tail
    return ("known GPUs: " + ", ".join(g.name for g in _catalogue()) + "; " + tail)


def gpu_total_memory_bytes(gpu: Gpu, override: int | str | None = None) -> int:
    """The runtime total memory to size against: an explicit override, else the catalogue's.

    A row without a measured total raises `InputError` asking for `--gpu-memory`.
    """
    if override is not None:
        return parse_size_bytes(override)
    if gpu.total_memory_bytes is None:
        raise InputError(
            f"no measured total memory for {gpu.name} in the catalogue",
            hint="pass the runtime total with --gpu-memory (torch.cuda.mem_get_info()[1], "
                 "or deviceQuery's 'Total amount of global memory' bytes), e.g. --gpu-memory 79.1GiB",
        )
    return gpu.total_memory_bytes


# --------------------------------------------------------------------------------------------
# Capability gates


def sm_version(gpu: Gpu) -> int | None:
    """NVIDIA compute capability as vLLM's `DeviceCapability.to_int()` (9.0 → 90); None on AMD."""
    cc = gpu.compute_capability
    if not gpu.is_nvidia or not isinstance(cc, tuple):
        return None
    return cc[0] * 10 + cc[1]
