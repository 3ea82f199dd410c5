"""Bad input of every kind: exit code 2, one `Error:` line and one `Hint:` line on stderr,
nothing on stdout, never a traceback, and a token is never echoed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.cli import main
from tests.hubcache import make_hub_cache, use_hub_cache

CONFIGS = Path(__file__).resolve().parent / "data" / "hf-configs"
LLAMA = CONFIGS / "meta-llama--Llama-3.1-8B" / "config.json"
QWEN35 = CONFIGS / "Qwen--Qwen3.5-27B" / "config.json"
QNEXT = CONFIGS / "Qwen--Qwen3-Next-80B-A3B-Thinking" / "config.json"
SEED = Path(__file__).resolve().parent / "data" / "golden" / "cases" / "seed_dflash_qwen35_27b.json"
TOKEN = "hf_NotARealTokenButSecret123456789"
BUDGET = ["--kv-cache-memory", "20GiB"]


def _llama(**changes):  # a real config with one field changed on purpose
    cfg = json.loads(LLAMA.read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    return json.dumps(cfg)


def _case(**changes):
    case = json.loads(SEED.read_text())
    case.update(changes)
    return json.dumps(case)


# (id, files to write {name: text|bytes}, argv with {tmp} placeholders, expected stderr fragment)
CASES = [
    # --- model config files -----------------------------------------------------------------
    ("config-empty", {"c/config.json": ""}, ["check", "{tmp}/c", *BUDGET], "empty"),
    ("config-truncated", {"c/config.json": '{"architectures": ["LlamaForCausalLM"], "hid'},
     ["check", "{tmp}/c", *BUDGET], "not valid JSON"),
    ("config-list", {"c/config.json": "[1, 2, 3]"}, ["check", "{tmp}/c", *BUDGET], "list"),
    ("config-string-layers", {"c/config.json": _llama(num_hidden_layers="thirty-two")},
     ["check", "{tmp}/c", *BUDGET], "num_hidden_layers"),
    ("config-missing-heads", {"c/config.json": _llama(num_attention_heads=None,
                                                      num_key_value_heads=None)},
     ["check", "{tmp}/c", *BUDGET], "num_attention_heads"),
    ("config-negative-layers", {"c/config.json": _llama(num_hidden_layers=-4)},
     ["check", "{tmp}/c", *BUDGET], "num_hidden_layers"),
    ("config-zero-kv-heads", {"c/config.json": _llama(num_key_value_heads=0)},
     ["check", "{tmp}/c", *BUDGET], "num_key_value_heads"),
    ("config-heads-do-not-divide", {"c/config.json": _llama(num_attention_heads=32,
                                                            num_key_value_heads=5)},
     ["check", "{tmp}/c", *BUDGET], "divi"),
    # a model type neither vLLM nor transformers knows is vLLM's own start-up refusal (exit 1,
    # its words): tests/cli/test_remote_code_families.py test_unknown_model_type_is_vllms_...
    ("config-non-utf8", {"c/config.json": b'{"model_type": "\xff\xfe"}'},
     ["check", "{tmp}/c", *BUDGET], "UTF-8"),
    ("config-50MB", {"c/config.json": '{"pad": "' + "x" * (50 * 2**20) + '"}'},
     ["check", "{tmp}/c", *BUDGET], "MiB"),
    ("folder-without-config", {"c/README.md": "hi"}, ["check", "{tmp}/c", *BUDGET], "config.json"),
    ("no-such-path", {}, ["check", "{tmp}/nope/config.json", *BUDGET], "no such file"),
    ("draft-not-a-draft-and-bad-json", {"d/config.json": "{"},
     ["check", str(LLAMA), "--draft", "{tmp}/d", "--num-speculative-tokens", "3", *BUDGET],
     "not valid JSON"),
    # --- flags ----------------------------------------------------------------------------------
    ("unknown-kv-dtype", {}, ["check", str(LLAMA), "--kv-cache-dtype", "fp6", *BUDGET],
     "unknown KV cache dtype"),
    ("unsized-kv-dtype", {}, ["check", str(LLAMA), "--kv-cache-dtype", "turboquant_k8v4", *BUDGET],
     "does not model"),
    ("unknown-gpu", {}, ["check", str(LLAMA), "--gpu", "H900"], "H900"),
    ("nvfp4-on-v100", {}, ["check", str(LLAMA), "--gpu", "V100", "--kv-cache-dtype", "nvfp4",
                           *BUDGET], "V100"),
    ("fp8-on-t4", {}, ["check", str(LLAMA), "--gpu", "T4", "--kv-cache-dtype", "fp8", *BUDGET],
     "T4"),
    ("tp-does-not-divide-kv-heads", {}, ["check", str(QNEXT), "-tp", "3", *BUDGET],
     "tensor parallel size 3"),
    # Qwen3.5-27B: 4 KV heads split over 32 ranks, but 48 GDN value heads do not divide by 32
    ("tp-does-not-divide-gdn", {}, ["check", str(QWEN35), "-tp", "32", *BUDGET],
     "not divisible by tensor parallel size 32"),
    ("max-model-len-zero", {}, ["check", str(LLAMA), "--max-model-len", "0", *BUDGET], "≥ 1"),
    ("max-model-len-negative", {}, ["check", str(LLAMA), "--max-model-len", "-2", *BUDGET],
     "max-model-len"),
    ("max-model-len-1e12", {}, ["check", str(LLAMA), "--max-model-len", "1000000000000", *BUDGET],
     "out of range"),
    ("max-model-len-text", {}, ["check", str(LLAMA), "--max-model-len", "long", *BUDGET],
     "argument --max-model-len: invalid human_readable_int_or_auto value: 'long'"),
    ("block-size-no-backend-takes", {}, ["check", str(LLAMA), "--block-size", "7", *BUDGET],
     "--block-size 7"),
    ("tp-zero", {}, ["check", str(LLAMA), "-tp", "0", *BUDGET], "tensor-parallel-size"),
    ("negative-spec-tokens", {}, ["check", str(LLAMA), "--num-speculative-tokens", "-1", *BUDGET],
     "num-speculative-tokens"),
    ("bad-format", {}, ["check", str(LLAMA), "--format", "xml", *BUDGET], "--format"),
    # a zero or negative size is planned (vLLM: "No available memory for the cache blocks"),
    # a negative size with a unit vLLM does not know is not
    ("negative-memory", {}, ["check", str(LLAMA), "--kv-cache-memory", "-5XB"], "size"),
    ("unreadable-memory", {}, ["check", str(LLAMA), "--kv-cache-memory", "lots"], "size"),
    ("utilization-above-one", {}, ["check", str(LLAMA), "--gpu", "H100",
                                   "--gpu-memory-utilization", "1.5"], "(0, 1]"),
    ("unknown-release", {}, ["check", str(LLAMA), "--vllm", "9.9", *BUDGET], "vLLM release"),
    ("bad-speculative-config", {}, ["check", str(LLAMA), "--speculative-config", "{bad", *BUDGET],
     "--speculative-config"),
    ("mtp-without-mtp", {}, ["check", str(LLAMA), "--speculative-method", "mtp",
                             "--num-speculative-tokens", "1", *BUDGET], "MTP"),
    ("no-budget", {}, ["check", str(LLAMA)], "budget"),
    ("unknown-option", {}, ["check", str(LLAMA), "--bogus-flag", "3"], "--bogus-flag"),
    ("unknown-command", {}, ["chekc", str(LLAMA)], "chekc"),
    ("non-integer-flag", {}, ["check", str(LLAMA), "--max-num-batched-tokens", "many"],
     "--max-num-batched-tokens"),
    # --- layer-spec files -------------------------------------------------------------------------
    ("specs-empty", {"s.json": ""}, ["check", "--specs", "{tmp}/s.json"], "not valid JSON"),
    ("specs-list", {"s.json": "[]"}, ["check", "--specs", "{tmp}/s.json"], "JSON object"),
    ("specs-unknown-key", {"s.json": _case(max_model_lenn=5)}, ["check", "--specs", "{tmp}/s.json"],
     "unknown key"),
    ("specs-missing-mml", {"s.json": _case(max_model_len=None)}, ["check", "--specs",
                                                                   "{tmp}/s.json"], "max_model_len"),
    ("specs-negative-block", {"s.json": _case(block_size=-16)}, ["check", "--specs",
                                                                  "{tmp}/s.json"], "block_size"),
    ("specs-zero-heads", {"s.json": json.dumps({"max_model_len": 4096, "max_num_batched_tokens": 8,
                                                 "available_kv_memory_bytes": 2**30, "layers": [
                                                     {"name": "a", "num_kv_heads": 0,
                                                      "head_size": 128}]})},
     ["check", "--specs", "{tmp}/s.json"], "num_kv_heads"),
    ("specs-window-beyond-context", {"s.json": json.dumps(
        {"max_model_len": 4096, "max_num_batched_tokens": 8, "available_kv_memory_bytes": 2**30,
         "layers": [{"name": "a", "kind": "sliding_window", "sliding_window": 8192,
                     "num_kv_heads": 8, "head_size": 128}]})},
     ["check", "--specs", "{tmp}/s.json"], "larger than max_model_len"),
    ("specs-unknown-template", {"s.json": json.dumps(
        {"max_model_len": 4096, "max_num_batched_tokens": 8, "available_kv_memory_bytes": 2**30,
         "layers": [{"template": "ghost", "name": "x"}]})},
     ["check", "--specs", "{tmp}/s.json"], "unknown template"),
    ("specs-unknown-dtype", {"s.json": json.dumps(
        {"max_model_len": 4096, "max_num_batched_tokens": 8, "available_kv_memory_bytes": 2**30,
         "layers": [{"name": "a", "num_kv_heads": 8, "head_size": 128, "dtype": "fp4x"}]})},
     ["check", "--specs", "{tmp}/s.json"], "fp4x"),
    ("specs-non-utf8", {"s.json": b"\xff\xfe\x00"}, ["check", "--specs", "{tmp}/s.json"], "UTF-8"),
    ("specs-directory", {"dir/x": "1"}, ["check", "--specs", "{tmp}/dir"], "directory"),
    # --- deployment files -------------------------------------------------------------------------
    ("ci-bad-toml", {"d.toml": "[[deployment"}, ["ci", "{tmp}/d.toml"], "TOML"),
    ("ci-no-entries", {"d.toml": "x = 1"}, ["ci", "{tmp}/d.toml"], "deployment"),
    ("ci-unknown-key", {"d.toml": f'[[deployment]]\nmodel = "{LLAMA}"\nmax-modl-len = 3\n'},
     ["ci", "{tmp}/d.toml"], "unknown key"),
    ("ci-missing-file", {}, ["ci", "{tmp}/none.toml"], "does not exist"),
    # (an entry that fails while planning is reported with the others: tests/cli/test_ci.py)
    # --- vllm serve lines and vLLM logs --------------------------------------------------------
    ("serve-no-model", {}, ["check", "--serve", "vllm serve --max-model-len 4096", *BUDGET], "model"),
    ("serve-not-vllm", {}, ["check", "--serve", "python train.py", *BUDGET], "vllm"),
    ("serve-unbalanced-quotes", {}, ["check", "--serve", "vllm serve m --speculative-config '{",
                                     *BUDGET], "quot"),
    ("serve-missing-value", {}, ["check", "--serve", f"vllm serve {LLAMA} --max-model-len", *BUDGET],
     "--max-model-len"),
    ("serve-bad-int", {}, ["check", "--serve", f"vllm serve {LLAMA} -tp two", *BUDGET], "two"),
    ("serve-bad-json", {}, ["check", "--serve", f"vllm serve {LLAMA} --speculative-config '{{x'",
                            *BUDGET], "speculative"),
    ("log-not-a-log", {"s.log": "hello\nworld\n"}, ["check", "--from-log", "{tmp}/s.log"], "vLLM"),
    ("log-binary", {"s.log": b"\x00\xff\xfe" * 100}, ["check", "--from-log", "{tmp}/s.log"], "log"),
    ("log-missing", {}, ["check", "--from-log", "{tmp}/none.log"], "does not exist"),
    # --- the hub ----------------------------------------------------------------------------------
    ("hub-offline-miss", {}, ["check", "Qwen/Qwen3.5-27B", *BUDGET], "not in the Hugging Face cache"),
    ("hub-offline-miss-revision", {}, ["check", "Qwen/Qwen3.5-27B@abc123", *BUDGET], "config.json"),
    ("hub-bad-repo-id", {}, ["check", "a/b/c/d", *BUDGET], "a/b/c/d"),
    ("hub-draft-miss", {}, ["check", "org/cached", "--draft", "org/missing-draft",
                            "--num-speculative-tokens", "3", *BUDGET], "org/missing-draft"),
]


@pytest.mark.parametrize(("files", "argv", "needle"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input(tmp_path, monkeypatch, capsys, files, argv, needle) -> None:
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    cache = tmp_path / "hub-cache"
    make_hub_cache(cache, "org/cached", {"config.json": LLAMA})
    use_hub_cache(monkeypatch, cache, offline=True)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("COLUMNS", "120")
    with pytest.raises(SystemExit) as exit_info:
        main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2, err
    assert out == ""
    lines = err.strip("\n").split("\n")
    assert len(lines) == 2, err
    assert lines[0].startswith("Error: ") and lines[1].startswith("Hint: ")
    assert needle in lines[0], lines[0]
    assert TOKEN not in err and "Traceback" not in err


def test_the_table_is_big_enough() -> None:
    assert len(CASES) >= 40
