"""PP layer partitions (vLLM get_pp_indices), KV heads per TP rank, divisibility errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engines.vllm.parallel import (
    check_attention_heads_tp,
    check_kv_heads_tp,
    divide,
    get_pp_indices,
    kv_heads_per_rank,
    pp_partitions,
)
from kvplan.errors import InputError


def _all(num_layers: int, pp: int, partition: str | None = None) -> list[tuple[int, int]]:
    return [get_pp_indices(num_layers, r, pp, partition) for r in range(pp)]


# Worked by hand from vllm/distributed/utils.py::get_pp_indices: L // pp per stage, then the
# remainder L % pp goes one each to partitions[-2], partitions[-3], ... (never the last stage).
@pytest.mark.parametrize(("layers", "pp", "expected"), [
    (32, 1, [(0, 32)]),
    (32, 2, [(0, 16), (16, 32)]),
    (32, 4, [(0, 8), (8, 16), (16, 24), (24, 32)]),
    (61, 2, [(0, 31), (31, 61)]),  # DeepSeek-V3: 30 each, the extra one to the first stage
    (61, 4, [(0, 15), (15, 30), (30, 46), (46, 61)]),  # 15,15,16,15
    (61, 8, [(0, 7), (7, 14), (14, 22), (22, 30), (30, 38), (38, 46), (46, 54), (54, 61)]),  # 7,7,8,8,8,8,8,7
    (10, 4, [(0, 2), (2, 5), (5, 8), (8, 10)]),  # 2,3,3,2
    (30, 4, [(0, 7), (7, 15), (15, 23), (23, 30)]),  # 7,8,8,7
    (32, 3, [(0, 11), (11, 22), (22, 32)]),  # 11,11,10
    (5, 2, [(0, 3), (3, 5)]),
    (3, 4, [(0, 1), (1, 2), (2, 3), (3, 3)]),  # more stages than layers: the last stage is empty
    (0, 2, [(0, 0), (0, 0)]),
])
def test_get_pp_indices_hand_worked(layers, pp, expected):
    assert _all(layers, pp) == expected


def test_explicit_partition():
    assert _all(32, 3, "10,11,11") == [(0, 10), (10, 21), (21, 32)]
    assert _all(4, 2, "0,4") == [(0, 0), (0, 4)]
    assert pp_partitions(61, 4, "16,15,15,15") == [16, 15, 15, 15]


@pytest.mark.parametrize(("partition", "needle"), [
    ("10,11", "2 stages"),
    ("10,11,12", "sums to 33"),
    ("-1,16,17", "negative"),
    ("10,a,12", "invalid"),
    ("", "invalid"),
])
def test_explicit_partition_errors(partition, needle):
    with pytest.raises(InputError) as ei:
        get_pp_indices(32, 0, 3, partition)
    assert needle in ei.value.message


def test_rank_and_size_errors():
    with pytest.raises(InputError):
        get_pp_indices(32, 2, 2)
    with pytest.raises(InputError):
        get_pp_indices(32, -1, 2)
    with pytest.raises(InputError):
        get_pp_indices(32, 0, 0)
    with pytest.raises(InputError):
        get_pp_indices(-1, 0, 1)


def _check_cover(layers: int, pp: int, ranges: list[tuple[int, int]]) -> None:
    seen = [i for start, end in ranges for i in range(start, end)]
    assert seen == list(range(layers))  # every layer exactly once, in order
    for (_, e), (s, _) in zip(ranges, ranges[1:], strict=False):
        assert e == s  # contiguous


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200), st.integers(1, 16))
def test_default_partitions_cover_every_layer_once(layers, pp):
    ranges = _all(layers, pp)
    _check_cover(layers, pp, ranges)
    sizes = [e - s for s, e in ranges]
    assert max(sizes) - min(sizes) <= 1
    assert sizes[-1] == layers // pp  # the last stage (norm + LM head) never gets an extra layer
    if pp > 1 and layers % pp <= pp - 2 and layers % pp > 0:
        assert sizes[0] == layers // pp  # a small remainder goes to the middle stages


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=12))
def test_explicit_partitions_cover_every_layer_once(parts):
    layers = sum(parts)
    ranges = _all(layers, len(parts), ",".join(map(str, parts)))
    _check_cover(layers, len(parts), ranges)
    assert [e - s for s, e in ranges] == parts


@pytest.mark.parametrize(("heads", "tp", "per_rank"), [
    (8, 1, 8), (8, 2, 4), (8, 4, 2), (8, 8, 1), (8, 16, 1), (4, 8, 1), (1, 4, 1), (128, 8, 16),
    (2, 2, 1), (2, 8, 1),
])
def test_kv_heads_per_rank(heads, tp, per_rank):
    assert kv_heads_per_rank(heads, tp) == per_rank


@pytest.mark.parametrize(("heads", "tp"), [(8, 3), (6, 4), (2, 3), (12, 8), (3, 2)])
def test_kv_heads_that_do_not_divide(heads, tp):
    with pytest.raises(InputError) as ei:
        kv_heads_per_rank(heads, tp)
    assert "not divisible" in ei.value.message
    assert "KV heads" in ei.value.message
    with pytest.raises(InputError):
        check_kv_heads_tp(heads, tp)


def test_divide():
    assert divide(64, 8) == 8
    with pytest.raises(InputError) as ei:
        divide(28, 8, what="attention heads (28) by TP size (8)")
    assert "28 is not divisible by 8" in ei.value.message
    assert "attention heads" in ei.value.message
    with pytest.raises(InputError):
        divide(1, 0)


def test_attention_heads_must_divide_by_tp():
    check_attention_heads_tp(32, 8)
    with pytest.raises(InputError) as ei:
        check_attention_heads_tp(28, 8)
    assert "(28)" in ei.value.message and "(8)" in ei.value.message
