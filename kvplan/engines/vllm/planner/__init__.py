"""vLLM's KV-cache start-up planner."""

from kvplan.engines.vllm.planner.planning import *  # noqa: F403
