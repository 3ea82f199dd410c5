"""Pooling models (kvplan.models.pooling): decoder-based ones keep their generation counterpart's
KV cache with vLLM's pooling-runner defaults; encoder-only ones have no KV cache at all.

The decoder configs are real fixtures with `architectures` swapped to the pooling architecture
(vLLM picks the model class by that name only): intfloat/e5-mistral-7b-instruct is
Mistral-7B-v0.1's geometry under MistralModel, Alibaba-NLP/gte-Qwen2-7B-instruct Qwen2-7B's under
Qwen2Model (see PROVENANCE.md: their own config.json files were not found).
"""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.build import Deployment, build
from kvplan.engines.vllm.planner import plan
from kvplan.errors import InputError, StartupError
from kvplan.models import describe_model
from kvplan.models.description import LayerKind
from kvplan.models.pooling import resolve_runner
from tests.models.helpers import edited, real

DEP = Deployment(block_size=16, sm=90, max_num_batched_tokens=8192, available_kv_bytes=10**11)


def _describe(name: str, arch: str, *more: object) -> object:
    return describe_model(edited(name, ("architectures",), [arch], *more), source=arch)


def test_e5_mistral_plans_its_sliding_window_with_one_batch_in_flight() -> None:
    desc = _describe("mistralai--Mistral-7B-v0.1", "MistralModel")
    assert desc.family == "mistral" and desc.pooling_defaults == ("LAST", "ALL")
    # vLLM registers MistralModel with LlamaForCausalLM (a generation class): `--runner auto`
    # generates unless the folder has a sentence-transformers modules.json (config only here)
    pooled = build(desc, Deployment(**{**DEP.__dict__, "runner": "pooling"}))
    generated = build(desc, DEP)
    assert (pooled.runner, generated.runner) == ("pooling", "generate")
    # vLLM: VllmConfig — async scheduling off by default for pooling models: 1 batch in flight
    assert pooled.planner_input.async_scheduling is False
    assert generated.planner_input.async_scheduling is True
    # SlidingWindowSpec: cdiv(min(4096 - 1 + in_flight, 32768), 16) + 1 per layer group
    # pooling:  cdiv(4095 + 8192, 16) + 1 = cdiv(12287, 16) + 1 = 768 + 1 = 769
    # generate: cdiv(4095 + 2 × 8192, 16) + 1 = cdiv(20479, 16) + 1 = 1280 + 1 = 1281
    assert plan(pooled.planner_input).total_blocks_per_request == 769
    assert plan(generated.planner_input).total_blocks_per_request == 1281


def test_gte_qwen2_plans_full_attention_and_needs_the_kv_of_a_whole_request() -> None:
    desc = _describe("Qwen--Qwen2.5-7B", "Qwen2Model")
    result = plan(build(desc, Deployment(**{**DEP.__dict__, "max_model_len": 32768}))
                  .planner_input)
    # 28 layers × 16 tokens × 2 (K, V) × 4 KV heads × 128 × 2 B = 28 × 32,768 = 917,504 B/block;
    # cdiv(32768, 16) = 2048 blocks → 2048 × 917,504 = 1,879,048,192 B
    assert result.pool_bytes_per_block == (917_504,)
    assert result.total_bytes_needed == (1_879_048_192,)
    assert result.fits


@pytest.mark.parametrize(("arch", "family", "tok"), [
    ("Qwen2ForRewardModel", "qwen2", "ALL"), ("Qwen2ForProcessRewardModel", "qwen2", "STEP"),
    ("LlamaModel", "llama", "ALL")])
def test_reward_and_embedding_archs_reach_their_counterpart(arch: str, family: str,
                                                            tok: str) -> None:
    base = "meta-llama--Llama-3.1-8B" if family == "llama" else "Qwen--Qwen2.5-7B"
    desc = _describe(base, arch)
    assert desc.family == family and desc.pooling_defaults == ("LAST", tok)
    assert {layer.kind for layer in desc.layers} == {LayerKind.FULL_ATTENTION}
    # LlamaModel's registry class is LlamaForCausalLM: generate unless asked (or a
    # sentence-transformers folder), and the pooling runner converts it (--convert embed)
    runner = resolve_runner(desc, "pooling" if arch == "LlamaModel" else "auto")
    assert runner is not None and runner.convert == ("embed" if arch == "LlamaModel" else "none")
    assert (resolve_runner(desc) is None) is (arch == "LlamaModel")
    # vLLM: is_chunked_prefill_supported — STEP token pooling (process reward) turns it off
    assert runner.supports_chunked_prefill is (tok != "STEP")


def test_chunked_prefill_off_batches_a_whole_prompt() -> None:
    desc = _describe("Qwen--Qwen2.5-7B", "Qwen2ForProcessRewardModel")
    dep = Deployment(sm=90, max_model_len=32768, gpu_total_memory_bytes=80 * 2**30,
                     gpu_name="H100")
    # vLLM: max(max_model_len, the GPU default 8192) = 32768 without chunked prefill
    assert build(desc, dep).max_num_batched_tokens == 32768


_SHORT_BATCH = ("max_num_batched_tokens (8192) is smaller than max_model_len (32768). This "
                "effectively limits the maximum sequence length to max_num_batched_tokens and "
                "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or "
                "decrease max_model_len.")


@pytest.mark.parametrize(("arch", "chunked", "refused"), [
    ("Qwen2ForProcessRewardModel", None, True),  # STEP pooling: no chunked prefill
    ("Qwen2ForProcessRewardModel", True, False),  # --enable-chunked-prefill given
    ("TransformersEmbeddingModel", None, True),  # Transformers backend: CLS pooling
    ("Qwen2ForRewardModel", None, False),  # LAST pooling: chunked prefill on
    ("Qwen2ForCausalLM", False, True),  # --no-enable-chunked-prefill on a generative model
    ("Qwen2ForCausalLM", None, False)])
def test_a_given_batch_below_max_model_len_is_refused_without_chunked_prefill(
        arch: str, chunked: bool | None, refused: bool) -> None:
    desc = _describe("Qwen--Qwen2.5-7B", arch)
    dep = Deployment(**{**DEP.__dict__, "max_model_len": 32768,
                        "enable_chunked_prefill": chunked})
    # vLLM: SchedulerConfig.verify_max_model_len (a whole prompt per step needs the batch)
    if not refused:
        assert build(desc, dep).max_num_batched_tokens == 8192
        return
    with pytest.raises(StartupError) as e:
        build(desc, dep)
    assert e.value.error_type == "ValueError" and e.value.vllm_message == _SHORT_BATCH
    # at the batch's length it builds
    assert build(desc, Deployment(**{**dep.__dict__, "max_model_len": 8192})
                 ).max_num_batched_tokens == 8192


def test_transformers_backend_pooling_classes_pool_cls_and_keep_their_kv_cache() -> None:
    for arch in ("TransformersEmbeddingModel", "TransformersMoEForSequenceClassification"):
        desc = _describe("Qwen--Qwen2.5-7B", arch)
        assert desc.pooling_defaults == ("CLS", "ALL")
        assert {layer.kind for layer in desc.layers} == {LayerKind.FULL_ATTENTION}
        runner = resolve_runner(desc)
        # vLLM: ModelConfig.attn_type — CLS pooling is encoder_only, so no chunked prefill
        assert runner is not None and runner.attn_type == "encoder_only"
        assert not runner.supports_chunked_prefill


def test_is_causal_false_runs_encoder_only_with_no_kv_cache() -> None:
    desc = _describe("Qwen--Qwen2.5-7B", "Qwen2Model", ("is_causal",), False)
    assert {layer.kind for layer in desc.layers} == {LayerKind.ENCODER_ONLY}
    # no chunked prefill: a length within the given batch (131072 would be refused)
    built = build(desc, Deployment(**{**DEP.__dict__, "max_model_len": 8192}))
    assert built.layers == ()  # vLLM: EncoderOnlyAttention.get_kv_cache_spec returns None
    assert any("no KV cache: encoder-only attention" in w for w in built.warnings)


@pytest.mark.parametrize(("is_causal", "kinds"), [
    (None, {LayerKind.MLA}), (True, {LayerKind.MLA}), (False, {LayerKind.ENCODER_ONLY})])
def test_deepseek_v3_bidirectional_is_bidirectional_only_when_the_config_says_so(
        is_causal: bool | None, kinds: set[LayerKind]) -> None:
    # vLLM: no config hook sets is_causal for it; DeepseekV2MLAAttention reads
    # getattr(config, "is_causal", True), so without the field the MLA layers keep a KV cache
    more = () if is_causal is None else (("is_causal",), is_causal)
    desc = _describe("deepseek-ai--DeepSeek-V3", "DeepseekV3BidirectionalModel", *more)
    assert {layer.kind for layer in desc.layers if layer.kind.is_attention} == kinds


def test_qwen3_for_causal_lm_as_embedding_model_with_runner_pooling() -> None:
    desc = real("Qwen--Qwen3-8B")  # Qwen3-Embedding-8B is this geometry under Qwen3ForCausalLM
    assert resolve_runner(desc) is None  # a generation architecture: generate by default
    for runner, convert in (("pooling", "auto"), ("auto", "embed")):
        r = resolve_runner(desc, runner, convert)
        assert r is not None and r.convert == "embed" and r.attn_type == "decoder"
    built = build(desc, Deployment(**{**DEP.__dict__, "runner": "pooling"}))
    result = plan(built.planner_input)
    # 36 layers × 16 × 2 × 8 KV heads × 128 × 2 B = 36 × 65,536 = 2,359,296 B per block;
    # cdiv(40960, 16) = 2560 blocks → 6,039,797,760 B
    assert result.total_bytes_needed == (6_039_797_760,)
    assert built.runner == "pooling" and built.planner_input.async_scheduling is False


def test_encoder_only_real_config_needs_no_kv_cache_even_with_no_memory() -> None:
    desc = real("BAAI--bge-reranker-v2-m3")
    assert desc.family == "encoder_only" and len(desc.layers) == 24
    result = plan(build(desc, Deployment(available_kv_bytes=0)).planner_input)
    # vLLM: no KV cache groups → no "No available memory" error, num_blocks 1
    assert result.fits and result.groups == () and result.num_blocks == 1
    with pytest.raises(InputError, match="only with --runner pooling"):
        resolve_runner(desc, "generate")


def test_bad_runner_and_convert_are_input_errors() -> None:
    desc = real("Qwen--Qwen3-8B")
    with pytest.raises(InputError, match="--runner"):
        resolve_runner(desc, "embed")
    with pytest.raises(InputError, match="--convert"):
        resolve_runner(desc, "pooling", "reward")
