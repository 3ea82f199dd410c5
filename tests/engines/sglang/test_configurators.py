"""Unit tests of the SGLang engine's pieces, with numbers worked by hand from real configs
(tests/data/hf-configs): each pool configurator's bytes per token, the Mamba state, the default
mem_fraction_static, resolve_max_num_reqs and SGLang's error texts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.engines.sglang import (
    KvBudget,
    Platform,
    ProfiledMemory,
    SglangDeployment,
    SglangGpu,
    plan_sglang,
)
from kvplan.engines.sglang.dsv4 import DSV4PoolConfigurator, v4_page_bytes
from kvplan.engines.sglang.mamba import mamba_cache_per_req, mamba_ratio, pp_indices, state_shape
from kvplan.engines.sglang.model import sglang_model
from kvplan.engines.sglang.pools import (
    DefaultPoolConfigurator,
    DraftLayers,
    HybridSWAPoolConfigurator,
    Stage,
    SWARequestCapPoolConfigurator,
    mla_kv_cache_dim,
)
from kvplan.engines.sglang.profiles import SGLANG_0_5_23, sglang_profile
from kvplan.engines.sglang.server_args import (
    StartupError,
    prefill_graph_batch_sizes,
    resolve,
    vlm_factor,
)
from kvplan.engines.sglang.sizing import resolve_max_num_reqs
from kvplan.errors import InputError, UnsupportedError
from kvplan.models import describe_model

CONFIGS = Path(__file__).resolve().parents[2] / "data" / "hf-configs"
P = SGLANG_0_5_23
H100 = SglangGpu(total_memory_mib=81559, platform=Platform.SM90)
H200 = SglangGpu(total_memory_mib=143771, platform=Platform.SM90)
B200 = SglangGpu(total_memory_mib=183359, platform=Platform.SM100)
A100_40 = SglangGpu(total_memory_mib=40960, platform=Platform.SM80)
L4 = SglangGpu(total_memory_mib=23034, platform=Platform.SM89)


def model(name: str):  # type: ignore[no-untyped-def]
    folder = CONFIGS / name
    quant = folder / "hf_quant_config.json"
    desc = describe_model(json.loads((folder / "config.json").read_text()), source=name,
                          hf_quant_config=json.loads(quant.read_text()) if quant.exists() else None)
    return sglang_model(desc, P), desc


LLAMA8 = "meta-llama--Llama-3.1-8B"


# ---- memory_hook.handle_gpu_memory_settings -----------------------------------------------------

@pytest.mark.parametrize(("gpu", "tp", "chunk", "max_bs", "expected"), [
    # H100: 512 + 8192·1.5 + 1·128 + 256·2 + 58 prefill buckets·8 = 13904 MiB
    (H100, 1, 8192, 256, round((81559 - 13904) / 81559, 3)),
    # H100 TP4: 512 + 12288 + 512 + 512·2 + 464 = 14800
    (H100, 4, 8192, 512, round((81559 - 14800) / 81559, 3)),
    # B200: 512 + 16384·1.5 + 128 + 512·2 + 66 buckets·8
    (B200, 1, 16384, 512, round((183359 - (512 + 24576 + 128 + 1024 + 66 * 8)) / 183359, 3)),
    # A100 40GB: 4096 chunk, max_bs 32; under 60 GiB no 10 GiB floor
    (A100_40, 1, 4096, 32, round((40960 - (512 + 6144 + 128 + 64 + 50 * 8)) / 40960, 3)),
    # L4: 4096 chunk, max_bs 48
    (L4, 1, 4096, 48, round((23034 - (512 + 6144 + 128 + 96 + 50 * 8)) / 23034, 3)),
])
def test_default_mem_fraction_static(gpu, tp, chunk, max_bs, expected) -> None:
    m, _ = model(LLAMA8)
    args = resolve(m, SglangDeployment(tp_size=tp), gpu, P)
    assert (args.chunked_prefill_size, args.cuda_graph_max_bs_decode) == (chunk, max_bs)
    assert args.mem_fraction_static == expected
    assert args.prefill_cuda_graph == "breakable"


def test_prefill_graph_buckets() -> None:
    assert len(prefill_graph_batch_sizes(8192)) == 58
    assert prefill_graph_batch_sizes(4096)[-1] == 4096
    assert prefill_graph_batch_sizes(100) == [4, 8, 12, 16, 20, 24, 28, 32, 48, 64, 80, 96]


def test_ten_gib_floor_above_60_gib() -> None:
    """chunked 1024 on an H100: the reserve would be 3 GiB; SGLang keeps 10 GiB."""
    m, _ = model(LLAMA8)
    args = resolve(m, SglangDeployment(chunked_prefill_size=1024), H100, P)
    assert 512 + 2048 * 1.5 + 128 + 256 * 2 + 8 * len(prefill_graph_batch_sizes(1024)) < 10240
    assert args.reserved_mem_mib == 10240
    assert args.mem_fraction_static == round((81559 - 10240) / 81559, 3)


def test_vlm_factor_and_its_bounds() -> None:
    m, _ = model("Qwen--Qwen3.5-27B")  # vision hidden 1152, no num_hidden_layers → 24
    assert vlm_factor(P, m) == pytest.approx(0.95 * (1 - 0.1 * (1152 ** 2 / 1024 ** 2 - 1)))
    huge = replace(m, vision_num_hidden_layers=200, vision_hidden_size=4096)
    small = replace(m, vision_num_hidden_layers=1, vision_hidden_size=64)
    assert vlm_factor(P, huge) == pytest.approx(0.95 * 0.8)
    assert vlm_factor(P, small) == pytest.approx(0.95 * 1.05)


def test_explicit_mem_fraction_static_is_kept() -> None:
    m, _ = model(LLAMA8)
    args = resolve(m, SglangDeployment(mem_fraction_static=0.9), H100, P)
    assert args.mem_fraction_static == 0.9 and args.reserved_mem_mib is None


# ---- DefaultPoolConfigurator ----------------------------------------------------------------------

NO_DRAFT = DraftLayers()


def _conf(name: str, dep: SglangDeployment, gpu: SglangGpu = H100,
          draft: DraftLayers = NO_DRAFT):  # type: ignore[no-untyped-def]
    m, _ = model(name)
    args = resolve(m, dep, gpu, P)
    return m, args, DefaultPoolConfigurator(m, args, Stage(0, m.num_hidden_layers), draft, P)


@pytest.mark.parametrize(("kv", "cell"), [
    ("auto", 8 * (128 + 128) * 32 * 2),  # GQA: 8 KV heads × (K + V) × 32 layers × bf16
    ("fp8_e4m3", 8 * 256 * 32),
    ("fp8_e5m2", 8 * 256 * 32),
    ("bf16", 8 * 256 * 32 * 2),
])
def test_default_mha_cell_size(kv: str, cell: int) -> None:
    _, _, conf = _conf(LLAMA8, SglangDeployment(kv_cache_dtype=kv))
    assert conf.cell_size == cell


def test_default_mxfp8_and_nvfp4_scales_on_b200() -> None:
    _, _, mx = _conf(LLAMA8, SglangDeployment(kv_cache_dtype="mxfp8"), B200)
    assert mx.cell_size == 8 * 256 * 32 + 8 * 256 * 32 // 32  # fp8 values + an e8m0 scale per 32
    _, args, fp4 = _conf(LLAMA8, SglangDeployment(kv_cache_dtype="nvfp4"), B200)
    # packed FP4 K+V (½ byte) + one layout of per-16 fp8 block scales (native trtllm_mha)
    assert fp4.cell_size == 8 * 64 * 32 * 2 + 8 * (128 // 16) * 32 * 2
    assert args.attention_backend == "trtllm_mha" and args.page_size == 64


def test_tp_beyond_kv_heads_keeps_one_head() -> None:
    _, _, conf = _conf("Qwen--Qwen2.5-7B", SglangDeployment(tp_size=8))  # 4 KV heads
    assert conf.cell_size == 1 * 256 * 28 * 2


def test_page_rounding_and_not_enough_memory() -> None:
    _, _, conf = _conf(LLAMA8, SglangDeployment(page_size=64))
    assert conf.calculate_pool_sizes(131072 * 1000 + 5, 64).max_total_num_tokens == 960
    with pytest.raises(StartupError) as exc:
        conf.calculate_pool_sizes(131072 * 63, 64)
    assert exc.value.error.message == ("Not enough memory. Please try to increase "
                                       "--mem-fraction-static.")


def test_mla_rows_and_dsa_indexer() -> None:
    m, args, conf = _conf("deepseek-ai--DeepSeek-V3", SglangDeployment(tp_size=8), H200)
    assert conf.cell_size == (512 + 64) * 61 * 2  # latent + rope, not split by TP
    m32, args32, conf32 = _conf("deepseek-ai--DeepSeek-V3.2",
                                SglangDeployment(tp_size=8, kv_cache_dtype="fp8_e4m3"), H200)
    # Hopper fp8 (flashmla_kv): 512 fp8 + 4 scales of 4 B + 64 rope in bf16; index K 128 + 4
    assert mla_kv_cache_dim(m32, args32, P) == 512 + 16 + 128
    assert conf32.cell_size == (656 + 132) * 61
    m_b, args_b, conf_b = _conf("deepseek-ai--DeepSeek-V3.2", SglangDeployment(tp_size=8), B200)
    assert args_b.kv_cache_dtype == "fp8_e4m3"  # DSA on Blackwell defaults to FP8
    assert mla_kv_cache_dim(m_b, args_b, P) == 576  # trtllm reads the raw layout
    assert (args_b.attention_backend, args_b.page_size) == ("dsa", 64)


def test_eagle_draft_layers_scale_the_cell() -> None:
    _, _, conf = _conf(LLAMA8, SglangDeployment(), draft=DraftLayers(eagle_num_layers=1))
    assert conf.cell_size == 131072 + 131072 // 32
    _, _, dsa = _conf("deepseek-ai--DeepSeek-V3.2", SglangDeployment(tp_size=8), H200,
                      DraftLayers(eagle_num_layers=1))
    # the draft's latent rows scale with the target's; its index K cache keeps its one layer
    assert dsa.cell_size == (576 * 2 + 132) * 61 + (576 * 2 * 61) // 61 + 132


# ---- hybrid SWA -----------------------------------------------------------------------------------

def test_hybrid_swa_cell_is_full_plus_ratio_times_swa() -> None:
    m, _ = model("openai--gpt-oss-20b")
    args = resolve(m, SglangDeployment(), H100, P)
    conf = HybridSWAPoolConfigurator(m, args, Stage(0, 24), DraftLayers(), P)
    assert (conf.full_per_token, conf.swa_per_token) == (8 * 128 * 2, 8 * 128 * 2)
    assert conf.cell_size == 2048 * 12 + 0.8 * 2048 * 12
    assert m.sliding_window_size == 127  # GptOssForCausalLM: config.sliding_window − 1
    config = conf.calculate_pool_sizes(44236 * 1000, 1)
    assert config.swa_max_total_num_tokens == int(config.full_max_total_num_tokens * 0.8)
    with pytest.raises(StartupError) as exc:
        conf.calculate_pool_sizes(44236 * 100, 1)
    assert exc.value.error.message.startswith("SWA pool (")


def test_swa_request_cap_sizes_the_swa_pool_from_requests() -> None:
    m, _ = model("openai--gpt-oss-20b")
    args = resolve(m, SglangDeployment(disable_radix_cache=True, max_running_requests=64), H100,
                   P)
    assert SWARequestCapPoolConfigurator.is_applicable(m, args, Stage(0, 24))
    conf = SWARequestCapPoolConfigurator(m, args, Stage(0, 24), DraftLayers(), P)
    # (window 127 + eviction 128 + page + decode page) × 64 + 2 chunks × 8192 + page
    assert conf.swa_cap == (127 + 128 + 1 + 1) * 64 + 2 * 8192 + 1
    config = conf.calculate_pool_sizes(10 * 2**30, 1)
    assert config.swa_max_total_num_tokens == conf.swa_cap
    assert config.full_max_total_num_tokens == (10 * 2**30 - conf.swa_cap * 2048 * 12) // (
        2048 * 12)


# ---- DeepSeek-V4 ----------------------------------------------------------------------------------

def test_dsv4_bytes_per_token_by_hand() -> None:
    m, _ = model("deepseek-ai--DeepSeek-V4-Flash")
    args = resolve(m, SglangDeployment(tp_size=4), H200, P)
    assert (args.page_size, args.kv_cache_dtype, args.max_running_requests) == (256, "fp8_e4m3",
                                                                                 256)
    assert v4_page_bytes(256) == 260 * 576  # 584 B/token padded to 576-byte rows
    conf = DSV4PoolConfigurator(m, args, Stage(0, 43), P)
    swa = 585 * 43 + 8 / 256 * (2 * 2 * 512 * 4 + 2 * 2 * 128 * 4) * 21
    assert conf.bytes_per_swa_token == swa
    c4 = (585 + 132) / 4
    c128 = (v4_page_bytes(2) / 2) / 128
    assert conf.bytes_per_full_token == pytest.approx(0.1 * swa + 21 * c4 + 20 * c128)


# ---- Mamba / linear attention ---------------------------------------------------------------------

def test_gdn_state_shape_qwen3_next_tp4() -> None:
    m, _ = model("Qwen--Qwen3-Next-80B-A3B-Thinking")
    assert m.linear is not None
    shape = state_shape(m.linear, 4)
    # conv over [q, k, v]: (32·128 + 2·16·128) / 4, kernel 4 − 1; temporal 32/4 heads × 128 × 128
    assert shape.conv == ((2048, 3),) and shape.temporal == (8, 128, 128)
    assert mamba_cache_per_req(m.linear, 4) == (2048 * 3 * 2 + 8 * 128 * 128 * 4) * 36


def test_mamba_ratio_follows_radix_and_overlap() -> None:
    m, _ = model("Qwen--Qwen3-Next-80B-A3B-Thinking")
    base = resolve(m, SglangDeployment(tp_size=4), H100, P)
    assert base.mamba_extra_buffer and mamba_ratio(base, P) == 5
    assert mamba_ratio(replace(base, disable_overlap_schedule=True), P) == 4
    assert mamba_ratio(replace(base, disable_radix_cache=True), P) == 1
    assert mamba_ratio(replace(base, mamba_extra_buffer=False), P) == 3


def test_mamba_errors_word_for_word() -> None:
    m, desc = model("Qwen--Qwen3-Next-80B-A3B-Thinking")
    dep = SglangDeployment(tp_size=4)
    r = plan_sglang(desc, dep, gpu=H100, memory=KvBudget(budget_bytes=(10 * 2**20,)))
    assert r.error is not None and r.error.message.startswith(
        "Not enough GPU memory for hybrid (mamba/linear-attention) state cache. Computed "
        "max_mamba_cache_size=")
    assert not r.fits


def test_resolve_max_num_reqs_estimate_and_cap() -> None:
    m, _ = model(LLAMA8)
    args = resolve(m, SglangDeployment(), H100, P)
    assert resolve_max_num_reqs(400_000, args, None, P)[0] == 2048  # floor of the estimate
    assert resolve_max_num_reqs(2_000_000, args, None, P)[0] == 4096 * 0 + min(
        max(int(2_000_000 / 131072 * 512), 2048), 4096)
    assert resolve_max_num_reqs(1000, args, None, P)[0] == 500  # at most half the tokens
    capped = replace(args, max_running_requests=300)
    n, warnings = resolve_max_num_reqs(400, capped, None, P)
    assert n == 200 and warnings == [
        "max_running_requests was reduced from the requested 300 to 200 (per dp worker) due to "
        "the available KV cache capacity."]


def test_pp_layer_split_gives_the_extra_layers_to_the_last_stages() -> None:
    assert [pp_indices(80, r, 3) for r in range(3)] == [(0, 26), (26, 53), (53, 80)]
    assert [pp_indices(48, r, 2) for r in range(2)] == [(0, 24), (24, 48)]


# ---- server-arg errors and what is not modelled ---------------------------------------------------

def test_start_up_errors_come_back_as_results() -> None:
    _, desc = model(LLAMA8)
    mem = ProfiledMemory(pre_model_load_gib=78.6, available_gib=(63.6,))
    r = plan_sglang(desc, SglangDeployment(context_length=200_000), gpu=H100, memory=mem)
    assert r.error is not None and r.error.type == "ValueError"
    assert "User-specified context_length (200000) is greater than the derived" in r.error.message
    r = plan_sglang(desc, SglangDeployment(kv_cache_dtype="nvfp4"), gpu=H100, memory=mem)
    assert r.error is not None and r.error.type == "RuntimeError"
    r = plan_sglang(desc, SglangDeployment(mem_fraction_static=0.15), gpu=H100, memory=mem)
    assert r.error is not None and r.error.message.startswith(
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.15. "
        "Raise --mem-fraction-static above 0.191 ")


def test_unmodelled_models_and_options_are_refused() -> None:
    folder = CONFIGS / "openai--whisper-small"
    whisper = describe_model(json.loads((folder / "config.json").read_text()), source="whisper")
    with pytest.raises(UnsupportedError):
        plan_sglang(whisper, SglangDeployment(), gpu=H100,
                    memory=KvBudget(budget_bytes=(2**30,)))
    _, llama = model(LLAMA8)
    with pytest.raises(UnsupportedError):
        plan_sglang(llama, SglangDeployment(speculative_algorithm="NGRAM"), gpu=H100,
                    memory=KvBudget(budget_bytes=(2**30,)))
    with pytest.raises(InputError):
        sglang_profile("0.4.0")
