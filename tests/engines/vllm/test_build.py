"""ModelDescription → per-rank specs, checked against vLLM's golden outputs.

The descriptions here are hand-written from the Qwen3.5-27B config (numbers in the comments);
tests/config/ checks that the adapters derive the same facts from the real config files.
"""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.build import Deployment, build, get_batch_defaults, pp_partition
from kvplan.engines.vllm.planner import plan
from kvplan.engines.vllm.serialize import contract_dict
from kvplan.errors import InputError
from kvplan.models.description import GdnDims, LayerDescription, LayerKind, ModelDescription
from tests.golden import BUNDLED, contract, load


def qwen35_27b() -> ModelDescription:
    # 64 layers, full_attention_interval 4 → 16 full (4 KV heads × 256) + 48 GDN
    # (linear_num_key_heads 16, linear_num_value_heads 48, 128 × 128, conv 4), mamba_ssm_dtype fp32
    layers = []
    for i in range(64):
        if i % 4 == 3:
            layers.append(LayerDescription(index=i, name=f"model.layers.{i}.self_attn.attn",
                                           kind=LayerKind.FULL_ATTENTION, num_kv_heads=4,
                                           head_size=256))
        else:
            layers.append(LayerDescription(
                index=i, name=f"model.layers.{i}.linear_attn", kind=LayerKind.GDN,
                gdn=GdnDims(num_k_heads=16, num_v_heads=48, head_k_dim=128, head_v_dim=128,
                            conv_kernel=4)))
    return ModelDescription(source="Qwen/Qwen3.5-27B", model_type="qwen3_5",
                            architectures=("Qwen3_5ForConditionalGeneration",), family="qwen3_5",
                            layers=tuple(layers), mamba_ssm_dtype="float32",
                            max_position_embeddings=262144)


def dflash_draft() -> ModelDescription:
    # 5 sliding-window (2048) layers, 8 KV heads × 128
    return ModelDescription(
        source="z-lab/Qwen3.8-27B-DFlash2", model_type="qwen3", family="dflash",
        draft_method="dflash",
        layers=tuple(LayerDescription(index=i, name=f"drafter.layers.{i}.self_attn.attn",
                                      kind=LayerKind.SLIDING_WINDOW, num_kv_heads=8, head_size=128,
                                      sliding_window=2048) for i in range(5)))


CASES = [("0.33.0", "seed_dflash_sw_block_equals_primary", None, 2912),
         ("0.34.0", "seed_dflash_v034_defaults", None, 2944),
         ("0.33.0", "seed_dflash_qwen35_27b", 16, 2912)]


@pytest.mark.parametrize(("version", "case", "draft_block", "block"), CASES)
@pytest.mark.parametrize("fix", [False, True])
def test_seed_scenario_specs_are_the_golden_ones(version, case, draft_block, block, fix) -> None:
    dep = Deployment(vllm_version=version, with_fix=fix, kv_cache_dtype="nvfp4",
                     draft_kv_cache_dtype="bfloat16", max_model_len=262144,
                     max_num_batched_tokens=16384, num_speculative_tokens=7, sm=80,
                     available_kv_bytes=32 * 2**30, draft_block_size=draft_block)
    built = build(qwen35_27b(), dep, dflash_draft())
    assert built.block_size == block
    got = contract(contract_dict(plan(built.planner_input)))
    suffix = ".patched" if fix else ""
    assert got == contract(load(BUNDLED / "expected" / f"{case}.{version}{suffix}.json"))


def test_sm90_adds_flashinfer_gdn_checkpoints() -> None:
    # FlashInfer GDN prefill on sm90: A = lcm(16, 64) = 64 → 64·cdiv(3,350,528, 64·1152) = 2944,
    # and every GDN layer holds 2 + 7 + 1 state blocks in align mode
    dep = Deployment(vllm_version="0.33.0", kv_cache_dtype="nvfp4", max_model_len=262144,
                     max_num_batched_tokens=16384, num_speculative_tokens=7, sm=90,
                     available_kv_bytes=32 * 2**30, speculative_method="mtp")
    with pytest.raises(Exception, match="MTP"):
        build(qwen35_27b(), dep)  # the hand-written description carries no MTP layers
    dep = Deployment(vllm_version="0.33.0", kv_cache_dtype="nvfp4", max_model_len=262144,
                     max_num_batched_tokens=16384, sm=90, available_kv_bytes=32 * 2**30)
    built = build(qwen35_27b(), dep)
    mamba = next(p.spec for p in built.layers if p.kind == "gdn")
    assert built.block_size == 64 * -(-3_207_168 // (64 * 1152))  # no spec: conv (3, 10240)
    assert mamba.num_prefill_checkpoint_blocks == 1


def test_flashinfer_gdn_checkpoints_by_gpu_family_and_cuda_runtime() -> None:
    # qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend: FlashInfer's GDN prefill (and so one
    # prefill-checkpoint block per GDN layer) on SM 9.0, and on the SM10.x / SM12.x families with
    # head_k_dim 128 and a CUDA 13 runtime; SM11.x gets CuteDSL only when asked (Triton here).
    # The stock 0.34 wheels are CUDA 13 builds (the 0.34 e2e golden Qwen3.5-27B@b200: 3 blocks
    # per GDN group and request, 49 with the full-attention group's 40)
    def ckpt(sm: int, **changes: object) -> int:
        dep = Deployment(vllm_version="0.34.0", max_model_len=32768, max_num_batched_tokens=8192,
                         sm=sm, available_kv_bytes=40 * 2**30, **changes)  # type: ignore[arg-type]
        built = build(qwen35_27b(), dep)
        return next(p.spec for p in built.layers if p.kind == "gdn").num_prefill_checkpoint_blocks

    assert Deployment().cuda_runtime_major == 13
    assert [ckpt(sm) for sm in (90, 100, 103, 110, 120, 89)] == [1, 1, 1, 0, 1, 0]
    assert ckpt(100, cuda_runtime_major=12) == 0 and ckpt(90, cuda_runtime_major=12) == 1


def test_defaults_and_partitions() -> None:
    assert get_batch_defaults(85_045_477_376, "NVIDIA H100 SXM 80GB", sm=90)[0] == 8192
    assert get_batch_defaults(85_899_345_920, "NVIDIA A100 SXM 80GB", sm=80)[0] == 2048
    assert get_batch_defaults(192 * 2**30, "NVIDIA B200", sm=100)[0] == 16384
    # vLLM get_pp_indices: 61 layers over 4 stages → 15,15,16,15 (remainder before the last)
    assert pp_partition(61, 4, None) == [(0, 15), (15, 30), (30, 46), (46, 61)]
    assert pp_partition(10, 2, "3,7") == [(0, 3), (3, 10)]
    with pytest.raises(InputError):
        pp_partition(10, 2, "3,6")


def test_kv_heads_must_split_over_tp() -> None:
    dep = Deployment(kv_cache_dtype="auto", max_model_len=4096, max_num_batched_tokens=2048,
                     tensor_parallel_size=3, available_kv_bytes=2**30)
    with pytest.raises(InputError, match="cannot be split"):
        build(qwen35_27b(), dep)
