"""Where inputs come from: the hub, local files, `vllm serve` lines, vLLM logs, spec files."""
