"""The registry coverage table: every architecture of vLLM 0.34.0's registry has a row, and the
rows agree with kvplan's dispatch (kvplan/data/coverage.csv, kvplan/data/vllm_registry_0.34.0.json).
"""

from __future__ import annotations

import csv
import re
from importlib import resources

import pytest

from kvplan.errors import UnsupportedError
from kvplan.models import describe_model, fast_adapter_names
from kvplan.models.coverage import COVERAGE_COLUMNS, coverage, registry
from tests.models.helpers import edited

PATH = re.compile(r"^(adapter:[a-z0-9_]+|generic|draft:(separate-head|mtp|extract-hidden-states)|refused:[a-z-]+)$")


def test_registry_file_is_vllm_0_34_0() -> None:
    reg = registry()
    assert reg["vllm_version"] == "0.34.0"
    # spot checks against vllm/model_executor/models/registry.py of the 0.34.0 wheel
    archs = reg["architectures"]
    assert archs["Phi3ForCausalLM"]["module"] == "phi3"
    assert archs["LlavaForConditionalGeneration"]["categories"] == ["multimodal"]
    assert "IsHybrid" in archs["JambaForCausalLM"]["interfaces"]
    assert reg["previously_supported"]["Phi3SmallForCausalLM"] == "0.9.2"


def test_every_registry_architecture_has_a_row() -> None:
    missing = sorted(set(registry()["architectures"]) - set(coverage()))
    assert missing == []
    extra = sorted(set(coverage()) - set(registry()["architectures"]))
    assert extra == []


def test_rows_are_well_formed() -> None:
    with resources.files("kvplan").joinpath("data", "coverage.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == COVERAGE_COLUMNS
        rows = list(reader)
    assert len(rows) == len({r["architecture"] for r in rows})  # one row per architecture
    for r in rows:
        assert PATH.match(r["path"]), r
        if r["path"].startswith("refused:") and not r["pending"]:
            assert r["reason"], r  # a refusal says why, in words


def test_adapter_rows_match_the_dispatch() -> None:
    fast = fast_adapter_names()
    for arch, row in coverage().items():
        if row.pending:
            continue  # brought by another branch; the lead reconciles after merging
        if row.path.startswith("adapter:"):
            assert fast.get(arch) == row.path.removeprefix("adapter:"), arch
        else:
            assert arch not in fast, (arch, row.path)
    for arch, name in fast.items():
        if arch in coverage() and not coverage()[arch].pending:
            assert coverage()[arch].path == f"adapter:{name}", arch


def test_no_row_is_pending() -> None:
    # every architecture another branch brought now has its adapter (the consistency test
    # above checks the names against the dispatch)
    assert [a for a, r in coverage().items() if r.pending] == []
    assert coverage()["ChatGLMModel"].path == "adapter:chatglm"
    assert coverage()["DeciLMForCausalLM"].path == "adapter:nemotron_nas"


@pytest.mark.parametrize(("arch", "path"), [
    ("BertModel", "adapter:encoder_only"), ("Qwen2ForRewardModel", "adapter:qwen2"),
    ("JambaForSequenceClassification", "adapter:jamba"), ("MistralModel", "adapter:mistral"),
    ("GPT2ForSequenceClassification", "generic")])
def test_pooling_rows_are_planned(arch: str, path: str) -> None:
    # vLLM runs decoder-based pooling models on causal attention with a KV cache, and encoders
    # with none: neither is refused any more
    assert coverage()[arch].path == path
    assert not any(r.path == "refused:pooling-only" for r in coverage().values())


def test_multimodal_pooling_rows_refuse_with_their_reason() -> None:
    row = coverage()["ColQwen3"]
    assert row.path == "refused:needs-adapter"
    config = edited("meta-llama--Llama-3.1-8B", ("architectures",), ["ColQwen3"])
    with pytest.raises(UnsupportedError) as info:
        describe_model(config, source="edited")
    assert "vLLM allocates its KV cache" in info.value.message


def test_hybrid_without_adapter_is_refused_naming_what_is_missing() -> None:
    row = coverage()["Qwen4ExpForCausalLM"]
    assert row.path == "refused:needs-adapter"
    assert "state" in row.reason


def test_every_row_has_exactly_the_columns() -> None:
    """An unquoted comma in a reason would cut it short (csv.DictReader puts the rest under None)."""
    with resources.files("kvplan").joinpath("data", "coverage.csv").open(encoding="utf-8") as fh:
        widths = {len(row) for row in csv.reader(fh)}
    assert widths == {len(COVERAGE_COLUMNS)}
