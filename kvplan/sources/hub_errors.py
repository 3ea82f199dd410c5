"""The Hub's failures in words: a `huggingface_hub` exception → one `HubError` line with a hint
(gated, not found, offline, unreachable, no access ...), never echoing a token; which failures are
the network's and which a retry can fix."""

from __future__ import annotations

import os
from pathlib import Path

from kvplan.errors import HubError


def _rev_flag(revision: str | None) -> str:
    return f" --revision {revision}" if revision else ""


def _known_tokens() -> list[str]:
    """Token values that must never appear in a message (env, or the file `hf auth login` wrote).

    Read plainly rather than through `get_token()`, which may refresh an expiring token online.
    """
    tokens = [os.environ.get("HF_TOKEN"), os.environ.get("HUGGING_FACE_HUB_TOKEN")]
    try:
        from huggingface_hub import constants

        tokens.append(Path(constants.HF_TOKEN_PATH).read_text().strip())
    except Exception:  # no token file, unreadable, ...: nothing to scrub
        pass
    return [t.strip() for t in tokens if t and len(t.strip()) >= 4]


def _scrub(text: str) -> str:
    for token in _known_tokens():
        text = text.replace(token, "***")
    return text


def _one_line(text: str | None, limit: int = 200) -> str:
    lines = (text or "").strip().splitlines()
    line = _scrub(lines[0].strip()) if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def caused_by(error: BaseException, types: tuple[type[BaseException], ...]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, types):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def network_types() -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]  # incl. OfflineModeIsEnabled
    try:
        import httpx2  # huggingface_hub 2.x

        types.append(httpx2.TransportError)
    except ImportError:
        pass
    for mod in ("httpx", "requests"):  # older huggingface_hub releases
        try:
            m = __import__(mod)
            types.append(m.TransportError if mod == "httpx" else m.ConnectionError)
        except (ImportError, AttributeError):
            pass
    return tuple(types)


def map_hub_error(
    e: BaseException, repo_id: str, revision: str | None, filename: str
) -> HubError | None:
    """Translate an exception from `hf_hub_download`; None = not ours to translate (a bug)."""
    from huggingface_hub import constants, errors

    endpoint = constants.ENDPOINT
    where = f"{repo_id}@{revision}" if revision else repo_id
    page = f"{endpoint}/{repo_id}"
    has_token = bool(_known_tokens())
    login = "set HF_TOKEN or run `hf auth login`"
    get_it = (
        f"on a machine with network run `hf download {repo_id}{_rev_flag(revision)} {filename}` "
        f"and copy its cache ({constants.HF_HUB_CACHE}), or pass a local folder holding {filename}"
    )

    if isinstance(e, errors.GatedRepoError):
        return HubError(
            f"{repo_id} is a gated model: downloading {filename} needs an account with access",
            hint=(
                f"the token in use has no access: accept the terms at {page} with that account"
                if has_token
                else f"accept the terms at {page}, then {login}"
            ),
        )
    if isinstance(e, errors.RepositoryNotFoundError):
        return HubError(
            f"model {repo_id} not found on {endpoint}",
            hint=(
                "check the spelling; if it is private, the token in use has no access to it"
                if has_token
                else f"check the spelling; if it is private, {login}"
            ),
        )
    if isinstance(e, errors.RevisionNotFoundError):
        return HubError(
            f"revision '{revision or 'main'}' not found in {repo_id}",
            hint="use a branch, tag or full commit hash that exists in the repo",
        )
    if isinstance(e, errors.DisabledRepoError):
        return HubError(f"model {repo_id} has been disabled on {endpoint}")
    if isinstance(e, errors.RemoteEntryNotFoundError):
        return HubError(
            f"{where} has no {filename}",
            hint="is it a transformers-style model repo? otherwise pass a local config.json",
        )
    if isinstance(e, errors.HfHubHTTPError):
        status = e.response.status_code if e.response is not None else None
        if status in (401, 403):
            return HubError(
                f"access to {repo_id} denied (HTTP {status}) while fetching {filename}",
                hint=(
                    f"the token in use is invalid or lacks access to {page}; renew it, then {login}"
                    if has_token
                    else f"{login} with an account that can read {page}"
                ),
            )
        detail = _one_line(getattr(e, "server_message", None))
        return HubError(
            f"the Hub answered HTTP {status} for {filename} of {where}"
            + (f": {detail}" if detail else ""),
            hint="retry later, or use HF_HUB_OFFLINE=1 with a cache warmed on another machine",
        )

    offline = constants.is_offline_mode() or caused_by(e, (errors.OfflineModeIsEnabled,))
    if isinstance(e, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled) and offline:
        return HubError(
            f"{filename} of {where} is not in the Hugging Face cache and offline mode is on "
            "(HF_HUB_OFFLINE=1)",
            hint=get_it,
        )
    network = network_types()
    if isinstance(e, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled) or isinstance(
        e, network
    ):
        return HubError(
            f"cannot reach {endpoint} to fetch {filename} of {where}, and it is not cached",
            hint=(
                "check the network, proxy and HF_ENDPOINT; or warm the cache where there is "
                f"network (`hf download {repo_id}{_rev_flag(revision)} {filename}`) and run "
                "with HF_HUB_OFFLINE=1; or pass a local folder"
            ),
        )
    if isinstance(e, errors.HFValidationError):
        return HubError(
            f"'{repo_id}' is not a valid hub model id ({_one_line(str(e), 120)})",
            hint="a hub model is named ORG/NAME, optionally ORG/NAME@REVISION",
        )
    if isinstance(e, OSError):  # cache folder not writable, disk full, ...
        return HubError(
            f"cannot store {filename} of {where} in the cache ({constants.HF_HUB_CACHE}): "
            f"{_one_line(e.strerror or str(e), 120)}",
            hint="set HF_HUB_CACHE (or HF_HOME) to a writable folder",
        )
    return None


def transient_types() -> tuple[type[BaseException], ...]:
    """Failures a retry can fix: timeouts and a connection dropped mid-answer."""
    types: list[type[BaseException]] = [TimeoutError]
    try:
        import httpx2

        types += [httpx2.TimeoutException, httpx2.RemoteProtocolError]
    except ImportError:
        pass
    return tuple(types)


def damaged_hint(repo_id: str, revision: str | None, filename: str) -> str:
    return (
        "the cached copy may be damaged: re-fetch it with "
        f"`hf download {repo_id}{_rev_flag(revision)} {filename} --force-download`"
    )

