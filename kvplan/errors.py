"""One exception hierarchy; the CLI maps each to `Error:` / `Hint:` and an exit code."""

from __future__ import annotations

EXIT_FITS = 0
EXIT_DOES_NOT_FIT = 1
EXIT_BAD_INPUT = 2


class KvplanError(Exception):
    """A user-facing failure: one-line message, optional hint, exit code."""

    exit_code: int = EXIT_BAD_INPUT

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class InputError(KvplanError):
    """Bad input: a flag, a number, a spec file, a deployment file."""


class ConfigError(KvplanError):
    """A model config that cannot be read or understood."""


class UnsupportedError(KvplanError):
    """Valid input that kvplan (or vLLM) does not support."""


class HubError(KvplanError):
    """The hub or its cache could not provide a file."""
