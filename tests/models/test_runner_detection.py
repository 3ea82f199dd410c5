"""`--runner auto` as vLLM resolves it (ModelConfig._get_default_runner_type /
_get_default_convert_type, transformers_utils/config.py get_pooling_config): a model folder with
a sentence-transformers `modules.json` naming a Pooling module runs the pooling runner, with the
pooling types of that module's config.json; otherwise the registry class decides, and vLLM
registers MistralModel / LlamaModel / Qwen2Model / Gemma2Model / DeepseekV3BidirectionalModel with
generation classes (LlamaForCausalLM, ...), so they generate. Explicit flags are authoritative.

The model is the MistralModel coverage config vLLM 0.34.0's own code confirmed
(tests/data/coverage-configs/MistralModel); the sentence-transformers files are hand-made here
(they hit one branch each), laid out as sentence-transformers writes them (intfloat/
e5-mistral-7b-instruct's layout: Transformer, 1_Pooling, 2_Normalize). Expected numbers are vLLM
0.34.0's (the e2e harness, /work/shared/vllm-e2e, compare.py's flags) on the same folders.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.models.pooling import parse_pooling_type, st_pooling_types
from tests.hubcache import make_hub_cache, use_hub_cache

CONFIG = Path(__file__).resolve().parents[1] / "data" / "coverage-configs" / "MistralModel" / \
    "config.json"
FLAGS = ("-tp", "1", "--max-num-batched-tokens", "8192", "--kv-cache-memory", "40GiB",
         "--vllm", "0.34.0", "--gpu", "H100", "--json")
MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    {"idx": 2, "name": "2", "path": "2_Normalize",
     "type": "sentence_transformers.models.Normalize"},
]


def _pooling_config(mode: str) -> dict[str, object]:
    keys = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
            "weightedmean_tokens", "lasttoken")
    return {"word_embedding_dimension": 4096,
            **{f"pooling_mode_{k}": k == mode for k in keys}, "include_prompt": True}


def _folder(tmp_path: Path, mode: str | None) -> Path:
    """The MistralModel config in a folder, with sentence-transformers files unless mode is
    None."""
    folder = tmp_path / "model"
    folder.mkdir(parents=True)
    shutil.copy(CONFIG, folder / "config.json")
    if mode is not None:
        (folder / "modules.json").write_text(json.dumps(MODULES))
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(_pooling_config(mode)))
    return folder


def _check(model: str | Path, *extra: str, mml: int = 32768) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    res = CliRunner().invoke(app, ["check", str(model), "--max-model-len", str(mml), *FLAGS,
                                   *extra])
    out = json.loads(res.stdout) if res.stdout.strip() else {}
    return res.exit_code, out, res.stderr


def _said(out: dict, start: str) -> list[str]:  # type: ignore[type-arg]
    return [w for w in out["warnings"] if w.startswith(start)]


def test_folder_without_modules_json_generates(tmp_path: Path) -> None:
    code, out, _ = _check(_folder(tmp_path, None))
    assert code == 0
    # vLLM: generate runner, async scheduling on (2 batches in flight): 5120 blocks, 15.95x
    got = out["vllm_contract"]
    assert (got["num_blocks"], got["max_concurrency"]) == (5120, pytest.approx(15.950155763239875))
    assert _said(out, "--runner auto → generate: vLLM registers MistralModel with a "
                      "text-generation class and the model folder has no")
    assert not _said(out, "pooling runner")


def test_sentence_transformers_folder_runs_the_pooling_runner(tmp_path: Path) -> None:
    code, out, _ = _check(_folder(tmp_path, "lasttoken"))
    assert code == 0
    # vLLM: pooling runner (--convert embed, LAST/ALL), async scheduling off: one batch in flight,
    # the sliding window needs fewer blocks per request → 26.53x on the same 5120 blocks
    got = out["vllm_contract"]
    assert (got["num_blocks"], got["max_concurrency"]) == (5120, pytest.approx(26.528497409326423))
    assert _said(out, "--runner auto → pooling: the model folder has a sentence-transformers "
                      "pooling module (modules.json; LAST pooling)")
    assert _said(out, "pooling runner (--convert embed, LAST/ALL pooling): async scheduling off, "
                      "chunked prefill on")


def test_mean_pooling_turns_chunked_prefill_off(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "mean_tokens")
    # vLLM: MEAN pooling → no chunked prefill → SchedulerConfig refuses 8192 < 32768
    code, out, _ = _check(folder)
    assert code == 1 and out["error_type"] == "ValueError"
    assert out["error_message"].startswith(
        "max_num_batched_tokens (8192) is smaller than max_model_len (32768). This effectively "
        "limits the maximum sequence length")
    # and plans at 8192: 5120 blocks, 39.69x
    code, out, _ = _check(folder, mml=8192)
    got = out["vllm_contract"]
    assert code == 0 and (got["num_blocks"], got["max_concurrency"]) == (
        5120, pytest.approx(39.689922480620154))
    assert _said(out, "pooling runner (--convert embed, MEAN/ALL pooling): async scheduling off, "
                      "chunked prefill off")


def test_explicit_runner_flags_are_authoritative(tmp_path: Path) -> None:
    code, out, _ = _check(_folder(tmp_path / "a", "lasttoken"), "--runner", "generate")
    assert code == 0 and out["vllm_contract"]["max_concurrency"] == pytest.approx(
        15.950155763239875)
    assert not _said(out, "--runner auto") and not _said(out, "pooling runner")
    code, out, _ = _check(_folder(tmp_path / "b", None), "--runner", "pooling")
    assert code == 0 and out["vllm_contract"]["max_concurrency"] == pytest.approx(
        26.528497409326423)
    assert not _said(out, "--runner auto")


def test_config_json_alone_says_which_runner_it_assumed(tmp_path: Path) -> None:
    # a JSON file not named config.json is a config, not a model folder: nothing beside it read
    lone = tmp_path / "mistral-embedding.json"
    shutil.copy(CONFIG, lone)
    (tmp_path / "modules.json").write_text(json.dumps(MODULES))  # not the model's folder
    code, out, _ = _check(lone)
    assert code == 0 and _said(out, "--runner auto → generate assumed: vLLM registers "
                                    "MistralModel with a text-generation class")
    # a file named config.json is read in its folder, as vLLM reads the folder
    code, out, _ = _check(_folder(tmp_path / "c", "lasttoken") / "config.json")
    assert code == 0 and _said(out, "--runner auto → pooling")


def test_hub_cache_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    use_hub_cache(monkeypatch, tmp_path / "hub", offline=True)
    st = {"config.json": CONFIG, "modules.json": json.dumps(MODULES).encode(),
          "1_Pooling/config.json": json.dumps(_pooling_config("lasttoken")).encode()}
    make_hub_cache(tmp_path / "hub", "org/embed", st)
    make_hub_cache(tmp_path / "hub", "org/absent", {"config.json": CONFIG},
                   no_exist=["modules.json"])
    make_hub_cache(tmp_path / "hub", "org/unknown", {"config.json": CONFIG})
    code, out, _ = _check("org/embed")
    assert code == 0 and _said(out, "--runner auto → pooling")
    code, out, _ = _check("org/absent")  # the cache knows the Hub has none
    assert code == 0 and _said(out, "--runner auto → generate: vLLM registers MistralModel")
    code, out, _ = _check("org/unknown")  # kvplan never downloads it
    assert code == 0 and _said(out, "--runner auto → generate assumed")


def test_modules_json_without_a_pooling_module_does_not_pool(tmp_path: Path) -> None:
    folder = _folder(tmp_path, None)
    (folder / "modules.json").write_text(json.dumps(MODULES[:1]))  # vLLM: get_pooling_config None
    code, out, _ = _check(folder)
    assert code == 0 and _said(out, "--runner auto → generate: vLLM registers MistralModel")
    (folder / "modules.json").write_text("{not json")
    code, _, err = _check(folder)
    assert code == 2 and err.startswith("Error: cannot read ") and "Traceback" not in err


def test_bidirectional_config_under_the_generate_runner_has_no_kv_cache(tmp_path: Path) -> None:
    # is_causal false: LlamaForCausalLM's layers are EncoderOnlyAttention under the generate
    # runner as well; vLLM 0.34.0 starts with no KV cache groups (num_blocks 1)
    folder = _folder(tmp_path, None)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "is_causal": False}))
    code, out, _ = _check(folder, mml=8192)
    got = out["vllm_contract"]
    assert code == 0 and got["groups"] == [] and got["num_blocks"] == 1
    assert _said(out, "no KV cache: encoder-only attention")


@pytest.mark.parametrize(("name", "kind"), [
    ("pooling_mode_mean_tokens", "MEAN"), ("pooling_mode_cls_token", "CLS"),
    ("pooling_mode_lasttoken", "LAST"), ("lasttoken", "LAST"), ("mean", "MEAN"),
    ("include_prompt", "INCLUDE"), ("pooling_mode_max_tokens", "MAX")])
def test_parse_pooling_type(name: str, kind: str) -> None:
    assert parse_pooling_type(name) == kind


def test_pooling_config_keys() -> None:
    # the last true key of a kind wins; a string pooling_mode is read as a name; other keys skip
    st = st_pooling_types({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": True,
                           "include_prompt": True, "word_embedding_dimension": 8})
    assert (st.seq_pooling_type, st.tok_pooling_type) == ("MEAN", None)
    st = st_pooling_types({"pooling_mode": "lasttoken"})
    assert st.seq_pooling_type == "LAST"
    assert st_pooling_types({}).seq_pooling_type is None
