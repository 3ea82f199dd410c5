"""Architectures vLLM 0.31-0.34 no longer serve are refused with vLLM's reason.

vLLM 0.34.0 model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS (L883-): Phi3Small
until 0.9.2, Baichuan until 0.23.0; _raise_for_unsupported (L1300-1320) words the message.
The configs are hand-written: the architecture alone decides the refusal.
"""

from __future__ import annotations

import pytest

from kvplan.errors import UnsupportedError
from kvplan.models import describe_model


@pytest.mark.parametrize(("arch", "model_type", "last"), [
    ("Phi3SmallForCausalLM", "phi3small", "0.9.2"),
    ("BaichuanForCausalLM", "baichuan", "0.23.0"),
    ("BaiChuanForCausalLM", "baichuan", "0.23.0"),
])
def test_retired_architecture_is_refused_with_the_reason(arch: str, model_type: str,
                                                        last: str) -> None:
    config = {"architectures": [arch], "model_type": model_type, "num_hidden_layers": 32}
    with pytest.raises(UnsupportedError) as info:
        describe_model(config, source="hand-written")
    message = info.value.message
    assert f"{arch} was supported in vLLM until v{last}" in message
    assert "num_hidden_layers" not in message  # the cause, not a missing field
    assert last in info.value.hint


def test_phi3_small_names_blocksparse_attention() -> None:
    config = {"architectures": ["Phi3SmallForCausalLM"], "model_type": "phi3small"}
    with pytest.raises(UnsupportedError, match="blocksparse"):
        describe_model(config, source="hand-written")


def test_a_served_architecture_next_to_a_retired_one_plans() -> None:
    # vLLM raises only when no listed architecture is served (_raise_for_unsupported)
    config = {"architectures": ["BaichuanForCausalLM", "ExaoneForCausalLM"],
              "model_type": "exaone", "num_layers": 2, "torch_dtype": "bfloat16",
              "max_position_embeddings": 4096}
    m = describe_model(config, source="hand-written")
    assert m.family == "exaone" and len(m.layers) == 2
