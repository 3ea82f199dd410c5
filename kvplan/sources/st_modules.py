"""The model folder's sentence-transformers files (`modules.json` and its Pooling module's
`config.json`), which decide vLLM's `--runner auto` (transformers_utils/config.py
get_pooling_config, repo_utils.file_or_path_exists): read from the folder kvplan already has —
a local model folder, or the hub cache snapshot of config.json. Never downloaded: a hub model
whose modules.json the cache neither holds nor knows absent stays unknown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import ConfigError
from kvplan.sources.hub import CONFIG_FILE, ModelFiles
from kvplan.sources.json_files import MAX_CONFIG_BYTES, read_json_object

MODULES_FILE = "modules.json"
# vLLM: transformers_utils/config.py _ST_POOLING_MODULE_TYPES (0.31–0.34)
ST_POOLING_MODULE_TYPES = frozenset({
    "sentence_transformers.models.Pooling",
    "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
})


@dataclass(frozen=True)
class StModules:
    """What kvplan saw: `known` — whether modules.json is known present or absent; `pooling` —
    the Pooling module's config.json ({} when that file is missing), None without a Pooling
    module."""

    known: bool
    pooling: dict[str, Any] | None = None


def read_st_modules(files: ModelFiles) -> StModules:
    """The sentence-transformers pooling module next to `files.config_path`."""
    folder = _model_folder(files)
    if folder is None:
        return StModules(known=False)
    modules = folder / MODULES_FILE
    if not modules.is_file():
        return StModules(known=files.repo_id is None or _known_absent(files))
    entries = _read_modules(modules)
    pooling = next((e for e in entries if isinstance(e, dict) and e.get("type")
                    in ST_POOLING_MODULE_TYPES), None)
    if pooling is None:
        return StModules(known=True)
    cfg = folder / str(pooling.get("path", "")) / CONFIG_FILE
    return StModules(known=True, pooling=read_json_object(cfg) if cfg.is_file() else {})


def _model_folder(files: ModelFiles) -> Path | None:
    """The folder vLLM would be given: a local folder, the folder of a file named config.json
    or of a Mistral-format params.json, or the hub snapshot; None for a JSON file of another
    name (a config, not a model folder)."""
    if files.local_dir is None:
        return None
    if (files.repo_id is None and files.config_format != "mistral"
            and Path(files.config_path).name != CONFIG_FILE):
        return None
    return Path(files.local_dir)


def _known_absent(files: ModelFiles) -> bool:
    """The hub cache records that the Hub has no modules.json at this commit (vLLM:
    file_or_path_exists → try_to_load_from_cache returns _CACHED_NO_EXIST)."""
    import huggingface_hub
    from huggingface_hub import _CACHED_NO_EXIST

    assert files.repo_id is not None
    cached = huggingface_hub.try_to_load_from_cache(
        files.repo_id, MODULES_FILE, revision=files.commit_hash or files.revision)
    return cached is _CACHED_NO_EXIST


def _read_modules(path: Path) -> list[Any]:
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{path} is over the {MAX_CONFIG_BYTES // 2**20} MiB limit")
        value = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ConfigError(f"cannot read {path}: {e}",
                          hint="a sentence-transformers modules.json is a JSON list") from e
    if not isinstance(value, list):
        raise ConfigError(f"{path} is not a JSON list",
                          hint="a sentence-transformers modules.json lists the modules")
    return value
