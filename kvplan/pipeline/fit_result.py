"""What `kvplan fit --json` prints: the target, the deployments that meet it (cheapest first), the
nearest misses, what was skipped and why; its JSON Schema (docs/fit.schema.json)."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import Field

from kvplan import __version__
from kvplan.frozen import Frozen

SCHEMA_VERSION = 1


class FitTarget(Frozen):
    model: str
    draft: str | None = None
    max_model_len: int
    concurrency: int = Field(description="concurrent requests of max_model_len tokens to serve")
    vllm_version: str | None = Field(description="the vLLM release profile planned (None: "
                                                 "SGLang only)")
    engines: list[str] = Field(default_factory=lambda: ["vllm"],
                               description="the servers searched: vllm, sglang or both")
    sglang_version: str | None = Field(default=None,
                                       description="the SGLang release profile planned")
    gpus: list[str]
    kv_cache_dtypes: list[str]
    kv_cache_dtypes_given: bool = Field(
        default=False, description="--kv-cache-dtype was given: dtypes a GPU serves only "
                                   "dequantised are tried too (marked); else native ones only")
    vendors: list[str] = Field(default_factory=list, description="--vendor filter (empty: all)")
    max_gpus: int
    workload: str | None = Field(
        default=None, description="--workload: concurrency counts requests of this workload "
                                  "that vLLM's scheduler runs at once without preemption")


class FitCandidate(Frozen):
    engine: Literal["vllm", "sglang"] = Field(default="vllm", description="the server")
    gpu: str
    num_gpus: int
    tensor_parallel_size: int
    pipeline_parallel_size: int
    data_parallel_size: int
    kv_cache_dtype: str
    speculative: bool = Field(description="the draft (speculative decoding) is on")
    max_concurrency: float = Field(description="vLLM's maximum concurrency at max_model_len × DP "
                                               "(SGLang: its tokens / max_model_len × DP)")
    requests_per_replica: int = Field(
        description="whole max_model_len requests one replica holds (capped by max_num_seqs / "
                    "SGLang's max_running_requests)")
    kv_cache_size_tokens: int = Field(description="per replica (vLLM's 'GPU KV cache size')")
    available_kv_bytes_per_gpu: int
    headroom_pct: float = Field(description="max_concurrency / target concurrency − 1, in %")
    usd_per_hour: float | None = Field(description="all GPUs; None when the GPU has no price")
    usd_per_gpu_hour: float | None
    price_source: str | None
    total_memory_nominal: bool = Field(description="the GPU's total memory is nominal, not "
                                       "measured: ranked on that estimate")
    kv_cache_dequantised: bool = Field(
        default=False, description="the GPU has no hardware for this KV dtype: vLLM serves it "
                                   "dequantised (e.g. fp8 on Ampere through FlashInfer); memory "
                                   "as planned, attention no faster than bfloat16")
    workload_concurrency: int | None = Field(
        default=None, description="--workload: requests of the workload run at once without "
                                  "preemption × DP (what the search ranks and meets the target "
                                  "with)")
    vllm_serve: str | None = Field(default=None, description="the `vllm serve` line (vLLM)")
    sglang_launch: str | None = Field(
        default=None, description="the `python -m sglang.launch_server` line (SGLang)")
    kvplan_check: str
    merged_kv_cache_dtypes: list[str] = Field(
        default_factory=list, description="other --kv-cache-dtype values searched that planned "
                                          "identically on this shape (e.g. auto resolves to fp8 "
                                          "on this GPU); folded into this row")


class FitMiss(Frozen):
    engine: Literal["vllm", "sglang"] = "vllm"
    gpu: str
    tensor_parallel_size: int
    pipeline_parallel_size: int
    kv_cache_dtype: str
    speculative: bool
    usd_per_gpu_hour: float | None
    closeness: float = Field(description="the share of the target concurrency this shape reaches "
                                         "within --max-gpus (a request that does not fit counts "
                                         "as the share of its KV that does); 1.0 would meet it")
    lacks: str
    weights_limited: bool = Field(default=False, description="the weights leave no KV memory "
                                                             "per GPU on this shape")
    available_kv_bytes_per_gpu: int | None = Field(
        default=None, description="the estimate (≤ 0 when weights_limited); ranks misses that "
                                  "reach 0% of the target: closer to fitting first")
    merged_kv_cache_dtypes: list[str] = Field(
        default_factory=list, description="other --kv-cache-dtype values that missed the same way")


class FitSkip(Frozen):
    engine: Literal["vllm", "sglang"] = "vllm"
    gpu: str
    kv_cache_dtype: str | None = Field(default=None,
                                       description="set when the KV dtype gate refused it")
    support: str | None = Field(default=None, description="the KV dtype's support on this GPU "
                                "and release (budget.kv_dtype_support): 'refused' (no backend), "
                                "'dequantised' (not tried unless --kv-cache-dtype names it)")
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    reason: str


class FitResult(Frozen):
    schema_version: int = SCHEMA_VERSION
    kvplan_version: str = Field(default=__version__, description="the kvplan release that planned")
    target: FitTarget
    candidates: list[FitCandidate]
    num_fitting: int = Field(description="deployments found that meet the target (≥ candidates)")
    misses: list[FitMiss] = Field(default_factory=list,
                                  description="the nearest misses, when nothing meets the target")
    skipped: list[FitSkip] = Field(default_factory=list,
                                   description="combinations not planned, and why (KV dtype "
                                               "gates, TP/PP rules)")
    weights_need_more_gpus: dict[str, int] = Field(
        default_factory=dict, description="GPU → the fewest GPUs (TP×PP) whose share of the "
                                          "weights leaves KV memory, for the GPU types where no "
                                          "shape within --max-gpus did (raise --max-gpus)")
    refusal: str | None = Field(
        default=None, description="vLLM refuses the model itself at this target before any "
                                  "deployment matters (e.g. max_model_len above the derived "
                                  "maximum): said once, nothing searched")
    planned: int = Field(description="replica shapes planned by the engine")
    pruned: int = Field(description="shapes not planned: they cannot beat the ones found")


def json_schema() -> dict:  # type: ignore[type-arg]
    """The JSON Schema of `kvplan fit --json` (committed as docs/fit.schema.json)."""
    return FitResult.model_json_schema()


if __name__ == "__main__":  # python -m kvplan.pipeline.fit_result > docs/fit.schema.json
    import sys

    sys.stdout.write(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
