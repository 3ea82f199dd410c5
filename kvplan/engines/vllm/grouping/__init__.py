"""KV cache grouping (vLLM: kv_cache_planning.get_kv_cache_groups)."""

from kvplan.engines.vllm.grouping.groups import *  # noqa: F403
from kvplan.engines.vllm.grouping.groups import _largest_divisor_at_most  # noqa: F401
