#!/usr/bin/env python3
"""kvplan's extension of the shared SGLang 0.5.23 KV-pool sizing oracle.

Usage (same arguments as the shared oracle.py; see tests/data/sglang-0.5.23/README.md):

    python3 tools/sglang_oracle_ext.py CASE.json [-o OUT.json] [--no-log]
    python3 tools/sglang_oracle_ext.py cases/*.json --out-pattern 'out/{name}.out.json'

It loads the unmodified shared oracle (``$SGLANG_ORACLE``, default
``/work/shared/sglang-oracle/oracle.py``) for its helpers (venv lookup, case loading, JSON
conversion, the torchvision import stub) and runs its own ``run_case``: the same SGLang calls in
the same order, plus what the shared one does not cover. Every number still comes from SGLang's own
functions; nothing of SGLang is copied. What is added, and why it cannot change a number:

* **Model-class hooks** (``model`` is a stand-in object instead of None). ModelRunner passes the
  loaded model to ``resolve_layer_indices``, ``resolve_sliding_window_size`` and
  ``configure_kv_cache_dtype``; the shared oracle passes None, which (a) takes the config's
  ``sliding_window`` where the model class reports ``sliding_window - 1`` (gpt-oss, Gemma 3/4,
  ...), (b) sizes an ``auto`` KV cache in the model dtype where the checkpoint's quantization
  config declares an FP8 KV cache (ModelOpt ``kv_cache_quant_algo: FP8``), and (c) cannot slice
  the layers of a pipeline stage. The stand-in carries exactly those attributes, each made by
  SGLang: ``get_attention_sliding_window_size`` is the model class's own method (the
  ``sglang.srt.models`` module that defines ``class <architecture>(`` is imported, as the registry
  would, and the method called unbound on an object holding ``config``; only for hybrid-SWA
  models, the ones whose pools read the window); ``quant_config`` is
  ``model_loader.weight_utils.get_quant_config`` on the case's config folder; ``start_layer`` /
  ``end_layer`` are ``distributed.utils.get_pp_indices`` for the stage, as ``make_layers`` sets
  them. Importing the model classes needs a few pure-Python
  packages the shared venv lacks (einops, openai, distro, jiter, sniffio, partial_json_parser);
  ``tools/sglang_oracle_extra.sh`` installs them ``--no-deps`` into a separate folder
  (``$SGLANG_ORACLE_EXTRA``, default ``~/.cache/kvplan-sglang-oracle-extra``) put on sys.path
  after the venv's own site-packages, so no installed package is shadowed.
* **Pipeline parallelism** (``server_args.pp_size`` > 1). Every stage runs in this process with
  its own stand-in model (layer slice above) and a fresh ``runtime_context.publish`` (the pool
  sizing writes ``max_mamba_cache_size`` into the process config, as each real stage process
  does for itself). ``_apply_token_constraints`` all-reduces the token capacity with MIN across
  the stages through ``torch.distributed``; here pass 1 records each stage's capacity (the
  all-reduce is the identity) and pass 2 gives every stage the minimum of those values -- what a
  MIN all-reduce returns. Each stage's free memory may differ (``weights_gib`` /
  ``available_gpu_memory_gib`` may be a list, one per stage). Output: ``pp_ranks`` (one entry per
  stage) and, at top level, stage 0's numbers.
* **Speculative decoding**: ``draft_model_dir`` (relative to the case) becomes
  ``speculative_draft_model_path``; the draft's ModelConfig and layer counts are SGLang's
  (``resolve_spec_aux_hidden_state_config``, ``KVCacheConfigurator.__post_init__``). The draft
  worker's own pool is not built: the target's ``MemoryPoolConfig`` is the one the draft reuses.
* **Platforms**: facts for ``cuda_sm90`` (the shared oracle's H100 facts), ``cuda_sm100``
  (B200), ``cuda_sm80`` (A100), ``cuda_sm89`` (L4 / L40S), installed with SGLang's own
  ``override_platform``; each adds ``has_flashinfer`` (flashinfer is a dependency of the sglang
  wheel on CUDA; it picks the default attention backend off Hopper / Blackwell).
* ``is_cuda()`` answers the platform's fact inside the three SGLang functions on the sizing path
  that call it at run time (not at import): ``cuda_graph_config.default_prefill_backend`` (on
  CUDA the breakable prefill CUDA graph is the default, and ``handle_gpu_memory_settings``
  reserves its capture memory: without this the shared oracle's torch+cpu process disables the
  prefill graph and reports a mem_fraction_static 0.005 too high for most models) and
  ``utils.common.is_float4_e2m1fn_x2`` (an FP4 KV cache is sized by its FP4 recipe, scales
  included, only on CUDA: without it NVFP4 KV is sized as one byte per element), and
  ``select_dsv4_kv_layout`` (with SGLANG_DSV4_KV_LAYOUT=auto DeepSeek-V4's KV page layout is V4.1
  on SM100; the default, v4, takes V4 anywhere; it asks
  ``torch.cuda.is_available()``, ``torch.version.cuda`` and the capability). Patched for the
  duration of each call only; module-level ``_is_cuda`` constants bound at import keep False and
  none of them is on the sizing path.
* The FP4 KV recipe object (``get_kv_cache_quant_method``) is built with ``device="cpu"``: it
  allocates per-layer global-scale tensors on the device, which ``compute_cell_size`` never
  reads (it sizes from head counts, head dims and the recipe's scale layout).
* ``torch.cuda.get_device_capability`` returns the emulated platform's ``device_capability``
  (model_hook asks torch.cuda directly for DSA models; torch+cpu would raise).
* ``env``: SGLang environment variables set before SGLang is imported (e.g.
  ``SGLANG_PP_LAYER_PARTITION``).
* ``kv_budget_bytes`` on a Mamba / linear-attention hybrid: the budget is what
  ``_profile_available_bytes`` would hand to ``_handle_max_mamba_cache`` (the state pool is carved
  out of it first, as in profile mode); the shared oracle skipped that step, which leaves
  ``max_mamba_cache_size`` unset and fails in ``resolve_max_num_reqs``.
* The free-memory profile runs once (``_resolve_memory_pool_config`` as ModelRunner calls it);
  ``available_bytes`` is the value ``_profile_available_bytes`` returned inside it (the shared
  oracle called it twice, the second time with ``max_mamba_cache_size`` already set).
* More of the resolved configuration in the output: ``schedule``, ``memory``, ``spec``,
  ``parallel`` (runtime-context bags), CUDA-graph backends, ``spec_aux``, the Mamba state shapes
  and dtypes, and every configurator field that sizes a pool.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import re
import sys
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE_PATH = os.environ.get("SGLANG_ORACLE", "/work/shared/sglang-oracle/oracle.py")
EXTRA = os.environ.get("SGLANG_ORACLE_EXTRA",
                       os.path.expanduser("~/.cache/kvplan-sglang-oracle-extra"))
VERSION = "0.5.23"
_REEXEC_ENV = "_KVPLAN_SGLANG_ORACLE_EXT_REEXEC"

EXT_CASE_KEYS = {"draft_model_dir", "env"}

_CUDA = dict(is_cuda=True, is_hip=False, is_npu=False, is_xpu=False, is_musa=False, is_mps=False,
             is_sm110=False, is_sm120=False, has_amx=False,
             # a CUDA install of SGLang has flashinfer (a dependency of the sglang wheel)
             has_flashinfer=True)
PLATFORMS_EXT = {
    # H100 / H200 / H20: the shared oracle's facts plus has_flashinfer
    "cuda_sm90": dict(_CUDA, is_sm90=True, is_sm100=False, is_sm100_or_sm110=False,
                      is_blackwell=False, is_hopper_with_cuda_12_3=True, device_sm=90,
                      device_capability=(9, 0)),
    # B200 / GB200
    "cuda_sm100": dict(_CUDA, is_sm90=False, is_sm100=True, is_sm100_or_sm110=True,
                       is_blackwell=True, is_hopper_with_cuda_12_3=False, device_sm=100,
                       device_capability=(10, 0)),
    # A100
    "cuda_sm80": dict(_CUDA, is_sm90=False, is_sm100=False, is_sm100_or_sm110=False,
                      is_blackwell=False, is_hopper_with_cuda_12_3=False, device_sm=80,
                      device_capability=(8, 0)),
    # L4 / L40S / RTX 4090
    "cuda_sm89": dict(_CUDA, is_sm90=False, is_sm100=False, is_sm100_or_sm110=False,
                      is_blackwell=False, is_hopper_with_cuda_12_3=False, device_sm=89,
                      device_capability=(8, 9)),
}

# configurator attributes reported when present (bytes per token, layer counts, ratios)
CONFIGURATOR_FIELDS = (
    "_cell_size", "_fixed_overhead_bytes", "_zero_kv_max_tokens",
    "_full_per_token", "_swa_per_token", "_full_layers_num", "_swa_layers_num",
    "_swa_full_tokens_ratio", "_sliding_window_size", "_draft_full_layers_num",
    "_draft_swa_layers_num", "_draft_swa_full_layers_num", "_draft_cell_size", "_swa_cap",
    "kv_bytes", "indexer_bytes_per_token", "low_ratio_index_bytes", "bytes_per_full_token",
    "bytes_per_swa_token", "swa_ratio", "swa_cap_tokens", "swa_prefix_tails", "ring_sizes",
    "stage_owner_layers", "num_layers_total", "_spec_infl", "_unified", "_unified_fp8",
    "request_window_bytes", "_swa_ring_size", "context_len", "c4_shrink_factor",
)


def _load_shared_oracle():
    spec = importlib.util.spec_from_file_location("sglang_shared_oracle", ORACLE_PATH)
    if spec is None or spec.loader is None:
        sys.exit(f"sglang_oracle_ext: cannot load {ORACLE_PATH} (set SGLANG_ORACLE)")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sglang_shared_oracle"] = mod
    spec.loader.exec_module(mod)
    return mod


base = _load_shared_oracle()


def ensure_version(argv):
    if base._installed_sglang_version() == VERSION:
        return
    py = base._venv_python(VERSION)
    if py is None or os.environ.get(_REEXEC_ENV) == VERSION:
        sys.stderr.write(f"sglang_oracle_ext: no sglang {VERSION} venv; run the shared setup.sh\n")
        sys.exit(2)
    os.environ[_REEXEC_ENV] = VERSION
    os.execv(py, [py, os.path.abspath(__file__), *argv])


def load_case(path):
    with open(path) as f:
        case = json.load(f)
    unknown = set(case) - base.CASE_KEYS - EXT_CASE_KEYS
    if unknown:
        raise ValueError(f"unknown case keys: {sorted(unknown)}")
    return case


def _bag(bag, depth=0):
    """A runtime-context config bag as a JSON dict (leaves and nested bags)."""
    fields = object.__getattribute__(bag, "_fields")
    subs = object.__getattribute__(bag, "_subs")
    out = {k: base._jsonable(v) for k, v in sorted(fields.items())
           if isinstance(v, (bool, int, float, str, type(None), list, tuple, dict))}
    if depth < 2:
        for k, sub in sorted(subs.items()):
            out[k] = _bag(sub, depth + 1)
    return out


def _per_rank(value, rank):
    return value[rank] if isinstance(value, list) else value


def _model_class(arch):
    """SGLang's model class for `arch`: the sglang.srt.models module that defines it (found by
    reading the package's source text for ``class <arch>(``, then imported), as the registry would
    import it; importing every model module as ModelRegistry does costs a minute per case."""
    import importlib
    import pkgutil

    import sglang.srt.models as models_pkg

    pattern = re.compile(rf"^class {re.escape(arch)}\(", re.M)
    for info in pkgutil.iter_modules(models_pkg.__path__):
        path = os.path.join(models_pkg.__path__[0], info.name + ".py")
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            if pattern.search(f.read()):
                return getattr(importlib.import_module(f"sglang.srt.models.{info.name}"), arch)
    raise LookupError(f"no sglang.srt.models module defines {arch}")


def _window_hook(model_config):
    """The model class's get_attention_sliding_window_size, unbound, on a stand-in self.

    Only hybrid-SWA models read the window when the pools are sized (validate_swa_pool_size,
    compute_swa_request_cap, DSV4): for the others the shared oracle's None model is kept."""
    from types import SimpleNamespace

    if not model_config.is_hybrid_swa:
        return None, "not hybrid SWA: the window does not size a pool (model=None as shared)"
    try:
        cls = _model_class(model_config.hf_config.architectures[0])
    except Exception as e:  # no class: the shared oracle's behaviour (None model)
        return None, f"model class lookup failed: {type(e).__name__}: {e}"
    fn = getattr(cls, "get_attention_sliding_window_size", None)
    if fn is None:
        return None, f"{cls.__name__} has no get_attention_sliding_window_size"
    stand_in = SimpleNamespace(config=model_config.hf_config,
                               text_config=model_config.hf_text_config)
    try:
        value = fn(stand_in)
    except Exception as e:
        return None, f"{cls.__name__}.get_attention_sliding_window_size failed: {e}"
    return (lambda: value), f"{cls.__name__}.get_attention_sliding_window_size() = {value}"


def _quant_config(model_config):
    if model_config.quantization is None:
        return None, None
    try:
        from sglang.srt.configs.load_config import LoadConfig
        from sglang.srt.model_loader.weight_utils import get_quant_config

        qc = get_quant_config(model_config, LoadConfig(), {})
    except Exception as e:
        return None, f"get_quant_config failed: {type(e).__name__}: {e}"
    return qc, (f"{type(qc).__name__} kv_cache_quant_algo="
                f"{getattr(qc, 'kv_cache_quant_algo', None)}")


def run_case(case, case_path):
    import tempfile

    for k, v in (case.get("env") or {}).items():
        os.environ[k] = str(v)
    if os.path.isdir(EXTRA):
        sys.path.append(EXTRA)

    import import_stubs

    import_stubs.install()
    import torch

    out = {
        "oracle": "kvplan-sglang-kv-pool-oracle-ext",
        "shared_oracle": ORACLE_PATH,
        "case_name": case.get("name", os.path.basename(case_path)),
        "stubbed_packages": sorted(import_stubs.STUBBED_PACKAGES),
        "sglang_version": base._installed_sglang_version(),
        "torch_version": torch.__version__,
        "env": case.get("env") or {},
    }
    gpu_mib = base._gpu_mib(case)
    available_gb_holder = {}

    import sglang.srt.arg_groups.memory_hook as memory_hook
    import sglang.srt.mem_cache.kv_cache_configurator as kvcc
    import sglang.srt.utils.common as common

    def fake_capacity(device=None):
        return gpu_mib

    def fake_available(device=None, gpu_id=None, distributed=False, empty_cache=True,
                       cpu_group=None, **kw):
        if "gb" not in available_gb_holder:
            raise RuntimeError("oracle: free GPU memory requested but the case gave none")
        return available_gb_holder["gb"]

    common.get_device_memory_capacity = fake_capacity
    memory_hook.get_device_memory_capacity = fake_capacity
    kvcc.get_device_memory_capacity = fake_capacity
    kvcc.get_available_gpu_memory = fake_available

    from sglang.srt.arg_groups.overrides import resolving_view
    from sglang.srt.server_args import ServerArgs

    platform = case.get("platform", "cuda_sm90")
    out["platform"] = platform
    if platform != "host":
        import sglang.srt.layers.quantization as quant
        from sglang.srt.runtime_context import override_platform

        facts = dict(PLATFORMS_EXT[platform])
        override_platform(**facts).install()
        out["platform_facts"] = {k: base._jsonable(v) for k, v in facts.items()}
        # model_hook.handle_model_specific_adjustments asks torch.cuda directly (DSA models);
        # torch+cpu has no CUDA: answer with the emulated platform's capability.
        capability = tuple(facts["device_capability"])
        torch.cuda.get_device_capability = lambda device=None: capability
        # cuda_graph_config.default_prefill_backend() calls sglang.srt.utils.is_cuda() when the
        # server args resolve (breakable prefill CUDA graph is CUDA's default, which reserves
        # memory in handle_gpu_memory_settings); torch+cpu says False. Module-level `_is_cuda`
        # constants bound at import keep False (none of them sizes a pool).
        _install_is_cuda_fact(bool(facts["is_cuda"]))
        if "mxfp4" not in quant.QUANTIZATION_METHODS:
            quant.QUANTIZATION_METHODS["mxfp4"] = quant.BASE_QUANTIZATION_METHODS.get(
                "mxfp4") or __import__("sglang.srt.layers.quantization.mxfp4",
                                       fromlist=["Mxfp4Config"]).Mxfp4Config
            out["platform_quant_registered"] = ["mxfp4"]

    tmpdir = tempfile.mkdtemp(prefix="sglang-oracle-ext-")
    model_dir = base._model_dir_for(case, case_path, tmpdir)
    sa_kwargs = dict(case.get("server_args", {}))
    sa_kwargs.setdefault("device", "cuda")
    if "draft_model_dir" in case:
        d = case["draft_model_dir"]
        if not os.path.isabs(d):
            d = os.path.join(os.path.dirname(os.path.abspath(case_path)), d)
        sa_kwargs["speculative_draft_model_path"] = d
    out["server_args_input"] = {k: (os.path.basename(v) if k == "speculative_draft_model_path"
                                    else v) for k, v in sa_kwargs.items()}
    server_args = ServerArgs(model_path=model_dir, **sa_kwargs)
    stage = "resolve_server_args"
    try:
        server_args.resolve_once()
        cfg = resolving_view(server_args)
        out["resolved"] = {
            k: base._jsonable(getattr(cfg, k, None))
            for k in (
                "mem_fraction_static", "chunked_prefill_size", "max_prefill_tokens",
                "page_size", "kv_cache_dtype", "attention_backend", "prefill_attention_backend",
                "decode_attention_backend", "tp_size", "pp_size", "dp_size",
                "enable_dp_attention", "max_running_requests", "max_total_tokens",
                "context_length", "swa_full_tokens_ratio", "mamba_full_memory_ratio",
                "max_mamba_cache_size", "mamba_ssm_dtype", "mamba_scheduler_strategy",
                "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
                "speculative_num_draft_tokens", "disable_radix_cache",
                "disable_overlap_schedule", "torch_compile_max_bs", "disable_hybrid_swa_memory",
                "enable_unified_memory", "language_only",
            )
        }
        if "speculative_draft_model_path" in out["resolved"]:
            out["resolved"].pop("speculative_draft_model_path")
        gcc = cfg.cuda_graph_config
        out["resolved"]["cuda_graph_decode_backend"] = str(gcc.decode.backend)
        out["resolved"]["cuda_graph_decode_max_bs"] = gcc.decode.max_bs
        out["resolved"]["cuda_graph_decode_bs"] = list(gcc.decode.bs or [])
        out["resolved"]["cuda_graph_prefill_backend"] = str(gcc.prefill.backend)
        out["resolved"]["cuda_graph_prefill_max_bs"] = gcc.prefill.max_bs
        out["resolved"]["cuda_graph_prefill_bs_count"] = len(gcc.prefill.bs or [])
        out["mem_fraction_static"] = cfg.mem_fraction_static
        out["gpu_total_memory_mib"] = gpu_mib

        stage = "publish"
        from types import SimpleNamespace

        from sglang.srt import runtime_context as rc

        def publish():
            rc.publish(server_args, role="scheduler")
            rc.get_parallel().override_permanently(
                world_group=SimpleNamespace(cpu_group=None, world_size=1))

        publish()
        out["schedule"] = _bag(rc.get_schedule())
        out["memory"] = _bag(rc.get_memory())
        out["spec"] = _bag(rc.get_spec())
        par = rc.get_parallel()
        out["parallel"] = {k: getattr(par, k, None) for k in (
            "tp_size", "pp_size", "dp_size", "attn_tp_size", "attn_dp_size", "attn_dcp_size",
            "launch_world_size")}

        stage = "model_config"
        from sglang.srt.arg_groups.model_override_base import model_config_of
        from sglang.srt.configs.model_config import AttentionArch

        model_config = model_config_of(server_args)
        out["model"] = {
            "architectures": list(model_config.hf_config.architectures or []),
            "model_type": getattr(model_config.hf_config, "model_type", None),
            "attention_arch": str(model_config.attention_arch),
            "context_len": model_config.context_len,
            "num_hidden_layers": model_config.num_hidden_layers,
            "num_attention_layers": getattr(model_config, "num_attention_layers", None),
            "num_key_value_heads": getattr(model_config, "num_key_value_heads", None),
            "total_num_kv_heads": model_config.get_total_num_kv_heads(),
            "head_dim": getattr(model_config, "head_dim", None),
            "v_head_dim": getattr(model_config, "v_head_dim", None),
            "swa_head_dim": getattr(model_config, "swa_head_dim", None),
            "swa_v_head_dim": getattr(model_config, "swa_v_head_dim", None),
            "kv_lora_rank": getattr(model_config, "kv_lora_rank", None),
            "qk_rope_head_dim": getattr(model_config, "qk_rope_head_dim", None),
            "index_head_dim": getattr(model_config, "index_head_dim", None),
            "dtype": str(model_config.dtype),
            "quantization": model_config.quantization,
            "is_hybrid_swa": model_config.is_hybrid_swa,
            "is_multimodal": model_config.is_multimodal,
            "sliding_window_size": getattr(model_config, "sliding_window_size", None),
            "attention_chunk_size": getattr(model_config, "attention_chunk_size", None),
            "num_nextn_predict_layers": model_config.num_nextn_predict_layers,
            "swa_attention_layer_ids": model_config.swa_attention_layer_ids,
            "full_attention_layer_ids": model_config.full_attention_layer_ids,
        }

        stage = "model_stand_in"
        from sglang.srt.distributed.utils import get_pp_indices

        window_fn, window_note = _window_hook(model_config)
        quant_config, quant_note = _quant_config(model_config)
        out["model_stand_in"] = {"sliding_window": window_note, "quant_config": quant_note}

        def stand_in(rank, pp_size):
            attrs = {"quant_config": quant_config}
            if window_fn is not None:
                attrs["get_attention_sliding_window_size"] = window_fn
            if pp_size > 1:
                start, end = get_pp_indices(model_config.num_hidden_layers, rank, pp_size)
                attrs.update(start_layer=start, end_layer=end)
            return SimpleNamespace(**attrs)

        pp_size = rc.get_parallel().pp_size
        ranks = []
        capacities = {}
        for pass_no in (1, 2) if pp_size > 1 else (1,):
            ranks = []
            for rank in range(pp_size):
                publish()
                r = _run_rank(case, kvcc, rc, server_args, model_config, stand_in(rank, pp_size),
                              rank, pp_size, pass_no, capacities, available_gb_holder, gpu_mib,
                              AttentionArch)
                ranks.append(r)
        if pp_size > 1:
            out["pp_ranks"] = ranks
        first = ranks[0]
        out.update({k: v for k, v in first.items() if k != "pp_rank"})
        if pp_size > 1:
            errors = [r for r in ranks if not r.get("fits")]
            if errors and first.get("fits"):
                out["fits"] = False
                out["error"] = errors[0]["error"]
    except Exception as e:
        out["fits"] = False
        out["error"] = {"type": type(e).__name__, "message": str(e), "stage": stage}
        out["error_traceback_tail"] = _tb_tail()
    return out


def _run_rank(case, kvcc, rc, server_args, model_config, model, rank, pp_size, pass_no,
              capacities, available_gb_holder, gpu_mib, AttentionArch):
    out = {"pp_rank": rank}
    stage = "runner_attributes"
    try:
        import torch
        from sglang.srt.mem_cache import kv_cache_dtype as kvd
        from sglang.srt.model_executor.model_runner_components.layer_setup import (
            resolve_layer_indices,
        )
        from sglang.srt.model_executor.model_runner_components.load_model_utils import (
            resolve_sliding_window_size,
        )
        from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import (
            resolve_spec_aux_hidden_state_config,
        )
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        spec_algorithm = SpeculativeAlgorithm.from_string(rc.get_spec().speculative_algorithm)
        layer_info = resolve_layer_indices(model=model, model_config=model_config,
                                           is_draft_worker=False)
        kv_dtype_str, kv_dtype = kvd.configure_kv_cache_dtype(
            server_args_kv_cache_dtype=rc.get_model().kv_cache_dtype,
            model=model,
            model_dtype=model_config.dtype,
            is_draft_worker=False,
            is_dflash=spec_algorithm.is_dflash_family(),
            speculative_draft_attention_backend=None,
            speculative_draft_kv_cache_dtype=rc.get_spec().speculative_draft_kv_cache_dtype,
        )
        kv_dtype_str = kv_dtype_str if kv_dtype_str is not None else rc.get_model().kv_cache_dtype
        sliding_window_size = resolve_sliding_window_size(model, model_config)
        spec_aux = resolve_spec_aux_hidden_state_config(
            server_args=server_args, model_config=model_config,
            spec_algorithm=spec_algorithm, is_draft_worker=False)
        out["runner"] = {
            "kv_cache_dtype": str(kv_dtype),
            "kv_cache_dtype_str": kv_dtype_str,
            "kv_cache_element_size": torch._utils._element_size(kv_dtype),
            "page_size": rc.get_schedule().page_size,
            "sliding_window_size": sliding_window_size,
            "use_mla_backend": model_config.attention_arch == AttentionArch.MLA,
            "layer_info": base._jsonable(layer_info),
            "spec_algorithm": str(spec_algorithm),
        }
        out["spec_aux"] = {k: base._jsonable(getattr(spec_aux, k)) for k in (
            "eagle_use_aux_hidden_state", "eagle_draft_num_layers", "eagle_draft_swa_num_layers",
            "dflash_draft_num_layers", "dspark_num_stages", "draft_kv_num_layers")}

        stage = "kv_cache_configurator"
        kvc = kvcc.KVCacheConfigurator(
            device="cuda", gpu_id=0,
            attn_dp_size=rc.get_parallel().attn_dp_size,
            pp_size=pp_size,
            pp_group=SimpleNamespaceRank(rank),
            model=model,
            model_config=model_config,
            server_args=server_args,
            kv_cache_dtype=kv_dtype,
            kv_cache_dtype_str=kv_dtype_str,
            model_dtype=model_config.dtype,
            page_size=rc.get_schedule().page_size,
            sliding_window_size=sliding_window_size,
            spec_algorithm=spec_algorithm,
            is_draft_worker=False,
            post_capture_kv_active=False,
            spec_aux_config=spec_aux,
            draft_parallel_layout=None,
            is_hybrid_swa=model_config.is_hybrid_swa,
            is_hybrid_swa_compress=model_config.is_hybrid_swa_compress,
            use_mla_backend=model_config.attention_arch == AttentionArch.MLA,
            layer_info=layer_info,
            forward_stream=None,
            req_to_token_pool=None,
            token_to_kv_pool_allocator=None,
            memory_pool_config=None,
            draft_model_idx=None,
        )
        out["dflash_draft_cell_size_per_token"] = kvc.dflash_draft_cell_size_per_token
        from sglang.srt.model_executor.pool_configurator import create_memory_pool_configurator

        pc = create_memory_pool_configurator(kvc)
        out["pool_configurator"] = type(pc).__name__
        out["cell_size_bytes_per_token"] = base._num(getattr(pc, "_cell_size", None))
        fields = {}
        for attr in CONFIGURATOR_FIELDS:
            if hasattr(pc, attr):
                fields[attr.lstrip("_")] = base._jsonable(getattr(pc, attr))
        out["pool_configurator_fields"] = fields
        if kvc.mambaish_config is not None:
            mp = kvc.mambaish_config.mamba2_cache_params
            out["mamba"] = {
                "params_class": type(mp).__name__,
                "mamba_layers": len(mp.layers),
                "layer_ids": list(mp.layers),
                "mamba_cache_per_req_bytes": int(mp.mamba_cache_per_req),
                "conv_shapes": [list(s) for s in mp.shape.conv],
                "temporal_shape": list(mp.shape.temporal),
                "conv_dtype": str(mp.dtype.conv),
                "temporal_dtype": str(mp.dtype.temporal),
                "full_attention_layer_ids": list(kvc.mambaish_config.full_attention_layer_ids),
                "mamba_ratio": kvc._calculate_mamba_ratio(),
            }

        stage = "memory_pool_config"
        _install_pp_all_reduce(rank, pass_no, capacities)
        if "kv_budget_bytes" in case:
            budget = int(_per_rank(case["kv_budget_bytes"], rank))
            out["mode"] = "kv_budget_bytes"
            out["available_bytes"] = budget
            if kvc.mambaish_config is not None:
                # Hybrids: the budget is the pools' whole share (what _profile_available_bytes
                # hands to _handle_max_mamba_cache); the state pool is carved out of it first.
                rest_gb = kvc._handle_max_mamba_cache(budget / (1 << 30))
                budget = int(rest_gb * (1 << 30))
                out["kv_bytes_after_mamba"] = budget
            config = kvc.config_from_budget(budget)
            config.max_running_requests = kvc.resolve_max_num_reqs(config.max_total_num_tokens)
            config = create_memory_pool_configurator(kvc).finalize_with_max_running_requests(
                config)
        else:
            pre = _per_rank(case.get("pre_model_load_memory_gib"), rank)
            if pre is None:
                pre = gpu_mib / 1024
            if "available_gpu_memory_gib" in case:
                avail = float(_per_rank(case["available_gpu_memory_gib"], rank))
            else:
                avail = float(pre) - float(_per_rank(case.get("weights_gib", 0.0), rank))
            available_gb_holder["gb"] = avail
            out["mode"] = "profile"
            out["pre_model_load_memory_gib"] = float(pre)
            out["available_gpu_memory_gib"] = avail
            seen = {}
            real_profile = kvcc.KVCacheConfigurator._profile_available_bytes

            def recording_profile(self, pre_model_load_memory):
                value = real_profile(self, pre_model_load_memory)
                seen["available_bytes"] = value
                return value

            kvcc.KVCacheConfigurator._profile_available_bytes = recording_profile
            try:
                config = kvc._resolve_memory_pool_config(float(pre))
            finally:
                kvcc.KVCacheConfigurator._profile_available_bytes = real_profile
                if "available_bytes" in seen:
                    out["available_bytes"] = seen["available_bytes"]
        out["fits"] = True
        out["max_total_num_tokens"] = config.max_total_num_tokens
        out["max_running_requests"] = config.max_running_requests
        out["full_max_total_num_tokens"] = config.full_max_total_num_tokens
        out["swa_max_total_num_tokens"] = config.swa_max_total_num_tokens
        out["page_size"] = rc.get_schedule().page_size
        out["max_mamba_cache_size"] = rc.get_schedule().max_mamba_cache_size
        out["memory_pool_config"] = base._jsonable(config)
    except Exception as e:
        out["fits"] = False
        out["error"] = {"type": type(e).__name__, "message": str(e), "stage": stage}
        out["error_traceback_tail"] = _tb_tail()
    return out


def _install_is_cuda_fact(is_cuda_fact):
    """Run two SGLang functions that call ``is_cuda()`` at call time with the platform's answer,
    for the duration of each call only (a module imported while ``is_cuda`` were patched would
    bind ``_is_cuda = True`` at import and pull in CUDA kernels):

    * ``cuda_graph_config.default_prefill_backend`` (breakable prefill CUDA graph on CUDA; its
      capture memory is reserved in ``handle_gpu_memory_settings``), which imports
      ``sglang.srt.utils.is_cuda`` when called;
    * ``utils.common.is_float4_e2m1fn_x2`` (FP4 KV storage only counts as FP4 on CUDA; it picks
      the FP4 KV recipe's cell size), which reads ``common.is_cuda`` as a global; replaced in
      every imported module that bound it by name;
    * ``deepseek_v4_memory_pool.select_dsv4_kv_layout`` (the V4.1 KV page layout on SM100),
      which asks ``torch.cuda.is_available()`` / ``torch.version.cuda`` and the capability.
    """
    import sglang.srt.mem_cache.kv_cache_configurator  # noqa: F401  (bind the names first)
    import sglang.srt.model_executor.cuda_graph_config as cgc
    import sglang.srt.model_executor.pool_configurator  # noqa: F401
    import sglang.srt.utils as sglang_utils
    import sglang.srt.utils.common as common
    import torch

    def with_fact(fn):
        def wrapper(*args, **kwargs):
            saved = (sglang_utils.is_cuda, common.is_cuda, torch.cuda.is_available,
                     torch.version.cuda)
            sglang_utils.is_cuda = common.is_cuda = lambda: is_cuda_fact
            torch.cuda.is_available = lambda: is_cuda_fact
            torch.version.cuda = "12.9" if is_cuda_fact else None
            try:
                return fn(*args, **kwargs)
            finally:
                (sglang_utils.is_cuda, common.is_cuda, torch.cuda.is_available,
                 torch.version.cuda) = saved

        wrapper.__wrapped__ = fn
        return wrapper

    cgc.default_prefill_backend = with_fact(cgc.default_prefill_backend)
    import sglang.srt.mem_cache.deepseek_v4_memory_pool as dsv4_pool

    dsv4_pool.select_dsv4_kv_layout = with_fact(dsv4_pool.select_dsv4_kv_layout)
    # The FP4 KV recipe object allocates its per-layer global scales on kvc.device ("cuda");
    # make them on the CPU: compute_cell_size reads head counts and dims, never these tensors.
    import sglang.srt.layers.quantization.fp4_kv_cache_quant_method as fp4q

    real_get_method = fp4q.get_kv_cache_quant_method

    def get_kv_cache_quant_method(name, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = "cpu"
        return real_get_method(name, **kwargs)

    fp4q.get_kv_cache_quant_method = get_kv_cache_quant_method
    real_fp4 = common.is_float4_e2m1fn_x2
    wrapped_fp4 = with_fact(real_fp4)
    for name, mod in list(sys.modules.items()):
        if name.startswith("sglang.") and vars(mod).get("is_float4_e2m1fn_x2") is real_fp4:
            mod.is_float4_e2m1fn_x2 = wrapped_fp4


def _tb_tail():
    """The innermost frames of the exception being handled: SGLang's file:line of the raise."""
    return [line for line in traceback.format_exc().splitlines() if line.startswith("  File")][-8:]


class SimpleNamespaceRank:
    """The PP group handle DSV4's configurator logs (``rank_in_group``); nothing else reads it."""

    def __init__(self, rank):
        self.rank_in_group = rank


def _install_pp_all_reduce(rank, pass_no, capacities):
    """torch.distributed.all_reduce(MIN) over the stages: pass 1 records, pass 2 returns the min."""
    import torch

    def all_reduce(tensor, op=None, group=None, async_op=False):
        if pass_no == 1:
            capacities[rank] = int(tensor.item())
        else:
            tensor.fill_(min(capacities.values()))

    torch.distributed.all_reduce = all_reduce


def _preload():
    """Import SGLang once in the parent so each forked case starts warm (copy-on-write). Nothing
    here changes state a case sets: platform facts, patched memory queries and the published
    config are all installed inside the case's own child process, after these imports, as the
    shared oracle does within one process."""
    if os.path.isdir(EXTRA):
        sys.path.append(EXTRA)
    import import_stubs

    import_stubs.install()
    import sglang.srt.arg_groups.memory_hook  # noqa: F401
    import sglang.srt.configs.model_config  # noqa: F401
    import sglang.srt.mem_cache.kv_cache_configurator  # noqa: F401
    import sglang.srt.model_executor.pool_configurator  # noqa: F401
    import sglang.srt.server_args  # noqa: F401


def main(argv):
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+")
    ap.add_argument("-o", "--out")
    ap.add_argument("--out-pattern")
    ap.add_argument("--no-log", action="store_true")
    args = ap.parse_args(argv)
    ensure_version(argv)
    sys.path.insert(0, os.path.dirname(ORACLE_PATH))

    if len(args.cases) > 1:
        _preload()
    real_stdout = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    rc_all = 0
    for path in args.cases:
        if len(args.cases) > 1:
            pid = os.fork()
            if pid:
                _, status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(status)
                sys.stderr.write(f"{'ok  ' if code == 0 else 'rc=' + str(code) + ' '}{path}\n")
                rc_all = rc_all or code
                continue
        handler = base._ListHandler()
        logging.getLogger().addHandler(handler)
        logging.getLogger().setLevel(logging.INFO)
        try:
            res = run_case(load_case(path), path)
            code = 0
        except Exception as e:
            res = {"oracle_error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            code = 2
        if not args.no_log:
            res["log"] = [r for r in handler.records if "UserWarning" not in r]
        text = json.dumps(res, indent=2, sort_keys=False) + "\n"
        name = os.path.splitext(os.path.basename(path))[0]
        dest = args.out
        if args.out_pattern:
            dest = args.out_pattern.format(name=name, version=VERSION)
        if dest:
            os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
            with open(dest, "w") as f:
                f.write(text)
        else:
            real_stdout.write(text)
            real_stdout.flush()
        if len(args.cases) > 1:
            os._exit(code)
        rc_all = code
    return rc_all


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
