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


# why vLLM refuses a deployment before it sizes the KV cache (a StartupError's `cause`; the
# plan's `failure_cause` takes the same value)
STARTUP_CAUSES = ("max_model_len", "trust_remote_code", "config")


class StartupError(KvplanError):
    """vLLM itself would refuse this deployment at start-up, before it sizes the KV cache: a
    max_model_len past the config's derived one, custom code without --trust-remote-code, a
    configuration vLLM rejects (exit 1, like a capacity miss). It carries vLLM's exception type
    and text; `kvplan.pipeline.deploy.evaluate_plan` turns it into a plan that says so.

    Raise it as `StartupError.vllm("ValueError", vllm_text, cause="max_model_len", hint=...)`;
    the message is "vLLM would raise ValueError: <vllm_text>". A plain
    `StartupError("vLLM would raise X: text")` is read back into its type and text."""

    exit_code = EXIT_DOES_NOT_FIT
    default_hint = "change the deployment so that vLLM accepts it"

    def __init__(self, message: str, hint: str | None = None, *, error_type: str | None = None,
                 vllm_message: str | None = None, cause: str = "config") -> None:
        super().__init__(message, hint)
        if error_type is None:
            head, sep, text = message.partition(": ")
            words = head.split()
            if sep and len(words) == 4 and words[:3] == ["vLLM", "would", "raise"]:
                error_type, vllm_message = words[3], text
        if cause not in STARTUP_CAUSES:
            raise ValueError(f"unknown start-up cause {cause!r}; one of {STARTUP_CAUSES}")
        self.error_type = error_type or "RuntimeError"
        self.vllm_message = message if vllm_message is None else vllm_message
        self.cause = cause

    @classmethod
    def vllm(cls, error_type: str, vllm_message: str, *, cause: str = "config",
             hint: str | None = None) -> StartupError:
        """vLLM would raise `error_type` with exactly `vllm_message`."""
        return cls(f"vLLM would raise {error_type}: {vllm_message}", hint, error_type=error_type,
                   vllm_message=vllm_message, cause=cause)
