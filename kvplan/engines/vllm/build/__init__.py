"""ModelDescription(s) + deployment settings → the per-rank layer specs vLLM's workers report.

This is vLLM's start-up up to the planner, pure, in modules along its seams:

* `deployment.py` — `Deployment` (what `vllm serve` is told), `LayerPlan`, `BuildResult`;
* `releases.py` — what a release refuses before it builds (registry first releases, GLM-5.3 / 0.31);
* `dtypes.py` — model / KV cache / Mamba SSM dtypes and the architectures' config hooks;
* `batch.py` — the scheduler's batch limits (`EngineArgs.get_batch_defaults`,
  `_set_default_max_num_seqs_and_batched_tokens_args`);
* `backend_choice.py` — each layer's attention backend and the backend constraints of a model;
* `layer_specs.py` — each attention layer's `get_kv_cache_spec`, by kind;
* `state.py` — Mamba-family state shapes / dtypes and prefill checkpoints;
* `startup.py` — `build`: config hooks, backends, `update_block_size_for_backend` (Phase 1
  preference, Phase 2 hybrid alignment), per-layer specs per TP rank and PP stage, draft and MTP
  layers → `PlannerInput`.
"""

from kvplan.engines.vllm.backends import min_kernel_block
from kvplan.engines.vllm.build.batch import get_batch_defaults
from kvplan.engines.vllm.build.deployment import BuildResult, Deployment, LayerPlan
from kvplan.engines.vllm.build.startup import build, pp_partition

__all__ = ["BuildResult", "Deployment", "LayerPlan", "build", "get_batch_defaults",
           "min_kernel_block", "pp_partition"]
