"""Workload concurrency: how many identical requests vLLM's scheduler runs at once.

For the planned KV cache (num_blocks, groups, block sizes), `simulate` runs vLLM's scheduler
(`vllm/v1/core/sched/scheduler.py` `Scheduler.schedule` / `update_from_output`, the async
subclass, and `EngineCore.step` / `step_with_batch_queue`) on N requests of P prompt and D output
tokens submitted together, step by step, with the KV cache manager's block arithmetic per group
(`KVCacheManager.allocate_slots`, each single-type manager's `get_num_blocks_to_allocate`,
`allocate_new_blocks` and `remove_skipped_blocks`) — integer counts per request and group, no
block objects. The model outputs one token per step (every draft token rejected), as vLLM's
own scheduler tests fake them; prompts are distinct, so no prefix-cache hit ever happens.

Why a step simulation and not a closed form: vLLM admits a request on its prompt (with
`scheduler_reserve_full_isl`, on the whole prompt, capped per sliding-window group), allocates
decode blocks one step at a time, frees sliding-window blocks behind the window on the
processed-token basis (one async step behind), moves Mamba "align" states block by block, and
preempts as soon as one allocation in a step fails; staggered prefills make the requests reach
each block boundary at different steps, so the first preemption depends on the order of the
allocations inside a step. For full attention with long answers the answer is vLLM's
concurrency formula at P+D; with short answers, windows or Mamba states it is not.

What keeps it fast (a check stays well under 100 ms extra; tests/engines/vllm/test_workload.py
compares each shortcut with the plain every-step run):
- identical groups are one class, simulated once and counted `count` times;
- a request decoding steadily goes *lazy*: it advances implicitly and is stepped only at its
  next block event (an allocation, a window free, a Mamba state move, its last steps), and
  stretches where every request is lazy are skipped whole;
- a run asked only "do all N run at once without preempting?" stops as soon as the answer is
  known: all admitted and the running requests' hold bounds fit the pool, or a completion
  while one still waits (or no waiting one can get in before a completion);
- the search for N starts at the pool over one request's end-of-life blocks and gallops.

Release differences are fields of `VllmProfile` (profiles.py), read here.

Modules: `rules.py` the settings vLLM resolves (groups as their managers see them, block sizes,
speculative decoding) from a plan; `requests.py` one request's counts; `kv_manager.py` the
single-type managers and `KVCacheManager.allocate_slots` as integer counts; `lazy.py` the running
set with lazily advanced decoding requests; `scheduler.py` `Scheduler.schedule` /
`update_from_output`; `simulation.py` one run of N requests (`simulate`); `search.py` the largest
N that runs clean and the admission peak (`estimate`).
"""

from kvplan.engines.vllm.workload.rules import (
    DRAFT_METHODS,
    NUM_SAMPLED_TOKENS_PER_STEP,
    GroupRule,
    ManagerKind,
    SchedulerRules,
    SpecDecodeSettings,
    Workload,
    build_rules,
    group_rule,
    manager_kind,
    resolve_block_sizes,
    rules_for_plan,
    spec_decode_settings,
)
from kvplan.engines.vllm.workload.search import WorkloadEstimate, estimate, first_guess, largest_clean
from kvplan.engines.vllm.workload.simulation import RunResult, simulate

__all__ = [
    "DRAFT_METHODS", "NUM_SAMPLED_TOKENS_PER_STEP", "GroupRule", "ManagerKind", "RunResult",
    "SchedulerRules", "SpecDecodeSettings", "Workload", "WorkloadEstimate", "build_rules",
    "estimate", "first_guess", "group_rule", "largest_clean", "manager_kind",
    "resolve_block_sizes", "rules_for_plan", "simulate", "spec_decode_settings",
]
