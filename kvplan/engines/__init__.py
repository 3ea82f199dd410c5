"""The serving engines whose start-up kvplan mirrors, one subpackage each, pure (no I/O, no printing,
no environment).

* `vllm/` — vLLM's worker start-up (the build: backends, block sizes, per-layer KV specs) and its
  KV-cache planner, with each release's differences as data (`vllm/profiles.py`).
* `sglang/` — SGLang's memory-pool sizing (`sglang/profiles.py` holds each release's constants).

What both share lives here, below them: `state_shapes.py`, the Mamba-family state shapes and dtypes
per TP rank (vLLM's `get_state_shape` / SGLang's Mamba pool read the same shapes).

The contract: an engine takes a `kvplan.models.description.ModelDescription` (engine-agnostic
architecture facts, family rules included as fields) and the deployment in that engine's own flag
names, and returns its plan; the layers above pick the engine and never reach into its modules'
internals. `engines.vllm` and `engines.sglang` never import each other
(`tests/test_architecture.py`).
"""
