"""kvplan's plan equals vLLM's own start-up, config.json → vLLM's model classes → KV-cache plan.

tests/data/vllm-e2e-<version>/*.json hold what vLLM itself did (its serve parser, its model class
built on the meta device, each layer's get_kv_cache_spec, its planner), made by
tools/vllm_e2e_golden.py with shared/vllm-e2e/vllm_e2e.py and tools/vllm_e2e_ext.py (the README
there says how); no value in them was computed by kvplan. Each file carries the kvplan flags of
its run; this test plans the same config with them through the API and asserts equality: the
verdict, blocks, groups (spec kind, layer names, block size, page size, layer count), max
concurrency, and vLLM's refusal text where vLLM refuses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import kvplan
from kvplan.errors import KvplanError, StartupError

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
GOLDENS = sorted(p for d in sorted(DATA.glob("vllm-e2e-*")) for p in sorted(d.glob("*.json")))
GROUP_KEYS = ("spec_type", "block_size", "page_size_bytes", "num_layers", "layer_names")


def _cases() -> list[tuple[Path, str]]:
    out = []
    for path in GOLDENS:
        for config_path in json.loads(path.read_text())["config_paths"]:
            out.append((path, config_path))
    return out


def _id(case: tuple[Path, str]) -> str:
    path, config_path = case
    where = "" if config_path.startswith("tests/") else " (examples)"
    return f"{path.parent.name.removeprefix('vllm-e2e-')}/{path.stem}{where}"


def vllm_message(text: str) -> str:
    """The message of vLLM's exception, without pydantic's ValidationError wrapping."""
    text = re.sub(r"^\d+ validation errors? for \w+\s+Value error, ", "", text.strip())
    return re.sub(r" \[type=value_error.*$", "", text, flags=re.S).strip()


# shared/vllm-e2e/vllm_e2e.py keeps the first 4000 characters of vLLM's exception text (vLLM's
# "are not supported for now" refusal lists its whole registry, ~17000)
HARNESS_MESSAGE_CHARS = 4000


def same_message(got: str, golden_message: str) -> bool:
    """kvplan's text is vLLM's: equal, or starting with the harness's cut-off copy of it."""
    want = vllm_message(golden_message)
    if len(golden_message) >= HARNESS_MESSAGE_CHARS:
        return got.startswith(want)
    return got == want


def kvplan_message(message: str, config_path: str) -> str:
    """kvplan's refusal as vLLM's message (`vLLM would raise ValueError: <message>`, or vLLM's
    text alone as a refused plan carries it)."""
    text = message.split("vLLM would raise ", 1)[-1]
    text = re.sub(r"^[A-Za-z]+Error: ", "", text)
    return text.replace(str(ROOT / config_path), "<model>").strip()


def _flags(golden: dict) -> dict:
    flags = dict(golden["kvplan_flags"])
    spec = flags.get("speculative_config")
    if spec and "model" in spec:
        flags["speculative_config"] = {**spec, "model": str(ROOT / spec["model"])}
    return flags


def test_goldens_exist() -> None:
    assert len(GOLDENS) >= 50, "tests/data/vllm-e2e-*/ lost its golden files"


# held-out sets: real configs kvplan had not seen, each with vLLM's base start-up as a golden
# (tests/data/vllm-e2e-0.34.0/README.md lists the ones vLLM's harness could not run)
HELDOUT_NOT_GOLDEN = {"meta-llama--Llama-3.2-90B-Vision-Instruct", "mistralai--Voxtral-Mini-3B-2507"}


@pytest.mark.parametrize("folder", ["heldout-configs", "heldout-configs-2"])
def test_every_heldout_config_has_a_base_golden(folder: str) -> None:
    configs = {p.parent.name for p in (DATA / folder).glob("*/config.json")}
    covered = {Path(c).name for path in GOLDENS if "@" not in path.stem
               for c in json.loads(path.read_text())["config_paths"]
               if c.startswith(f"tests/data/{folder}/")}
    assert configs, folder
    assert configs - covered == HELDOUT_NOT_GOLDEN & configs


def _refusal(model: str, golden: dict, config_path: str) -> str | None:
    """kvplan's refusal of a deployment vLLM refuses: vLLM's message as kvplan words it (a
    start-up refusal is a plan that does not fit, refused_at_startup, with vLLM's error text; or
    a StartupError), None for another refusal kvplan makes (a KvplanError it cannot plan past)."""
    try:
        plan = kvplan.check(model, **_flags(golden))
    except StartupError as err:
        return kvplan_message(err.message, config_path)
    except KvplanError:
        return None
    assert plan.refused_at_startup, "kvplan plans a deployment vLLM refuses"
    assert not plan.fits
    return kvplan_message(plan.error_message or "", config_path)


@pytest.mark.parametrize("case", _cases(), ids=_id)
def test_kvplan_plans_what_vllm_starts(case: tuple[Path, str]) -> None:
    path, config_path = case
    golden = json.loads(path.read_text())
    model = str(ROOT / config_path)
    outcome = golden["outcome"]
    raw = golden.get("vllm_error", {}).get("message", "")
    want = vllm_message(raw)
    if outcome == "VLLM_STARTUP_ERROR":
        # vLLM's own backend / block-size / grouping code refused to start (e.g. no attention
        # backend for this GPU): kvplan refuses with vLLM's words, or plans a deployment that
        # does not start
        try:
            plan = kvplan.check(model, **_flags(golden))
        except StartupError as err:
            assert same_message(kvplan_message(err.message, config_path), raw)
            return
        if plan.refused_at_startup:
            assert same_message(kvplan_message(plan.error_message or "", config_path), raw)
        assert not plan.fits, golden["vllm_error"]
        return
    if outcome != "PLANNED":
        got = _refusal(model, golden, config_path)
        if outcome == "VLLM_REJECTS_FLAGS" or golden["vllm_error"]["stage"] == "config":
            # vLLM refused at start-up, before building the model: the same error, exit 1
            assert same_message(got, raw), (got, want)
        return
    plan = kvplan.check(model, **_flags(golden))
    got = plan.vllm_contract
    assert bool(got["fits"]) == bool(golden["fits"])
    want_groups = [{k: g[k] for k in GROUP_KEYS} for g in golden["groups"]]
    got_groups = [{k: g.get(k) for k in GROUP_KEYS} for g in got["groups"]]
    assert got_groups == want_groups
    if golden["fits"]:
        assert got["num_blocks"] == golden["num_blocks"]
        # a model without KV cache (encoder-only pooling: no groups) has no capacity in vLLM's
        # start-up, and the harness then writes no max_concurrency / kv_cache_size_tokens
        want_concurrency = golden.get("max_concurrency")
        if want_concurrency is None:
            assert got["max_concurrency"] is None
        else:
            assert got["max_concurrency"] == pytest.approx(want_concurrency, rel=1e-9)
        assert got["kv_cache_size_tokens"] == golden.get("kv_cache_size_tokens")
        assert got["max_model_len_after_planning"] == golden["max_model_len_after_planning"]
    else:
        assert (got["error"] or {}).get("message") == (golden["plan_error"] or {}).get("message")
