"""Whether vLLM runs with prefix caching, and so which Mamba cache mode it plans.

vLLM: `EngineArgs._set_default_chunked_prefill_and_prefix_caching_args` — without
`--enable-prefix-caching` / `--no-enable-prefix-caching` the model's default
(`ModelConfig.is_prefix_caching_supported`, by `ModelConfig.attn_type`); an explicit flag is
honoured as given (a pooling model that does not support it gets a warning). Then
`MambaModelConfig.verify_and_update_config` derives `mamba_cache_mode`: "align" with prefix
caching, "none" without (the Mamba block is then max_model_len: one block per request). The
same code in 0.31–0.34.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.models.description import ModelDescription
from kvplan.models.pooling import PoolingRunner


@dataclass(frozen=True)
class PrefixCaching:
    """vLLM's resolved `enable_prefix_caching` and what the plan says about it."""

    enabled: bool
    note: str | None = None  # why it is off by default / what an explicit flag does


def default_prefix_caching(target: ModelDescription, pooling: PoolingRunner | None) -> bool:
    """vLLM: ModelConfig.is_prefix_caching_supported (attn_type: hybrid, then attention_free,
    then encoder_decoder, else decoder)."""
    if pooling is not None:
        return pooling.supports_prefix_caching
    if target.is_hybrid:
        return True
    return not (target.attention_free or target.is_encoder_decoder)


def resolve_prefix_caching(target: ModelDescription, pooling: PoolingRunner | None,
                           flag: bool | None) -> PrefixCaching:
    """`--enable-prefix-caching` (True / False / None: not given) → what vLLM runs with."""
    default = default_prefix_caching(target, pooling)
    if flag is None:
        note = None
        if target.attention_free and pooling is None:
            note = ("prefix caching off: vLLM's default for an attention-free model ('Attention "
                    "free models do not support prefix caching since the feature is still "
                    "experimental', ModelConfig.is_prefix_caching_supported), so the Mamba state "
                    "is planned in 'none' mode: one block of max_model_len tokens per request; "
                    "--enable-prefix-caching turns on 'align' mode")
        return PrefixCaching(default, note)
    note = None
    if flag and not default and pooling is not None:
        # vLLM: the pooling runner warns and keeps it on
        note = ("--enable-prefix-caching on a pooling model that does not support it: vLLM warns "
                "'This model does not officially support prefix caching. Enabling this manually "
                "may cause the engine to crash or produce incorrect outputs.' and keeps it on")
    elif flag and target.attention_free:
        # vLLM: the generate runner takes it silently; MambaModelConfig then picks 'align'
        note = ("--enable-prefix-caching on an attention-free model: vLLM keeps it on (off by "
                "default: experimental for attention-free models) and plans the Mamba state in "
                "'align' mode")
    return PrefixCaching(flag, note)
