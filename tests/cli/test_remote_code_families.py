"""`kvplan check --json` on configs whose class transformers lacks (ChatGLM, Nemotron-NAS) and on an
architecture vLLM retired: through the CLI, with the KV bytes worked out by hand."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app
from tests.cli.test_startup import _heavy

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "hf-configs"


def _json(args: list[str]) -> tuple[int, dict]:
    res = CliRunner().invoke(app, ["check", *args, "--json"])
    return res.exit_code, json.loads(res.stdout)


def _refused(args: list[str], cause: str = "config") -> str:
    """vLLM's start-up refusal, planned: exit 1, a plan refused at start-up with vLLM's
    exception type; its text returned."""
    code, plan = _json(args)
    assert code == 1 and plan["refused_at_startup"] and not plan["fits"]
    assert (plan["error_type"], plan["failure_cause"]) == ("ValueError", cause)
    return str(plan["error_message"])


def test_chatglm3_6b_plans_from_its_own_config() -> None:
    # 28 layers × 2 KV heads × 128 × (K + V) × 2 B (float16) = 1,024 B/token/layer;
    # vLLM 0.34 full-attention block 64 → 64 KiB pages; max_model_len = seq_length 8192 →
    # 8192 / 64 = 128 blocks per request
    code, out = _json([str(CONFIGS / "THUDM--chatglm3-6b"), "--kv-cache-memory", "4GiB"])
    assert code == 0
    (group,) = out["groups"]
    assert group["num_layers"] == 28
    assert group["page_size_bytes"] == 64 * 1024
    assert out["max_model_len"] == 8192
    assert out["total_bytes_needed"] == [28 * 64 * 1024 * 128]


def test_nemotron_super_49b_skips_no_op_attention() -> None:
    # 49 of 80 blocks hold KV: 8 KV heads × 128 × 2 × 2 B = 4,096 B/token/layer; block 64 →
    # 256 KiB pages; 131072 / 64 = 2048 blocks per request
    code, out = _json([str(CONFIGS / "nvidia--Llama-3_3-Nemotron-Super-49B-v1"),
                       "--kv-cache-memory", "40GiB", "--max-model-len", "131072",
                       "--trust-remote-code"])
    assert code == 0
    (group,) = out["groups"]
    assert group["num_layers"] == 49
    assert out["total_bytes_needed"] == [49 * 64 * 4096 * 2048]


def test_remote_code_needs_the_flag_as_in_vllm() -> None:
    """vLLM 0.34.0 refuses a config whose class is the checkpoint's code (auto_map, a model type
    neither vLLM nor its transformers knows) at start-up; its text is transformers' (the e2e
    golden tests/data/vllm-e2e-0.34.0/FreedomIntelligence--openPangu-Embedded-7B.json)."""
    folder = CONFIGS / "FreedomIntelligence--openPangu-Embedded-7B"
    text = _refused([str(folder), "--kv-cache-memory", "40GiB"], cause="trust_remote_code")
    assert text.startswith(
        f"The repository {folder} contains custom code which must be executed to correctly load "
        "the model.")
    assert "trust_remote_code=True" in text
    code, out = _json([str(folder), "--kv-cache-memory", "40GiB", "--trust-remote-code"])
    assert code == 0 and any(w.startswith("--trust-remote-code: vLLM would run the checkpoint")
                             for w in out["warnings"] + out["notes"])


def test_serve_lines_and_ci_files_take_the_flags(tmp_path: Path) -> None:
    folder = CONFIGS / "FreedomIntelligence--openPangu-Embedded-7B"
    line = f"vllm serve {folder} --kv-cache-memory-bytes 40G --max-model-len 32768"
    assert CliRunner().invoke(app, ["check", "--serve", line]).exit_code == 1
    assert CliRunner().invoke(app, ["check", "--serve", line + " --trust-remote-code"]
                              ).exit_code == 0
    ci = tmp_path / "d.toml"
    ci.write_text(f'[[deployment]]\nname = "p"\nmodel = "{folder}"\ntrust-remote-code = true\n'
                  'kv-cache-memory = "40GiB"\nmax-model-len = 32768\n')
    assert CliRunner().invoke(app, ["ci", str(ci)]).exit_code == 0


def test_upstream_remote_code_message(tmp_path: Path) -> None:
    # auto_map pointing into another repository ("ORG/NAME--module.Class"): transformers passes
    # that repository as the message head (AutoConfig.from_pretrained → resolve_trust_remote_code)
    cfg = json.loads((CONFIGS / "LGAI-EXAONE--EXAONE-3.0-7.8B-Instruct" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    text = _refused([str(tmp_path), "--kv-cache-memory", "40GiB", "--max-model-len", "4096"],
                    cause="trust_remote_code")
    assert text.startswith("LGAI-EXAONE/EXAONE-3.0-7.8B-Instruct You can inspect the repository "
                           f"content at https://hf.co/{tmp_path}.")


def test_deprecated_quantization_needs_the_flag(tmp_path: Path) -> None:
    """vLLM 0.34.0 ModelConfig._verify_quantization: fbgemm_fp8 is deprecated; vLLM raises
    ValueError(msg, method), whose text is the tuple's repr (checked with vLLM 0.34.0's serve
    parser on this config, hand-made from Llama-3.1-8B + a fbgemm_fp8 quantization_config)."""
    cfg = json.loads((CONFIGS / "meta-llama--Llama-3.1-8B" / "config.json").read_text())
    cfg["quantization_config"] = {"activation_scale_ub": 1200.0, "quant_method": "fbgemm_fp8",
                                  "modules_to_not_convert": ["lm_head"]}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    args = ["check", str(tmp_path), "--kv-cache-memory", "40GiB", "--max-model-len", "32768"]
    assert _refused(args[1:]) == (
        "('The quantization method %s is deprecated and will be removed in future versions of "
        "vLLM. To bypass, set `--allow-deprecated-quantization`.', 'fbgemm_fp8')")
    ok = CliRunner().invoke(app, args + ["--allow-deprecated-quantization", "--json"])
    assert ok.exit_code == 0
    assert ("vLLM warns: The quantization method fbgemm_fp8 is deprecated and will be removed in "
            "future versions of vLLM.") in json.loads(ok.stdout)["warnings"]
    # 0.31-0.33 deprecate fp_quant too (DEPRECATED_QUANTIZATION_METHODS)
    cfg["quantization_config"] = {"quant_method": "fp_quant"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert CliRunner().invoke(app, args + ["--vllm", "0.33.0"]).exit_code == 1


def test_unknown_model_type_is_vllms_config_error(tmp_path: Path) -> None:
    # neither vLLM nor the transformers it pins has a class, and no remote code: vLLM's parser
    # refuses (AutoConfig.from_pretrained's ValueError)
    (tmp_path / "config.json").write_text(json.dumps(
        {"architectures": ["LlamaForCausalLM"], "model_type": "no_such_type",
         "num_hidden_layers": 2, "layer_types": ["full_attention"] * 2}))
    assert _refused([str(tmp_path), "--kv-cache-memory", "1GiB"]).startswith(
        "The checkpoint you are trying to load has model type `no_such_type` but Transformers "
        "does not recognize this architecture.")


def test_retired_architecture_is_one_error_line(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    # its config class is remote code (auto_map): with --trust-remote-code vLLM reads it, then
    # its registry refuses the architecture
    config.write_text(json.dumps({"architectures": ["Phi3SmallForCausalLM"],
                                  "auto_map": {"AutoConfig": "configuration_phi3_small.C"},
                                  "model_type": "phi3small", "num_hidden_layers": 32}))
    res = CliRunner().invoke(app, ["check", str(config), "--trust-remote-code"])
    assert res.exit_code == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert lines[0].startswith("Error: ") and "until v0.9.2" in lines[0]
    assert lines[1].startswith("Hint: ")
    assert "Traceback" not in res.stderr


def test_fast_adapters_stay_off_transformers() -> None:
    # these families never need transformers: kvplan reads their config classes by hand
    for name in ("THUDM--chatglm3-6b", "nvidia--Llama-3_3-Nemotron-Super-49B-v1",
                 "deepseek-ai--deepseek-vl2"):
        assert _heavy(["check", str(CONFIGS / name), "--gpu", "H100", "--json",
                       "--trust-remote-code"]) == [], name
