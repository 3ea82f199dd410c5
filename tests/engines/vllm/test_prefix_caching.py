"""Prefix caching by default and on request (kvplan.engines.vllm.build.prefix_caching): vLLM turns
it off for attention-free models (MambaForCausalLM, Mamba2ForCausalLM, FalconMambaForCausalLM:
`IsAttentionFree` classes), so their Mamba state is planned in 'none' mode (one block of
max_model_len tokens per request); `--enable-prefix-caching` turns it back on ('align' mode).

The configs are the coverage configs vLLM 0.34.0's own code confirmed
(tests/data/coverage-configs/<ARCH>, PROVENANCE.md there). The same rule is in 0.31–0.34
(ModelConfig.is_prefix_caching_supported, EngineArgs._set_default_chunked_prefill_and_
prefix_caching_args and MambaModelConfig.verify_and_update_config read alike in the four wheels).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.engines.vllm.build import Deployment, build
from kvplan.engines.vllm.build.prefix_caching import default_prefix_caching
from kvplan.engines.vllm.specs import MambaSpec
from kvplan.errors import StartupError
from kvplan.models import describe_model
from kvplan.models.pooling import resolve_runner
from tests.models.helpers import real

BUILT = Path(__file__).resolve().parents[2] / "data" / "coverage-configs"
ATTENTION_FREE = ("MambaForCausalLM", "Mamba2ForCausalLM", "FalconMambaForCausalLM")
RELEASES = ("0.31.0", "0.32.0", "0.33.0", "0.34.0")
FLAGS = ("-tp", "1", "--max-model-len", "32768", "--max-num-batched-tokens", "8192",
         "--kv-cache-memory", "40GiB", "--vllm", "0.34.0", "--gpu", "H100", "--json")


def _describe(arch: str):  # type: ignore[no-untyped-def]
    config = json.loads((BUILT / arch / "config.json").read_text())
    return describe_model(config, source=arch)


def _check(arch: str, *extra: str) -> dict:  # type: ignore[type-arg]
    res = CliRunner().invoke(app, ["check", str(BUILT / arch), *FLAGS, *extra],
                             env={"HF_HUB_OFFLINE": "1"})
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("arch", ATTENTION_FREE)
def test_attention_free_classes_are_marked_by_their_adapter(arch: str) -> None:
    desc = _describe(arch)
    assert desc.attention_free and not desc.is_hybrid
    assert default_prefix_caching(desc, None) is False
    # vLLM: Mamba2ForCausalLM does not implement SupportsPP; MambaForCausalLM (FalconMamba's
    # class too) does
    assert desc.supports_pipeline_parallel is (arch != "Mamba2ForCausalLM")


def test_hybrid_and_attention_models_keep_prefix_caching() -> None:
    # Nemotron-H (IsHybrid) and Qwen3 (decoder): on by default, hence 'align' for the hybrid
    for name in ("nvidia--Nemotron-H-56B-Base-8K", "Qwen--Qwen3-8B"):
        desc = real(name)
        assert not desc.attention_free and default_prefix_caching(desc, None) is True
    built = build(real("nvidia--Nemotron-H-56B-Base-8K"),
                  Deployment(sm=90, max_model_len=8192, available_kv_bytes=10**11))
    assert built.mamba_cache_mode == "align" and built.enable_prefix_caching
    # an encoder-decoder model generates without it (ModelConfig.attn_type "encoder_decoder")
    assert default_prefix_caching(real("openai--whisper-small"), None) is False


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("arch", ATTENTION_FREE)
def test_default_is_none_mode_with_one_max_model_len_block(arch: str, release: str) -> None:
    desc = _describe(arch)
    dep = Deployment(vllm_version=release, sm=90, max_model_len=32768, available_kv_bytes=10**11)
    built = build(desc, dep)
    specs = {p.spec for p in built.layers}
    # MambaModelConfig: prefix caching off → mamba_cache_mode none, mamba_block_size =
    # max_model_len (one block per request)
    assert built.mamba_cache_mode == "none" and not built.enable_prefix_caching
    assert {(type(s), s.block_size, s.mamba_cache_mode) for s in specs} == {
        (MambaSpec, 32768, "none")}
    assert any(w.startswith("prefix caching off: vLLM's default for an attention-free model")
               for w in built.warnings)
    # --enable-prefix-caching: vLLM keeps it (no warning for the generate runner) → 'align',
    # the Mamba block is the attention block size
    on = build(desc, Deployment(**{**dep.__dict__, "enable_prefix_caching": True}))
    assert on.mamba_cache_mode == "align" and on.enable_prefix_caching
    assert {p.spec.block_size for p in on.layers} == {on.block_size} != {32768}
    assert any("--enable-prefix-caching on an attention-free model" in w for w in on.warnings)
    # --no-enable-prefix-caching: the default, said nothing about
    off = build(desc, Deployment(**{**dep.__dict__, "enable_prefix_caching": False}))
    assert off.mamba_cache_mode == "none"
    assert not any("prefix caching" in w for w in off.warnings)


def test_mamba_concurrency_equals_vllm_with_and_without_the_flag() -> None:
    # vLLM 0.34.0's own code (/work/shared/vllm-e2e, compare.py's flags): 32 MambaMixer layers
    # of 58,368 B; 'none' mode: 22,995 blocks of 32,768 tokens, one per request → 22995.0x
    # (the coverage golden); with --enable-prefix-caching ('align', measured with
    # `vllm_e2e.py … --extra=--enable-prefix-caching`): block 64, two blocks per request of
    # 32,768 tokens in flight → 11497.5x
    out = _check("MambaForCausalLM")["vllm_contract"]
    assert (out["num_blocks"], out["max_concurrency"]) == (22995, 22995.0)
    assert [(g["block_size"], g["page_size_bytes"]) for g in out["groups"]] == [(32768, 58368)]
    out = _check("MambaForCausalLM", "--enable-prefix-caching")["vllm_contract"]
    assert (out["num_blocks"], out["max_concurrency"]) == (22995, 11497.5)
    assert [(g["block_size"], g["page_size_bytes"]) for g in out["groups"]] == [(64, 58368)]


def test_mamba2_refuses_pipeline_parallelism() -> None:
    dep = Deployment(sm=90, max_model_len=4096, pipeline_parallel_size=2,
                     available_kv_bytes=10**11)
    with pytest.raises(StartupError, match="Pipeline parallelism is not supported"):
        build(_describe("Mamba2ForCausalLM"), dep)


def test_pooling_runner_keeps_its_own_rule() -> None:
    # --runner pooling on a Mamba model: the pooler's types decide (LAST/ALL: supported), as
    # ModelConfig.is_prefix_caching_supported reads the pooler config first
    desc = _describe("MambaForCausalLM")
    assert default_prefix_caching(desc, resolve_runner(desc, "pooling")) is True


def test_serve_line_flag_and_fit_command_line() -> None:
    from kvplan.pipeline.fit import _shared_flags
    from kvplan.pipeline.request import Request

    for flag, words in ((None, []), (True, ["--enable-prefix-caching"]),
                        (False, ["--no-enable-prefix-caching"])):
        req = Request(model="m", deployment=Deployment(enable_prefix_caching=flag))
        assert [w for w in _shared_flags(req, vllm_serve=True) if "prefix" in w] == words
