"""Start-up engines kvplan reproduces: vLLM's planner and SGLang's pool sizing."""
