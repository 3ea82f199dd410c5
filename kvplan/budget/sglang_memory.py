"""The memory SGLang's start-up profile sees, from the GPU catalogue and the weights per rank.

SGLang reads the GPU's total from nvidia-smi (memory.total, MiB: utils.get_device_memory_capacity)
for its memory defaults, and measures the free memory before and after loading the weights
(get_available_gpu_memory, GB) for the KV pools: rest = free after weights − free before ×
(1 − mem_fraction_static). kvplan estimates the free memory before the weights as the total less
the CUDA context (an estimate, below), and after them as that less the weights on the fullest
rank (target + draft).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.budget.hardware import Gpu
from kvplan.engines.sglang.deployment import Platform, ProfiledMemory, SglangGpu
from kvplan.errors import InputError, UnsupportedError
from kvplan.units import GiB

# The free memory before the weights load is the total less the CUDA context, the NCCL
# communicators and allocator reserves (SGLang's "Load weight begin. avail mem=X GB"). Estimate:
# SGLang logs on an H100 SXM (81,559 MiB = 79.65 GiB) read 78.43-78.81 GB (public start-up logs,
# 2025-2026, TP 1 and 2), so 1.2 GiB. A log's figure replaces it (`pre_model_load_gib`).
PRE_MODEL_LOAD_OVERHEAD_GIB = 1.2

_PLATFORMS = {(8, 0): Platform.SM80, (8, 6): Platform.SM86, (8, 9): Platform.SM89,
              (9, 0): Platform.SM90, (10, 0): Platform.SM100, (10, 3): Platform.SM100,
              (12, 0): Platform.SM120}


def sglang_platform(gpu: Gpu) -> Platform:
    """The GPU's architecture as SGLang's platform facts distinguish it."""
    cc = gpu.compute_capability
    if not gpu.is_nvidia or not isinstance(cc, tuple) or cc not in _PLATFORMS:
        raise UnsupportedError(f"{gpu.name}: kvplan models SGLang on NVIDIA Ampere, Ada, Hopper "
                               "and Blackwell GPUs only")
    return _PLATFORMS[cc]


def sglang_gpu(gpu: Gpu, *, total_memory_mib: float | None = None) -> SglangGpu:
    """The GPU as SGLang sizes its defaults from it: nvidia-smi's memory.total, else the
    runtime total (then SGLang would see a little more: the driver reserve)."""
    mib = total_memory_mib
    if mib is None:
        mib = gpu.nvidia_smi_total_mib
    if mib is None:
        if gpu.total_memory_bytes is None:
            raise InputError(f"{gpu.name}: no memory figure in the catalogue",
                             hint="pass the GPU's nvidia-smi memory.total")
        mib = gpu.total_memory_bytes / 2**20
    return SglangGpu(total_memory_mib=mib, platform=sglang_platform(gpu))


@dataclass(frozen=True)
class SglangMemoryEstimate:
    memory: ProfiledMemory
    pre_model_load_gib: float
    weights_bytes: tuple[int, ...]  # per PP stage (fullest rank of each)
    how: str


def profiled_memory(gpu: SglangGpu, weights_bytes: tuple[int, ...], *,
                    pre_model_load_gib: float | None = None) -> SglangMemoryEstimate:
    """Free GB before the weights (the total less PRE_MODEL_LOAD_OVERHEAD_GIB, or a logged
    value) and after them, per stage."""
    pre = (gpu.total_memory_mib / 1024 - PRE_MODEL_LOAD_OVERHEAD_GIB
           if pre_model_load_gib is None else pre_model_load_gib)
    avail = tuple(pre - w / GiB for w in weights_bytes)
    how = (f"free before the weights: {pre:.2f} GB "
           + ("(logged)" if pre_model_load_gib is not None else
              f"(nvidia-smi total {gpu.total_memory_mib:.0f} MiB less "
              f"{PRE_MODEL_LOAD_OVERHEAD_GIB} GiB CUDA context, estimated)")
           + "; weights per GPU: " + ", ".join(f"{w / GiB:.2f} GiB" for w in weights_bytes))
    return SglangMemoryEstimate(memory=ProfiledMemory(pre_model_load_gib=pre,
                                                      available_gib=avail),
                                pre_model_load_gib=pre, weights_bytes=weights_bytes, how=how)
