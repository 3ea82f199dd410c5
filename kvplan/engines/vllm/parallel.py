"""Tensor/pipeline-parallel arithmetic, as vLLM does it. Pure functions, no environment reads."""

from __future__ import annotations

from kvplan.errors import InputError


def divide(numerator: int, denominator: int, *, what: str | None = None) -> int:
    """vLLM: distributed/utils.divide (asserts `numerator % denominator == 0`).

    `what` names the quantities for the message, e.g. "attention heads (28) by TP (8)".
    """
    if denominator <= 0:
        raise InputError(f"cannot divide by {denominator}" + (f" ({what})" if what else ""))
    if numerator % denominator != 0:
        label = what or f"{numerator} by {denominator}"
        raise InputError(f"{numerator} is not divisible by {denominator}: {label}",
                         hint="choose a parallel size that divides it")
    return numerator // denominator


def parse_pp_layer_partition(partition: str, num_layers: int, pp_size: int) -> list[int]:
    """VLLM_PP_LAYER_PARTITION ("10,11,11") → per-stage layer counts, validated as vLLM does."""
    try:
        parts = [int(p) for p in str(partition).split(",")]
    except ValueError:
        raise InputError(f"invalid pipeline layer partition {partition!r}",
                         hint="write one layer count per stage, e.g. VLLM_PP_LAYER_PARTITION=10,11,11"
                         ) from None
    if len(parts) != pp_size:
        raise InputError(f"pipeline layer partition {partition!r} has {len(parts)} stages, "
                         f"pipeline parallel size is {pp_size}")
    if sum(parts) != num_layers:
        raise InputError(f"pipeline layer partition {partition!r} sums to {sum(parts)}, "
                         f"the model has {num_layers} layers")
    if any(p < 0 for p in parts):
        raise InputError(f"negative layer count in pipeline layer partition {partition!r}")
    return parts


def pp_partitions(num_layers: int, pp_size: int, partition: str | None = None) -> list[int]:
    """Layers per pipeline stage (vLLM: distributed/utils.get_pp_indices, its `partitions`)."""
    if pp_size < 1:
        raise InputError(f"pipeline parallel size must be >= 1, got {pp_size}")
    if num_layers < 0:
        raise InputError(f"number of layers must be >= 0, got {num_layers}")
    if partition is not None:
        return parse_pp_layer_partition(partition, num_layers, pp_size)
    per = num_layers // pp_size
    parts = [per] * pp_size
    # The remainder goes, one each, to the stages before the last, counted backwards.
    remaining = num_layers % pp_size
    for i in range(2, remaining + 2):
        parts[-i] += 1
    return parts


def get_pp_indices(num_layers: int, pp_rank: int, pp_size: int,
                   partition: str | None = None) -> tuple[int, int]:
    """vLLM: distributed/utils.get_pp_indices → [start, end) layers of stage `pp_rank`.

    `partition` is the value of VLLM_PP_LAYER_PARTITION (the caller reads the environment).
    """
    parts = pp_partitions(num_layers, pp_size, partition)
    if not 0 <= pp_rank < pp_size:
        raise InputError(f"pipeline rank {pp_rank} is outside 0..{pp_size - 1}")
    start = sum(parts[:pp_rank])
    return start, start + parts[pp_rank]


def check_kv_heads_tp(total_kv_heads: int, tp: int) -> None:
    """vLLM: QKVParallelLinear.__init__ — `divide(tp, kv)` if tp >= kv else `divide(kv, tp)`.

    KV heads are split when TP divides them and replicated when they divide TP; anything else
    fails at model construction.
    """
    if total_kv_heads < 1 or tp < 1:
        raise InputError(f"KV heads ({total_kv_heads}) and TP ({tp}) must be >= 1")
    if tp >= total_kv_heads:
        divide(tp, total_kv_heads, what=f"TP size ({tp}) by KV heads ({total_kv_heads}); "
                                        "vLLM replicates KV heads only a whole number of times")
    else:
        divide(total_kv_heads, tp, what=f"KV heads ({total_kv_heads}) by TP size ({tp})")


def kv_heads_per_rank(total_kv_heads: int, tp: int, *, layer: str | None = None) -> int:
    """vLLM: ModelConfig.get_num_kv_heads — max(1, total // tp), replicated when tp > heads.

    Also applies the divisibility rule of QKVParallelLinear (`check_kv_heads_tp`); the build
    names the `layer` whose heads do not split.
    """
    if layer is not None and total_kv_heads % tp and tp % total_kv_heads:
        raise InputError(f"{layer}: {total_kv_heads} KV heads cannot be split over tensor parallel "
                         f"size {tp}",
                         hint="pick a TP size that divides the KV heads (or a multiple of them)")
    check_kv_heads_tp(total_kv_heads, tp)
    return max(1, total_kv_heads // tp)


def check_decode_context_parallel(tp: int, dcp: int) -> None:
    """vLLM: ParallelConfig's validator — without prefill context parallelism DCP reuses the TP
    ranks, so `tp % dcp == 0` (its ValueError, word for word; 0.31-0.34)."""
    if tp % dcp != 0:
        fits = ", ".join(str(d) for d in range(1, tp + 1) if tp % d == 0)
        raise InputError(f"--decode-context-parallel-size {dcp}: vLLM raises ValueError: "
                         f"tp_size={tp} must be divisible by dcp_size={dcp}.",
                         hint=f"DCP reuses the TP ranks: with -tp {tp} use -dcp {fits}")


def check_attention_heads_tp(total_attention_heads: int, tp: int) -> None:
    """vLLM: ModelConfig.verify_with_parallel_config — heads % tp must be 0."""
    if tp < 1:
        raise InputError(f"tensor parallel size must be >= 1, got {tp}")
    if total_attention_heads % tp != 0:
        raise InputError(
            f"total number of attention heads ({total_attention_heads}) must be divisible by "
            f"tensor parallel size ({tp})",
            hint="vLLM refuses this at startup (ModelConfig.verify_with_parallel_config)")
