"""Configs no fast adapter covers, and vLLM's generic reading of a config before any model code
runs: transformers as the resolver of record (`resolve.py`, imported lazily), vLLM's `ModelConfig`
accessors (`accessors.py`), `--hf-overrides` (`overrides.py`), the max-model-len rule
(`max_len.py`), the transformers-resolved generic decoder (`resolved.py`), the fallback for
unknown types (`generic.py`), remote code and its start-up refusals (`remote_code.py`) and the
layer names vLLM's model classes give (`layer_names.py`)."""
