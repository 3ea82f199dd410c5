"""The one base of kvplan's pydantic models: frozen (hashable, never changed after it is built),
its schema built on first use (`defer_build`: a command builds only the schemas it needs, cold
start); `FrozenStrict` also refuses fields it does not declare (`extra="forbid"`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)


class FrozenStrict(Frozen):
    model_config = ConfigDict(extra="forbid")  # merged with Frozen's
