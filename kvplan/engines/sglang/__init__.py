"""SGLang's KV-pool sizing at start-up (SGLang 0.5.23), as pure functions: `plan_sglang`."""

from kvplan.engines.sglang.deployment import (
    KvBudget,
    Platform,
    ProfiledMemory,
    SglangDeployment,
    SglangGpu,
)
from kvplan.engines.sglang.result import PoolRow, SglangError, SglangResult
from kvplan.engines.sglang.sizing import plan_sglang

__all__ = ["KvBudget", "Platform", "PoolRow", "ProfiledMemory", "SglangDeployment", "SglangError",
           "SglangGpu", "SglangResult", "plan_sglang"]
