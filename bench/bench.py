"""`make bench`: planner speed, max-len search, cold start of the CLI, peak memory."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from kvplan.engines.vllm.planner import PlannerInput, plan
from kvplan.engines.vllm.specs import FullAttentionSpec, MambaSpec, SlidingWindowSpec
from kvplan.sources.specfile import load_spec_file

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "tests" / "data" / "golden" / "cases" / "seed_dflash_qwen35_27b.json"
LLAMA = ROOT / "tests" / "data" / "hf-configs" / "meta-llama--Llama-3.1-8B"
QWEN = ROOT / "examples" / "configs" / "Qwen--Qwen3.5-27B"
DFLASH = ROOT / "examples" / "configs" / "z-lab--Qwen3.8-27B-DFlash2"
QWEN25VL = ROOT / "tests" / "data" / "hf-configs" / "Qwen--Qwen2.5-VL-7B-Instruct"


def hybrid_100_layers() -> PlannerInput:
    """75 GDN-like Mamba + 25 nvfp4-packed full attention + 5 bf16 SW draft layers."""
    full = FullAttentionSpec(block_size=2912, num_kv_heads=4, head_size=256, dtype="uint8",
                             num_head_slots=8, state_content_bytes=144)
    mamba = MambaSpec(block_size=2912, shapes=((10, 10240), (48, 128, 128)),
                      dtypes=("bfloat16", "float32"), num_speculative_blocks=7,
                      page_size_padded=full.page_size_bytes)
    draft = SlidingWindowSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16",
                              sliding_window=2048, is_draft=True)
    specs = {}
    for i in range(100):
        specs[f"model.layers.{i}"] = full if i % 4 == 3 else mamba
    for i in range(5):
        specs[f"drafter.layers.{i}"] = draft
    return PlannerInput(worker_specs=(specs,), available_kv_bytes=(32 << 30,),
                        max_model_len=262144, max_num_batched_tokens=16384,
                        mamba_cache_mode="align", num_speculative_tokens=7)


def timeit(fn, min_seconds: float = 1.0) -> tuple[float, int]:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < min_seconds:
        fn()
        n += 1
    return (time.perf_counter() - start) / n, n


def cold_start(args: list[str], runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "kvplan.cli", *args], capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _run_cpu(args: list[str]) -> tuple[float, float]:
    """(wall, user + sys CPU) seconds of one child process."""
    t = time.perf_counter()
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(p.pid, 0)
    return time.perf_counter() - t, usage.ru_utime + usage.ru_stime


def cold_ratio(runs: int = 9) -> tuple[float, float, float, float]:
    """Cold `kvplan check <Llama config> --gpu H100 --json` against the import floor of typer +
    rich + pydantic, interleaved in one run so both see the same machine load.
    Returns (floor wall, check wall, floor CPU, check CPU) medians in seconds."""
    floor_cmd = [sys.executable, "-c", "import typer, rich, pydantic"]
    check_cmd = [sys.executable, "-m", "kvplan", "check", str(LLAMA), "--gpu", "H100", "--json"]
    floor, check = [], []
    for _ in range(runs):
        floor.append(_run_cpu(floor_cmd))
        check.append(_run_cpu(check_cmd))
    med = statistics.median
    return (med(f[0] for f in floor), med(c[0] for c in check), med(f[1] for f in floor),
            med(c[1] for c in check))
BARE_TYPER = ROOT / "bench" / "bare_typer.py"


def cold_breakdown(runs: int = 9) -> dict[str, tuple[float, float]]:
    """Where a cold check's time goes, each as (wall, CPU) ÷ the import floor, interleaved:
    pydantic's real modules (`import pydantic` alone loads almost none of them), a typer app
    whose one command has exactly check's parameters and an empty body, and kvplan check."""
    cmds = {
        "floor": [sys.executable, "-c", "import typer, rich, pydantic"],
        "floor + pydantic's BaseModel (what using pydantic costs)":
            [sys.executable, "-c", "import typer, rich, pydantic; from pydantic import BaseModel"],
        "typer alone: check's 37 parameters, empty body": [
            sys.executable, str(BARE_TYPER), "check", str(LLAMA), "--gpu", "H100", "--json"],
        "kvplan check (the same Llama command)": [
            sys.executable, "-m", "kvplan", "check", str(LLAMA), "--gpu", "H100", "--json"],
    }
    runs_by = {name: [_run_cpu(cmd) for _ in range(1)] for name, cmd in cmds.items()}
    for _ in range(runs - 1):
        for name, cmd in cmds.items():
            runs_by[name].append(_run_cpu(cmd))
    med = statistics.median
    fw, fc = med(r[0] for r in runs_by["floor"]), med(r[1] for r in runs_by["floor"])
    return {name: (med(r[0] for r in rs) / fw, med(r[1] for r in rs) / fc)
            for name, rs in runs_by.items() if name != "floor"}


def cold_start_cpu(args: list[str], runs: int = 7) -> tuple[float, float]:
    """(median wall seconds, median CPU seconds of the child): CPU time is what a loaded
    machine does not inflate."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "kvplan.cli", *args], capture_output=True)
        walls.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def compile_bytecode() -> None:
    """Cold-start figures are for kvplan as a wheel installs it: pip writes the bytecode at
    install time, so compile it here too (PYTHONDONTWRITEBYTECODE would otherwise make every
    cold run recompile kvplan from source while typer, rich and pydantic load theirs)."""
    import compileall

    compileall.compile_dir(str(ROOT / "kvplan"), quiet=1)


def engine_rows() -> list[tuple[str, str, str]]:
    """An SGLang plan against a vLLM plan of the same model and GPU: the engine alone (vLLM's
    build + planner vs SGLang's server args + pool configurator, from the same description and
    memory), and the whole `kvplan.check` (configs, weights, budget, plan)."""
    from dataclasses import replace

    import kvplan
    from kvplan.engines.sglang import (
        Platform,
        ProfiledMemory,
        SglangDeployment,
        SglangGpu,
        plan_sglang,
    )
    from kvplan.engines.vllm.build import Deployment, build
    from kvplan.models import describe_model

    out = []
    h100 = SglangGpu(total_memory_mib=81559, platform=Platform.SM90)
    dep = Deployment(sm=90, gpu_name="NVIDIA H100 SXM 80GB", gpu_total_memory_bytes=85045477376)
    for label, folder, (pre, post) in (("Llama-3.1-8B", LLAMA, (78.45, 63.49)),
                                       ("Qwen3.5-27B (GDN hybrid)", QWEN, (78.45, 27.5))):
        desc = describe_model(json.loads((folder / "config.json").read_text()), source=str(folder))
        memory = ProfiledMemory(pre_model_load_gib=pre, available_gib=(post,))

        def vllm_plan() -> None:
            inp = build(desc, dep).planner_input  # noqa: B023
            plan(replace(inp, available_kv_bytes=(int(post * 0.8 * 2**30),)  # noqa: B023
                         * len(inp.worker_specs)))

        def sglang_plan() -> None:
            plan_sglang(desc, SglangDeployment(), gpu=h100, memory=memory)  # noqa: B023

        tv, _ = timeit(vllm_plan)
        ts, _ = timeit(sglang_plan)
        out.append((f"engine: vLLM build + plan, {label}, H100", f"{tv * 1e3:.3f} ms",
                    f"{1 / tv:,.0f} plans/s"))
        out.append((f"engine: SGLang plan_sglang, {label}, H100", f"{ts * 1e3:.3f} ms",
                    f"{1 / ts:,.0f} plans/s; {ts / tv:.2f}× vLLM's"))
        tv, _ = timeit(lambda: kvplan.check(str(folder), gpu="H100"))  # noqa: B023
        ts, _ = timeit(lambda: kvplan.check(str(folder), engine="sglang", gpu="H100"))  # noqa: B023
        out.append((f"kvplan.check, {label}, H100: vLLM", f"{tv * 1e3:.2f} ms",
                    f"{1 / tv:,.0f} checks/s"))
        out.append((f"kvplan.check, {label}, H100: SGLang", f"{ts * 1e3:.2f} ms",
                    f"{1 / ts:,.0f} checks/s; {ts / tv:.2f}× vLLM's"))
    sg = cold_start(["check", str(LLAMA), "--gpu", "H100", "--engine", "sglang", "--json"])
    vl = cold_start(["check", str(LLAMA), "--gpu", "H100", "--json"])
    out.append(("cold start: kvplan check <Llama-3.1-8B> --gpu H100 --engine sglang --json",
                f"{sg * 1e3:.0f} ms", f"median of 7; vLLM's: {vl * 1e3:.0f} ms"))
    return out


def main() -> None:
    compile_bytecode()
    inp = hybrid_100_layers()
    fitting = PlannerInput(**{**inp.__dict__, "available_kv_bytes": (64 << 30,)})
    seed = load_spec_file(json.loads(SEED.read_text())).planner_input
    rows = []
    t, n = timeit(lambda: plan(fitting))
    rows.append(("plan: 105-layer hybrid (fits, incl. the max-len search)", f"{t * 1e3:.3f} ms",
                 f"{1 / t:,.0f} plans/s"))
    t, n = timeit(lambda: plan(inp))
    rows.append(("plan: 105-layer hybrid (does not fit, incl. the search)", f"{t * 1e3:.3f} ms",
                 f"{1 / t:,.0f} plans/s"))
    t, n = timeit(lambda: plan(seed))
    rows.append(("plan: PR #53499 seed case (69 layers)", f"{t * 1e3:.3f} ms", f"{1 / t:,.0f} plans/s"))
    # --workload: vLLM's scheduler on the workload goldens (each case: the whole estimate)
    import glob

    from kvplan.api import check_specs

    times = []
    for case in sorted(glob.glob(str(ROOT / "tests" / "data" / "workload-oracle" / "cases" / "*"))):
        ver = case.rsplit("-", 1)[1].removesuffix(".json")
        sf_case = json.loads(Path(case).read_text())
        wl = sf_case.pop("workload")
        check_specs(sf_case, vllm=ver)  # warm
        t0 = time.perf_counter()
        check_specs(sf_case, vllm=ver)
        t1 = time.perf_counter()
        check_specs({**sf_case, "workload": wl}, vllm=ver)
        times.append(time.perf_counter() - t1 - (t1 - t0))
    times.sort()
    rows.append((f"--workload: extra time of a check, {len(times)} workload goldens",
                 f"{times[len(times) // 2] * 1e3:.1f} ms", f"median; max {times[-1] * 1e3:.1f} ms"))
    # a sweep: 3 GPUs × 3 KV dtypes × 2,000 lengths, configs read once, grouping reused
    from kvplan.engines.vllm.build import Deployment
    from kvplan.pipeline.deploy import Request
    from kvplan.pipeline.sweep import run_sweep

    req = Request(model=str(LLAMA), deployment=Deployment(max_num_batched_tokens=8192))
    lengths = list(range(1024, 2048 * 1024 + 1, 1024))
    t = time.perf_counter()
    sw = run_sweep(req, gpus=["H100", "H200", "B200"], kv_dtypes=["bfloat16", "fp8", "nvfp4"],
                   lengths=lengths)
    dt = time.perf_counter() - t
    rows.append((f"sweep: 3 GPUs × 3 KV dtypes × {len(lengths):,} lengths (Llama-3.1-8B)",
                 f"{dt:.2f} s", f"{sw.plans_evaluated / dt:,.0f} plans/s"))
    # kvplan fit: every priced catalogue GPU × TP × PP × KV dtype × draft on/off (no pruning),
    # then the default search (pruned: stops once nothing left can be cheaper)
    from kvplan.pipeline.fit import search

    fit_req = Request(model=str(QWEN), draft=str(DFLASH),
                      deployment=Deployment(num_speculative_tokens=7))
    t = time.perf_counter()
    full = search(fit_req, max_model_len=131072, concurrency=16, prune=False)
    dt = time.perf_counter() - t
    rows.append((f"fit: {full.planned:,} candidates, no pruning (Qwen3.5-27B + DFlash, 128k × 16)",
                 f"{dt:.2f} s", f"{full.planned / dt:,.0f} fit candidates planned/s"))
    t = time.perf_counter()
    pruned = search(fit_req, max_model_len=131072, concurrency=16)
    dt = time.perf_counter() - t
    rows.append((f"fit: the same, pruned ({pruned.planned} planned, {pruned.pruned} skipped)",
                 f"{dt:.2f} s", f"{pruned.planned / dt:,.0f} fit candidates planned/s"))
    rows += engine_rows()
    rows.append(("cold start: kvplan --help", f"{cold_start(['--help']) * 1e3:.0f} ms", "median of 7"))
    rows.append(("cold start: kvplan check --specs seed --json",
                 f"{cold_start(['check', '--specs', str(SEED), '--json']) * 1e3:.0f} ms", "median of 7"))
    rows.append(("cold start: kvplan check <Llama-3.1-8B config> --gpu H100 --json",
                 f"{cold_start(['check', str(LLAMA), '--gpu', 'H100', '--json']) * 1e3:.0f} ms",
                 "median of 7"))
    fw, cw, fc, cc = cold_ratio()
    rows.append(("import floor: python -c 'import typer, rich, pydantic'", f"{fw * 1e3:.0f} ms",
                 f"CPU {fc * 1e3:.0f} ms, median of 9"))
    rows.append(("cold check ÷ import floor (same run, interleaved)", f"{cw / fw:.2f}×",
                 f"CPU {cc / fc:.2f}× (check {cw * 1e3:.0f} ms, CPU {cc * 1e3:.0f} ms)"))
    for label, (wall, cpu) in cold_breakdown().items():
        rows.append((f"  {label}", f"{wall:.2f}×", f"CPU {cpu:.2f}× the floor"))
    for label, folder in (("fast adapter: Llama-3.1-8B", LLAMA),
                          ("transformers-resolved: Qwen2.5-VL-7B", QWEN25VL)):
        wall, cpu = cold_start_cpu(["check", str(folder), "--gpu", "H100", "--json"])
        rows.append((f"cold start: kvplan check, {label}", f"{wall * 1e3:.0f} ms",
                     f"median of 7; CPU {cpu * 1e3:.0f} ms"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    rows.append(("peak RSS: this process / a cold kvplan check", f"{peak:.0f} MiB", f"{child:.0f} MiB"))
    print(f"machine: {platform.machine()} · {platform.processor() or 'cpu'} · "
          f"python {platform.python_version()}")
    width = max(len(r[0]) for r in rows)
    for name, value, extra in rows:
        print(f"{name:<{width}}  {value:>10}  {extra}")


if __name__ == "__main__":
    main()
