"""One exception hierarchy; the CLI maps each to `Error:` / `Hint:` and an exit code."""

from __future__ import annotations

EXIT_FITS = 0
EXIT_DOES_NOT_FIT = 1
EXIT_BAD_INPUT = 2


# the way out for any architecture kvplan cannot read: a hand-written layer list
SPECS_HINT = (
    "kvplan can plan any model from a hand-written layer list: "
    "`kvplan check --specs FILE.json` (see `kvplan check --help`)."
)

class KvplanError(Exception):
    """A user-facing failure: one-line message, a hint (a default per class), exit code."""

    exit_code: int = EXIT_BAD_INPUT
    default_hint: str = "run `kvplan --help` for the commands and their options"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or self.default_hint


class InputError(KvplanError):
    """Bad input: a flag, a number, a spec file, a deployment file."""

    default_hint = "run `kvplan check --help` for the flags and the forms their values take"


class OptionError(InputError):
    """A Python API call with an unknown option or a value of the wrong type (kvplan.api)."""

    default_hint = "see docs/api.md: the options are the CLI flags in snake_case"


class ConfigError(KvplanError):
    """A model config that cannot be read or understood."""

    default_hint = ("check the config file, or describe the model layer by layer with "
                    "`kvplan check --specs FILE.json` (docs/specs-format.md)")


class UnsupportedError(KvplanError):
    """Valid input that kvplan (or vLLM) does not support."""

    default_hint = ("describe the layers by hand with `kvplan check --specs FILE.json` "
                    "(docs/specs-format.md)")

    def __init__(self, message: str, hint: str | None = None, *,
                 vllm_stage: str | None = None) -> None:
        super().__init__(message, hint)
        # "config" / "registry": vLLM itself refuses while reading the config, before its
        # max-length check; None: later (building the model) or a limit of kvplan's
        self.vllm_stage = vllm_stage


class HubError(KvplanError):
    """The hub or its cache could not provide a file."""

    default_hint = "pass a local folder or config.json, or warm the Hugging Face cache first"


class StartupError(KvplanError):
    """vLLM itself would refuse this deployment at start-up (exit 1, like a capacity error)."""

    exit_code = EXIT_DOES_NOT_FIT
    default_hint = "change the deployment so that vLLM accepts it"
