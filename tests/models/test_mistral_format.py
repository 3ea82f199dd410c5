"""Mistral-format checkpoints (params.json + consolidated*.safetensors): kvplan reads them as
vLLM 0.34 does (transformers_utils/config.py get_config → MistralConfigParser.parse →
configs/mistral.py adapt_config_dict), replayed against vLLM's own output kept as goldens
(tests/data/mistral-format/<NAME>/vllm-0.34.0.json, tools/mistral_format_goldens.py; which files
are published and which are made: PROVENANCE.md there). Only kvplan runs here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from kvplan.errors import ConfigError, UnsupportedError
from kvplan.models.mistral import describe_mistral_format
from kvplan.models.resolution.mistral_format import (
    DEFAULT_MAX_POSITIONS,
    adapt_config_dict,
    parse_params,
    safetensors_dtype,
)
from kvplan.sources import hub
from tests.models.test_coverage_confirmed import _kvplan, _refusal

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "mistral-format"
GOLDENS = sorted(DATA.glob("*/vllm-0.34.0.json"))
DEVSTRAL = DATA / "mistralai--Devstral-Small-2507"


def _params(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "params.json").read_text())


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.parent.name for g in GOLDENS])
def test_kvplan_equals_vllm_on_a_mistral_format_checkpoint(golden: Path) -> None:
    want = json.loads(golden.read_text())
    config = ROOT / want["config"]
    assert (config / "params.json").is_file() and (config / "consolidated.safetensors").is_file()
    for run in want["runs"]:
        flags = {**want["flags"], "max_model_len": run["max_model_len"]}
        code, out, stderr = _kvplan(config, flags)
        if run["status"] != "ok":
            assert code in (1, 2), (run["max_model_len"], out.get("verdict"))
            assert (out.get("error_message") if code == 1 else _refusal(stderr)) == run["error"]
            continue
        assert code in (0, 1), stderr
        assert any("Mistral format" in w for w in out["warnings"])
        got = out["vllm_contract"]
        assert got["fits"] == run["fits"]
        assert [{k: g[k] for k in ("spec_type", "block_size", "num_layers", "page_size_bytes",
                                   "layer_names")} for g in got["groups"]] == run["groups"]
        if run["fits"]:
            assert got["num_blocks"] == run["num_blocks"]
            assert got["max_concurrency"] == pytest.approx(run["max_concurrency"], rel=1e-9)
            assert got["max_model_len_after_planning"] == run["max_model_len_after_planning"]


# the adapted fields compared with vLLM's get_config output (model_type: vLLM's to_dict writes
# PreTrainedConfig's class attribute "", the instance keeps "transformer")
_COMPARED = ("architectures", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
             "head_dim", "hidden_size", "max_position_embeddings", "max_seq_len",
             "sliding_window", "layer_types", "quantization_config", "kv_lora_rank",
             "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
             "n_routed_experts", "n_shared_experts", "first_k_dense_replace",
             "num_experts_per_tok", "llama_4_scaling", "dtype")


def _subset(d: dict[str, Any], ref: dict[str, Any]) -> dict[str, Any]:
    return {k: d.get(k) for k in _COMPARED if k in ref}


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.parent.name for g in GOLDENS])
def test_the_adapter_equals_vllms_adapt_config_dict(golden: Path) -> None:
    want = json.loads(golden.read_text())["adapted"]
    assert "error" not in want, want
    folder = golden.parent
    hf = json.loads((folder / "config.json").read_text()) if (folder / "config.json").is_file() \
        else None
    got = parse_params(_params(folder), hf, ["BF16"])
    assert _subset(got, want) == {k: want[k] for k in _COMPARED if k in want}
    if "text_config" in want:
        assert _subset(got["text_config"], want["text_config"]) == \
            {k: want["text_config"][k] for k in _COMPARED if k in want["text_config"]}
    rope = (got.get("text_config") or got).get("rope_parameters") or {}
    want_rope = (want.get("text_config") or want).get("rope_parameters") or {}
    for k in ("rope_type", "factor", "original_max_position_embeddings"):
        if k in rope:
            assert rope[k] == want_rope.get(k), k


def test_the_real_devstral_params_json_as_vllm_reads_it() -> None:
    """No max_position_embeddings, no config.json beside it: vLLM's 128000 default
    (_maybe_retrieve_max_pos_from_hf), the safetensors dtype, MistralForCausalLM."""
    got = parse_params(_params(DEVSTRAL), None, ["BF16", "BF16"])
    assert got["architectures"] == ["MistralForCausalLM"]
    assert (got["num_hidden_layers"], got["num_key_value_heads"], got["head_dim"]) == (40, 8, 128)
    assert got["max_position_embeddings"] == got["max_seq_len"] == DEFAULT_MAX_POSITIONS
    assert got["dtype"] == "bfloat16" and got["model_type"] == "transformer"
    assert "sliding_window" not in got and "layer_types" not in got


def test_config_json_fills_what_params_json_lacks() -> None:
    folder = DATA / "handmade--mistral-sliding-window-with-config-json"
    hf = json.loads((folder / "config.json").read_text())
    got = parse_params(_params(folder), hf, ["BF16"])
    # vLLM: _maybe_retrieve_max_pos_from_hf reads config.json's 32768; the rest setdefault
    assert got["max_position_embeddings"] == hf["max_position_embeddings"] == 32768
    assert got["architectures"] == ["MistralForCausalLM"]  # params.json's, not overridden
    assert got["layer_types"] == ["sliding_attention"] * 32 and got["sliding_window"] == 4096
    assert got["rms_norm_eps"] == 1e-05 and got["bos_token_id"] == hf["bos_token_id"]


def test_safetensors_dtype_is_vllms_common_broadcastable_dtype() -> None:
    assert safetensors_dtype(["BF16"]) == "bfloat16"
    assert safetensors_dtype(["F8_E4M3", "BF16", "F32"]) == "float32"
    assert safetensors_dtype(["I64", "F16"]) == "float16"
    assert safetensors_dtype(["U8"]) == "uint8"
    assert safetensors_dtype([]) is None


def _dsa_params() -> dict[str, Any]:
    return {"dim": 64, "n_layers": 4, "head_dim": 16, "hidden_dim": 128, "n_heads": 4,
            "n_kv_heads": 4, "vocab_size": 128, "q_lora_rank": 16, "kv_lora_rank": 16,
            "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
            "moe": {"num_experts": 4, "num_experts_per_tok": 2, "num_shared_experts": 1},
            "llama_4_scaling": {"original_max_position_embeddings": 64, "beta": 0.1},
            "nope": "rope,nope", "kv_sharing": {"source_layers_str": "0,1,0,1"},
            "dsa": {"topk": 8, "n_heads": 2, "head_dim": 16, "norm_eps": 1e-6,
                    "ssmax_scaling": False, "sharing": "full,shared"}}


def test_mistral_large_4_dsa_is_adapted_then_refused() -> None:
    got = adapt_config_dict(_dsa_params(), {})
    assert got["architectures"] == ["MistralLarge4ForCausalLM"]
    assert got["model_type"] == "mistral_large_4"
    assert got["nope_layer_flags"] == [False, True, False, True]
    assert got["kv_source_layers"] == [0, 1, 0, 1]
    assert got["index_sharing"] == ["full", "shared", "full", "shared"]
    assert (got["index_topk"], got["index_n_heads"]) == (8, 2)
    with pytest.raises(UnsupportedError, match="Mistral Large 4"):
        describe_mistral_format(got, source="ml4")


def test_vllms_asserts_are_config_errors() -> None:
    bad = {**_dsa_params(), "kv_sharing": {"source_layers_str": "0,1,2,4"}}
    with pytest.raises(ConfigError, match="Layer 3 must share KV with an earlier"):
        adapt_config_dict(bad, {})
    with pytest.raises(ConfigError, match="unknown quantization"):
        adapt_config_dict({"n_layers": 2, "quantization": {"qformat_weight": "int4"}}, {})
    with pytest.raises(ConfigError, match="MistralLarge3 expect llama4 scaling"):
        adapt_config_dict({"n_layers": 2, "moe": {"num_shared_experts": 1}}, {})


def test_a_mistral_format_voxtral_has_the_field_its_hf_config_lacks() -> None:
    """vLLM's Voxtral class reads audio_config.downsample_factor: the Mistral-format reading
    (_remap_mistral_audio_args) sets it, which is why vLLM builds Voxtral from params.json."""
    params = {"dim": 64, "n_layers": 2, "head_dim": 16, "hidden_dim": 128, "n_heads": 4,
              "n_kv_heads": 2, "vocab_size": 128, "max_position_embeddings": 4096,
              "multimodal": {"whisper_model_args": {
                  "encoder_args": {"dim": 32, "n_layers": 2, "hidden_dim": 64, "n_heads": 2,
                                   "head_dim": 16, "vocab_size": 51866,
                                   "audio_encoding_args": {"num_mel_bins": 128,
                                                           "window_size": 400,
                                                           "sampling_rate": 16000,
                                                           "hop_length": 160}},
                  "downsample_args": {"downsample_factor": 4}}}}
    causal = json.loads(json.dumps(params))
    got = adapt_config_dict(params, {})  # mutates params, as vLLM's does
    assert got["architectures"] == ["VoxtralForConditionalGeneration"]
    assert got["audio_config"]["downsample_factor"] == 4
    assert got["text_config"]["architectures"] == ["MistralForCausalLM"]
    desc = describe_mistral_format(got, source="voxtral")
    assert desc.layers[0].name == "language_model.model.layers.0.self_attn.attn"
    causal["multimodal"]["whisper_model_args"]["encoder_args"]["causal"] = True
    got = adapt_config_dict(causal, {})
    assert got["architectures"] == ["VoxtralRealtimeGeneration"]
    assert got["audio_config"]["block_pool_size"] == 4
    assert got["text_config"]["projection_size"] == 4 * 32
    with pytest.raises(UnsupportedError, match="Voxtral Realtime"):
        describe_mistral_format(got, source="voxtral-realtime")


# --- which format is read (sources/hub.py, vLLM's get_config with config_format) -------------


def test_the_format_follows_the_folders_files(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    shutil.copytree(DATA / "handmade--mistral-sliding-window-with-config-json", folder)
    (folder / "vllm-0.34.0.json").unlink()
    files = hub.load_model_files(str(folder))
    assert files.config_format == "mistral" and files.config["architectures"] == \
        ["MistralForCausalLM"] and files.config["layer_types"][0] == "sliding_attention"
    assert files.hf_config is not None and files.config_path.endswith("params.json")
    # --config-format hf: config.json as transformers reads it
    hf = hub.load_model_files(str(folder), config_format="hf")
    assert hf.config_format == "hf" and "layer_types" not in hf.config
    # no consolidated*.safetensors: vLLM reads config.json (is_mistral_model_repo is false)
    (folder / "consolidated.safetensors").unlink()
    assert hub.load_model_files(str(folder)).config_format == "hf"
    # ... unless --config-format mistral forces params.json
    assert hub.load_model_files(str(folder), config_format="mistral").config_format == "mistral"


def test_no_params_json_with_config_format_mistral_is_vllms_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        (DATA / "handmade--mistral-sliding-window-with-config-json" / "config.json").read_text())
    with pytest.raises(ConfigError, match="Failed to load mistral 'params.json' config"):
        hub.load_model_files(str(tmp_path), config_format="mistral")
    with pytest.raises(Exception, match="unknown config format"):
        hub.load_model_files(str(tmp_path), config_format="gguf")


def test_a_mistral_folder_without_config_json_is_planned(tmp_path: Path) -> None:
    """Devstral's folder has no config.json: before, kvplan failed with 'no config.json'."""
    files = hub.load_model_files(str(DEVSTRAL))
    assert files.config_format == "mistral" and files.hf_config is None
    assert any("Mistral format" in n for n in files.notes)


def test_config_format_in_a_serve_line_reaches_the_request() -> None:
    from kvplan.pipeline.batch import serve_options
    from kvplan.sources.serve_line import parse_serve_command

    cmd = parse_serve_command(f"vllm serve {DEVSTRAL} --config-format hf --max-model-len 8192")
    opts, skipped = serve_options(cmd.options)
    assert opts["config_format"] == "hf" and not skipped


def test_config_format_hf_on_a_folder_without_config_json_says_so() -> None:
    flags = {"tensor_parallel_size": 1, "max_model_len": 32768, "max_num_batched_tokens": 8192,
             "kv_cache_memory": "40GiB", "vllm": "0.34.0", "gpu": "H100"}
    code, _, stderr = _kvplan(DEVSTRAL, flags)
    assert code == 0, stderr
    from typer.testing import CliRunner

    from kvplan.cli import app

    res = CliRunner().invoke(app, ["check", str(DEVSTRAL), "--config-format", "hf", "--json"],
                             env={"HF_HUB_OFFLINE": "1"})
    assert res.exit_code == 2 and "no config.json" in res.stderr


def test_a_params_json_path_stands_for_its_folder() -> None:
    files = hub.load_model_files(str(DEVSTRAL / "params.json"))
    assert files.config_format == "mistral" and files.local_dir == str(DEVSTRAL)
    folder = DATA / "handmade--mistral-sliding-window-with-config-json"
    # vLLM is given the folder: its config.json path reads the folder as vLLM does
    assert hub.load_model_files(str(folder / "config.json")).config_format == "mistral"


def test_a_length_neither_file_names_is_config_jsons_class_default(tmp_path: Path) -> None:
    """vLLM: _maybe_retrieve_max_pos_from_hf reads config.json through transformers, so a
    config.json without max_position_embeddings gives MistralConfig's default (131072, what
    vLLM 0.34.0's get_config printed on this folder); without config.json it is 128000."""
    src = DATA / "handmade--mistral-sliding-window-with-config-json"
    for name in ("params.json", "consolidated.safetensors"):
        shutil.copy(src / name, tmp_path / name)
    cfg = json.loads((src / "config.json").read_text())
    del cfg["max_position_embeddings"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    files = hub.load_model_files(str(tmp_path))
    assert files.config["max_position_embeddings"] == files.config["max_seq_len"] == 131072
    (tmp_path / "config.json").unlink()
    assert hub.load_model_files(str(tmp_path)).config["max_position_embeddings"] == 128000
