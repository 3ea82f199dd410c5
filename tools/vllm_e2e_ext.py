#!/usr/bin/env python3
"""vllm_e2e_ext.py DIR [harness options] [--tp N] [--gpu H100|A100|L40S|B200] [--kv-cache-dtype D]
                   [--speculative-config JSON]

`shared/vllm-e2e/vllm_e2e.py` (vLLM's own start-up code, config.json → its model classes on the
meta device → its KV-cache planner, on CPU) extended, without editing it, to the deployments
kvplan plans beyond one H100 with `--kv-cache-dtype auto`:

* `--tp N`         tensor parallelism: vLLM's per-rank head counts, with a faked TP world size;
* `--kv-cache-dtype D`  fp8, fp8_e5m2, nvfp4, ... (vLLM's serve flag);
* `--speculative-config JSON`  EAGLE / EAGLE3 / MTP / DFlash drafts (vLLM's serve flag); the
  drafter is built by vLLM's own speculator (`init_speculator(...).load_model`);
* `--gpu`          the CUDA platform posing as A100 (SM 8.0), L40S (SM 8.9), B200 (SM 10.0) or
  H100 (SM 9.0, the default);
* any vLLM release 0.31-0.34 whose wheel is in the Python running this (0.31/0.32 have the planner
  in `kv_cache_utils`; the harness's imports are pointed there).

Run it with the oracle venv's Python of the release (the e2e extras installed,
`shared/vllm-e2e/requirements-e2e-0.34.0.txt`), e.g.
    /tmp/kvplan-e2e/oracle/.venv-0.34.0/bin/python tools/vllm_e2e_ext.py \\
        tests/data/hf-configs/Qwen--Qwen3-8B --pass-kv-cache-memory-bytes --tp 2 --gpu A100
It prints the harness's JSON object, plus `ext` (what was extended) and, for a speculative run,
`draft_model_class`. Every patch on top of the harness's (its README, PATCHES) is in
`tools/README-vllm-e2e-ext.md`, with why it cannot change the planner's arithmetic.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import os
import sys
import tempfile
import traceback
import types

HARNESS_DIR = os.environ.get("VLLM_E2E_HARNESS_DIR", "/work/shared/vllm-e2e")
sys.path.insert(0, HARNESS_DIR)
import vllm_e2e as H  # noqa: E402  (the shared harness, used as a library)

# name vLLM's platform reports, compute capability, SMs, total memory (torch's figure; only the
# default max_num_batched_tokens reads it, and the runs here always pass that flag)
GPUS = {
    "H100": ("NVIDIA H100 80GB HBM3", (9, 0), 132, 85_045_477_376),
    "A100": ("NVIDIA A100-SXM4-80GB", (8, 0), 108, 85_100_068_864),
    "L40S": ("NVIDIA L40S", (8, 9), 142, 47_803_596_800),
    "B200": ("NVIDIA B200", (10, 0), 148, 191_514_017_792),
}
EXT_NOTES: list[str] = []


def _note(msg: str) -> None:
    if msg not in EXT_NOTES:
        EXT_NOTES.append(msg)


# ---------------------------------------------------------------------------------------------
# EXT 1: the GPU
# ---------------------------------------------------------------------------------------------
def set_gpu_constants(gpu: str) -> None:
    """The harness's platform reads its name / SM count / memory from module constants at call
    time; point them at the GPU asked for (before the platform is installed)."""
    name, _, sms, total = GPUS[gpu]
    H.H100_NAME, H.H100_SMS, H.H100_TOTAL_MEMORY = name, sms, total


def patch_nvidia_artifactory() -> None:
    """EXT 7: vllm.utils.flashinfer.has_nvidia_artifactory() → True. vLLM asks whether FlashInfer
    can fetch its TRT-LLM cubins (the flashinfer-cubin package, else an HTTP GET to NVIDIA's
    artifactory); a GPU server with network access answers yes, this offline CPU box no. It gates
    TRT-LLM attention (SM100: FlashInfer's larger kernel block sizes, NVFP4 KV) — the answer of
    a stock online install."""
    from vllm.utils import flashinfer as fi

    fi.has_nvidia_artifactory = lambda: True
    for name in ("supports_trtllm_attention",):
        fn = getattr(fi, name, None)
        if fn is not None and hasattr(fn, "cache_clear"):
            fn.cache_clear()
    _note("vllm.utils.flashinfer.has_nvidia_artifactory() = True (an online GPU server)")


def install_gpu_platform(gpu: str, world_size: int) -> None:
    """The harness's CUDA platform (device queries only) with this GPU's compute capability and
    `world_size` devices; torch.cuda's capability query likewise. The harness's platform object
    stays the one installed (a module may already hold it); its class's two queries change."""
    import torch
    import vllm.platforms as vp
    from vllm.platforms.interface import DeviceCapability

    name, (major, minor), _, _ = GPUS[gpu]
    cls = type(vp._current_platform)
    cls.get_device_capability = classmethod(  # type: ignore[method-assign]
        lambda c, device_id=0: DeviceCapability(major=major, minor=minor))
    cls.device_count = classmethod(lambda c: max(1, world_size))  # type: ignore[method-assign]
    torch.cuda.get_device_capability = lambda device=None: (major, minor)  # type: ignore[assignment]
    # EXT 8: torch.cuda.get_device_properties(...) — the GPU's name, capability, SM count and
    # memory (FlashInfer's attention impl sizes its scheduler by the SM count)
    props = types.SimpleNamespace(name=name, major=major, minor=minor,
                                  multi_processor_count=GPUS[gpu][2],
                                  total_memory=GPUS[gpu][3])
    torch.cuda.get_device_properties = lambda device=None: props  # type: ignore[assignment]
    # EXT 6: FlashMLA sparse's impl sizes its scheduler by the SM count of
    # torch.accelerator.current_device_index() (a device query; no CPU torch answers it)
    torch.accelerator.current_device_index = lambda: 0  # type: ignore[assignment]
    _note(f"platform and torch.cuda report {name!r}, compute capability {major}.{minor}, "
          f"{max(1, world_size)} device(s)")


# ---------------------------------------------------------------------------------------------
# EXT 2: tensor parallelism on one process
# ---------------------------------------------------------------------------------------------
def init_workspace(vllm_config) -> None:
    """EXT 9: what the GPU Worker's init_device does before it loads a model —
    `init_workspace_manager(device)` (kernel scratch space some attention impls reserve in
    `__init__`, e.g. FlashInfer's sparse MLA on SM100), on the meta device: no KV cache."""
    import torch

    try:
        from vllm.v1.worker.workspace import init_workspace_manager
    except ImportError:
        return
    init_workspace_manager(torch.device("meta"))
    _note("init_workspace_manager(meta), as Worker.init_device does before loading the model")


def fake_tp_world(tp: int) -> None:
    """After the harness's world-size-1 gloo group and `ensure_model_parallel_initialized(1, 1)`,
    the TP GroupCoordinator claims `tp` ranks, this process being rank 0. Layers read
    get_tensor_model_parallel_world_size() / _rank() (= this group's world_size /
    rank_in_group) to size their per-rank heads, as rank 0 of a real TP group does. Model
    construction issues no collective (meta tensors, no weights), so none is ever run."""
    if tp == 1:
        return
    from vllm.distributed import parallel_state as ps

    group = ps.get_tp_group()
    group.world_size = tp
    group.rank_in_group = 0
    group.ranks = list(range(tp))
    _note(f"TP GroupCoordinator world_size={tp}, rank_in_group=0 (one process: rank 0's view)")


# ---------------------------------------------------------------------------------------------
# EXT 3: the drafter
# ---------------------------------------------------------------------------------------------
def load_drafter(vllm_config, target_model):
    """What GPUModelRunner.load_model does for a DraftModelSpeculator: `init_speculator` builds
    vLLM's speculator for the configured method and its `load_model(target)` builds the draft
    model (registering its attention layers and tagging them `is_draft_layer`). The speculator's
    buffers are made on the meta device; the draft model is built the way the harness builds the
    target (initialize_model on meta: `get_model` would also load weights, of which there are
    none here)."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader.utils import initialize_model
    from vllm.utils.torch_utils import set_default_torch_dtype

    def get_model_no_weights(*, vllm_config, model_config=None, **_):
        model_config = model_config or vllm_config.model_config
        with set_default_torch_dtype(model_config.dtype):
            return initialize_model(vllm_config=vllm_config, model_config=model_config)

    patched = []
    for mod_name in list(sys.modules):
        mod = sys.modules[mod_name]
        if mod_name.startswith("vllm.v1.worker.gpu.spec_decode") and hasattr(mod, "get_model"):
            patched.append((mod, mod.get_model))
            mod.get_model = get_model_no_weights
    import vllm.model_executor.model_loader as ml

    patched.append((ml, ml.get_model))
    ml.get_model = get_model_no_weights
    _note("speculator: get_model → initialize_model on meta (no weights), as for the target")

    from vllm.v1.worker.gpu.spec_decode import init_speculator

    meta = torch.device("meta")
    req_states = types.SimpleNamespace()
    with set_current_vllm_config(vllm_config, check_compile=False):
        with torch.device("meta"), H._cuda_to_meta_mode():
            spec = init_speculator(vllm_config, meta, req_states)
            # modules imported by init_speculator after the patch above
            for mod_name in list(sys.modules):
                mod = sys.modules[mod_name]
                if (mod_name.startswith("vllm.v1.worker.gpu.spec_decode")
                        and getattr(mod, "get_model", None) not in (None, get_model_no_weights)):
                    patched.append((mod, mod.get_model))
                    mod.get_model = get_model_no_weights
            spec.load_model(target_model)
    return spec


# ---------------------------------------------------------------------------------------------
# EXT 4: releases whose planner lives in kv_cache_utils (0.31, 0.32)
# ---------------------------------------------------------------------------------------------
def alias_planner_module() -> None:
    import importlib

    try:
        importlib.import_module("vllm.v1.core.kv_cache_planning")
    except ImportError:
        from vllm.v1.core import kv_cache_utils

        sys.modules["vllm.v1.core.kv_cache_planning"] = kv_cache_utils
        _note("vllm.v1.core.kv_cache_planning → vllm.v1.core.kv_cache_utils (this release's home "
              "of get_global_kv_cache_groups / get_kv_cache_configs)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("--kv-memory", type=int, default=H.KV_MEMORY_DEFAULT)
    ap.add_argument("--max-model-len", type=int, default=32768)
    ap.add_argument("--max-num-batched-tokens", type=int, default=8192)
    ap.add_argument("--pass-kv-cache-memory-bytes", action="store_true")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--gpu", choices=sorted(GPUS), default="H100")
    ap.add_argument("--kv-cache-dtype", default="auto")
    ap.add_argument("--speculative-config", default=None)
    ap.add_argument("--extra", action="append", default=[])
    ap.add_argument("--debug", action="store_true")
    a = ap.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cuda")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "DEBUG" if a.debug else "INFO")
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    cache_root = tempfile.mkdtemp(prefix="vllm_e2e_cache_")
    os.environ["VLLM_CACHE_ROOT"] = cache_root

    real_stdout = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = io.TextIOWrapper(os.fdopen(os.dup(2), "wb"), write_through=True)

    extra = list(a.extra) + ["--tensor-parallel-size", str(a.tp),
                             "--kv-cache-dtype", a.kv_cache_dtype]
    if a.speculative_config:
        extra += ["--speculative-config", a.speculative_config]
    result: dict = {
        "harness": "vllm_e2e+tools/vllm_e2e_ext.py", "model_dir": os.path.abspath(a.model_dir),
        "kv_memory_bytes": a.kv_memory, "gpu": GPUS[a.gpu][0],
        "ext": {"gpu": a.gpu, "tensor_parallel_size": a.tp, "kv_cache_dtype": a.kv_cache_dtype,
                "speculative_config": json.loads(a.speculative_config)
                if a.speculative_config else None},
    }
    stage = "import"
    log_records: list[str] = []

    class _Cap(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.INFO:
                with contextlib.suppress(Exception):
                    log_records.append(record.getMessage()[:2000])

    try:
        set_gpu_constants(a.gpu)
        H.stub_cuda_extensions()
        H.patch_torchvision_ops()
        H.patch_triton_driver()
        import vllm

        result["vllm_version"] = vllm.__version__
        # the platform first: a module that imports vllm.platforms.current_platform binds
        # whatever platform it resolves to at that moment
        H.install_h100_platform()
        H.patch_torch_cuda()
        install_gpu_platform(a.gpu, a.tp)
        alias_planner_module()
        patch_nvidia_artifactory()
        H.patch_registry_subprocess()
        logging.getLogger("vllm").addHandler(_Cap())

        stage = "config"
        vllm_config, serve_argv = H.build_vllm_config(
            a.model_dir, a.max_model_len, a.max_num_batched_tokens,
            a.kv_memory if a.pass_kv_cache_memory_bytes else None, extra)
        result["serve_argv"] = serve_argv
        mc = vllm_config.model_config
        result["architecture"] = mc.architecture
        result["model_dtype"] = str(mc.dtype)
        result["cache_dtype"] = vllm_config.cache_config.cache_dtype
        result["mamba_cache_mode"] = str(getattr(vllm_config.cache_config, "mamba_cache_mode",
                                                 None))
        result["enable_prefix_caching"] = vllm_config.cache_config.enable_prefix_caching
        result["max_model_len_config"] = mc.max_model_len
        result["disable_hybrid_kv_cache_manager"] = \
            vllm_config.scheduler_config.disable_hybrid_kv_cache_manager
        # 0.31-0.33 fall back to the V1 GPUModelRunner for some features; the harness walks
        # model runner V2's get_kv_cache_spec only (0.34 has no V1 runner)
        v2 = getattr(vllm_config, "use_v2_model_runner", True)
        result["use_v2_model_runner"] = v2
        if not v2:
            raise RuntimeError("vllm_e2e: this deployment runs vLLM's V1 model runner, which "
                               "the harness does not walk")

        stage = "distributed"
        from vllm.config import set_current_vllm_config

        with set_current_vllm_config(vllm_config, check_compile=False):
            H.init_dist()
            fake_tp_world(a.tp)
            init_workspace(vllm_config)

        stage = "model"
        model = H.instantiate_model(vllm_config)
        result["model_class"] = type(model).__module__ + "." + type(model).__name__
        if vllm_config.speculative_config is not None:
            stage = "draft_model"
            spec = load_drafter(vllm_config, model)
            result["speculator_class"] = type(spec).__name__
            draft = getattr(spec, "model", None)
            if draft is not None:
                result["draft_model_class"] = type(draft).__module__ + "." + type(draft).__name__

        stage = "block_size"
        from vllm.platforms import current_platform

        current_platform.update_block_size_for_backend(vllm_config)
        result["cache_block_size_after_update"] = vllm_config.cache_config.block_size
        result["mamba_page_size_padded"] = vllm_config.cache_config.mamba_page_size_padded
        with contextlib.suppress(Exception):
            result["attention_backends"] = sorted(
                {b.get_name() for b in current_platform._find_non_ssm_backends(vllm_config)})

        stage = "plan"
        if not hasattr(vllm_config.cache_config, "enable_extensible_kv_cache"):
            # EXT 5: 0.31-0.33 have no extensible KV cache; the harness only reports the flag
            vllm_config.cache_config.enable_extensible_kv_cache = False
            _note("cache_config.enable_extensible_kv_cache = False (a field of 0.34 only, which "
                  "the harness reports)")
        result.update(H.plan(vllm_config, a.kv_memory))
        result["status"] = "ok"
    except BaseException as e:  # noqa: BLE001
        result["status"] = "vllm_error"
        result["stage"] = stage
        result["exception"] = {"type": type(e).__name__, "message": str(e)[:4000]}
        result["traceback"] = traceback.format_exc()[-6000:]
    result["patches"] = H.PATCH_LOG + EXT_NOTES
    result["backend_import_rejects"] = sorted(H.BACKEND_IMPORT_REJECTS)
    result["log"] = log_records[-80:]
    import shutil

    shutil.rmtree(cache_root, ignore_errors=True)
    with os.fdopen(real_stdout, "w") as f:
        f.write(json.dumps(result, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
