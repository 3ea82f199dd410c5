"""Where config files come from: a local file or folder, or the Hugging Face Hub (and its cache).

The only module of kvplan that does I/O. Hub access goes through `huggingface_hub` alone, which
reads the environment itself (`HF_TOKEN`, `HF_HOME`/`HF_HUB_CACHE`, `HF_HUB_OFFLINE`,
`HF_ENDPOINT`); it is imported inside the functions so that `kvplan --help` stays fast. Only
`config.json` and `hf_quant_config.json` are ever downloaded; weights never are (their sizes come
from safetensors headers, fetched by byte range).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError, HubError, InputError

__all__ = [
    "CONFIG_FILE",
    "MAX_CONFIG_BYTES",
    "QUANT_CONFIG_FILE",
    "ModelFiles",
    "load_model_files",
    "safetensors_headers",
]

CONFIG_FILE = "config.json"
QUANT_CONFIG_FILE = "hf_quant_config.json"  # ModelOpt checkpoints (NVFP4/FP8): KV-cache quant algo
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
MAX_CONFIG_BYTES = 16 * 1024 * 1024  # no real config comes near; a bigger file is a mistake
MAX_SAFETENSORS_HEADER_BYTES = 100 * 1000 * 1000  # the safetensors library's own limit

# ORG/NAME as the Hub spells repo ids; the library validates the finer rules.
_HUB_ID = re.compile(r"^[A-Za-z0-9_][\w.-]*/[A-Za-z0-9_][\w.-]*$")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class ModelFiles:
    """The raw config dicts of one model and where they were read from."""

    source: str  # as given by the user
    repo_id: str | None  # "ORG/NAME" for a hub model, None for a local path
    revision: str | None  # as requested (`@rev` or `revision=`), None = the default branch
    config: dict[str, Any]
    config_path: str  # the file actually read (for a hub model: inside the hub cache)
    hf_quant_config: dict[str, Any] | None
    local_dir: str | None  # folder holding config.json (local, or the cache snapshot)
    commit_hash: str | None = None  # hub models: the commit the cached snapshot belongs to
    notes: tuple[str, ...] = ()  # assumptions made while loading (e.g. quant config not cached)

    @property
    def is_hub(self) -> bool:
        return self.repo_id is not None


# --------------------------------------------------------------------------------------------
# Reading JSON files (local or cached): size limit, UTF-8, JSON, top-level object.


def _read_json_object(path: Path, *, label: str | None = None, hint: str | None = None) -> dict:
    """Read `path` as a JSON object; every failure is a one-line `ConfigError` naming the file."""
    name = label or str(path)
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise _too_big(name, size)
        with path.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read {name}: {e.strerror or e}", hint=hint) from e
    if len(data) > MAX_CONFIG_BYTES:  # stat can under-report (pipes, /proc)
        raise _too_big(name, len(data))
    return _parse_json_object(data, name, hint=hint)


def _too_big(name: str, size: int) -> ConfigError:
    return ConfigError(
        f"{name} is {size / 2**20:.1f} MiB, over the {MAX_CONFIG_BYTES // 2**20} MiB limit for a "
        "config file; refusing to parse it",
        hint="pass the model's config.json (a few KiB), not a weights or data file",
    )


def _parse_json_object(data: bytes, name: str, *, hint: str | None = None) -> dict:
    try:
        text = data.decode("utf-8-sig")  # tolerate a BOM, as editors on Windows write one
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{name} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
            hint=hint or "is this really a JSON config file? re-download or re-save it as UTF-8",
        ) from e
    if not text.strip():
        raise ConfigError(f"{name} is empty", hint=hint)
    try:
        # Python's json accepts Infinity/-Infinity/NaN (Nemotron-H's time_step_limit has Infinity).
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(
            f"{name} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}",
            hint=hint or "fix the file, or re-download it",
        ) from e
    except (ValueError, RecursionError) as e:  # e.g. a 5000-digit integer, absurd nesting
        raise ConfigError(f"{name} is not usable JSON: {e}", hint=hint) from e
    if not isinstance(value, dict):
        raise ConfigError(
            f"{name} holds a JSON {_json_kind(value)}, expected an object {{...}} at the top level",
            hint=hint or "pass the model's config.json",
        )
    return value


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


# --------------------------------------------------------------------------------------------
# Source classification.


def _looks_like_path(source: str) -> bool:
    return (
        source.startswith(("/", "./", "../", "~", ".\\", "..\\"))
        or source in (".", "..")
        or source.lower().endswith(".json")
        or "\\" in source
        or os.path.isabs(source)
    )


def _split_hub_id(source: str, revision: str | None) -> tuple[str, str | None] | None:
    """`ORG/NAME[@REV]` -> (repo_id, revision), or None if `source` is not shaped like a hub id."""
    repo_id, at, rev = source.partition("@")
    if not _HUB_ID.match(repo_id) or (at and not rev):
        return None
    if at and revision is not None and rev != revision:
        raise InputError(
            f"two revisions for {repo_id}: '@{rev}' in the name and revision '{revision}'",
            hint="give the revision once, either as ORG/NAME@REV or with --revision",
        )
    return repo_id, (rev if at else revision)


# --------------------------------------------------------------------------------------------
# Public API.


def load_model_files(
    source: str,
    *,
    revision: str | None = None,
    want_quant_config: bool = True,
) -> ModelFiles:
    """Read a model's `config.json` (and `hf_quant_config.json` if present).

    `source` is a path to a JSON config file, a local folder holding `config.json`, or a hub id
    `ORG/NAME` with an optional `@REVISION` (or `revision=`). It is local only if the path exists.
    Raises `ConfigError` for unreadable or malformed files, `HubError` for hub/cache failures,
    `InputError` for contradictory arguments.
    """
    path = Path(os.path.expanduser(source))
    if source and path.exists():
        if revision is not None:
            raise InputError(
                f"a revision ('{revision}') was given, but '{source}' is a local path",
                hint="revisions apply to hub models (ORG/NAME@REV); drop it or pass a hub id",
            )
        return _load_local(source, path, want_quant_config=want_quant_config)

    hub = None if _looks_like_path(source) else _split_hub_id(source, revision)
    if hub is None:
        raise ConfigError(
            f"no such file or folder: '{source}'",
            hint="pass a config.json, a folder holding one, or a hub model id ORG/NAME[@REVISION]",
        )
    repo_id, rev = hub
    return _load_hub(source, repo_id, rev, want_quant_config=want_quant_config)


def _load_local(source: str, path: Path, *, want_quant_config: bool) -> ModelFiles:
    if path.is_dir():
        folder = path
        config_path = path / CONFIG_FILE
        if not config_path.is_file():
            raise ConfigError(
                f"no {CONFIG_FILE} in folder '{folder}'",
                hint="pass the model folder that holds config.json, or the JSON file itself",
            )
    elif path.is_file():
        folder = path.parent
        config_path = path
    else:
        raise ConfigError(f"'{source}' is neither a file nor a folder")

    config = _read_json_object(config_path)
    quant: dict | None = None
    quant_path = folder / QUANT_CONFIG_FILE
    if want_quant_config and quant_path.is_file() and quant_path != config_path:
        quant = _read_json_object(quant_path)
    return ModelFiles(
        source=source,
        repo_id=None,
        revision=None,
        config=config,
        config_path=str(config_path),
        hf_quant_config=quant,
        local_dir=str(folder),
    )


def _load_hub(
    source: str, repo_id: str, revision: str | None, *, want_quant_config: bool
) -> ModelFiles:
    try:
        config_file = Path(_hub_download(repo_id, CONFIG_FILE, revision))
    except Exception as e:
        mapped = _map_hub_error(e, repo_id, revision, CONFIG_FILE)
        if mapped is None:
            raise
        raise mapped from e

    snapshot = config_file.parent
    commit = snapshot.name if _COMMIT.match(snapshot.name) else None
    label = f"{CONFIG_FILE} of {repo_id} ({config_file})"
    config = _read_json_object(
        config_file, label=label, hint=_damaged_hint(repo_id, revision, CONFIG_FILE)
    )

    quant: dict | None = None
    notes: list[str] = []
    if want_quant_config:
        # Same commit as config.json, so the two files always belong together.
        quant, notes = _fetch_hub_quant_config(repo_id, commit or revision)

    return ModelFiles(
        source=source,
        repo_id=repo_id,
        revision=revision,
        config=config,
        config_path=str(config_file),
        hf_quant_config=quant,
        local_dir=str(snapshot),
        commit_hash=commit,
        notes=tuple(notes),
    )


def _hub_download(repo_id: str, filename: str, revision: str | None) -> str:
    """`hf_hub_download`, but a file that is not cached is first asked for once, without the
    library's retry loop (5 retries, up to 8 s apart, on any network error): an unreachable Hub
    (DNS, refused connection) or a 401/404 fails at once; only a timeout or an HTTP 408/429/5xx
    gets one quiet second try. A cached file needs no probe (the library falls back to it)."""
    import huggingface_hub  # lazy: importing it costs ~0.3 s
    from huggingface_hub import constants

    if not constants.is_offline_mode() and huggingface_hub.try_to_load_from_cache(
            repo_id, filename, revision=revision) is None:
        _probe(repo_id, filename, revision)
    return str(huggingface_hub.hf_hub_download(repo_id, filename, revision=revision))


PROBE_TIMEOUT_S = 10.0


def _probe(repo_id: str, filename: str, revision: str | None) -> None:
    """One HEAD request for the file (its metadata); raises the library's exception."""
    import time

    import huggingface_hub
    from huggingface_hub import errors

    url = huggingface_hub.hf_hub_url(repo_id, filename, revision=revision)
    for attempt in (1, 2):
        try:
            huggingface_hub.get_hf_file_metadata(url, timeout=PROBE_TIMEOUT_S)
            return
        except Exception as e:
            transient = _caused_by(e, _transient_types()) or (
                isinstance(e, errors.HfHubHTTPError) and e.response is not None
                and e.response.status_code in (408, 429, 500, 502, 503, 504))
            if attempt == 2 or not transient:
                raise
            time.sleep(1.0)


def _transient_types() -> tuple[type[BaseException], ...]:
    """Failures a retry can fix: timeouts and a connection dropped mid-answer."""
    types: list[type[BaseException]] = [TimeoutError]
    try:
        import httpx2

        types += [httpx2.TimeoutException, httpx2.RemoteProtocolError]
    except ImportError:
        pass
    return tuple(types)


def _damaged_hint(repo_id: str, revision: str | None, filename: str) -> str:
    return (
        "the cached copy may be damaged: re-fetch it with "
        f"`hf download {repo_id}{_rev_flag(revision)} {filename} --force-download`"
    )


def _fetch_hub_quant_config(repo_id: str, revision: str | None) -> tuple[dict | None, list[str]]:
    """`hf_quant_config.json` of a hub model; its absence is the normal case, not an error."""
    import huggingface_hub
    from huggingface_hub import _CACHED_NO_EXIST  # exported sentinel of try_to_load_from_cache
    from huggingface_hub import errors as hf_errors

    def known_absent() -> bool:
        # The cache records files the Hub said do not exist (`.no_exist/<commit>/<file>`); a
        # commit never changes, so that answer needs no network round trip.
        cached = huggingface_hub.try_to_load_from_cache(
            repo_id, QUANT_CONFIG_FILE, revision=revision
        )
        return cached is _CACHED_NO_EXIST

    if revision is not None and _COMMIT.match(revision) and known_absent():
        return None, []
    try:
        path = Path(_hub_download(repo_id, QUANT_CONFIG_FILE, revision))
    except (hf_errors.EntryNotFoundError, *_network_types()) as e:  # type: ignore[misc]
        # Absent on the Hub, or not cached while offline / the Hub is unreachable.
        if not isinstance(e, hf_errors.RemoteEntryNotFoundError) and not known_absent():
            return None, [
                f"{QUANT_CONFIG_FILE} of {repo_id} is not in the cache and the Hub was not "
                "reachable: assuming the checkpoint has none (a ModelOpt checkpoint without it "
                "may get the wrong KV-cache dtype)"
            ]
        return None, []
    except Exception as e:
        mapped = _map_hub_error(e, repo_id, revision, QUANT_CONFIG_FILE)
        if mapped is None:
            raise
        raise mapped from e
    label = f"{QUANT_CONFIG_FILE} of {repo_id} ({path})"
    hint = _damaged_hint(repo_id, revision, QUANT_CONFIG_FILE)
    return _read_json_object(path, label=label, hint=hint), []


# --------------------------------------------------------------------------------------------
# Error mapping: library exceptions -> one-line HubError with a hint. Never echo a token.


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


def _caused_by(error: BaseException, types: tuple[type[BaseException], ...]) -> bool:
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, types):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _network_types() -> tuple[type[BaseException], ...]:
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


def _map_hub_error(
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

    offline = constants.is_offline_mode() or _caused_by(e, (errors.OfflineModeIsEnabled,))
    if isinstance(e, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled) and offline:
        return HubError(
            f"{filename} of {where} is not in the Hugging Face cache and offline mode is on "
            "(HF_HUB_OFFLINE=1)",
            hint=get_it,
        )
    network = _network_types()
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


# --------------------------------------------------------------------------------------------
# Safetensors headers (dtype/shape of every tensor) without reading tensor data.


def safetensors_headers(files: ModelFiles) -> dict[str, dict] | None:
    """The header of each safetensors file of the checkpoint, keyed by file name.

    Each header maps tensor name -> {"dtype", "shape", "data_offsets"} plus "__metadata__" (a
    dict, possibly empty). Files are chosen as vLLM does: the shards named by
    `model.safetensors.index.json` if present, else every `*.safetensors`. Local folders (and a
    fully cached hub snapshot) are read from disk; otherwise the Hub serves the headers by byte
    range. Returns None when no complete set is available (offline, not a safetensors repo, shards
    missing): weights are then estimated elsewhere. A corrupt local file is a `ConfigError`.
    """
    if files.local_dir is not None:
        local = _local_headers(Path(files.local_dir), trust_glob=not files.is_hub)
        if local is not None or not files.is_hub:
            return local
    assert files.repo_id is not None
    return _hub_headers(files.repo_id, files.commit_hash or files.revision)


def _local_shards(folder: Path) -> list[str] | None:
    """Relative names of the shards to read, or None if the set is incomplete/unknown."""
    index = folder / SAFETENSORS_INDEX_FILE
    if index.is_file():
        data = _read_json_object(index)
        weight_map = data.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ConfigError(f"{index} has no 'weight_map' object")
        names = sorted({str(v) for v in weight_map.values()})
        if not all((folder / n).is_file() for n in names):
            return None
        return names
    return sorted(p.name for p in folder.glob("*.safetensors") if p.is_file()) or None


def _local_headers(folder: Path, *, trust_glob: bool) -> dict[str, dict] | None:
    names = _local_shards(folder)
    if names is None:
        return None
    if not trust_glob and not (folder / SAFETENSORS_INDEX_FILE).is_file():
        # A hub snapshot without the index: complete only if it is a single-file checkpoint.
        if names != ["model.safetensors"]:
            return None
    return {name: read_safetensors_header(folder / name) for name in names}


def read_safetensors_header(path: str | os.PathLike[str]) -> dict:
    """Parse one file's header: u64 little-endian length N, then N bytes of UTF-8 JSON."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise ConfigError(f"{path} is too short to be a safetensors file ({size} bytes)")
            n = int.from_bytes(prefix, "little")
            if n > MAX_SAFETENSORS_HEADER_BYTES or 8 + n > size:
                raise ConfigError(
                    f"{path} is not a valid safetensors file "
                    f"(header length {n}, file {size} bytes)",
                    hint="the download may be truncated; re-download the file",
                )
            raw = f.read(n)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    header = _parse_json_object(raw, f"header of {path}", hint="re-download the file")
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not (isinstance(info, dict) and {"dtype", "shape", "data_offsets"} <= info.keys()):
            raise ConfigError(f"{path}: tensor '{name}' lacks dtype/shape/data_offsets")
    header.setdefault("__metadata__", {})
    return header


def _hub_headers(repo_id: str, revision: str | None) -> dict[str, dict] | None:
    import huggingface_hub
    from huggingface_hub import errors

    expected: tuple[type[BaseException], ...] = (
        errors.HfHubHTTPError,
        errors.EntryNotFoundError,
        errors.NotASafetensorsRepoError,
        errors.SafetensorsParsingError,
        errors.HFValidationError,
        OSError,  # includes ConnectionError / OfflineModeIsEnabled
        *_network_types(),
    )
    try:
        meta = huggingface_hub.get_safetensors_metadata(repo_id, revision=revision)
    except expected:
        return None
    out: dict[str, dict] = {}
    for filename, file_meta in sorted(meta.files_metadata.items()):
        header: dict[str, Any] = {"__metadata__": dict(file_meta.metadata or {})}
        for name, t in file_meta.tensors.items():
            header[name] = {
                "dtype": t.dtype,
                "shape": list(t.shape),
                "data_offsets": list(t.data_offsets),
            }
        out[filename] = header
    return out
