r"""The shell around a `vllm serve` line: text → simple commands → words (`shlex`), with `\`
continuations, quotes, comments, `VAR=value` prefixes, `export` lines, `env`/`sudo`/`nohup`-style
wrappers, pipes and redirections; which command starts vLLM's server (`vllm serve`,
`python -m vllm.entrypoints.openai.api_server` and the other `-m` spellings,
`python -m vllm.entrypoints.cli.main serve`, the `vllm/vllm-openai` image), and the environment
it gets."""

from __future__ import annotations

import re
import shlex

from kvplan.errors import InputError

_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_REDIRECT = re.compile(r"\d*(?:>>|>&|>\||<<<|<<|<&|<>|>|<)|&>>|&>")
_OP_BREAK = set(" \t\n;|&<>")


def _skip_word(text: str, i: int) -> int:
    """Index after one shell word starting at i (quotes respected, used for redirect targets)."""
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    quote = None
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c in _OP_BREAK:
            break
        i += 1
    return i


def shell_segments(text: str) -> list[str]:
    """Split shell text into simple commands at unquoted newlines, `;`, `|`, `&&`, `||`, `&`;
    drop `\\`-newline continuations, `#` comments and redirections (`> log 2>&1`)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    segments: list[str] = []
    cur: list[str] = []
    quote: str | None = None
    i, n = 0, len(text)

    def at_word_start() -> bool:
        return not cur or cur[-1] in " \t"

    def flush() -> None:
        seg = "".join(cur).strip()
        if seg:
            segments.append(seg)
        cur.clear()

    while i < n:
        c = text[i]
        if quote == "'":
            cur.append(c)
            if c == "'":
                quote = None
            i += 1
            continue
        if quote == '"':
            if c == "\\" and i + 1 < n:
                if text[i + 1] == "\n":  # continuation inside double quotes
                    i += 2
                    continue
                cur.append(text[i:i + 2])
                i += 2
                continue
            cur.append(c)
            if c == '"':
                quote = None
            i += 1
            continue
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2
                continue
            cur.append(text[i:i + 2])
            i += 2
            continue
        if c in "'\"":
            quote = c
            cur.append(c)
            i += 1
            continue
        if c == "#" and at_word_start():
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in "\n;":
            flush()
            i += 1
            continue
        if c == "|":
            flush()
            i += 2 if text[i + 1:i + 2] in ("|", "&") else 1
            continue
        if c == "&" and text[i + 1:i + 2] == "&":
            flush()
            i += 2
            continue
        if c in "<>&" or (c.isdigit() and at_word_start()):
            m = _REDIRECT.match(text, i)
            if m and (c != "&" or m.group().startswith("&>")):
                j = m.end()
                if m.group().endswith("&"):
                    while j < n and (text[j].isdigit() or text[j] == "-"):
                        j += 1
                else:
                    j = _skip_word(text, j)
                i = j
                cur.append(" ")
                continue
            if c == "&":  # background
                flush()
                i += 1
                continue
        cur.append(c)
        i += 1
    if quote:
        raise InputError(f"unbalanced {quote} quote in the command line",
                         hint="close every quote; JSON values go in single quotes: --speculative-config '{...}'")
    flush()
    return segments


def split_words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, comments=False, posix=True)
    except ValueError as e:  # "No closing quotation", "No escaped character"
        raise InputError(f"cannot split the command line: {e}",
                         hint="check the quotes and the trailing backslashes") from None


_PY = re.compile(r"^(?:.*/)?python(?:\d+(?:\.\d+)*)?(?:\.exe)?$")
_VLLM_BIN = re.compile(r"^(?:.*/)?vllm(?:\.exe)?$")
_IMAGE = re.compile(r"^(?:[\w.\-]+(?::\d+)?/)*vllm-openai(?::[\w.\-]+)?(?:@sha256:[0-9a-f]+)?$")
_API_MODULES = {
    "vllm.entrypoints.openai.api_server": "api_server",
    "vllm.entrypoints.launchers.api_server.entry": "api_server",
    "vllm.entrypoints.api_server": "api_server",
}
_VLLM_SUBCOMMANDS = {"chat", "complete", "bench", "collect-env", "run-batch", "launch", "download-kernels",
                     "preload", "snapshot", "--version", "-v", "--help", "-h"}


class NotServe(Exception):
    """A vLLM command that is not the server (vllm bench, vllm chat ...)."""


def find_entry(words: list[str]) -> tuple[int, str] | None:
    """(index of the first vLLM argument, entry kind) if `words` runs the vLLM server.

    Raises NotServe for another vLLM subcommand (`vllm bench serve`, `vllm chat`)."""
    for i, w in enumerate(words):
        nxt = words[i + 1] if i + 1 < len(words) else None
        if _VLLM_BIN.match(w):
            if nxt == "serve":
                return i + 2, "serve"
            if nxt in _VLLM_SUBCOMMANDS:
                raise NotServe(f"vllm {nxt}")
            continue  # e.g. `pip install vllm`
        if _PY.match(w):
            j = i + 1
            while j < len(words) and words[j].startswith("-") and words[j] != "-m":
                j += 2 if words[j] in ("-X", "-W") else 1
            if j + 1 < len(words) and words[j] == "-m":
                mod = words[j + 1]
                if mod in _API_MODULES:
                    return j + 2, "api_server"
                if mod in ("vllm.entrypoints.cli.main", "vllm"):
                    if j + 2 < len(words) and words[j + 2] == "serve":
                        return j + 3, "serve"
                    raise NotServe(f"python -m {mod} {' '.join(words[j + 2:j + 3])}".strip())
        if _IMAGE.match(w):
            # The vllm/vllm-openai image's ENTRYPOINT is `vllm serve`.
            if words[i + 1:i + 3] == ["vllm", "serve"]:
                return i + 3, "serve"
            return i + 1, "image"
    return None


_ENV_COMMANDS = {"export", "env", "declare", "typeset", "setenv"}


def leading_assignments(words: list[str], env: dict[str, str]) -> None:
    """`A=1 B=2 cmd`, `export A=1`, `env -u X A=1 cmd`: the environment the command gets."""
    i = 0
    if words and words[0] in _ENV_COMMANDS:
        i = 1
        while i < len(words) and words[i].startswith("-"):
            i += 2 if words[i] in ("-u", "--unset") else 1
    while i < len(words) and _ASSIGN.match(words[i]):
        k, v = words[i].split("=", 1)
        env[k] = v
        i += 1


def prefix_env(words: list[str], env: dict[str, str]) -> None:
    """Assignments anywhere before the entry point: `A=1 env B=2 nohup vllm serve`, `docker -e A=1`."""
    for w in words:
        if _ASSIGN.match(w):
            k, v = w.split("=", 1)
            env[k] = v

