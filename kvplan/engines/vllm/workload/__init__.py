"""vLLM's scheduler and KV cache manager on N requests of a workload (`--workload`)."""

from kvplan.engines.vllm.workload.scheduler import *  # noqa: F403
