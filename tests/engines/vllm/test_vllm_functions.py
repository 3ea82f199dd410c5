"""kvplan's block-size rule and state-shape calculators against vLLM's own functions' outputs
(tests/data/vllm-functions, generated with vLLM 0.31.0 / 0.34.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.engines import state_shapes as S
from kvplan.engines.vllm.blocksize import sliding_window_block_size
from kvplan.engines.vllm.profiles import get_profile
from kvplan.engines.vllm.specs import MultipleOf
from kvplan.errors import InputError

DATA = Path(__file__).resolve().parents[2] / "data" / "vllm-functions"


@pytest.mark.parametrize("version", ["0.31.0", "0.34.0"])
def test_sliding_window_block_rule_matches_vllm(version) -> None:
    data = json.loads((DATA / f"largest_kernel_block_within.{version}.json").read_text())
    assert data["version"] == version and len(data["rows"]) == 3000
    profile = get_profile(version)
    for r in data["rows"]:
        sizes = tuple(MultipleOf(b) if m else b for b, m in zip(r["sizes"], r["multiple_of"],
                                                                   strict=True))
        got = sliding_window_block_size(profile, sizes=sizes, sw_per_token=r["per_tok"],
                                        block_size=r["block"])
        assert got == r["result"], r


FUNCS = {"mamba1": S.mamba1_state_shapes, "mamba2": S.mamba2_state_shapes,
         "gdn": S.gdn_state_shapes, "short": S.short_conv_state_shapes,
         "linear": S.linear_attention_state_shapes}


def test_state_shapes_match_vllm() -> None:
    rows = json.loads((DATA / "mamba_state_shapes.0.34.0.json").read_text())
    assert len(rows) == 2000 and any("error" in r for r in rows)
    for r in rows:
        fn = FUNCS[r["kind"]]
        if "error" in r:  # vLLM's divide() asserts: kvplan refuses with an InputError
            with pytest.raises(InputError):
                fn(tp=r["tp"], **r["args"])
        else:
            assert [list(s) for s in fn(tp=r["tp"], **r["args"])] == r["shapes"], r
