"""KV budget: explicit, from a log line, estimated (arithmetic, release rules, calibration)."""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys
from pathlib import Path

import pytest

from kvplan.budget import kv_memory as B
from kvplan.budget.hardware import lookup_gpu
from kvplan.budget.kv_memory import (
    BudgetMode,
    KvBudget,
    budget_from_log_gib,
    budget_from_log_line,
    cudagraph_in_budget,
    default_batch_limits,
    default_gpu_memory_utilization,
    estimate_budget,
    explicit_budget,
)
from kvplan.errors import InputError
from kvplan.units import GiB, format_gib

ROOT = Path(__file__).resolve().parents[2]
SHARED_PROFILES = Path("/work/shared/data/vllm-memory-profiles.jsonl")


def _calibrate():
    spec = importlib.util.spec_from_file_location("kvplan_bench_calibrate", ROOT / "bench" / "calibrate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


CAL = _calibrate()

LLAMA_8B = dict(hidden_size=4096, vocab_size=128256, num_layers=32, intermediate_size=14336)


def test_explicit_budget():
    b = explicit_budget("20GiB")
    assert b.mode is BudgetMode.EXPLICIT
    assert b.available_kv_bytes_per_gpu == 20 * GiB
    assert explicit_budget(12345).available_kv_bytes_per_gpu == 12345
    assert b.extensible_kv_cache is False
    with pytest.raises(InputError):
        explicit_budget("-3GiB")  # a string is a size: positive
    zero = explicit_budget(0)  # --kv-cache-memory 0 arrives parsed (units.parse_kv_cache_memory_bytes)
    assert zero.available_kv_bytes_per_gpu == 0
    assert any("reads --kv-cache-memory 0 as unset" in w for w in zero.warnings)


def test_budget_from_log():
    b = budget_from_log_gib(12.34)
    assert b.mode is BudgetMode.FROM_LOG
    assert b.available_kv_bytes_per_gpu == round(12.34 * 2**30)
    assert b.available_kv_gib == "12.34"
    assert any("±0.005 GiB" in w for w in b.warnings)
    assert budget_from_log_gib("58.11 GiB").available_kv_bytes_per_gpu == round(58.11 * 2**30)
    line = ("(EngineCore pid=1) INFO 07-01 12:00:00 [gpu_worker.py:298] Available KV cache memory: "
            "58.11 GiB\nINFO ... GPU KV cache size: 475,968 tokens")
    assert budget_from_log_line(line) == budget_from_log_gib(58.11)
    for bad in ("abc", "nan", "inf"):
        with pytest.raises(InputError):
            budget_from_log_gib(bad)
    # zero or negative: vLLM logged it, then failed; planned (the planner gives vLLM's error)
    neg = budget_from_log_line("INFO 08-20 18:04:22 [gpu_worker.py:276] Available KV cache memory: "
                               "-2.14 GiB")
    assert neg.available_kv_bytes_per_gpu == -round(2.14 * 2**30)
    assert any("take all of the requested memory" in w for w in neg.warnings)
    assert budget_from_log_gib("0").available_kv_bytes_per_gpu == 0
    with pytest.raises(InputError):
        budget_from_log_line("no such line")


def test_release_defaults():
    assert default_gpu_memory_utilization("0.31.0", extensible_kv_cache=False) == 0.92
    assert default_gpu_memory_utilization("0.33.0", extensible_kv_cache=False) == 0.92
    assert default_gpu_memory_utilization("0.34.0", extensible_kv_cache=True) == 1.0
    assert default_gpu_memory_utilization("0.34.0", extensible_kv_cache=False) == 0.92
    assert default_gpu_memory_utilization("0.6.5", extensible_kv_cache=False) == 0.90
    assert cudagraph_in_budget("0.34.0") and cudagraph_in_budget("0.21.0")
    assert not cudagraph_in_budget("0.19.0")
    assert not cudagraph_in_budget("0.34.0", enforce_eager=True)
    with pytest.raises(InputError):
        default_gpu_memory_utilization("main", extensible_kv_cache=False)


def test_default_batch_limits_mirror_get_batch_defaults():
    assert default_batch_limits(lookup_gpu("h100").total_memory_bytes, "NVIDIA H100") == (8192, 1024)
    assert default_batch_limits(lookup_gpu("h100").total_memory_bytes, "H100", usage="llm") == (16384, 1024)
    assert default_batch_limits(lookup_gpu("a100").total_memory_bytes, "NVIDIA A100-SXM4-80GB") == (2048, 256)
    assert default_batch_limits(lookup_gpu("b200").total_memory_bytes) == (16384, 1024)
    assert default_batch_limits(lookup_gpu("l40s").total_memory_bytes) == (2048, 256)


def _terms(b: KvBudget) -> dict[str, int]:
    return {t.name: t.num_bytes for t in b.breakdown}


def test_estimate_arithmetic_033():
    total = 85045477376
    w = 16 * GiB
    b = estimate_budget(total, None, w, vllm_version="0.33.0", max_num_batched_tokens=8192,
                        max_num_seqs=1024, **LLAMA_8B)
    t = _terms(b)
    assert b.mode is BudgetMode.ESTIMATED
    assert b.gpu_memory_utilization == 0.92 and b.extensible_kv_cache is False
    assert t["requested memory"] == math.ceil(total * 0.92)
    assert t["model weights"] == -w
    assert b.available_kv_bytes_per_gpu == sum(t.values())
    nt, _ = B.estimate_non_torch_bytes(1, 1)
    act, _ = B.estimate_activation_bytes(max_num_batched_tokens=8192, max_num_seqs=1024,
                                         hidden_size=4096, vocab_size=128256,
                                         intermediate_size=14336)
    cg, _ = B.estimate_cudagraph_bytes(num_layers=32, hidden_size=4096)
    assert t["non-torch memory"] == -nt and t["activation peak"] == -act
    assert t["CUDA-graph estimate"] == -cg  # subtracted by default since 0.21
    assert b.available_kv_bytes_per_gpu == math.ceil(total * 0.92) - w - nt - act - cg
    for term in b.breakdown:
        assert term.how  # every term says where it came from


def test_estimate_019_keeps_graphs_out_and_eager_has_none():
    b = estimate_budget(85045477376, 0.95, 15 * GiB, vllm_version="0.19.0",
                        max_num_batched_tokens=8192, max_num_seqs=1024, **LLAMA_8B)
    assert _terms(b)["CUDA-graph estimate"] == 0
    e = estimate_budget(85045477376, 0.95, 15 * GiB, vllm_version="0.33.0", enforce_eager=True,
                        max_num_batched_tokens=8192, max_num_seqs=1024, **LLAMA_8B)
    assert _terms(e)["CUDA-graph estimate"] == 0


def test_estimate_034_extensible_cache():
    total = 85045477376
    b = estimate_budget(total, None, 15 * GiB, vllm_version="0.34.0",
                        max_num_batched_tokens=8192, max_num_seqs=1024, **LLAMA_8B)
    t = _terms(b)
    assert b.gpu_memory_utilization == 1.0 and b.extensible_kv_cache is True
    assert t["requested memory"] == total
    act = -t["activation peak"]
    margin = max(1 << 30, int(0.75 * act))
    pre = round(B.PRE_SNAPSHOT_SINGLE_GIB * GiB)
    # util 1.0: the physical cap binds: min(requested − U, init_free − U − margin) = … − pre − margin
    assert t["extensible KV cache headroom"] == -(pre + margin)
    assert b.available_kv_bytes_per_gpu == sum(t.values())
    # An explicit lower util makes the requested budget bind instead: no extra term
    low = estimate_budget(total, 0.9, 15 * GiB, vllm_version="0.34.0",
                          max_num_batched_tokens=8192, max_num_seqs=1024, **LLAMA_8B)
    assert _terms(low)["extensible KV cache headroom"] == 0
    off = estimate_budget(total, None, 15 * GiB, vllm_version="0.34.0", extensible_kv_cache=False,
                          max_num_batched_tokens=8192, max_num_seqs=1024, **LLAMA_8B)
    assert off.gpu_memory_utilization == 0.92 and "extensible KV cache headroom" not in _terms(off)
    rocm = estimate_budget(lookup_gpu("mi300x"), None, 15 * GiB, vllm_version="0.34.0",
                           max_num_batched_tokens=8192, max_num_seqs=1024, **LLAMA_8B)
    assert -_terms(rocm)["extensible KV cache headroom"] >= 3 << 30  # ROCm margin floor 3 GiB


def test_estimate_with_catalogue_gpu_and_defaults():
    b = estimate_budget(lookup_gpu("h100"), None, 15 * GiB, **LLAMA_8B)
    assert b.total_memory_bytes == 85045477376
    assert any("8192" in w and "1024" in w for w in b.warnings)  # vllm serve defaults on H100
    nominal = estimate_budget(lookup_gpu("h100 pcie"), None, 15 * GiB, **LLAMA_8B)
    assert nominal.total_memory_bytes == 80527 * 2**20  # 80 GB × 0.983, floored to MiB
    ok = estimate_budget(lookup_gpu("h100 pcie"), None, 15 * GiB, gpu_memory_override="79GiB",
                         **LLAMA_8B)
    assert ok.total_memory_bytes == 79 * GiB


def test_estimate_input_errors_and_negative_budget():
    with pytest.raises(InputError):
        estimate_budget(80 * GiB, 1.5, 0, **LLAMA_8B)
    with pytest.raises(InputError):
        estimate_budget(80 * GiB, 0.9, 0, tp=0, **LLAMA_8B)
    neg = estimate_budget(8 * GiB, 0.7, 7 * GiB, vllm_version="0.33.0", **LLAMA_8B)
    assert neg.available_kv_bytes_per_gpu < 0
    assert any("no memory for the KV cache" in w for w in neg.warnings)


def test_non_torch_and_moe_terms():
    assert B.estimate_non_torch_bytes(1, 1)[0] == round(B.NON_TORCH_TP1_GIB * GiB)
    assert B.estimate_non_torch_bytes(1, 2)[0] == round(B.NON_TORCH_PP_ONLY_GIB * GiB)
    tp2, tp4 = B.estimate_non_torch_bytes(2, 1)[0], B.estimate_non_torch_bytes(4, 1)[0]
    assert tp4 - tp2 == pytest.approx(B.NON_TORCH_TP_PER_LOG2_GIB * GiB, abs=2)
    dense, _ = B.estimate_activation_bytes(max_num_batched_tokens=8192, max_num_seqs=1024,
                                           hidden_size=2048, vocab_size=151936)
    moe, how = B.estimate_activation_bytes(max_num_batched_tokens=8192, max_num_seqs=1024,
                                           hidden_size=2048, vocab_size=151936,
                                           moe_intermediate_size=768, num_experts_per_tok=8)
    ws = 2 * 8192 * 8 * (max(2 * 768, 2048) + 768)
    assert moe - dense == pytest.approx(B.ACT_MOE_WORKSPACE_COEF * ws, abs=1)
    assert "MoE" in how


# --------------------------------------------------------------------------------------------
# calibration against real vLLM start-up logs


def test_packaged_profiles_are_the_shared_file():
    if not SHARED_PROFILES.exists():
        pytest.skip("shared reference data not available")
    assert (ROOT / "kvplan/data/vllm-memory-profiles.jsonl").read_bytes() == SHARED_PROFILES.read_bytes()


def test_constants_in_budget_are_the_fitted_ones():
    fitted = CAL.fit(CAL.load_rows())
    for name, value in fitted.items():
        assert getattr(B, name) == pytest.approx(value, rel=1e-9, abs=1e-12), name


def test_calibration_median_error_within_5_percent():
    comps = CAL.compare()
    rel = [abs(c.rel_error) for c in comps if c.rel_error is not None]
    assert len(rel) == 32  # every row with a logged KV value (one excerpt is cut off)
    assert statistics.median(rel) < 0.05
    v019 = [abs(c.rel_error) for c in comps if c.rel_error is not None and c.row.is_v019]
    assert len(v019) == 21
    assert statistics.median(v019) < 0.01
    assert max(v019) < 0.05  # every vLLM 0.19 row within 5% (the 3 GiB KV row is the worst)


def test_calibration_holds_out_of_sample():
    loo = CAL.leave_one_out(CAL.load_rows())
    errs = [abs(e) for _, e in loo]
    assert statistics.median(errs) < 0.05
    assert max(errs) < 0.05


def test_calibration_script_formula_is_the_budget_formula():
    rows = CAL.load_rows()
    k = {name: getattr(B, name) for name in CAL.fit(rows)}
    for c in CAL.compare(rows):
        assert CAL.predict_kv_gib(c.row, k) == pytest.approx(c.est_kv_bytes / GiB, abs=1e-6)


def test_calibration_terms_track_the_logged_terms():
    comps = [c for c in CAL.compare() if c.row.is_v019]
    nt = statistics.median(abs(c.est_non_torch_gib - c.row.non_torch_gib) for c in comps)
    act = statistics.median(abs(c.est_act_gib - c.row.act_gib) for c in comps)
    cg = statistics.median(abs(c.est_cg_gib - c.row.cg_gib) for c in comps)
    assert nt < 0.05 and act < 0.1 and cg < 0.1


def test_format_of_the_budget_matches_vllm_rounding():
    b = budget_from_log_gib(41.1)
    assert b.available_kv_gib == format_gib(b.available_kv_bytes_per_gpu) == "41.1"


def test_logged_terms_are_set_beside_kvplans_estimate() -> None:
    """A log's Free-memory line (hand-made numbers, the 0.2x+ wording) beside kvplan's estimate of
    the same deployment: every estimated column is the estimate's own term."""
    from pathlib import Path

    from kvplan.engines.vllm.build import Deployment
    from kvplan.pipeline.deploy import Request, evaluate
    from kvplan.sources.vllm_log import LoggedMemory

    model = str(Path(__file__).parent.parent / "data" / "hf-configs" / "Qwen--Qwen3-8B")
    logged = LoggedMemory(total_gib=79.19, gpu_memory_utilization=0.9, requested_gib=71.27,
                          consumed_gib=15.6, peak_activation_gib=1.2, cudagraph_gib=0.5,
                          available_kv_gib=53.97)
    dep = Deployment(max_model_len=8192)
    ev = evaluate(Request(model=model, deployment=dep, gpu="H100", available_kv_gib=53.97,
                          gpu_memory_utilization=0.9, logged_memory=logged))
    est = evaluate(Request(model=model, deployment=dep, gpu="H100", gpu_memory_utilization=0.9)).budget
    terms = {t.name: -t.num_bytes for t in est.breakdown}
    rows = {r.name: (r.logged_bytes, r.estimated_bytes) for r in ev.budget.log_comparison}
    assert list(rows) == ["requested memory", "weights + non-torch memory", "activation peak",
                          "CUDA graphs", "available KV cache memory"]
    assert rows["requested memory"] == (round(71.27 * GiB), -terms["requested memory"])
    assert rows["weights + non-torch memory"] == (round(15.6 * GiB),
                                                  terms["model weights"] + terms["non-torch memory"])
    assert rows["activation peak"] == (round(1.2 * GiB), terms["activation peak"])
    assert rows["CUDA graphs"] == (round(0.5 * GiB), terms["CUDA-graph estimate"])
    assert rows["available KV cache memory"] == (round(53.97 * GiB), est.available_kv_bytes_per_gpu)
    # the budget planned is the logged one, explained by the logged terms (they add up)
    assert ev.budget.available_kv_bytes_per_gpu == round(53.97 * GiB)
    assert sum(t.num_bytes for t in ev.budget.breakdown) == round(53.97 * GiB)
    assert [t.name for t in ev.budget.breakdown][:2] == ["requested memory",
                                                         "weights + non-torch memory (logged)"]


def test_one_batch_defaults_rule_for_the_build_and_the_budget():
    from kvplan.budget.hardware import sm_version
    from kvplan.engines.vllm.build import get_batch_defaults

    assert default_batch_limits is get_batch_defaults
    gb10 = lookup_gpu("gb10")
    assert sm_version(gb10) == 121
    # vLLM 0.33+: GB10 is told by its compute capability (is_device_capability((12, 1))), not by
    # its name: the small tier despite its 121 GiB
    assert get_batch_defaults(121 * 2**30, "NVIDIA GB10", sm=121) == (2048, 256)
    assert get_batch_defaults(121 * 2**30, "anything", sm=121, usage="llm") == (8192, 256)
    assert get_batch_defaults(121 * 2**30, "NVIDIA GB10", sm=None) == (8192, 1024)
    assert get_batch_defaults(None) == (2048, 256)  # unknown device: vLLM's except branch


# vLLM's EngineArgs.get_batch_defaults, per release (engine/arg_utils.py): the GB10 (DGX Spark,
# compute capability 12.1, 121.69 GiB) is kept on the small tier by is_device_capability((12, 1))
# from 0.33; 0.31 and 0.32 have no such test, so its memory puts it on the ≥ 70 GiB tier
GB10_BATCH_DEFAULTS = {"0.31.0": (8192, 1024), "0.32.0": (8192, 1024), "0.33.0": (2048, 256),
                       "0.34.0": (2048, 256)}


@pytest.mark.parametrize("version", sorted(GB10_BATCH_DEFAULTS))
def test_gb10_batch_defaults_per_release(version):
    from kvplan.budget.hardware import sm_version
    from kvplan.engines.vllm.build import get_batch_defaults
    from kvplan.engines.vllm.profiles import get_profile

    gb10 = lookup_gpu("gb10")
    profile = get_profile(version)
    assert get_batch_defaults(gb10.total_memory_bytes, gb10.name, sm=sm_version(gb10),
                              profile=profile) == GB10_BATCH_DEFAULTS[version]
    # the A100 exception (by device name) is in every release; an H100 is on the large tier
    assert get_batch_defaults(85_899_345_920, "NVIDIA A100 SXM 80GB", sm=80,
                              profile=profile) == (2048, 256)
    assert get_batch_defaults(85_045_477_376, "NVIDIA H100 SXM 80GB", sm=90,
                              profile=profile) == (8192, 1024)
    # the estimated budget says the defaults it assumed, for the release asked
    b = estimate_budget(gb10, None, 10 * GiB, vllm_version=version, **LLAMA_8B)
    mbt, seqs = GB10_BATCH_DEFAULTS[version]
    assert f"max_num_batched_tokens={mbt}, max_num_seqs={seqs}" in " ".join(b.warnings)


@pytest.mark.parametrize("version", sorted(GB10_BATCH_DEFAULTS))
def test_gb10_batch_defaults_reach_the_plan(version):
    import kvplan

    llama = str(ROOT / "tests" / "data" / "hf-configs" / "meta-llama--Llama-3.1-8B")
    p = kvplan.check(llama, gpu="gb10", vllm=version, max_model_len=8192,
                     kv_cache_memory="20GiB")
    assert p.max_num_batched_tokens == GB10_BATCH_DEFAULTS[version][0]


def test_a_release_kvplan_does_not_plan_reads_the_nearest_profile():
    assert B.release_profile("0.19.0").version == "0.31.0"  # older: the oldest profile
    assert B.release_profile("0.32.1").version == "0.32.0"
    assert B.release_profile("0.33").version == "0.33.0"
    assert B.release_profile("0.35.2").version == "0.34.0"  # newer: the newest
