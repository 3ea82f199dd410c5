"""Typed per-layer KV cache specs (vLLM: v1/kv_cache_interface.py)."""

from kvplan.engines.vllm.specs.attention import *  # noqa: F403
