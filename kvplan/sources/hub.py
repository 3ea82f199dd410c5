"""Where config files come from: a local file or folder, or the Hugging Face Hub (and its cache).

With `json_files` (reading them) and `st_modules` (the sentence-transformers files beside them),
the only place where kvplan does I/O; `hub_errors` puts the Hub's failures in words. Hub access
goes through `huggingface_hub` alone, which reads the environment itself (`HF_TOKEN`,
`HF_HOME`/`HF_HUB_CACHE`, `HF_HUB_OFFLINE`, `HF_ENDPOINT`); it is imported inside the functions so
that `kvplan --help` stays fast. Only `config.json`, `hf_quant_config.json` and a Mistral-format
checkpoint's `params.json` are ever downloaded; weights never are (their sizes and dtypes come from
safetensors headers, fetched by byte range).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError, InputError
from kvplan.sources.hub_errors import caused_by, damaged_hint, map_hub_error, network_types, transient_types
from kvplan.sources.json_files import MAX_CONFIG_BYTES, parse_json_object, read_json_object

__all__ = [
    "CONFIG_FILE",
    "MAX_CONFIG_BYTES",
    "QUANT_CONFIG_FILE",
    "ModelFiles",
    "load_model_files",
    "mistral_format",
    "safetensors_headers",
]

CONFIG_FILE = "config.json"
PARAMS_FILE = "params.json"  # a Mistral-format checkpoint's config (vLLM: MISTRAL_CONFIG_NAME)
CONFIG_FORMATS = ("auto", "hf", "mistral")  # vLLM's --config-format
QUANT_CONFIG_FILE = "hf_quant_config.json"  # ModelOpt checkpoints (NVFP4/FP8): KV-cache quant algo
SAFETENSORS_INDEX_FILE = "model.safetensors.index.json"
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
    # the format vLLM reads the model in: "hf" (config.json) or "mistral" (params.json, adapted
    # by kvplan.models.resolution.mistral_format into `config`); then `hf_config` is config.json's
    # raw dict beside it (None: the checkpoint has none)
    config_format: str = "hf"
    hf_config: dict[str, Any] | None = None
    # False: "auto" on a hub model whose file list could not be asked (offline, unreachable), so
    # the format came from the cache alone and vLLM online may read it otherwise
    config_format_certain: bool = True

    @property
    def is_hub(self) -> bool:
        return self.repo_id is not None


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


def is_hub_id(source: str) -> bool:
    """`ORG/NAME[@REV]`-shaped and not a path (`./x`, `x.json`, `/abs`): what a hub id looks like."""
    return not _looks_like_path(source) and _split_hub_id(source, None) is not None


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
    config_format: str = "auto",
) -> ModelFiles:
    """Read a model's `config.json` (and `hf_quant_config.json` if present).

    `source` is a path to a JSON config file, a local folder holding `config.json`, or a hub id
    `ORG/NAME` with an optional `@REVISION` (or `revision=`). It is local only if the path exists.
    `config_format` is vLLM's `--config-format`: "auto" reads a Mistral-format checkpoint
    (consolidated*.safetensors and params.json) from params.json as vLLM does, "hf" always
    config.json, "mistral" always params.json.
    Raises `ConfigError` for unreadable or malformed files, `HubError` for hub/cache failures,
    `InputError` for contradictory arguments.
    """
    if config_format not in CONFIG_FORMATS:
        raise InputError(f"unknown config format '{config_format}'",
                         hint=f"one of {', '.join(CONFIG_FORMATS)} (vLLM's --config-format)")
    path = Path(os.path.expanduser(source))
    if source and path.exists():
        if revision is not None:
            raise InputError(
                f"a revision ('{revision}') was given, but '{source}' is a local path",
                hint="revisions apply to hub models (ORG/NAME@REV); drop it or pass a hub id",
            )
        return _load_local(source, path, want_quant_config=want_quant_config,
                           config_format=config_format)

    hub = None if _looks_like_path(source) else _split_hub_id(source, revision)
    if hub is None:
        raise ConfigError(
            f"no such file or folder: '{source}'",
            hint="pass a config.json, a folder holding one, or a hub model id ORG/NAME[@REVISION]",
        )
    repo_id, rev = hub
    return _load_hub(source, repo_id, rev, want_quant_config=want_quant_config,
                     config_format=config_format)


def _load_local(source: str, path: Path, *, want_quant_config: bool,
                config_format: str = "auto") -> ModelFiles:
    folder = path if path.is_dir() else path.parent
    if path.is_file() and path.name == PARAMS_FILE and config_format == "auto":
        config_format = "mistral"  # a params.json given itself
    if config_format == "mistral" or (config_format == "auto" and _is_mistral_folder(folder)):
        return _load_local_mistral(source, folder, want_quant_config=want_quant_config)
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

    config = read_json_object(config_path)
    quant: dict | None = None
    quant_path = folder / QUANT_CONFIG_FILE
    if want_quant_config and quant_path.is_file() and quant_path != config_path:
        quant = read_json_object(quant_path)
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
    source: str, repo_id: str, revision: str | None, *, want_quant_config: bool,
    config_format: str = "auto",
) -> ModelFiles:
    certain = True
    if config_format != "hf":
        mistral, certain = ((True, True) if config_format == "mistral"
                            else _hub_is_mistral(repo_id, revision))
        if mistral:
            return _load_hub_mistral(source, repo_id, revision,
                                     want_quant_config=want_quant_config)
    config_file, config = _hub_json(repo_id, CONFIG_FILE, revision)
    snapshot = config_file.parent
    commit = snapshot.name if _COMMIT.match(snapshot.name) else None

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
        config_format_certain=certain,
    )


def _hub_json(repo_id: str, filename: str, revision: str | None) -> tuple[Path, dict[str, Any]]:
    """A hub file downloaded (or taken from the cache) and read as a JSON object; the Hub's
    failures in words (`map_hub_error`), a damaged file as a `ConfigError`."""
    try:
        path = Path(_hub_download(repo_id, filename, revision))
    except Exception as e:
        mapped = map_hub_error(e, repo_id, revision, filename)
        if mapped is None:
            raise
        raise mapped from e
    return path, read_json_object(path, label=f"{filename} of {repo_id} ({path})",
                                  hint=damaged_hint(repo_id, revision, filename))


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
            transient = caused_by(e, transient_types()) or (
                isinstance(e, errors.HfHubHTTPError) and e.response is not None
                and e.response.status_code in (408, 429, 500, 502, 503, 504))
            if attempt == 2 or not transient:
                raise
            time.sleep(1.0)


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
    except (hf_errors.EntryNotFoundError, *network_types()) as e:  # type: ignore[misc]
        # Absent on the Hub, or not cached while offline / the Hub is unreachable.
        if not isinstance(e, hf_errors.RemoteEntryNotFoundError) and not known_absent():
            return None, [
                f"{QUANT_CONFIG_FILE} of {repo_id} is not in the cache and the Hub was not "
                "reachable: assuming the checkpoint has none (a ModelOpt checkpoint without it "
                "may get the wrong KV-cache dtype)"
            ]
        return None, []
    except Exception as e:
        mapped = map_hub_error(e, repo_id, revision, QUANT_CONFIG_FILE)
        if mapped is None:
            raise
        raise mapped from e
    label = f"{QUANT_CONFIG_FILE} of {repo_id} ({path})"
    hint = damaged_hint(repo_id, revision, QUANT_CONFIG_FILE)
    return read_json_object(path, label=label, hint=hint), []


# --------------------------------------------------------------------------------------------
# Mistral-format checkpoints (params.json + consolidated*.safetensors), read as vLLM reads them:
# transformers_utils/config.py get_config (format detection) and MistralConfigParser.parse.

_CONSOLIDATED = "consolidated*.safetensors"


def _mistral_names(names: list[str]) -> bool:
    """vLLM: repo_utils.is_mistral_model_repo (a file whose base name matches) and
    file_or_path_exists(params.json) at the top of the repo."""
    from fnmatch import fnmatch

    return PARAMS_FILE in names and any(fnmatch(n.rsplit("/", 1)[-1], _CONSOLIDATED)
                                        for n in names)


def _is_mistral_folder(folder: Path) -> bool:
    if not (folder / PARAMS_FILE).is_file():  # cheap first: no walk of a folder without one
        return False
    try:
        names = [f.relative_to(folder).as_posix() for f in folder.rglob("*") if f.is_file()]
    except OSError:
        return False
    return _mistral_names(names)


def _hub_listing(repo_id: str, revision: str | None) -> list[str] | None:
    """The repo's file list (vLLM: repo_utils.list_repo_files), asked once (no retry loop, the
    probe's timeout); None when the Hub cannot be asked (offline, unreachable, refused)."""
    from urllib.parse import quote

    from huggingface_hub import constants
    from huggingface_hub.utils import build_hf_headers, get_session

    if constants.is_offline_mode():
        return None
    url = (f"{constants.ENDPOINT}/api/models/{repo_id}/tree/"
           f"{quote(revision or 'main', safe='')}?recursive=true")
    try:
        response = get_session().get(url, headers=build_hf_headers(), timeout=PROBE_TIMEOUT_S)
        if response.status_code != 200:
            return None
        entries = response.json()
    except Exception:  # unreachable, or not a listing: the config.json path reports it
        return None
    if not isinstance(entries, list):
        return None
    return [str(e.get("path")) for e in entries if isinstance(e, dict)
            and e.get("type") == "file"]


def _cached_snapshot(repo_id: str, revision: str | None) -> Path | None:
    """The cache snapshot folder holding this repo's params.json, if cached."""
    import huggingface_hub

    cached = huggingface_hub.try_to_load_from_cache(repo_id, PARAMS_FILE, revision=revision)
    return Path(cached).parent if isinstance(cached, str) else None


def _hub_is_mistral(repo_id: str, revision: str | None) -> tuple[bool, bool]:
    """(Mistral format, decided from the repo's listing rather than the cache alone)."""
    names = _hub_listing(repo_id, revision)
    if names is not None:
        return _mistral_names(names), True
    # offline / unreachable: what the cache holds (vLLM, offline, sees no listing and reads
    # config.json; kvplan plans the model the online vLLM serves, from the cached files)
    snapshot = _cached_snapshot(repo_id, revision)
    return snapshot is not None and _is_mistral_folder(snapshot), False


def mistral_format(files: ModelFiles) -> bool | None:
    """Whether vLLM reads this model in Mistral format (params.json) rather than config.json, as
    the load decided it (vLLM's get_config: --config-format, else consolidated*.safetensors and a
    params.json among the model's files). None: a hub model whose file list could not be asked
    (offline, unreachable) and whose cache holds no Mistral-format checkpoint."""
    if files.config_format == "mistral":
        return True
    return False if files.config_format_certain else None


def _mistral_missing(model: str) -> ConfigError:
    # vLLM: config.py _download_mistral_config_file
    return ConfigError(
        f"Failed to load mistral '{PARAMS_FILE}' config for model {model}. Please check if the "
        "model is a mistral-format model and if the config file exists.",
        hint="--config-format mistral needs a params.json; auto/hf read config.json")


def _format_note(hf: dict | None, dtype_from: str | None) -> str:
    note = ("vLLM reads this model in Mistral format: params.json (consolidated*.safetensors "
            "beside it, or --config-format mistral), adapted as vLLM's adapt_config_dict does")
    if hf is not None:
        note += "; config.json only fills the fields params.json lacks"
    if dtype_from:
        note += f"; model dtype {dtype_from} read from the safetensors headers"
    return note


def _mistral_files(source: str, repo_id: str | None, revision: str | None, params: dict,
                   params_path: Path, hf: dict | None, dtypes: list[str] | None,
                   quant: dict | None, folder: Path, commit: str | None,
                   notes: list[str]) -> ModelFiles:
    from kvplan.models.resolution.mistral_format import parse_params, safetensors_dtype

    dtype = None if params.get("dtype") is not None else safetensors_dtype(dtypes or ())
    config = parse_params(params, hf, dtypes, hf_max_positions=_hf_max_positions(params, hf))
    return ModelFiles(
        source=source, repo_id=repo_id, revision=revision, config=config,
        config_path=str(params_path), hf_quant_config=quant, local_dir=str(folder),
        commit_hash=commit, notes=(*notes, _format_note(hf, dtype)), config_format="mistral",
        hf_config=hf)


def _hf_max_positions(params: dict, hf: dict | None) -> int | None:
    """vLLM: config.py _maybe_retrieve_max_pos_from_hf reads config.json through transformers
    (`get_config(config_format="hf")`): a text config without max_position_embeddings gets its
    configuration class's default. Only asked when neither file names the length; None: the
    raw value (or vLLM's 128000 when transformers cannot read config.json either)."""
    if params.get("max_position_embeddings") is not None or hf is None:
        return None
    text = hf.get("text_config")
    if (text if isinstance(text, dict) else hf).get("max_position_embeddings") is not None:
        return None
    from kvplan.errors import KvplanError
    from kvplan.models.resolution.accessors import get_attr
    from kvplan.models.resolution.resolve import resolve

    try:
        value = get_attr(resolve(hf, CONFIG_FILE).hf_text_config, "max_position_embeddings")
    except KvplanError:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _load_local_mistral(source: str, folder: Path, *, want_quant_config: bool) -> ModelFiles:
    params_path = folder / PARAMS_FILE
    if not params_path.is_file():
        raise _mistral_missing(str(folder))
    params = read_json_object(params_path)
    hf = read_json_object(folder / CONFIG_FILE) if (folder / CONFIG_FILE).is_file() else None
    dtypes = None
    if params.get("dtype") is None:
        # vLLM: config.py _read_safetensors_metadata_in_dir (every *.safetensors of the folder)
        dtypes = _local_dtypes(folder)
    quant_path = folder / QUANT_CONFIG_FILE
    quant = read_json_object(quant_path) if want_quant_config and quant_path.is_file() else None
    return _mistral_files(source, None, None, params, params_path, hf, dtypes, quant, folder,
                          None, [])


def _load_hub_mistral(source: str, repo_id: str, revision: str | None, *,
                      want_quant_config: bool) -> ModelFiles:
    params_path, params = _hub_json(repo_id, PARAMS_FILE, revision)
    snapshot = params_path.parent
    commit = snapshot.name if _COMMIT.match(snapshot.name) else None
    notes: list[str] = []
    hf = None
    try:
        hf = _hub_json(repo_id, CONFIG_FILE, commit or revision)[1]
    except ConfigError:
        raise
    except Exception:  # vLLM: PreTrainedConfig.get_config_dict raising OSError → {}
        hf = None
    dtypes = None
    if params.get("dtype") is None:
        dtypes = _hub_param_dtypes(repo_id, commit or revision, snapshot)
        if dtypes is None:
            notes.append(f"the safetensors headers of {repo_id} are not available here: its "
                         "params.json has no dtype, so the model dtype is config.json's or "
                         "assumed")
    quant: dict | None = None
    if want_quant_config:
        quant, quant_notes = _fetch_hub_quant_config(repo_id, commit or revision)
        notes += quant_notes
    return _mistral_files(source, repo_id, revision, params, params_path, hf, dtypes, quant,
                          snapshot, commit, notes)


def _local_dtypes(folder: Path) -> list[str]:
    """Every tensor's dtype in the folder's *.safetensors headers (vLLM: config.py
    _read_safetensors_metadata_in_dir)."""
    return [str(info["dtype"]) for p in sorted(folder.glob("*.safetensors")) if p.is_file()
            for name, info in read_safetensors_header(p).items() if name != "__metadata__"]


def _hub_param_dtypes(repo_id: str, revision: str | None, snapshot: Path) -> list[str] | None:
    """The tensors' dtypes of a Mistral-format hub checkpoint (vLLM: MistralConfigParser.parse
    reads get_safetensors_params_metadata with consolidated.safetensors as the single file)."""
    local = _local_dtypes(snapshot)
    if local:
        return local
    import huggingface_hub
    from huggingface_hub import constants, errors

    single, index = constants.SAFETENSORS_SINGLE_FILE, constants.SAFETENSORS_INDEX_FILE
    constants.SAFETENSORS_SINGLE_FILE = "consolidated.safetensors"
    constants.SAFETENSORS_INDEX_FILE = "consolidated.safetensors.index.json"
    expected: tuple[type[BaseException], ...] = (
        errors.HfHubHTTPError, errors.EntryNotFoundError, errors.NotASafetensorsRepoError,
        errors.SafetensorsParsingError, errors.HFValidationError, OSError, *network_types())
    try:
        meta = huggingface_hub.get_safetensors_metadata(repo_id, revision=revision)
    except expected:
        return None
    finally:
        constants.SAFETENSORS_SINGLE_FILE, constants.SAFETENSORS_INDEX_FILE = single, index
    return [str(t.dtype) for f in meta.files_metadata.values() for t in f.tensors.values()]


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
        data = read_json_object(index)
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
    header = parse_json_object(raw, f"header of {path}", hint="re-download the file")
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
        *network_types(),
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
