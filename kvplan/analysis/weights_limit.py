"""The weights leave no KV memory: say so, with the fewest GPUs that hold them and what else helps.

An estimated budget ≤ 0 means the weights (with vLLM's other start-up memory) take all of the
requested memory. The search re-estimates the budget at other shapes through `budget_at`, which
the pipeline gives (it builds and budgets a request at TP × PP on a GPU); no I/O here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvplan.analysis.plan import WeightsLimit
from kvplan.budget.kv_memory import BudgetMode, KvBudget
from kvplan.units import GiB

# (TP, PP, catalogue GPU name or None for the request's own) → the estimated KV memory per GPU;
# None: the shape is invalid
BudgetAt = Callable[[int, int, str | None], int | None]

MAX_GPUS_SEARCHED = 1024  # the largest TP×PP tried


def fewest_gpus_for_weights(budget_at: BudgetAt, tp: int, start: int) -> tuple[int, int, int] | None:
    """(GPUs, TP, PP): the smallest TP×PP (powers of two from `start`) whose share of the weights
    leaves KV memory by the estimate (the given TP first); None up to MAX_GPUS_SEARCHED."""
    n = 1 << max(0, start - 1).bit_length()  # the power of two ≥ start
    while n <= MAX_GPUS_SEARCHED:
        shapes = [(t, n // t) for t in (1 << i for i in range(n.bit_length())) if n % t == 0]
        fits = [(t, p, a) for t, p in shapes
                if (a := budget_at(t, p, None)) is not None and a > 0]
        if fits:
            # the given TP with more stages first, then the shape that leaves the most KV memory
            t, p, _ = max(fits, key=lambda f: (f[0] == tp, f[2]))
            return n, t, p
        n *= 2
    return None


def _weights_remedies(budget_at: BudgetAt, *, model: str, tp: int, pp: int, gpu: Any,
                      quantized: bool, weights: int, usable: int, total: int | None,
                      max_model_len: int) -> tuple[tuple[int, int, int] | None, list[str], list[str]]:
    """What helps when the weights leave no KV memory: (the fewest GPUs as (GPUs, TP, PP), the
    suggestions in words, catalogue GPUs that leave KV memory at the same TP × PP)."""
    best = fewest_gpus_for_weights(budget_at, tp, tp * pp * 2)
    tips: list[str] = []
    roomy: list[str] = []
    model = model if " " not in model else repr(model)
    if best is not None:
        tips.append(f"more GPUs: at least {best[0]} of this type (e.g. -tp {best[1]} -pp "
                    f"{best[2]}); `kvplan fit {model} --max-model-len {max_model_len} "
                    f"--concurrency 1{f' --gpu {gpu.name!r}' if gpu is not None else ''} "
                    f"--max-gpus {best[0]}` searches TP/PP/DP and GPU types")
    else:
        tips.append(f"more GPUs: none of up to {MAX_GPUS_SEARCHED} of this type leave KV memory")
    if not quantized:
        tips.append(f"fp8 or another quantized checkpoint: about half the bytes "
                    f"(~{weights / 2 / GiB:.1f} GiB per GPU here, "
                    + ("within" if weights / 2 < usable else "still over")
                    + f" {usable / GiB:.1f} GiB usable)")
    else:
        tips.append("a more strongly quantized checkpoint (fewer bytes per weight)")
    if gpu is not None:
        from kvplan.budget import hardware

        bigger = [g for g in sorted(hardware.list_gpus(), key=lambda g: g.total_memory_bytes or 0)
                  if (g.total_memory_bytes or 0) > (total or 0) and g.name != gpu.name]
        roomy = [g.name for g in bigger if (a := budget_at(tp, pp, g.name)) and a > 0][:3]
        tips.append(f"a bigger GPU at TP {tp} × PP {pp}: " + (", ".join(roomy) if roomy
                                                               else "none in the catalogue"))
    return best, tips, roomy


def weights_limit(budget: KvBudget, *, tp: int, pp: int, model: str, gpu: Any, quantized: bool,
                  max_model_len: int, budget_at: BudgetAt | None) -> WeightsLimit | None:
    """The diagnosis when an estimated budget leaves nothing for the KV cache because of the
    weights, else None. `budget_at` None: no search for what helps (`fit` plans every shape)."""
    if budget.mode is not BudgetMode.ESTIMATED or budget.available_kv_bytes_per_gpu > 0:
        return None
    terms = {t.name: t.num_bytes for t in budget.breakdown}
    weights = -terms.get("model weights", 0)
    if weights <= 0:
        return None
    usable = budget.available_kv_bytes_per_gpu + weights  # requested − the other deductions
    total = budget.total_memory_bytes
    tips: list[str] = []
    roomy: list[str] = []
    best = None
    if budget_at is not None:
        best, tips, roomy = _weights_remedies(budget_at, model=model, tp=tp, pp=pp, gpu=gpu,
                                              quantized=quantized, weights=weights, usable=usable,
                                              total=total, max_model_len=max_model_len)
    return WeightsLimit(
        weight_bytes_per_gpu=weights, usable_bytes_per_gpu=usable,
        gpu_total_memory_bytes=total, exceeds_gpu_memory=bool(total and weights > total),
        tensor_parallel_size=tp, pipeline_parallel_size=pp,
        min_num_gpus=best[0] if best else None, min_tensor_parallel_size=best[1] if best else None,
        min_pipeline_parallel_size=best[2] if best else None, bigger_gpus=roomy, suggestions=tips)
