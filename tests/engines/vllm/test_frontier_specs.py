"""The spec kinds of issue 10, one formula at a time (numbers worked out by hand in comments).

Whole plans of every kind are checked against vLLM's own planner in
tests/data/golden-oracle-2026 (test_golden.py); these pin the single formulas and refusals.
"""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.grouping import merge_specs
from kvplan.engines.vllm.grouping.page_size import _largest_divisor_at_most
from kvplan.engines.vllm.planner import PlannerInput, plan
from kvplan.engines.vllm.specs import (
    CircularBufferSpec,
    DemandSettings,
    FullAttentionSpec,
    HiSparseHotSpec,
    HiSparseResidentSpec,
    KpoolTailSpec,
    MLAAttentionSpec,
    RSWASpec,
    SparseCacheRole,
    SpecKind,
    spec_kind,
    uniform_type_base,
)
from kvplan.errors import InputError
from kvplan.sources.specfile import build_spec, load_spec_file

S = DemandSettings(max_model_len=32768, max_in_flight_tokens=8192,
                   max_num_encoder_input_tokens=4096)


def test_indexer_cache_is_132_uint8_bytes_per_token_whatever_the_kv_dtype() -> None:
    # DeepseekV32IndexerCache: head = 128 + 128 // 128 * 4 = 132 bytes, one head, uint8;
    # page at block 64 = 64 * 132 = 8448 B
    for dtype in ("auto", "fp8_ds_mla"):
        spec, _ = build_spec({"name": "x", "kind": "indexer", "index_head_dim": 128,
                              "block_size": 64, "dtype": dtype}, {})
        assert isinstance(spec, MLAAttentionSpec)
        assert spec.page_size_bytes == 8448
        assert (spec.cache_role, spec.dtype, spec.cache_dtype_str) == (
            SparseCacheRole.INDEXER, "uint8", None)
        assert spec.max_tp_shards == 1 and spec_kind(spec) is SpecKind.MLA_ATTENTION


def test_rswa_is_sized_and_grouped_as_full_attention() -> None:
    # 8 heads * (128 + 128) * 2 B * 16 tokens = 65536 B; cdiv(32768, 16) = 2048 blocks
    spec = RSWASpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16",
                    rswa_window=512)
    assert spec.page_size_bytes == 65536 and spec.blocks_per_request(S) == 2048
    assert spec_kind(spec) is SpecKind.FULL_ATTENTION
    assert uniform_type_base(spec) is FullAttentionSpec
    full = FullAttentionSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16")
    # FullAttentionSpec.merge takes RSWA layers; RSWASpec.merge takes only RSWA layers
    assert type(merge_specs([full, spec])) is FullAttentionSpec
    with pytest.raises(AssertionError, match="must be RSWASpec"):
        merge_specs([spec, full])
    with pytest.raises(AssertionError, match="same rswa_window"):
        merge_specs([spec, spec.with_changes(rswa_window=1024)])


def test_rings_take_one_block_per_request() -> None:
    # CircularBufferSpec: fp32, 1 head, head 1024 + 0, ring of 8 → 8 * 1024 * 4 = 32768 B, 1 block
    ring = CircularBufferSpec(block_size=8, num_kv_heads=1, head_size=1024, head_size_v=0,
                              dtype="float32")
    assert ring.page_size_bytes == 32768
    assert ring.blocks_per_request(S) == 1 and ring.max_num_blocks_per_req(S, 10**6) == 1
    assert not ring.prefix_cacheable and not ring.uses_slot_mapping
    assert spec_kind(ring) is SpecKind.UNKNOWN
    tail = KpoolTailSpec(block_size=16, num_kv_heads=8, head_size=128, dtype="bfloat16",
                         sliding_window=16)
    assert tail.blocks_per_request(S) == 1 and spec_kind(tail) is SpecKind.SLIDING_WINDOW


def test_hisparse_pages() -> None:
    hot = HiSparseHotSpec(block_size=64, page_size=73728, hot_blocks_per_request=12)
    assert hot.max_memory_usage_bytes(S) == 12 * 73728
    # resident: cdiv(min(8192 in flight, 32768), 64) = 128 blocks
    res = HiSparseResidentSpec(block_size=64, page_size=73728)
    assert res.blocks_per_request(S) == 128
    assert not (hot.has_layer_views or res.has_layer_views or hot.prefix_cacheable)


def test_hidden_state_block_is_the_largest_divisor_that_fits() -> None:
    # common page 32768 B / (1 x 2880 x 2 B = 5760 B per token) = 5 tokens at most; the
    # largest divisor of the groups' block 16 not above 5 is 4
    assert _largest_divisor_at_most(16, 32768 // 5760) == 4
    assert _largest_divisor_at_most(16, 1) == 1


def _case(layers: list[dict]) -> dict:
    return {"max_model_len": 8192, "max_num_batched_tokens": 2048,
            "available_kv_memory_bytes": 2**30, "layers": layers}


def _plan(case: dict, version: str) -> object:
    return plan(load_spec_file(case, vllm_version=version).planner_input)


def test_a_class_the_release_lacks_is_refused_with_the_release_named() -> None:
    case = _case([{"name": "t", "kind": "kpool_tail", "num_kv_heads": 1, "head_size": 64,
                   "sliding_window": 16}])
    _plan(case, "0.31.0")  # KpoolTailSpec exists in 0.31.0
    with pytest.raises(InputError, match=r"KpoolTailSpec does not exist in vLLM 0\.32\.0") as e:
        _plan(case, "0.32.0")
    assert e.value.hint == "vLLM 0.31.0 defines it"


def test_a_field_the_release_lacks_is_refused_with_the_release_named() -> None:
    case = _case([{"name": "m", "kind": "mla", "kv_lora_rank": 512, "qk_rope_head_dim": 64,
                   "topk_buffer_width": 2048}])
    _plan(case, "0.33.0")
    with pytest.raises(InputError, match=r"topk_buffer_width does not exist in vLLM 0\.31\.0") as e:
        _plan(case, "0.31.0")
    assert e.value.hint == "vLLM 0.33.0, 0.34.0 define it"


def test_hisparse_outside_its_layout_fails_where_vllm_fails() -> None:
    case = _case([{"name": "h", "kind": "hisparse_hot", "page_size": 4096,
                   "blocks_per_request": 2},
                  {"name": "f", "kind": "full_attention", "num_kv_heads": 1, "head_size": 64}])
    r = _plan(case, "0.32.0")  # planned, then the tensor layout raises NotImplementedError
    assert r.error is not None and r.error.type == "NotImplementedError"  # type: ignore[attr-defined]
    assert r.num_blocks is None  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="per-layer views"):
        _plan(case, "0.33.0")


def test_planner_input_accepts_new_specs_directly() -> None:
    ring = CircularBufferSpec(block_size=8, num_kv_heads=1, head_size=1024, head_size_v=0,
                              dtype="float32")
    r = plan(PlannerInput(worker_specs=({"ring": ring},), available_kv_bytes=(2**30,),
                          max_model_len=8192, max_num_batched_tokens=2048))
    # one group, one ring block per request: 32768 B needed
    assert r.total_blocks_per_request == 1 and r.total_bytes_needed == (32768,)


def test_block_table_rows_align_to_128_tokens_in_0_34_only() -> None:
    from kvplan.engines.vllm.planner import block_table_width
    from kvplan.engines.vllm.profiles import get_profile

    mla = MLAAttentionSpec(block_size=64, num_kv_heads=1, head_size=576, dtype="bfloat16")
    # cdiv(8256, 64) = 129 blocks; 0.34 pads rows to 128 // gcd(128, 64) = 2 blocks → 130
    assert block_table_width(mla, S, 8256, get_profile("0.33.0")) == 129
    assert block_table_width(mla, S, 8256, get_profile("0.34.0")) == 130
    ring = CircularBufferSpec(block_size=8, num_kv_heads=1, head_size=64, head_size_v=0,
                              dtype="float32")
    assert block_table_width(ring, S, 8256, get_profile("0.34.0")) == 1  # no alignment


@pytest.mark.parametrize(("layer", "missing"), [
    ({"kind": "rswa", "num_kv_heads": 8, "head_size": 128}, "rswa_window"),
    ({"kind": "hidden_state", "num_kv_heads": 1}, "head_size"),
    ({"kind": "hisparse_hot", "page_size": 4096}, "blocks_per_request"),
    ({"kind": "hisparse_resident"}, "page_size"),
    ({"kind": "indexer"}, "index_head_dim"),
])
def test_new_kinds_name_their_missing_field(layer: dict, missing: str) -> None:
    with pytest.raises(InputError, match=f"missing required field '{missing}'"):
        build_spec({"name": "x", **layer}, {})
