"""Build a real Hugging Face hub cache layout on disk, for tests that must not touch the network.

The layout is the one `huggingface_hub` itself writes and reads (`hf_hub_download`, offline mode):

    <root>/models--ORG--NAME/
        blobs/<git-blob-sha1 of the bytes>
        snapshots/<commit>/<filename>      -> ../../blobs/<sha>   (relative symlink, or a copy)
        refs/main                          the commit hash, no trailing newline
        .no_exist/<commit>/<filename>      empty marker: "the Hub said this file does not exist"

Point `HF_HUB_CACHE` at `root` (and set `HF_HUB_OFFLINE=1`); see `use_hub_cache` for the in-process
variant (huggingface_hub reads those variables once, at import).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["DEFAULT_COMMIT", "commit_for", "make_hub_cache", "use_hub_cache"]

DEFAULT_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def commit_for(repo_id: str) -> str:
    """A deterministic, realistic-looking 40-hex commit hash for `repo_id`."""
    return hashlib.sha1(f"kvplan-test:{repo_id}".encode()).hexdigest()


def _git_blob_sha1(data: bytes) -> str:
    # The etag the Hub reports for a non-LFS file is its git blob id.
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def make_hub_cache(
    root: str | os.PathLike[str],
    repo_id: str,
    files: Mapping[str, bytes | str | os.PathLike[str]],
    *,
    commit: str | None = None,
    refs: Iterable[str] = ("main",),
    no_exist: Iterable[str] = (),
    symlinks: bool = True,
) -> Path:
    """Write `files` (repo filename -> bytes, or a path whose bytes are copied) into a hub cache.

    `commit` defaults to `commit_for(repo_id)`; each name in `refs` (branches/tags) points at it;
    each name in `no_exist` is marked as known-absent at that commit. Calling it again for the same
    repo with another commit adds a snapshot (blobs are shared). Returns the snapshot folder
    `<root>/models--ORG--NAME/snapshots/<commit>`; set `HF_HUB_CACHE=<root>` to use it.
    """
    commit = commit or commit_for(repo_id)
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        raise ValueError(f"commit must be 40 lowercase hex digits, got {commit!r}")
    repo_dir = Path(root) / ("models--" + repo_id.replace("/", "--"))
    blobs = repo_dir / "blobs"
    snapshot = repo_dir / "snapshots" / commit
    blobs.mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)

    for filename, content in files.items():
        data = content if isinstance(content, bytes) else Path(content).read_bytes()
        blob = blobs / _git_blob_sha1(data)
        if not blob.exists():
            blob.write_bytes(data)
        pointer = snapshot / filename
        pointer.parent.mkdir(parents=True, exist_ok=True)
        if pointer.is_symlink() or pointer.exists():
            pointer.unlink()
        if symlinks:
            try:
                pointer.symlink_to(os.path.relpath(blob, pointer.parent))
                continue
            except OSError:  # no symlinks (e.g. Windows without developer mode): copy like the lib
                pass
        pointer.write_bytes(data)

    for ref in refs:
        ref_path = repo_dir / "refs" / ref
        ref_path.parent.mkdir(parents=True, exist_ok=True)
        ref_path.write_text(commit)

    for filename in no_exist:
        marker = repo_dir / ".no_exist" / commit / filename
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()

    return snapshot


def use_hub_cache(monkeypatch, root: str | os.PathLike[str], *, offline: bool = True) -> None:
    """Make `huggingface_hub` in this process use the cache at `root` (and offline mode).

    Sets the environment variables (for subprocesses and a not-yet-imported library) and the
    library's own constants, which it computed from the environment when first imported.
    """
    import huggingface_hub.constants as constants

    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(root))
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)
