"""Architectures vLLM no longer serves, refused with vLLM's own reason.

Data: vLLM 0.34.0's model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS, as extracted
into kvplan/data/vllm_registry_0.34.0.json (`kvplan.models.coverage`); every last release there
older than 0.31 refuses it in every release kvplan models (a later one, e.g. Keye's 0.33.0,
is left to the coverage table).

vLLM refuses a retired architecture only when its Transformers modeling backend does not take
it: `_ModelRegistry.inspect_model_cls` first tries `_try_resolve_transformers` on the first
architecture (no architecture in the registry, model_impl auto), and only then
`_raise_for_unsupported` refuses. A retired architecture whose transformers class is backend
compatible (MllamaForConditionalGeneration, Dots1ForCausalLM, PersimmonForCausalLM, ...:
kvplan/data/vllm_arch_resolution.json) is served as a Transformers* class and planned here like
any other architecture vLLM does not register (kvplan.models' transformers-resolved path). That
data is vLLM 0.34.0's (transformers 5.20.2) and holds for 0.31-0.33 too: their wheels' registry.py
have the same inspect_model_cls / _try_resolve_transformers and the same retired entries for
these 13 architectures, and transformers 5.17.0 / 5.19.0 (the 0.31 / 0.32 pins; 0.33 pins
5.20.2) answer is_backend_compatible / _can_set_attn_implementation alike for their classes
(checked from the wheels' sources).
"""

from __future__ import annotations

from collections.abc import Iterable

from kvplan.errors import UnsupportedError
from kvplan.models.coverage import previously_supported

# Why, where the registry alone does not say it.
_WHY = {
    "Phi3SmallForCausalLM": "its blocksparse attention had no V1-engine backend",
}


# model types of retired architectures (a config without `architectures`); transformers'
# "minimax" is not one: vLLM names it MiniMaxModel (MODEL_MAPPING_NAMES), which the Transformers
# backend takes (and refuses to build: kvplan.models.resolution.resolved.no_interface_refusal)
_RETIRED_MODEL_TYPES = {"minimax_text_01": "MiniMaxText01ForCausalLM",
                        "minimax_m1": "MiniMaxM1ForCausalLM"}


def retired_by_model_type(model_type: object) -> list[str]:
    """The retired architecture a bare model_type stands for ([] when none)."""
    arch = _RETIRED_MODEL_TYPES.get(model_type) if isinstance(model_type, str) else None
    return [arch] if arch else []


def refuse_retired(source: str, architectures: Iterable[str]) -> None:
    """Raise when an architecture was served by vLLM only before 0.31 and the Transformers
    backend does not take the first one (vLLM: ModelRegistry.inspect_model_cls →
    _try_resolve_transformers, else _raise_for_unsupported, whose message this repeats)."""
    from kvplan.models.resolution.arch_resolution import transformers_backend_serves

    architectures = list(architectures)
    if architectures and transformers_backend_serves(architectures[0], None):
        return
    for arch in architectures:
        last = previously_supported(arch)
        if last is None or tuple(map(int, last.split("."))) >= (0, 31, 0):
            continue
        why = f" ({_WHY[arch]})" if arch in _WHY else ""
        raise UnsupportedError(
            f"{source}: model architecture {arch} was supported in vLLM until v{last}, and is "
            f"not supported anymore{why}; vLLM 0.31-0.34 refuse to start it",
            hint=f"an older vLLM (<= {last}) serves it; kvplan models vLLM 0.31-0.34 only",
            vllm_stage="registry")
