"""How vLLM reads a config before any model code runs (transformers' classes, vLLM's accessors,
its start-up refusals)."""
