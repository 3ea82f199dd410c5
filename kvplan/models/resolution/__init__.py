"""Configs no fast adapter covers, and vLLM's generic reading of a config: transformers as the
resolver of record (`resolve.py`, imported lazily), vLLM's `ModelConfig` accessors
(`accessors.py`), `--hf-overrides` (`overrides.py`), the max-model-len rule (`max_len.py`), the
transformers-resolved generic decoder (`resolved.py`) and the fallback for unknown types
(`generic.py`)."""
