"""Fuzz: mutated real configs and random layer-spec files. Only `KvplanError` may escape the
library; the CLI only ever exits 0, 1 or 2. `make fuzz` runs ≥ 10,000 examples each."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvplan.engines.vllm.build import Deployment, build
from kvplan.engines.vllm.planner import plan
from kvplan.errors import KvplanError
from kvplan.models import describe_model
from kvplan.sources.specfile import load_spec_file

EXAMPLES = int(os.environ.get("KVPLAN_FUZZ_EXAMPLES", "150"))
CONFIGS = sorted((Path(__file__).parent / "data" / "hf-configs").glob("*/config.json"))
REAL = [json.loads(p.read_text()) for p in CONFIGS]
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
                    st.lists(st.integers(-3, 100), max_size=4), st.just({}))


def _paths(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*prefix, k)
            yield from _paths(v, (*prefix, k))


@st.composite
def mutated_config(draw):
    cfg = json.loads(json.dumps(draw(st.sampled_from(REAL))))
    paths = list(_paths(cfg))
    for _ in range(draw(st.integers(1, 4))):
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = cfg
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
            if parent is None:
                break
        if not isinstance(parent, dict) or path[-1] not in parent:
            continue
        op = draw(st.sampled_from(["drop", "retype", "perturb"]))
        if op == "drop":
            del parent[path[-1]]
        elif op == "retype":
            parent[path[-1]] = draw(scalars)
        elif isinstance(parent[path[-1]], int) and not isinstance(parent[path[-1]], bool):
            parent[path[-1]] = parent[path[-1]] + draw(st.integers(-64, 64))
    return cfg


@FUZZ
@given(mutated_config(), st.sampled_from(["auto", "fp8", "nvfp4", "bfloat16"]),
       st.sampled_from([1, 2, 4]), st.sampled_from(["0.31.0", "0.33.0", "0.34.0"]))
def test_mutated_configs_raise_only_kvplan_errors(cfg, kv, tp, version):
    try:
        desc = describe_model(cfg, source="fuzz")
        dep = Deployment(vllm_version=version, kv_cache_dtype=kv, tensor_parallel_size=tp,
                         max_model_len=8192, max_num_batched_tokens=2048,
                         available_kv_bytes=8 * 2**30)
        result = plan(build(desc, dep).planner_input)
    except KvplanError:
        return
    assert result.fits in (True, False)


layer = st.fixed_dictionaries(
    {"name": st.text(min_size=1, max_size=8)},
    optional={"kind": st.sampled_from(["full_attention", "sliding_window", "mla", "mamba",
                                       "chunked_local", "cross_attention", "bogus"]),
              "num_kv_heads": st.one_of(st.integers(-2, 16), st.text(max_size=3)),
              "head_size": st.integers(-8, 512), "block_size": st.integers(-16, 4096),
              "dtype": st.sampled_from(["auto", "fp8", "nvfp4", "bfloat16", "x", "fp8_ds_mla"]),
              "sliding_window": st.integers(-1, 10**6), "kv_lora_rank": st.integers(0, 1024),
              "attention_chunk_size": st.integers(-1, 10**5),
              "shapes": st.lists(st.lists(st.integers(-1, 5000), max_size=3), max_size=3),
              "dtypes": st.lists(st.sampled_from(["bfloat16", "float32", "q"]), max_size=3),
              "page_size_padded": st.one_of(st.integers(-1, 10**8), st.just({"match_layer": "a"})),
              "repeat": st.integers(-1, 8), "is_draft": st.booleans()})
spec_file = st.fixed_dictionaries(
    {"layers": st.lists(layer, max_size=6)},
    optional={"max_model_len": st.one_of(st.integers(-5, 10**7), st.text(max_size=4)),
              "max_num_batched_tokens": st.integers(-5, 10**5),
              "available_kv_memory_bytes": st.one_of(st.integers(-10, 2**36), st.lists(
                  st.integers(0, 2**30), max_size=2)),
              "mamba_cache_mode": st.sampled_from(["align", "none", "all", "?"]),
              "num_speculative_tokens": st.integers(-1, 9),
              "disable_hybrid_kv_cache_manager": st.booleans(),
              "num_gpu_blocks_override": st.one_of(st.none(), st.integers(-1, 10**5)),
              "workers": st.lists(st.lists(st.text(max_size=3), max_size=3), max_size=2)})


@FUZZ
@given(spec_file, st.booleans(), st.sampled_from(["0.31.0", "0.32.0", "0.34.0"]))
def test_random_spec_files_raise_only_kvplan_errors(case, fix, version):
    try:
        result = plan(load_spec_file(case, vllm_version=version, with_fix=fix).planner_input)
    except KvplanError:
        return
    assert result.fits in (True, False)


@settings(max_examples=max(20, EXAMPLES // 10), deadline=None)
@given(st.lists(st.sampled_from(["check", "--specs", "--json", "--max-model-len", "auto", "-1",
                                 "0", "x", "--kv-cache-dtype", "fp8", "--gpu", "H100", "-tp",
                                 "3", "--kv-cache-memory", "1GiB", "sweep", "ci", "layers",
                                 "gpus", "--vllm", "0.31", "--explain", "/nonexistent"]),
                max_size=8))
def test_cli_exit_codes_are_only_0_1_2(argv):
    import contextlib
    import io

    from kvplan.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(argv)
        except SystemExit as exc:
            assert exc.code in (0, 1, 2, None)
