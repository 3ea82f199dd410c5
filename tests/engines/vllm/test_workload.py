"""--workload against vLLM's own scheduler (tests/data/workload-oracle, made with
tools/vllm_scheduler_oracle.py) and the rules it must keep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.api import check_specs
from kvplan.engines.vllm import workload as W
from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.profiles import get_profile
from kvplan.engines.vllm.specs import DemandSettings, FullAttentionSpec, MambaSpec, SlidingWindowSpec
from kvplan.errors import InputError, UnsupportedError
from kvplan.sources.specfile import load_spec_file
from tests.golden import golden_runs

DATA = Path(__file__).parents[2] / "data" / "workload-oracle"
EXPECTED = sorted((DATA / "expected").glob("*.json"))
SCHED_KEYS = ("workload", "scheduler_reserve_full_isl")


def _rules(case: dict, version: str) -> tuple[W.SchedulerRules, list[W.GroupRule], W.Workload]:
    sf = load_spec_file({k: v for k, v in case.items() if k not in SCHED_KEYS},
                        vllm_version=version)
    res = plan(sf.planner_input)
    rules, groups = W.rules_for_plan(
        res, sf.planner_input, max_num_seqs=case.get("max_num_seqs", 256),
        enable_chunked_prefill=case.get("enable_chunked_prefill", True),
        enable_prefix_caching=case.get("enable_prefix_caching", True),
        reserve_full_isl=case.get("scheduler_reserve_full_isl", True))
    wl = case["workload"]
    pairs = [tuple(p) for p in wl["pairs"]] if "pairs" in wl else [(wl["prompt"], wl["output"])]
    return rules, groups, W.Workload(tuple(pairs))


def test_there_are_goldens_for_both_releases() -> None:
    versions = {json.loads(p.read_text())["vllm_version"] for p in EXPECTED}
    assert {"0.31.0", "0.34.0"} <= versions
    assert len(EXPECTED) >= 20


@pytest.mark.parametrize("expected", EXPECTED, ids=[p.stem for p in EXPECTED])
def test_workload_equals_vllm_scheduler(expected: Path) -> None:
    """N, the admission peak, the blocks one request holds at its end, what caps: as vLLM's
    scheduler ran them."""
    out = json.loads(expected.read_text())
    plan_ = check_specs(DATA / "cases" / expected.name, vllm=out["vllm_version"])
    assert plan_.num_blocks == out["num_blocks"]
    (w,) = plan_.workload or []
    assert w.max_concurrent_without_preemption == out["max_concurrent_without_preemption"]
    assert w.admission_peak == out["admission_peak"]
    clean = out.get("clean_run")
    if clean:
        assert [b.blocks for b in w.blocks_per_request_at_end] == clean["blocks_at_end"]
    if out["max_concurrent_without_preemption"] == out["max_num_seqs"]:
        assert w.concurrency_capped_by == "max_num_seqs"
    else:  # N+1 requests: vLLM preempts, or keeps one waiting until another completes
        assert w.concurrency_capped_by == "kv_cache"
        nxt = out["first_preempting_run"]
        assert w.next_request_preempts == nxt["preempted"]
        assert nxt["preempted"] or nxt["peak_running"] < nxt["n"]
    assert w.admission_preempts == out["admission"]["preempted"]


@pytest.mark.parametrize("expected", EXPECTED, ids=[p.stem for p in EXPECTED])
@pytest.mark.parametrize("lazy", [True, False], ids=["lazy", "every-step"])
def test_each_run_step_by_step(expected: Path, lazy: bool) -> None:
    """Every oracle run (N clean, N+1, the admission run): the same number of scheduler steps,
    the same step of the first preemption, the same peak, the same completions."""
    out = json.loads(expected.read_text())
    case = json.loads((DATA / "cases" / expected.name).read_text())
    rules, groups, wl = _rules(case, out["vllm_version"])
    for key in ("clean_run", "first_preempting_run", "admission"):
        o = out.get(key)
        if not o:
            continue
        r = W.simulate(rules, groups, wl, o["n"], stop_at_first_finish=key == "admission",
                       lazy=lazy)
        assert (r.steps, r.first_preemption_step, r.peak_running, r.finished) == (
            o["steps"], o["first_preemption_step"], o["peak_running"], o["finished"]), key


def test_scans_equal_vllm_where_the_oracle_scanned() -> None:
    """Where the oracle ran every N (--scan), "all run at once without preempting" is monotone
    in N for vLLM, and kvplan says the same for every N."""
    scanned = 0
    for p in EXPECTED:
        out = json.loads(p.read_text())
        if "scan" not in out:
            continue
        scanned += 1
        assert out["scan_monotone"], p.name
        case = json.loads((DATA / "cases" / p.name).read_text())
        rules, groups, wl = _rules(case, out["vllm_version"])
        for n, clean in out["scan"].items():
            r = W.simulate(rules, groups, wl, int(n), until_clean=True)
            assert (not r.preempted and r.peak_running == int(n)) == clean, (p.name, n)
    assert scanned >= 1


@pytest.mark.parametrize("expected", EXPECTED, ids=[p.stem for p in EXPECTED])
def test_oracle_resolved_the_settings_we_use(expected: Path) -> None:
    out = json.loads(expected.read_text())
    rs = out.get("resolved_scheduler")
    if rs is None:
        pytest.skip("made before the oracle reported its resolved settings")
    case = json.loads((DATA / "cases" / expected.name).read_text())
    rules, _, _ = _rules(case, out["vllm_version"])
    assert rules.cache_block_size == rs["cache_block_size"]
    assert rules.num_lookahead_tokens == rs["num_lookahead_tokens"]
    assert rules.draft_slots == rs["draft_slots"]
    assert rules.use_eagle_block_drop == rs["use_eagle_block_drop"]
    assert rules.scheduler_block_size == out["scheduler_block_size"]
    assert rules.hash_block_size == out["hash_block_size"]


# ---- the block sizes vLLM's engine resolves, against every planner golden --------------------

@pytest.mark.parametrize("run", [r for r in golden_runs() if not r[2]],
                         ids=lambda r: f"{r[0].stem}-{r[1]}")
def test_resolved_block_sizes_equal_the_planner_goldens(run: tuple) -> None:
    case_path, version, _, exp_path = run
    exp = json.loads(exp_path.read_text())
    if exp.get("scheduler_block_size") is None or not exp.get("groups"):
        pytest.skip("no block sizes resolved in this case")
    case = json.loads(case_path.read_text())
    sf = load_spec_file(case, vllm_version=version)
    res = plan(sf.planner_input)
    try:
        rules = [W.group_rule(i, d.group.spec, DemandSettings(
            max_model_len=res.max_model_len_after_planning, max_in_flight_tokens=1,
            max_num_encoder_input_tokens=1)) for i, d in enumerate(res.groups)]
    except UnsupportedError:
        pytest.skip("a spec kind the workload estimate does not model")
    if case.get("prefix_match_unit") is not None or case.get("decode_context_parallel_size", 1) > 1:
        pytest.skip("prefix_match_unit / DCP are not modelled by the workload estimate")
    _, sbs, hbs, align = W.resolve_block_sizes(rules, case.get("enable_prefix_caching", True))
    assert (sbs, hbs) == (exp["scheduler_block_size"], exp["hash_block_size"])
    if exp.get("cache_hit_alignment_tokens") is not None:
        assert align == exp["cache_hit_alignment_tokens"]


# ---- properties ---------------------------------------------------------------------------

def _full_rules(num_blocks: int, *, block: int = 16, seqs: int = 256, mnbt: int = 8192,
                async_: bool = True, version: str = "0.34.0", mml: int = 32768
                ) -> tuple[W.SchedulerRules, list[W.GroupRule]]:
    spec = FullAttentionSpec(block_size=block, num_kv_heads=8, head_size=128, dtype="bfloat16")
    return W.build_rules(groups=[spec], num_blocks=num_blocks, max_model_len=mml,
                         max_num_batched_tokens=mnbt, max_num_seqs=seqs,
                         batch_queue_size=2 if async_ else 1, async_scheduling=async_,
                         enable_chunked_prefill=True, enable_prefix_caching=True,
                         num_speculative_tokens=0, speculative_method=None,
                         num_prefill_lookahead_tokens=0,
                         max_in_flight_tokens=(2 if async_ else 1) * mnbt,
                         profile=get_profile(version))


def _hybrid_rules(num_blocks: int, *, window: int = 128, seqs: int = 64, version: str = "0.34.0"
                  ) -> tuple[W.SchedulerRules, list[W.GroupRule]]:
    full = FullAttentionSpec(block_size=64, num_kv_heads=8, head_size=64, dtype="bfloat16")
    swa = SlidingWindowSpec(block_size=64, num_kv_heads=8, head_size=64, dtype="bfloat16",
                            sliding_window=window)
    mamba = MambaSpec(block_size=64, shapes=((4, 64),), dtypes=("bfloat16",),
                      mamba_cache_mode="align")
    return W.build_rules(groups=[full, swa, mamba], num_blocks=num_blocks, max_model_len=32768,
                         max_num_batched_tokens=2048, max_num_seqs=seqs, batch_queue_size=2,
                         async_scheduling=True, enable_chunked_prefill=True,
                         enable_prefix_caching=True, num_speculative_tokens=0,
                         speculative_method=None, num_prefill_lookahead_tokens=0,
                         max_in_flight_tokens=4096, profile=get_profile(version))


@pytest.mark.parametrize("make", [_full_rules, _hybrid_rules], ids=["full", "hybrid"])
def test_monotone_in_num_blocks_and_capped_by_max_num_seqs(make) -> None:  # type: ignore[no-untyped-def]
    wl = W.Workload.of(3000, 300)
    last = 0
    for blocks in (400, 900, 1500, 2600, 4000, 9000):
        rules, groups = make(blocks, seqs=32)
        est = W.estimate(rules, groups, wl)
        n = est.max_concurrent_without_preemption
        assert last <= n <= rules.max_num_seqs
        assert est.admission_peak >= n
        if n == rules.max_num_seqs:
            assert est.concurrency_capped_by == "max_num_seqs"
        last = n
    assert last == rules.max_num_seqs  # enough blocks: max_num_seqs caps


@pytest.mark.parametrize(("prompt", "output", "block", "exact"), [
    (8192, 1024, 16, True), (8192, 1024, 64, True), (1000, 4000, 16, True),
    (2048, 2048, 32, True), (6000, 100, 64, False), (16000, 64, 16, False)])
@pytest.mark.parametrize("async_", [True, False])
def test_full_attention_and_vllm_formula_at_p_plus_d(prompt: int, output: int, block: int,
                                                     exact: bool, async_: bool) -> None:
    """Full attention: vLLM's concurrency formula at P+D tokens (usable blocks over the blocks
    of a P+D−1-token request) is a lower bound, and the answer when the answers are long next to
    the admission ramp; with short answers the first requests finish their blocks' growth while
    the last are admitted, and more run at once."""
    for blocks in (3000, 7777, 12000):
        rules, groups = _full_rules(blocks, block=block, async_=async_)
        n = W.estimate(rules, groups, W.Workload.of(prompt, output)).max_concurrent_without_preemption
        formula = min(rules.max_num_seqs, (blocks - 1) // -(-(prompt + output - 1) // block))
        assert n == formula if exact else n >= formula


@pytest.mark.parametrize("make", [_full_rules, _hybrid_rules], ids=["full", "hybrid"])
@pytest.mark.parametrize("version", ["0.31.0", "0.34.0"])
def test_lazy_steps_equal_every_step(make, version: str) -> None:  # type: ignore[no-untyped-def]
    """The fast path (requests decoding steadily advance only at their block events) is the
    same simulation as stepping every request every step."""
    for blocks, wl in ((700, W.Workload.of(2500, 700)), (1300, W.Workload.of(700, 1500)),
                       (2000, W.Workload(((3000, 200), (500, 900), (1200, 1200))))):
        rules, groups = make(blocks, version=version)
        for n in (3, 9, 20):
            for first in (False, True):
                a = W.simulate(rules, groups, wl, n, stop_at_first_finish=first)
                b = W.simulate(rules, groups, wl, n, stop_at_first_finish=first, lazy=False)
                assert a == b


def _spec_rules(num_blocks: int, *, method: str, version: str, async_: bool, mode: str = "align",
                chunk_budget: int = 2048, seqs: int = 64
                ) -> tuple[W.SchedulerRules, list[W.GroupRule]]:
    k = 3
    full = FullAttentionSpec(block_size=32, num_kv_heads=4, head_size=64, dtype="bfloat16")
    draft = SlidingWindowSpec(block_size=32, num_kv_heads=4, head_size=64, dtype="bfloat16",
                              sliding_window=256, is_draft=True)
    mamba = MambaSpec(block_size=32 if mode == "align" else 32768, shapes=((8, 64),),
                      dtypes=("float32",), mamba_cache_mode=mode, num_speculative_blocks=k,
                      num_prefill_checkpoint_blocks=1 if mode == "align" else 0,
                      prefill_checkpoint_alignment=16)
    return W.build_rules(groups=[mamba, full, draft], num_blocks=num_blocks, max_model_len=32768,
                         max_num_batched_tokens=chunk_budget, max_num_seqs=seqs,
                         batch_queue_size=2 if async_ else 1, async_scheduling=async_,
                         enable_chunked_prefill=True, enable_prefix_caching=mode == "align",
                         num_speculative_tokens=k, speculative_method=method,
                         num_prefill_lookahead_tokens=1 if method != "ngram" else 0,
                         max_in_flight_tokens=(2 if async_ else 1) * chunk_budget,
                         profile=get_profile(version))


@pytest.mark.parametrize("version", ["0.31.0", "0.34.0"])
@pytest.mark.parametrize("async_", [True, False])
@pytest.mark.parametrize(("method", "mode"), [("eagle", "align"), ("dflash", "align"),
                                               ("ngram", "none"), ("mtp", "none")])
def test_hold_bounds_and_lazy_steps_with_speculation(version: str, async_: bool, method: str,
                                                     mode: str) -> None:
    """Speculative decoding over a Mamba + full + sliding-window draft model: the bound each
    request's blocks must stay under (what lets a clean run stop early) holds at every step, and
    the lazy simulation equals the every-step one."""
    for blocks, wl in ((600, W.Workload.of(1500, 400)),
                       (900, W.Workload(((3000, 200), (500, 900), (64, 1200))))):
        rules, groups = _spec_rules(blocks, method=method, version=version, async_=async_,
                                    mode=mode)
        for n in (2, 7, 15):
            a = W.simulate(rules, groups, wl, n, lazy=False, check_bounds=True)
            assert a == W.simulate(rules, groups, wl, n)


@pytest.mark.parametrize("make", [_full_rules, _hybrid_rules], ids=["full", "hybrid"])
def test_hold_bounds_hold(make) -> None:  # type: ignore[no-untyped-def]
    for blocks, wl in ((700, W.Workload.of(2500, 700)), (2000, W.Workload.of(300, 2000))):
        rules, groups = make(blocks)
        for n in (1, 5, 30):
            W.simulate(rules, groups, wl, n, lazy=False, check_bounds=True)


def test_early_stops_agree_with_full_runs() -> None:
    """until_clean's two early answers are the answers of the full runs."""
    for make in (_full_rules, _hybrid_rules):
        for blocks in (500, 1500, 5000):
            rules, groups = make(blocks)
            wl = W.Workload.of(2500, 600)
            for n in (2, 6, 12, 25, 40):
                early = W.simulate(rules, groups, wl, n, until_clean=True)
                full = W.simulate(rules, groups, wl, n)
                clean = not full.preempted and full.peak_running == n
                assert (not early.preempted and early.peak_running == n) == clean


def test_a_request_longer_than_max_model_len_is_refused() -> None:
    rules, groups = _full_rules(4000, mml=8192)
    with pytest.raises(InputError, match="max_model_len"):
        W.estimate(rules, groups, W.Workload.of(8000, 500))


@pytest.mark.parametrize("make", [_full_rules, _hybrid_rules], ids=["full", "hybrid"])
def test_search_equals_a_scan(make) -> None:  # type: ignore[no-untyped-def]
    """The galloping search finds the largest clean N a plain scan finds, and "clean" is
    monotone in N on these (the oracle's --scan checks vLLM itself)."""
    for blocks, wl in ((1500, W.Workload.of(2500, 600)), (900, W.Workload.of(300, 2000)),
                       (3000, W.Workload.of(6000, 100))):
        rules, groups = make(blocks, seqs=48)
        flags = []
        for n in range(1, rules.max_num_seqs + 1):
            r = W.simulate(rules, groups, wl, n, until_clean=True)
            flags.append(not r.preempted and r.peak_running == n)
        scan = sum(flags)
        assert flags == [True] * scan + [False] * (len(flags) - scan)
        assert W.estimate(rules, groups, wl).max_concurrent_without_preemption == scan
