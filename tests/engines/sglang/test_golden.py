"""kvplan's SGLang engine against SGLang 0.5.23's own sizing code (tests/data/sglang-0.5.23: the
cases and tools/sglang_oracle_ext.py's outputs). Every number and every text must be exact."""

from __future__ import annotations

import pytest

from tests.engines.sglang.sglang_golden import case_names, load, run

# SGLang warnings the engine reproduces (the log line prefix after "WARNING <logger>: ")
MODELLED_WARNINGS = ("max_running_requests is capped to", "max_running_requests was reduced",
                     "max_total_tokens=", "Max running requests is reset to 48")
NAMES = case_names()


def test_the_golden_set_is_complete() -> None:
    assert len(NAMES) >= 96
    configurators = set()
    errors = set()
    for name in NAMES:
        _, exp = load(name)
        configurators.add(exp.get("pool_configurator"))
        if exp.get("error"):
            errors.add(exp["error"]["message"][:30])
    assert {"DefaultPoolConfigurator", "HybridSWAPoolConfigurator",
            "SWARequestCapPoolConfigurator", "DSV4PoolConfigurator"} <= configurators
    assert len(errors) >= 12


def _expected_warnings(exp: dict) -> set[str]:
    out = set()
    for line in exp.get("log", []):
        if not line.startswith("WARNING "):
            continue
        msg = line.split(": ", 1)[1]
        if msg.startswith(MODELLED_WARNINGS):
            out.add(msg)
    return out


@pytest.mark.parametrize("name", NAMES)
def test_engine_equals_sglang(name: str) -> None:
    case, exp = load(name)
    got = run(case)
    if exp.get("error"):
        assert got.error is not None, f"SGLang fails: {exp['error']['message']}"
        assert got.error.message == exp["error"]["message"]
        assert got.error.type == exp["error"]["type"]
        assert not got.fits
        return
    assert got.error is None, got.error
    assert got.fits
    assert got.pool_configurator == exp["pool_configurator"]
    assert got.mem_fraction_static == exp["mem_fraction_static"]
    assert got.page_size == exp["page_size"]
    assert got.available_bytes == exp["available_bytes"]
    assert got.max_total_num_tokens == exp["max_total_num_tokens"]
    assert got.full_max_total_num_tokens == exp["full_max_total_num_tokens"]
    assert got.swa_max_total_num_tokens == exp["swa_max_total_num_tokens"]
    assert got.max_running_requests == exp["max_running_requests"]
    assert got.max_mamba_cache_size == exp["max_mamba_cache_size"]
    cell = exp["cell_size_bytes_per_token"]
    if cell is None:  # DSV4: its coefficient is bytes_per_full_token
        cell = exp["pool_configurator_fields"]["bytes_per_full_token"]
    assert got.cell_size_bytes_per_token == cell
    mpc = exp["memory_pool_config"]
    for key in ("c4_max_total_num_tokens", "c128_max_total_num_tokens", "c4_state_pool_size",
                "c128_state_pool_size"):
        assert (getattr(got, key) or 0) == mpc[key], key
    if "mamba" in exp:
        assert got.mamba_cache_per_req_bytes == exp["mamba"]["mamba_cache_per_req_bytes"]
        mamba_row = next(r for r in got.pools if r.pool == "mamba")
        assert mamba_row.layers == exp["mamba"]["mamba_layers"]
        assert mamba_row.note.startswith(f"{exp['mamba']['mamba_ratio']} state slots")
    fields = exp.get("pool_configurator_fields", {})
    rows = {r.pool: r for r in got.pools}
    if "full_per_token" in fields:
        assert rows["full"].bytes_per_token == fields["full_per_token"] * fields["full_layers_num"]
        assert rows["swa"].bytes_per_token == fields["swa_per_token"] * fields["swa_layers_num"]
    assert set(got.warnings) == _expected_warnings(exp)


@pytest.mark.parametrize("name", NAMES)
def test_resolved_server_args_equal_sglang(name: str) -> None:
    case, exp = load(name)
    got = run(case)
    if got.resolved is None:  # SGLang stopped while resolving its arguments
        assert exp["error"]["stage"] in ("resolve_server_args", "runner_attributes",
                                         "kv_cache_configurator")
        return
    r, res = exp["resolved"], got.resolved
    assert res.chunked_prefill_size == r["chunked_prefill_size"]
    assert res.mem_fraction_static == r["mem_fraction_static"]
    assert res.cuda_graph_max_bs_decode == r["cuda_graph_decode_max_bs"]
    assert res.prefill_cuda_graph == r["cuda_graph_prefill_backend"]
    if r["cuda_graph_prefill_backend"] == "breakable" and exp["parallel"]["attn_dp_size"] == 1:
        # (DP attention re-derives the buckets from the per-rank chunk after the memory
        # reserve counted them; the reserve's count is checked through mem_fraction_static)
        assert res.prefill_cuda_graph_bs_count == r["cuda_graph_prefill_bs_count"]
    assert res.attention_backend == r["attention_backend"]
    assert res.page_size == r["page_size"]
    assert res.max_running_requests == r["max_running_requests"]
    assert res.speculative_algorithm == r["speculative_algorithm"]
    assert res.speculative_num_steps == r["speculative_num_steps"]
    assert res.speculative_eagle_topk == r["speculative_eagle_topk"]
    assert res.speculative_num_draft_tokens == r["speculative_num_draft_tokens"]
    assert f"torch.{res.kv_cache_torch_dtype}" == exp["runner"]["kv_cache_dtype"]
    assert res.context_len == exp["model"]["context_len"]
    assert res.attn_dp_size == exp["parallel"]["attn_dp_size"]
    assert res.attn_tp_size == exp["parallel"]["attn_tp_size"]


@pytest.mark.parametrize("name", [n for n in NAMES if load(n)[1].get("pp_ranks")])
def test_every_pipeline_stage_equals_sglang(name: str) -> None:
    case, exp = load(name)
    got = run(case)
    assert len(got.stages) == len(exp["pp_ranks"])
    for stage, rank in zip(got.stages, exp["pp_ranks"], strict=True):
        info = rank["runner"]["layer_info"]
        assert (stage.start_layer, stage.end_layer) == (info["start_layer"], info["end_layer"])
        assert stage.available_bytes == rank["available_bytes"]
        assert stage.cell_size_bytes_per_token == rank["cell_size_bytes_per_token"]
        assert stage.max_total_num_tokens == rank["max_total_num_tokens"]
