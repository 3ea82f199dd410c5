#!/usr/bin/env python3
"""Workload oracle: vLLM's own scheduler class, driven on CPU with N identical synthetic requests.

Usage (any python3; it re-executes itself in the release's virtualenv next to the planner oracle):

    KVPLAN_ORACLE=/work/oracle/oracle.py python3 tools/vllm_scheduler_oracle.py CASE.json \
        --vllm 0.34.0 [-o OUT.json] [--scan N]

CASE.json is a layer-spec case (docs/specs-format.md: the planner oracle's input schema, which
`kvplan check --specs` reads too) with one more top-level key, ``workload``:

    "workload": {"prompt": 8192, "output": 1024}      (or {"pairs": [[P, D], ...]}: request i
                                                        takes pair i modulo their number)

and optionally ``max_num_seqs`` (256), ``async_scheduling`` (true), ``enable_chunked_prefill``
(true), ``enable_prefix_caching`` (true), ``scheduler_reserve_full_isl`` (vLLM's default, true).

What runs (all vLLM code, nothing copied):

1. The planner oracle (``tools/oracle_ext.py`` on ``$KVPLAN_ORACLE``) builds the real
   ``VllmConfig`` (CPU platform, knobs overwritten), the layers' real ``KVCacheSpec`` dataclasses,
   vLLM's groups and ``get_kv_cache_configs`` → ``generate_scheduler_kv_cache_config``; then what
   ``EngineCore._initialize_kv_caches`` does next: ``cache_config.num_gpu_blocks``,
   ``cache_config.block_size`` = the smallest prefix-cacheable group block,
   ``resolve_kv_cache_block_sizes`` (and ``resolve_cache_hit_alignment_tokens`` where it exists).
2. ``scheduler_config.get_scheduler_cls()`` (``AsyncScheduler`` when async scheduling is on) is
   constructed as ``EngineCore.__init__`` constructs it (``block_size=scheduler_block_size``,
   ``hash_block_size``), with the release's ``StructuredOutputManager``.
3. N requests (``vllm.v1.request.Request``) with distinct prompts (request i's tokens are
   ``[i+1]*P`` shifted so no two share a first block), ``SamplingParams(max_tokens=D,
   ignore_eos=True)`` and vLLM's own request block hasher when prefix caching is on, all added
   before the first step.
4. The engine loop is ``EngineCore.step`` (sync) or ``EngineCore.step_with_batch_queue`` (queue of
   ``vllm_config.max_concurrent_batches``), re-stated here around the scheduler calls: schedule →
   (queue) → ``update_from_output`` with a fake ``ModelRunnerOutput``: one sampled token for each
   scheduled request whose prompt is complete after the step, none for a partial prefill chunk
   (the GPU runner discards those), so every draft token is rejected. Without async scheduling
   and with speculative decoding, ``update_draft_token_ids`` gets ``num_speculative_tokens``
   placeholder drafts for every request that sampled (``EngineCore.post_step``), unless the
   scheduler output says ``skip_drafts``.

Reported: for the workload, ``max_concurrent_without_preemption`` (largest N whose requests all
run at once — every one admitted before the first completion — and finish with no preemption:
binary search over 1..max_num_seqs, then N and N+1 are reported; ``--scan K`` runs every N ≤ K to check that "clean" is monotone), ``admission_peak``
(max_num_seqs + 1 requests submitted; the most running at once, up to the first preemption or the
first completion, whichever comes first), and per group the blocks one request holds when it
finishes (non-null entries of its block table just before it is freed).

Stand-ins (documented in tests/data/workload-oracle/README.md): no model runs (fake outputs as
vLLM's scheduler tests make them); the KV-cache specs come from the case file, not from vLLM's
model classes; the KV memory is the case's, not profiled; 0.34's post-warm-up resizing of the
extensible KV cache is not run (num_blocks is the start-up one).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections import deque
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
_REEXEC = "_KVPLAN_SCHED_ORACLE_REEXEC"
WORKLOAD_KEYS = frozenset({"workload", "scheduler_reserve_full_isl", "expect"})


def _load_ext():
    spec = importlib.util.spec_from_file_location("oracle_ext", os.path.join(HERE, "oracle_ext.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["oracle_ext"] = mod
    spec.loader.exec_module(mod)
    return mod


EXT = _load_ext()
O = EXT.O  # noqa: E741 (the planner oracle module)


_TV_LIBS: list = []


def define_torchvision_schemas() -> None:
    """Stand-in: these venvs hold torchvision 0.28.0's CUDA wheel (installed for the end-to-end
    harness), whose _C.so cannot load on the CPU torch; torchvision then fails registering fake
    kernels for ops that were never defined, and transformers imports it. Define the two op
    schemas (no kernel) first so `import torchvision` succeeds; nothing here calls them."""
    import importlib.util as iu

    if iu.find_spec("torchvision") is None:
        return
    import torch

    lib = torch.library.Library("torchvision", "FRAGMENT")
    _TV_LIBS.append(lib)
    for schema in ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                   "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"):
        try:
            lib.define(schema)
        except Exception:  # the real extension loaded
            return


def ensure_version(version: str, argv: list[str]) -> None:
    if O._installed_vllm_version() == version:
        return
    py = O._venv_python(version)
    if py is None or os.environ.get(_REEXEC) == version:
        sys.exit(f"vllm_scheduler_oracle: vllm {version} is not installed next to {EXT.ORACLE_PATH}")
    os.environ[_REEXEC] = version
    os.execv(py, [py, os.path.abspath(__file__), *argv])


# ---- 1. VllmConfig + KVCacheConfig -------------------------------------------------------------

def build_engine_state(case: dict):
    """The VllmConfig and the scheduler's KVCacheConfig, as EngineCore has them before it builds
    the scheduler."""
    from vllm.v1.attention.backends.utils import _DEFAULT_LAYOUT_PREFERENCE, resolve_kv_cache_layout
    from vllm.v1.core import kv_cache_utils as U
    from vllm.v1.core.single_type_kv_cache_manager import register_all_kvcache_specs

    plan_case = {k: v for k, v in case.items() if k not in WORKLOAD_KEYS}
    O.validate_case(plan_case)
    ignored: list[str] = []
    # the planner oracle sets VLLM_USE_V2_MODEL_RUNNER after building its config; a second
    # build in this process must start without it (0.31 validates V2 in VllmConfig() then)
    os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
    vc = O.build_vllm_config(plan_case, ignored)
    spec = vc.speculative_config
    if spec is not None:
        # The planner oracle's stand-in SpeculativeConfig turns lookahead block hashes off; the
        # engine has SpeculativeConfig's default (on), resolved by VllmConfig (0.34).
        object.__setattr__(spec, "disable_lookahead_block_hashes", False)
        if hasattr(vc, "_resolve_num_hash_lookahead_tokens"):
            vc.num_hash_lookahead_tokens = vc._resolve_num_hash_lookahead_tokens()
    # The planner oracle sets prefix_cache_retention_interval=None (dense); the engine runs with
    # CacheConfig's default (0: sparse retention), which the Mamba managers read.
    vc.cache_config.prefix_cache_retention_interval = _field_default(
        type(vc.cache_config), "prefix_cache_retention_interval")
    planner = O.Planner(vc)
    register_all_kvcache_specs(vc)
    specs, _ = O.build_specs(plan_case, ignored)
    if case.get("workers"):
        raise ValueError("pipeline parallel cases are not supported by the workload oracle")
    worker_specs = [specs]
    avail = plan_case.get("available_kv_memory_bytes")
    if avail is None:
        avail = int(float(plan_case["available_kv_memory_gib"]) * (1 << 30))
    if plan_case.get("kv_cache_layout"):
        vc.cache_config.kv_cache_layout = plan_case["kv_cache_layout"]
    supported = plan_case.get("supported_kv_cache_layouts") or [
        layout.name for layout in _DEFAULT_LAYOUT_PREFERENCE]
    resolve_kv_cache_layout(vc, [supported], list(specs.values()))
    groups = planner.global_groups(vc, [dict(specs)])
    configs = planner.kv_cache_configs(vc, worker_specs, [int(avail)], groups)
    for c in configs:
        c.kv_cache_layout = vc.cache_config.kv_cache_layout
    sched_cfg = U.generate_scheduler_kv_cache_config(configs)
    cc = vc.cache_config
    cc.num_gpu_blocks = sched_cfg.num_blocks
    kv_groups = sched_cfg.kv_cache_groups
    participating = [g.kv_cache_spec.block_size for g in kv_groups if g.kv_cache_spec.prefix_cacheable]
    cc.block_size = min(participating or [g.kv_cache_spec.block_size for g in kv_groups])
    sbs, hbs = U.resolve_kv_cache_block_sizes(sched_cfg, vc)
    if hasattr(U, "resolve_cache_hit_alignment_tokens"):
        align = U.resolve_cache_hit_alignment_tokens(sched_cfg, vc, sbs, hbs)
        for c in (*configs, sched_cfg):
            if hasattr(c, "hash_block_size"):
                c.hash_block_size = hbs
            if hasattr(c, "cache_hit_alignment_tokens"):
                c.cache_hit_alignment_tokens = align
    if case.get("scheduler_reserve_full_isl") is not None:
        vc.scheduler_config.scheduler_reserve_full_isl = bool(case["scheduler_reserve_full_isl"])
    return vc, sched_cfg, sbs, hbs, ignored


def _field_default(cls, name: str):
    import dataclasses

    for f in dataclasses.fields(cls):
        if f.name == name:
            default = f.default
            return getattr(default, "default", default)  # a pydantic Field(default=...)
    raise KeyError(name)


def _complete_model_config(vc) -> None:
    """The oracle's stand-in ModelConfig (a namespace) gets the attributes the scheduler reads,
    with the values a text-only decoder's real ModelConfig has."""
    mc = vc.model_config
    for name, value in dict(uses_mrope=False, runner_type="generate", is_diffusion=False,
                            supports_multimodal_inputs=False, return_sampling_mask=False,
                            is_multimodal_model=False, skip_tokenizer_init=True,
                            multimodal_config=None, is_hybrid=False, pooler_config=None,
                            logits_processors=None, logprobs_mode="raw_logprobs",
                            max_logprobs=20).items():
        if not hasattr(mc, name):
            setattr(mc, name, value)


# ---- 2. the scheduler ------------------------------------------------------------------------

def make_scheduler(vc, kv_cache_config, sbs: int, hbs: int):
    from vllm.v1.structured_output import StructuredOutputManager

    _complete_model_config(vc)
    cls = vc.scheduler_config.get_scheduler_cls()
    try:
        som = StructuredOutputManager(vc)
    except Exception:  # pragma: no cover - needs a tokenizer in some releases
        som = SimpleNamespace(accept_tokens=lambda *a, **k: True, grammar_init=lambda *a: None,
                              should_advance=lambda *a: False, clear_backend=lambda: None)
    return cls(vllm_config=vc, kv_cache_config=kv_cache_config, structured_output_manager=som,
               block_size=sbs, hash_block_size=hbs, log_stats=False), cls.__name__


def block_hasher(vc, hbs: int):
    if not vc.cache_config.enable_prefix_caching:
        return None
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core import kv_cache_utils

    fn = get_hash_fn_by_name(vc.cache_config.prefix_caching_hash_algo)
    kv_cache_utils.init_none_hash(fn)
    args = [hbs, fn]
    lookahead = getattr(vc, "num_hash_lookahead_tokens", None)
    import inspect

    if lookahead is not None and len(inspect.signature(
            kv_cache_utils.get_request_block_hasher).parameters) >= 3:
        args.append(lookahead)
    return kv_cache_utils.get_request_block_hasher(*args)


def make_request(i: int, prompt: int, output: int, hasher):
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    # distinct first tokens: no prefix-cache hit between requests
    tokens = [1 + (i % 50000)] + [((i * 7919 + j) % 50000) + 1 for j in range(prompt - 1)]
    sp = SamplingParams(max_tokens=output, ignore_eos=True)
    kwargs = dict(request_id=f"r{i}", prompt_token_ids=tokens, sampling_params=sp,
                  pooling_params=None, arrival_time=float(i))
    if hasher is not None:
        kwargs["block_hasher"] = hasher
    return Request(**kwargs)


def fake_output(sched, so):
    """One token for every scheduled request whose prompt is complete after this step."""
    req_ids, sampled = [], []
    for rid, n in so.num_scheduled_tokens.items():
        req = sched.requests.get(rid)
        req_ids.append(rid)
        # is_prefill_chunk was set by _update_after_schedule for this step
        partial = req is not None and req.is_prefill_chunk
        sampled.append([] if partial else [7])
    return model_runner_output(req_ids, sampled)


def model_runner_output(req_ids: list[str], sampled: list[list[int]]):
    """ModelRunnerOutput with the fields the release has (0.31 also takes req_id_to_index)."""
    import dataclasses

    from vllm.v1.outputs import ModelRunnerOutput

    kw = dict(req_ids=req_ids, sampled_token_ids=sampled)
    if any(f.name == "req_id_to_index" for f in dataclasses.fields(ModelRunnerOutput)):
        kw["req_id_to_index"] = {r: k for k, r in enumerate(req_ids)}
    return ModelRunnerOutput(**kw)


class Run:
    """One engine-loop run; records preemptions, peaks and the blocks held at finish."""

    def __init__(self, vc, kvc, sbs, hbs, n: int, pairs: list, stop_at_first_finish: bool):
        self.sched, self.sched_cls = make_scheduler(vc, kvc, sbs, hbs)
        self.vc = vc
        self.n = n
        self.stop_at_first_finish = stop_at_first_finish
        hasher = block_hasher(vc, hbs)
        for i in range(n):
            prompt, output = pairs[i % len(pairs)]
            self.sched.add_request(make_request(i, prompt, output, hasher))
        self.num_groups = len(kvc.kv_cache_groups)
        self.blocks_at_end: list[list[int]] = []
        self.finished = 0
        self.preempted_at: int | None = None
        self.peak_running = 0
        self.peak_running_step = 0
        self.running_at_preemption: int | None = None
        self.waiting_at_peak: int | None = None
        self.steps = 0
        self.max_used_blocks = 0
        orig_free = self.sched._free_request

        def spy_free(request, *a, **k):
            blocks = self.sched.kv_cache_manager.coordinator.get_blocks(request.request_id)
            self.blocks_at_end.append([sum(1 for b in g if not b.is_null) for g in blocks])
            self.finished += 1
            return orig_free(request, *a, **k)

        self.sched._free_request = spy_free

    def _after_schedule(self, so) -> bool:
        self.steps += 1
        nrun = len(self.sched.running)
        if nrun > self.peak_running:
            self.peak_running = nrun
            self.peak_running_step = self.steps
            self.waiting_at_peak = len(self.sched.waiting)
        pool = self.sched.kv_cache_manager.block_pool
        used = pool.num_gpu_blocks - 1 - pool.get_num_free_blocks()
        self.max_used_blocks = max(self.max_used_blocks, used)
        if so.preempted_req_ids and self.preempted_at is None:
            self.preempted_at = self.steps
            self.running_at_preemption = nrun
            return True
        return False

    def go(self, max_steps: int = 10_000_000) -> dict:
        sched = self.sched
        queue_size = self.vc.max_concurrent_batches
        spec = self.vc.speculative_config
        num_spec = spec.num_speculative_tokens if spec is not None else 0
        queue: deque = deque()
        t0 = time.time()
        while (sched.has_requests() or queue) and self.steps < max_steps:
            if self.stop_at_first_finish and self.finished:
                break
            if queue_size <= 1:
                so = sched.schedule()
                if self._after_schedule(so):
                    break
                out = fake_output(sched, so)
                sched.update_from_output(so, out)
                if num_spec and so.total_num_scheduled_tokens > 0 and not getattr(so, "skip_drafts", False):
                    self._drafts(so, out, num_spec)
                continue
            # EngineCore.step_with_batch_queue
            if sched.has_requests():
                so = sched.schedule()
                if self._after_schedule(so):
                    break
                queue.appendleft(so)
                if len(queue) < queue_size and (so.total_num_scheduled_tokens > 0 or sched.has_requests()):
                    continue
            if not queue:
                break
            so = queue.pop()
            sched.update_from_output(so, fake_output_for_queued(sched, so))
        return {
            "n": self.n,
            "preempted": self.preempted_at is not None,
            "first_preemption_step": self.preempted_at,
            "running_at_first_preemption": self.running_at_preemption,
            "peak_running": self.peak_running,
            "peak_running_step": self.peak_running_step,
            "waiting_at_peak": self.waiting_at_peak,
            "finished": self.finished,
            "steps": self.steps,
            "max_used_blocks": self.max_used_blocks,
            # per group, the most blocks a request held when it finished
            "blocks_at_end": ([max(col) for col in zip(*self.blocks_at_end)]
                              if self.blocks_at_end else None),
            "blocks_at_end_all_equal": len({tuple(b) for b in self.blocks_at_end}) <= 1,
            "seconds": round(time.time() - t0, 3),
        }

    def _drafts(self, so, out, num_spec: int) -> None:
        from vllm.v1.outputs import DraftTokenIds

        ids = [rid for rid, s in zip(out.req_ids, out.sampled_token_ids)
               if s and rid in self.sched.requests and not self.sched.requests[rid].is_finished()]
        if ids:
            self.sched.update_draft_token_ids(DraftTokenIds(ids, [[-1] * num_spec for _ in ids]))


def fake_output_for_queued(sched, so):
    """Async: the step's output arrives after the next step was scheduled; a request sampled in
    this step iff its prompt was complete after this step's tokens (recorded at schedule time)."""
    done = so._kvplan_complete
    req_ids = list(so.num_scheduled_tokens)
    sampled = [[7] if done.get(r, True) else [] for r in req_ids]
    return model_runner_output(req_ids, sampled)


def _tag_schedule(sched):
    """Record, for every scheduled request, whether this step completes its prompt (what the
    worker knows when it decides to discard a partial prefill's sample)."""
    orig = sched.schedule

    def schedule(*a, **k):
        so = orig(*a, **k)
        so._kvplan_complete = {rid: not sched.requests[rid].is_prefill_chunk
                               for rid in so.num_scheduled_tokens if rid in sched.requests}
        return so

    sched.schedule = schedule


# ---- 3. the searches ---------------------------------------------------------------------------

def workload_pairs(w: dict) -> list[tuple[int, int]]:
    """{"prompt": P, "output": D} or {"pairs": [[P, D], ...]} (request i takes pair i mod len)."""
    if "pairs" in w:
        return [(int(p), int(d)) for p, d in w["pairs"]]
    return [(int(w["prompt"]), int(w["output"]))]


def run_once(case: dict, n: int, stop_at_first_finish: bool = False) -> dict:
    vc, kvc, sbs, hbs, _ = build_engine_state(case)
    r = Run(vc, kvc, sbs, hbs, n, workload_pairs(case["workload"]), stop_at_first_finish)
    _tag_schedule(r.sched)
    res = r.go()
    res["scheduler_cls"] = r.sched_cls
    return res


def main(argv=None) -> int:
    import argparse

    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case")
    ap.add_argument("--vllm", default="0.34.0")
    ap.add_argument("-o", "--output")
    ap.add_argument("--scan", type=int, default=0, help="also run every N up to this")
    args = ap.parse_args(argv)
    ensure_version(args.vllm, argv)
    define_torchvision_schemas()
    O._redirect_stdout_to_stderr()
    import logging

    logging.getLogger("vllm").setLevel(logging.WARNING)
    import vllm

    with open(args.case) as f:
        case = json.load(f)
    vc, kvc, sbs, hbs, ignored = build_engine_state(case)
    max_num_seqs = vc.scheduler_config.max_num_seqs
    result: dict = {
        "oracle": "kvplan-vllm-scheduler-oracle/1",
        "vllm_version": vllm.__version__,
        "case_name": case.get("name"),
        "workload": case["workload"],
        "num_blocks": kvc.num_blocks,
        "groups": [{"spec_type": type(g.kv_cache_spec).__name__,
                    "block_size": g.kv_cache_spec.block_size,
                    "num_layers": len(g.layer_names)} for g in kvc.kv_cache_groups],
        "scheduler_block_size": sbs,
        "hash_block_size": hbs,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": vc.scheduler_config.max_num_batched_tokens,
        "async_scheduling": vc.scheduler_config.async_scheduling,
        "enable_chunked_prefill": vc.scheduler_config.enable_chunked_prefill,
        "enable_prefix_caching": vc.cache_config.enable_prefix_caching,
        "scheduler_reserve_full_isl": vc.scheduler_config.scheduler_reserve_full_isl,
        "max_concurrent_batches": vc.max_concurrent_batches,
        "max_in_flight_tokens": vc.max_in_flight_tokens,
        "num_lookahead_tokens": vc.num_lookahead_tokens,
        "max_model_len": vc.model_config.max_model_len,
    }
    probe, _ = make_scheduler(vc, kvc, sbs, hbs)
    spec = vc.speculative_config
    result["resolved_scheduler"] = {
        "scheduler_cls": type(probe).__name__,
        "cache_block_size": vc.cache_config.block_size,
        "num_spec_tokens": probe.num_spec_tokens,
        "num_lookahead_tokens": probe.num_lookahead_tokens,
        "num_prefill_lookahead": probe.num_prefill_lookahead,
        "draft_slots": spec.max_num_new_slots_for_drafting if spec is not None else 0,
        "use_eagle_block_drop": probe.use_eagle_block_drop,
        "num_hash_lookahead_tokens": getattr(probe, "num_hash_lookahead_tokens", None),
        "need_mamba_block_aligned_split": probe.need_mamba_block_aligned_split,
        "mamba_partial_cache_hit": getattr(probe, "mamba_partial_cache_hit", None),
        "mamba_has_prefill_checkpoint_blocks": getattr(
            probe, "mamba_has_prefill_checkpoint_blocks", None),
        "prefix_cache_retention_interval": vc.cache_config.prefix_cache_retention_interval,
    }
    if ignored:
        result["ignored_inputs"] = sorted(set(ignored))
    runs: dict[int, dict] = {}

    def clean(n: int) -> bool:
        """All n run at once (none waits for another's completion) and finish unpreempted."""
        if n not in runs:
            runs[n] = run_once(case, n)
            r = runs[n]
            r["clean"] = not r["preempted"] and r["peak_running"] == n
            print(f"  N={n}: {'clean' if r['clean'] else 'preempts' if r['preempted'] else 'queues'}"
                  f" ({r['seconds']} s)", file=sys.stderr)
        return runs[n]["clean"]

    lo, hi = 0, max_num_seqs  # clean(lo) assumed (0 requests); find the largest clean
    if clean(hi):
        lo = hi
    else:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if clean(mid):
                lo = mid
            else:
                hi = mid
    result["max_concurrent_without_preemption"] = lo
    if lo:
        result["clean_run"] = runs[lo]
    if lo < max_num_seqs:
        clean(lo + 1)
        result["first_preempting_run"] = runs[lo + 1]
    if args.scan:
        result["scan"] = {str(n): clean(n) for n in range(1, min(args.scan, max_num_seqs) + 1)}
        result["scan_monotone"] = all(result["scan"][str(n)] == (n <= lo) for n in
                                      range(1, min(args.scan, max_num_seqs) + 1))
    peak = run_once(case, max_num_seqs + 1, stop_at_first_finish=True)
    result["admission"] = peak
    result["admission_peak"] = peak["peak_running"]
    text = json.dumps(result, indent=2) + "\n"
    O._REAL_STDOUT.write(text)
    O._REAL_STDOUT.flush()
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
