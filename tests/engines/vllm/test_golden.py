"""Every golden case, every release, plain and with the PR #53499 fix: exact equality on the
contract fields, through the public API (kvplan.engines.vllm.planner.plan)."""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.serialize import contract_dict
from kvplan.errors import KvplanError
from kvplan.sources.specfile import load_spec_file
from tests.golden import contract, golden_runs, has_extra_spec_keys, load

RUNS = golden_runs()


def test_bundled_golden_set_is_complete() -> None:
    # 35 cases × 4 releases × (released, patched)
    assert len([r for r in RUNS if "tests/data/golden" in str(r[0])]) >= 280


@pytest.mark.parametrize(("case", "version", "patched", "expected"), RUNS,
                         ids=[f"{c.stem}-{v}{'-fix' if p else ''}" for c, v, p, _ in RUNS])
def test_golden_case(case, version, patched, expected) -> None:
    exp = load(expected)
    if "oracle_error" in exp:  # vLLM (or the oracle for this release) refuses the input
        with pytest.raises(KvplanError):
            plan(load_spec_file(load(case), vllm_version=version, with_fix=patched).planner_input)
        return
    spec_file = load_spec_file(load(case), vllm_version=version, with_fix=patched)
    got = contract(contract_dict(plan(spec_file.planner_input),
                                 extra_spec_keys=has_extra_spec_keys(exp)))
    assert got == contract(exp)
