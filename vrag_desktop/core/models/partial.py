"""The ``.partial/<owner>--<name>/`` folder of a pull: which files it keeps (checked, or partial
with the checksum still expected), which it fetches, the space that takes, and the last step —
the marker written atomically, then the folder moved where loaders look.

Why apart from the transfer (download.py): this is the part that decides what may be trusted after
a crash, a pause or a moved revision, and it needs no thread and no network.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from vrag_desktop.core.fsutil import atomic_write_json
from vrag_desktop.core.models.catalogue import human_bytes
from vrag_desktop.core.models.errors import DiskSpaceError, ModelError
from vrag_desktop.core.models.fit import DISK_MARGIN, free_bytes
from vrag_desktop.core.models.hub import RemoteFile, RemoteModel
from vrag_desktop.core.models.store import INCOMPLETE, MARKER, PULL_STATE, InstalledModel, ModelStore


def installed_copy(store: ModelStore, repo_id: str) -> InstalledModel | None:
    return next((m for m in store.downloaded() if m.id.lower() == repo_id.lower()), None)


def same_files(folder: Path, remote: RemoteModel) -> bool:
    """The installed copy is this commit's files (checksums from its marker, sizes on disk)."""
    marker = _read(folder / MARKER)
    if marker is None or marker.get("commit") != remote.commit:
        return False
    return all(
        (folder / f.path).is_file() and (folder / f.path).stat().st_size == f.size for f in remote.files
    )


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def prepare(
    partial: Path, remote: RemoteModel, installed: InstalledModel | None
) -> tuple[list[RemoteFile], int]:
    """Make ``partial`` hold only what is still right for this commit: verified files and partial
    files whose checksum is the one expected now (any commit's), unchanged files of the installed
    copy (hard links, no copy); write the new expectations. Returns (files to fetch, bytes kept)."""
    partial.mkdir(parents=True, exist_ok=True)
    old = _read(partial / PULL_STATE) or _read(partial / MARKER) or {}
    old_files: dict[str, Any] = old.get("files") or {}
    verified: dict[str, Any] = old.get("verified") or ({} if old.get("format") is None else old_files)
    wanted = {f.path: f for f in remote.files}
    for path in [p for p in partial.rglob("*") if p.is_file()]:
        rel = path.relative_to(partial).as_posix()
        name = rel[: -len(INCOMPLETE)] if rel.endswith(INCOMPLETE) else rel
        if rel in (PULL_STATE,):
            continue
        f = wanted.get(name)
        same = f is not None and (old_files.get(name) or {}) == f.as_json()
        if not same:
            path.unlink()
        elif not rel.endswith(INCOMPLETE) and verified.get(name) != f.as_json():  # type: ignore[union-attr]
            os.replace(
                path, partial / (name + INCOMPLETE)
            )  # here, not checked: fetched "to the end", then checked
    marker = _read(installed.path / MARKER) if installed else None
    for f in remote.files:
        target = partial / f.path
        source = installed.path / f.path if installed else None
        if target.exists() or source is None or marker is None:
            continue
        if (marker.get("files") or {}).get(f.path) == f.as_json() and _size(source) == f.size:
            target.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                os.link(source, target)
    now_verified = {f.path: f.as_json() for f in remote.files if (partial / f.path).is_file()}
    _write_state(partial, remote, now_verified)
    todo = [f for f in remote.files if f.path not in now_verified]
    kept = sum(f.size for f in remote.files if f.path in now_verified)
    kept += sum(
        (partial / (f.path + INCOMPLETE)).stat().st_size
        for f in todo
        if (partial / (f.path + INCOMPLETE)).exists()
    )
    return todo, kept


def _write_state(partial: Path, remote: RemoteModel, verified: dict[str, Any]) -> None:
    atomic_write_json(
        partial / PULL_STATE,
        {
            "repo_id": remote.repo_id,
            "revision": remote.revision,
            "commit": remote.commit,
            "endpoint": remote.endpoint,
            "files": {f.path: f.as_json() for f in remote.files},
            "verified": verified,
        },
    )


def record_verified(partial: Path, f: RemoteFile) -> None:
    state = _read(partial / PULL_STATE) or {}
    verified = dict(state.get("verified") or {})
    verified[f.path] = f.as_json()
    atomic_write_json(partial / PULL_STATE, {**state, "verified": verified})


def verified_bytes(partial: Path, remote: RemoteModel) -> int:
    return sum(f.size for f in remote.files if (partial / f.path).is_file())


def check_space(store: ModelStore, remote: RemoteModel, partial: Path, todo: list[RemoteFile]) -> None:
    left = sum(max(0, f.size - _size(partial / (f.path + INCOMPLETE))) for f in todo)
    free = free_bytes(store.root)
    if left and free < left + DISK_MARGIN:
        raise DiskSpaceError(
            f"not enough disk space for {remote.repo_id}: it needs {human_bytes(left)} more "
            f"(+{human_bytes(DISK_MARGIN)} kept free) but only {human_bytes(free)} is free at {store.root}. "
            "Free space, or move the data directory to a bigger disk"
        )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def finish(store: ModelStore, partial: Path, remote: RemoteModel) -> InstalledModel:
    """Every file passed: the marker (atomically, last), then the folder moves into place."""
    missing = [f.path for f in remote.files if not (partial / f.path).is_file()]
    if missing:  # pragma: no cover - a file vanished under us
        raise ModelError(f"{remote.repo_id}: {missing[0]} vanished before the download finished; pull again")
    atomic_write_json(
        partial / MARKER,
        {
            "format": 1,
            "repo_id": remote.repo_id,
            "revision": remote.revision,
            "commit": remote.commit,
            "endpoint": remote.endpoint,
            "files": {f.path: f.as_json() for f in remote.files},
            "downloaded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
    )
    (partial / PULL_STATE).unlink(missing_ok=True)
    store.install(partial, remote.repo_id)
    model = installed_copy(store, remote.repo_id)
    assert model is not None
    return model
