"""vLLM's max-model-len rule: the length a config allows, and the start-up refusal past it.

Mirrors `_get_and_verify_max_len` (vllm/config/model.py) with the keys of
`ModelArchConfigConvertorBase.derive_max_model_len_and_key`; the same in 0.31-0.34. Not modelled,
because kvplan plans generative models without `--disable-sliding-window`: the tokenizer's
`model_max_length` (read only for pooling models with absolute positions) and the sliding-window
cap (only under `--disable-sliding-window`). Pure: the environment is read by the CLI.
"""

from __future__ import annotations

from kvplan.errors import StartupError
from kvplan.models.description import ModelDescription

# vLLM: derive_max_model_len_and_key's possible_keys, in its order
POSSIBLE_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                 "model_max_length", "max_target_positions", "max_sequence_length",
                 "max_seq_length", "seq_len")
# RoPE types whose max_position_embeddings is already scaled: `factor` is not applied again
UNSCALED_ROPE_TYPES = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn",
                                 "deepseek_llama_scaling"})
LONG_ENV = "VLLM_ALLOW_LONG_MAX_MODEL_LEN"
DEFAULT_MAX_LEN = 2048  # vLLM: _get_and_verify_max_len's default_max_len
NO_LENGTH_KEY_WARNING = ("The model's config.json does not contain any of the keys to determine "
                         "the original maximum length of the model.")
_WARNING = ("VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses "
            "relative position encoding (RoPE), positions exceeding derived_max_model_len lead to "
            "nan. If the model uses absolute position encoding, positions exceeding "
            "derived_max_model_len will cause a CUDA array out-of-bounds error.")


def allow_long_from_env(value: str | None) -> bool:
    """vLLM envs.VLLM_ALLOW_LONG_MAX_MODEL_LEN: "1" or "true" (any case, stripped)."""
    return (value or "0").strip().lower() in ("1", "true")


def derived_max_model_len(model: ModelDescription) -> tuple[float | None, str | None]:
    """(derived length, the key that set it) before vLLM's checks; (None, None) if no key.

    Always a float: vLLM keeps `derive_max_model_len_and_key`'s result in
    `ModelArchitectureConfig.derived_max_model_len_and_key: tuple[float, str | None]`, a pydantic
    dataclass that turns an int length into a float (0.31-0.34), so its refusal prints 8192.0."""
    fields = dict(model.max_length_fields)
    derived: float | None = None
    key = None
    for k in POSSIBLE_KEYS:  # the smallest of the keys present
        v = fields.get(k)
        if v is not None and (derived is None or v < derived):
            derived, key = float(v), k
    if fields.get("model_max_length"):  # Command-R / Cohere: this key wins
        derived, key = float(fields["model_max_length"]), "model_max_length"
    if derived is not None:
        derived *= rope_scaling_factor(model)
    return derived, key


def rope_scaling_factor(model: ModelDescription) -> float:
    """vLLM: _get_and_verify_max_len — the RoPE `factor` applied to the derived length (1.0 when
    the config has no RoPE, for Gemma 3, or for RoPE types whose length is already scaled)."""
    scaling: int | float | None = 1.0
    if model.rope_scaling and "gemma3" not in model.model_type:
        for rp in model.rope_scaling:
            if rp.rope_type not in UNSCALED_ROPE_TYPES and rp.factor is not None:
                scaling = rp.factor
    return float(scaling) if scaling is not None else 1.0


def verify_max_model_len(model: ModelDescription, requested: int | None, *,
                         allow_long: bool = False) -> tuple[int | None, str | None]:
    """(the max_model_len vLLM runs with, vLLM's warning or None). `requested`, or the derived
    default when None (2048 × the RoPE factor, with vLLM's warning, if the config has no length
    key; a requested length is then taken unchecked). Past the derived length vLLM raises
    at start-up (`StartupError`, exit 1) unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: then it warns."""
    derived, key = derived_max_model_len(model)
    if derived is None:
        if requested is not None:
            return requested, None
        # vLLM: no length key at all — it assumes 2048 (then applies the RoPE factor) and warns
        default = int(DEFAULT_MAX_LEN * rope_scaling_factor(model))
        return default, (f"vLLM warns: {NO_LENGTH_KEY_WARNING} Assuming the model's maximum "
                         f"length is {DEFAULT_MAX_LEN}.")
    fields = dict(model.max_length_fields)
    if requested is None:
        if any(rp.rope_type == "longrope" for rp in model.rope_scaling):
            # LongRoPE defaults to the original length (no slowdown on short sequences)
            return int(fields.get("original_max_position_embeddings", derived)), None
        return int(derived), None
    model_max_length = fields.get("model_max_length")
    if requested <= derived or (model_max_length is not None and requested <= model_max_length):
        return requested, None
    msg = (f"User-specified max_model_len ({requested}) is greater than the derived "
           f"max_model_len ({key}={derived} or model_max_length={model_max_length} in model's "
           "config.json).")
    if allow_long:
        return requested, f"vLLM warns: {msg} {_WARNING}"
    # vLLM: config/model.py _get_and_verify_max_len raises ValueError
    raise StartupError.vllm(
        "ValueError", f"{msg} To allow overriding this maximum, set the env var {LONG_ENV}=1. "
        f"{_WARNING}", cause="max_model_len",
        hint=f"use --max-model-len {int(derived)} or less, or set {LONG_ENV}=1 if the model "
             "really supports more")
