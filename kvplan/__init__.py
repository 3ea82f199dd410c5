"""kvplan: vLLM's KV-cache startup planner, reimplemented byte for byte, offline."""

__version__ = "0.1.0"
