"""The `Plan`: engine numbers + verdict + margin, as a typed, JSON-stable result for reports."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Literal

from pydantic import Field

from kvplan import __version__
from kvplan.analysis.explain import Explanation
from kvplan.analysis.log_agreement import LogDisagreement
from kvplan.analysis.serving import ServingCheck
from kvplan.analysis.sglang_log_check import SglangLogCheck
from kvplan.analysis.workload import WorkloadResult
from kvplan.budget.kv_memory import KvBudget
from kvplan.engines.sglang.result import SglangResult
from kvplan.engines.vllm.planner import EngineResult
from kvplan.engines.vllm.serialize import contract_dict
from kvplan.engines.vllm.specs import AttentionSpec, MambaSpec, UniformTypeKVCacheSpecs, spec_kind
from kvplan.frozen import Frozen
from kvplan.units import GiB, format_gib

SCHEMA_VERSION = 1


class Verdict(StrEnum):
    FITS = "FITS"
    DOES_NOT_FIT = "DOES NOT FIT"
    CANNOT_GROUP = "CANNOT GROUP"  # vLLM fails while grouping the layers


class FailureCause(StrEnum):
    """Why a plan does not fit, for CI to gate on (None in a plan that fits)."""

    WEIGHTS = "weights"  # estimated budget: the weights leave no memory for the KV cache
    NO_KV_MEMORY = "no_kv_memory"  # the given or logged KV memory is zero or less
    KV_CACHE = "kv_cache"  # memory is left for the KV cache, but less than the request needs
    GROUPING = "grouping"  # vLLM fails while grouping the layers
    OTHER = "other"  # another vLLM error (the error_type / error_message say which)
    # vLLM refuses before it sizes the KV cache (refused_at_startup; kvplan.errors.STARTUP_CAUSES)
    MAX_MODEL_LEN = "max_model_len"  # past the config's derived length, without the env var
    TRUST_REMOTE_CODE = "trust_remote_code"  # the config needs custom code: --trust-remote-code
    CONFIG = "config"  # another configuration vLLM rejects (error_type / error_message say which)


class WeightsLimit(Frozen):
    """The weights alone exceed what a GPU can give them: no context length fits (estimate)."""

    weight_bytes_per_gpu: int = Field(description="weights on the fullest rank at this TP/PP")
    usable_bytes_per_gpu: int = Field(
        description="what the weights may take: requested memory (total × gpu_memory_utilization)"
                    " less vLLM's other start-up memory (non-torch, activation peak, CUDA "
                    "graphs, extensible-cache headroom)")
    gpu_total_memory_bytes: int | None = None
    exceeds_gpu_memory: bool = Field(
        default=False, description="the weights are larger than the whole GPU: vLLM runs out "
                                   "of memory while loading them, before it sizes the KV cache")
    tensor_parallel_size: int
    pipeline_parallel_size: int
    min_num_gpus: int | None = Field(
        default=None, description="fewest GPUs of this type (TP×PP, powers of two) whose share "
                                  "of the weights leaves KV memory, by the same estimate; None: "
                                  "none up to the search limit")
    min_tensor_parallel_size: int | None = None
    min_pipeline_parallel_size: int | None = None
    bigger_gpus: list[str] = Field(default_factory=list,
                                   description="catalogue GPUs on which this TP×PP leaves KV "
                                               "memory (estimate), smallest first, at most 3")
    suggestions: list[str] = Field(default_factory=list,
                                   description="what helps, most direct first")

    @property
    def summary(self) -> str:
        return (f"the weights alone need {self.weight_bytes_per_gpu / GiB:.2f} GiB per GPU at TP "
                f"{self.tensor_parallel_size} × PP {self.pipeline_parallel_size} > "
                f"{self.usable_bytes_per_gpu / GiB:.2f} GiB usable: no max_model_len fits")


class GroupRow(Frozen):
    """One KV cache group, as the demand table shows it."""

    group_id: int
    kind: str
    spec_type: str
    num_layers: int
    layers: str = Field(description="compact layer-name range, e.g. model.layers.{3..63/4}")
    is_draft: bool = Field(description="every layer of the group belongs to the draft")
    draft_layers: int = Field(default=0, description="how many of its layers belong to the draft")
    block_size_tokens: int
    page_size_bytes: int = Field(description="bytes of one block of one layer, after padding")
    natural_page_size_bytes: int = Field(description="the page before padding")
    padding_pct: float = Field(description="share of the page that is padding")
    blocks_per_request: int
    bytes_per_request: int = Field(description="blocks_per_request × pool_bytes_per_block")
    share_of_total_pct: float


class Plan(Frozen):
    schema_version: int = SCHEMA_VERSION
    kvplan_version: str = Field(default=__version__, description="the kvplan release that planned")
    engine: Literal["vllm", "sglang"] = Field(
        default="vllm", description="the server whose start-up was planned: vLLM's KV cache "
                                    "planner, or SGLang's KV pool sizing (see `sglang`)")
    model: str
    draft: str | None = None
    vllm_version: str | None = Field(description="the vLLM release profile (None: an SGLang plan)")
    with_fix: bool
    gpu: str | None = None
    budget_mode: str
    available_kv_bytes: list[int]
    max_model_len: int
    max_model_len_after_planning: int
    max_num_batched_tokens: int
    max_in_flight_tokens: int
    max_num_seqs: int | None = Field(
        default=None, description="vLLM's cap on running requests (--max-num-seqs, else its "
                                  "default for the GPU); None where no scheduler was resolved")
    verdict: Verdict
    fits: bool
    groups: list[GroupRow]
    num_groups: int
    pool_bytes_per_block: list[int]
    total_blocks_per_request: int
    total_bytes_needed: list[int]
    total_gib_needed: list[str]
    total_bytes_needed_after_planning: list[int] = Field(
        default_factory=list, description="KV bytes one request needs per worker at "
        "max_model_len_after_planning: with --max-model-len auto, at the length vLLM fitted "
        "(what its capacity check then compares); else equal to total_bytes_needed")
    check_memory_bytes: list[int]
    check_gib: list[str]
    margin_bytes: int | None = Field(
        description="available after the null block − needed, on the tightest worker, at "
        "max_model_len_after_planning (the length vLLM runs with; auto-fit: the fitted one)")
    estimated_max_model_len: list[int]
    num_blocks: int | None
    max_concurrency: float | None
    kv_cache_size_tokens: int | None
    capacity_log_line: str | None
    capacity_is_hypothetical: bool
    error_type: str | None
    error_message: str | None
    failure_cause: FailureCause | None = Field(
        default=None, description="why it does not fit (None when it fits): 'weights' = the "
                                  "weights leave no KV memory per GPU (see weights_limit)")
    weights_limit: WeightsLimit | None = Field(
        default=None, description="set when failure_cause is 'weights'")
    refused_at_startup: bool = Field(
        default=False, description="vLLM refuses the deployment before it sizes the KV cache "
        "(failure_cause max_model_len, trust_remote_code or config; error_type and "
        "error_message are vLLM's): no groups, and the KV numbers are empty or 0")
    failure_hint: str | None = Field(
        default=None, description="what to change so that vLLM accepts it (a refusal)")
    grouping_path: str | None
    padding_layer_warnings: list[str]
    warnings: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="facts from a vLLM log or serve line")
    provenance: dict[str, str] = Field(
        default_factory=dict, description="--serve / --from-log: where each given value came from "
        "(command line, serve line, log); the rest are defaults")
    disagreements: list[LogDisagreement] = Field(
        default_factory=list, description="--from-log: each figure the log states (verdict, "
        "attention block size, KV needed, GPU KV cache size, blocks, concurrency) that this plan "
        "does not reproduce, with both values and the likely reasons; each is also a warning")
    explanation: Explanation | None = None
    budget: KvBudget | None = None
    data_parallel_size: int = 1
    total_max_concurrency: float | None = Field(
        default=None, description="max concurrency × data_parallel_size (all replicas)")
    vllm_contract: dict = Field(default_factory=dict,  # type: ignore[type-arg]
                                description="the numbers in the golden-case schema")
    sglang_version: str | None = Field(default=None,
                                       description="the SGLang release profile (SGLang plans)")
    sglang: SglangResult | None = Field(
        default=None, description="SGLang's own numbers under SGLang's names (engine 'sglang'): "
                                  "mem_fraction_static, max_total_num_tokens, "
                                  "max_running_requests, the pools, the resolved server args")
    serving: ServingCheck | None = Field(
        default=None, description="SGLang plans and side-by-side views: whether the KV cache "
                                  "holds `concurrency` requests of the context length at once")
    sglang_log: SglangLogCheck | None = Field(
        default=None, description="--from-log with an SGLang log: its numbers beside kvplan's")
    workload: list[WorkloadResult] | None = Field(
        default=None, description="--workload: how many such requests vLLM's scheduler runs "
                                  "at once on this KV cache, one entry per workload")

    def to_json(self) -> str:
        """The `kvplan check --json` text (indented, ASCII, keys in field order)."""
        import json

        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=False)


def compact_layer_range(names: tuple[str, ...] | list[str]) -> str:
    """model.layers.3.x … model.layers.63.x → 'model.layers.{3..63}.x (16)'."""
    if not names:
        return "(none on this worker)"
    if len(names) == 1:
        return names[0]
    parts = [re.fullmatch(r"(.*?)(\d+)(\D*)", n) for n in names]
    if all(parts) and len({(m.group(1), m.group(3)) for m in parts if m}) == 1:
        nums = sorted(int(m.group(2)) for m in parts if m)
        m0 = parts[0]
        assert m0 is not None
        steps = {b - a for a, b in zip(nums, nums[1:], strict=False)}
        if steps == {1}:
            inner = f"{nums[0]}..{nums[-1]}"
        elif len(steps) == 1:
            inner = f"{nums[0]}..{nums[-1]}/{steps.pop()}"
        elif len(nums) <= 6:
            inner = ",".join(map(str, nums))
        else:
            inner = f"{nums[0]},{nums[1]},…,{nums[-1]}"
        return f"{m0.group(1)}{{{inner}}}{m0.group(3)}"
    return f"{names[0]} … {names[-1]}"


def _natural_page(spec: object) -> int:
    if isinstance(spec, UniformTypeKVCacheSpecs):
        return sum(_natural_page(s) for _, s in spec.kv_cache_specs)
    if isinstance(spec, AttentionSpec | MambaSpec):
        return spec.unpadded_page_size_bytes
    return spec.page_size_bytes  # type: ignore[attr-defined,no-any-return]


def build_plan(result: EngineResult, *, model: str, draft: str | None = None,
               gpu: str | None = None, budget_mode: str = "explicit",
               max_num_batched_tokens: int = 0, max_num_seqs: int | None = None,
               available_kv_bytes: tuple[int, ...] = (), warnings: tuple[str, ...] = (),
               draft_layers: frozenset[str] = frozenset(),
               explanation: Explanation | None = None, budget: KvBudget | None = None,
               data_parallel_size: int = 1, weights_limit: WeightsLimit | None = None) -> Plan:
    pool = result.pool_bytes_per_block[0] if result.pool_bytes_per_block else 0
    total = result.total_blocks_per_request or 1
    rows = []
    for d in result.groups:
        spec = d.group.spec
        page, natural = spec.page_size_bytes, _natural_page(spec)
        names = d.group.layer_names
        if isinstance(spec, UniformTypeKVCacheSpecs):
            n_draft = sum(1 for n, s in spec.kv_cache_specs if s.is_draft or n in draft_layers)
        else:
            n_draft = sum(1 for n in names if n in draft_layers) or (len(names) if spec.is_draft
                                                                     else 0)
        rows.append(GroupRow(
            group_id=d.group_id, kind=spec_kind(spec).value, spec_type=spec.spec_type,
            num_layers=len(d.group.layer_names), layers=compact_layer_range(d.group.layer_names),
            is_draft=bool(names) and n_draft == len(names), draft_layers=n_draft,
            block_size_tokens=spec.block_size, page_size_bytes=page,
            natural_page_size_bytes=natural,
            padding_pct=round((page - natural) / page * 100, 2) if page else 0.0,
            blocks_per_request=d.blocks_per_request,
            bytes_per_request=d.blocks_per_request * pool,
            share_of_total_pct=round(d.blocks_per_request / total * 100, 2)))
    check = list(result.effective_check_memory_bytes or result.check_memory_bytes)
    # the margin where vLLM checks: at the auto-fitted length when it reduced max_model_len
    needed_at = list(result.bytes_needed_after_planning or result.total_bytes_needed)
    margins = [c - n for c, n in zip(check, needed_at, strict=False)]
    if result.grouping_error is not None:
        verdict = Verdict.CANNOT_GROUP
    else:
        verdict = Verdict.FITS if result.fits else Verdict.DOES_NOT_FIT
    padding_warnings = []
    if result.grouping is not None:
        padding_warnings = [f"Add {n} padding layers, may waste at most {pct:.2f}% KV cache memory"
                            for n, pct in result.grouping.padding_layers]
    err = result.error
    cause = None
    if verdict is Verdict.CANNOT_GROUP:
        cause = FailureCause.GROUPING
    elif weights_limit is not None:
        cause = FailureCause.WEIGHTS
    elif not result.fits:
        avail = available_kv_bytes or result.available_kv_bytes
        cause = (FailureCause.NO_KV_MEMORY if avail and min(avail) <= 0 else
                 FailureCause.KV_CACHE if err is None or err.type == "ValueError" else
                 FailureCause.OTHER)
    return Plan(
        model=model, draft=draft, vllm_version=result.profile.version, with_fix=result.with_fix,
        gpu=gpu, budget_mode=budget_mode,
        available_kv_bytes=list(available_kv_bytes or result.available_kv_bytes),
        max_model_len=result.max_model_len,
        max_model_len_after_planning=result.max_model_len_after_planning,
        max_num_batched_tokens=max_num_batched_tokens,
        max_in_flight_tokens=result.max_in_flight_tokens, max_num_seqs=max_num_seqs,
        verdict=verdict, fits=result.fits,
        groups=rows, num_groups=len(rows), pool_bytes_per_block=list(result.pool_bytes_per_block),
        total_blocks_per_request=result.total_blocks_per_request,
        total_bytes_needed=list(result.total_bytes_needed),
        total_gib_needed=list(result.total_gib_needed),
        total_bytes_needed_after_planning=needed_at, check_memory_bytes=check,
        check_gib=[format_gib(c) for c in check],
        margin_bytes=min(margins) if margins else None,
        estimated_max_model_len=list(result.estimated_max_model_len),
        num_blocks=result.num_blocks, max_concurrency=result.max_concurrency,
        kv_cache_size_tokens=result.kv_cache_size_tokens,
        capacity_log_line=result.capacity_log_line,
        capacity_is_hypothetical=result.capacity_is_hypothetical,
        error_type=err.type if err else None, error_message=err.message if err else None,
        failure_cause=cause, weights_limit=weights_limit,
        grouping_path=result.grouping.path if result.grouping else None,
        padding_layer_warnings=padding_warnings, warnings=list(warnings), explanation=explanation,
        budget=budget, data_parallel_size=data_parallel_size,
        total_max_concurrency=(result.max_concurrency * data_parallel_size
                               if result.max_concurrency is not None else None),
        vllm_contract=contract_dict(result))


def refused_plan(*, model: str, vllm_version: str, with_fix: bool, error_type: str,
                 error_message: str, cause: str, hint: str | None = None,
                 draft: str | None = None, gpu: str | None = None, budget_mode: str = "estimated",
                 available_kv_bytes: tuple[int, ...] = (), max_model_len: int = 0,
                 max_num_batched_tokens: int = 0, warnings: tuple[str, ...] = (),
                 data_parallel_size: int = 1) -> Plan:
    """A deployment vLLM refuses before it sizes the KV cache (a `StartupError`): a plan that
    does not fit, with vLLM's error and why (exit 1, like a capacity miss), and no KV numbers."""
    return Plan(
        model=model, draft=draft, vllm_version=vllm_version, with_fix=with_fix, gpu=gpu,
        budget_mode=budget_mode, available_kv_bytes=list(available_kv_bytes),
        max_model_len=max_model_len, max_model_len_after_planning=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens, max_in_flight_tokens=0,
        verdict=Verdict.DOES_NOT_FIT, fits=False, groups=[], num_groups=0,
        pool_bytes_per_block=[], total_blocks_per_request=0, total_bytes_needed=[],
        total_gib_needed=[], check_memory_bytes=[], check_gib=[], margin_bytes=None,
        estimated_max_model_len=[], num_blocks=None, max_concurrency=None,
        kv_cache_size_tokens=None, capacity_log_line=None, capacity_is_hypothetical=False,
        error_type=error_type, error_message=error_message, failure_cause=FailureCause(cause),
        refused_at_startup=True, failure_hint=hint, grouping_path=None,
        padding_layer_warnings=[], warnings=list(warnings),
        data_parallel_size=data_parallel_size)


def gib(num_bytes: int) -> float:
    return num_bytes / GiB


def json_schema() -> dict:  # type: ignore[type-arg]
    """The JSON Schema of `kvplan check --json` (committed as docs/plan.schema.json)."""
    return Plan.model_json_schema()


if __name__ == "__main__":  # python -m kvplan.analysis.plan > docs/plan.schema.json
    import json
    import sys

    sys.stdout.write(json.dumps(json_schema(), indent=2, sort_keys=True) + "\n")
