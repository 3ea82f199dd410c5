"""The committed JSON Schema of `--json` stays in sync with the models (`make schema`)."""

from __future__ import annotations

import json
from pathlib import Path

from kvplan.analysis.plan import SCHEMA_VERSION, json_schema

DOC = Path(__file__).resolve().parent.parent.parent / "docs" / "plan.schema.json"


def test_committed_schema_matches_the_models() -> None:
    assert json.loads(DOC.read_text()) == json_schema(), "run `make schema` and commit the result"


def test_schema_names_the_version_and_the_verdicts() -> None:
    schema = json_schema()
    assert schema["properties"]["schema_version"]["default"] == SCHEMA_VERSION
    verdicts = schema["$defs"]["Verdict"]["enum"]
    assert verdicts == ["FITS", "DOES NOT FIT", "CANNOT GROUP"]


FIT_DOC = DOC.parent / "fit.schema.json"


def test_committed_fit_schema_matches_the_models() -> None:
    from kvplan.pipeline.fit_result import SCHEMA_VERSION as FIT_VERSION
    from kvplan.pipeline.fit_result import json_schema as fit_schema

    schema = fit_schema()
    assert json.loads(FIT_DOC.read_text()) == schema, "run `make schema` and commit the result"
    assert schema["properties"]["schema_version"]["default"] == FIT_VERSION
    wanted = {"gpu", "num_gpus", "tensor_parallel_size", "pipeline_parallel_size",
              "data_parallel_size", "kv_cache_dtype", "max_concurrency", "kv_cache_size_tokens",
              "usd_per_hour", "kvplan_check"}
    assert wanted <= set(schema["$defs"]["FitCandidate"]["required"])
    # the line that starts the server: `vllm serve` for vLLM rows, launch_server for SGLang's
    props = schema["$defs"]["FitCandidate"]["properties"]
    assert {"engine", "vllm_serve", "sglang_launch"} <= set(props)
def test_schema_names_the_kvplan_version() -> None:
    from kvplan import __version__
    assert json_schema()["properties"]["kvplan_version"]["default"] == __version__
