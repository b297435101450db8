"""Pulling a model: a generator of :class:`DownloadProgress` (bytes, speed, ETA, current file) that
the app runs in a task and the CLI draws as a bar.

Guarantees (each has a test in tests/test_models.py):

- **resume**: a pull stopped in any way — cancel/pause (the :class:`CancelToken`, or closing the
  generator), Ctrl-C, ``kill -9``, a dropped connection, a full disk — keeps what it fetched, and
  the same pull continues each file from its size;
- **never a corrupt model**: every file is checked against the hub's checksum before it counts; a
  mismatch deletes that file and says so; the folder gets its marker (atomically, last) only when
  every file passed, and only then is it moved where loaders look;
- **space**: refused up front when the disk cannot hold what is left to fetch (space named), and a
  disk that fills during the download stops it with the space named and nothing marked usable;
- **offline**: with offline mode on, nothing is opened: :class:`OfflineError` at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.models.catalogue import (
    CatalogueEntry,
    entry_from_folder,
    find_entry,
    guess_kind,
    human_bytes,
)
from vrag_desktop.core.models.errors import (
    ChecksumError,
    DiskSpaceError,
    ModelBusyError,
    ModelError,
    NetworkError,
)
from vrag_desktop.core.models.fit import free_bytes
from vrag_desktop.core.models.hub import (
    RemoteFile,
    RemoteModel,
    digest,
    download,
    fetch_remote,
    fetch_small_file,
    file_url,
    hub_error,
    request_headers,
    validate_repo_id,
)
from vrag_desktop.core.models.partial import (
    check_space,
    finish,
    installed_copy,
    prepare,
    record_verified,
    same_files,
    verified_bytes,
)
from vrag_desktop.core.models.settings import ModelSettings, load_settings, resolve_token
from vrag_desktop.core.models.store import INCOMPLETE, InstalledModel, ModelStore
from vrag_desktop.core.paths import DataLayout
from vrag_desktop.core.progress import Cancelled, CancelToken, Progress, RateMeter

POLL_SECONDS = 0.2


@dataclass(frozen=True)
class DownloadProgress(Progress):
    """``done``/``total`` are bytes of the whole model (files already here count as done); ``rate``
    bytes/s of this run; ``phase``: ``resolve``, ``wait`` (another download of it is stopping),
    ``download``, ``verify``, ``done``."""

    repo_id: str = ""
    file: str = ""
    file_done: int = 0
    file_total: int = 0
    files_done: int = 0
    files_total: int = 0


@dataclass(frozen=True)
class PullResult:
    repo_id: str
    model: InstalledModel | None
    cancelled: bool = False
    up_to_date: bool = False
    downloaded_bytes: int = 0  # fetched by this run
    kept_bytes: int = 0  # already here: verified files, partial files continued, unchanged files
    seconds: float = 0.0


def inspect_remote(
    layout: DataLayout, spec: str, revision: str | None = None, *, settings: ModelSettings | None = None
) -> tuple[RemoteModel, CatalogueEntry]:
    """What pulling ``spec`` would fetch, and an entry sized by the real file list (and by its
    ``config.json`` for a model the catalogue lacks) for :func:`core.models.fit.fits`: the verdict
    before the download. Network: the file list and, for an unknown model, its config."""
    settings = settings or load_settings(layout)
    repo_id = _repo_id(spec)
    settings.require_online(f"look up {repo_id}")
    token = resolve_token(layout)
    remote = fetch_remote(repo_id, revision, endpoint=settings.effective_endpoint, token=token)
    entry = find_entry(remote.repo_id)
    if entry is not None:
        return remote, dataclasses.replace(entry, download_bytes=remote.total_bytes, measured=True)
    config: dict[str, Any] | None = None
    with contextlib.suppress(ModelError, ValueError):
        config = json.loads(fetch_small_file(remote, "config.json", token))
    entry = CatalogueEntry(
        id=remote.repo_id,
        kind=guess_kind(remote.repo_id, config),
        title=remote.repo_id,
        config=config if isinstance(config, dict) else None,
        params=remote.total_bytes // 2,
        download_bytes=remote.total_bytes,
        measured=True,
    )
    return remote, entry


def _repo_id(spec: str) -> str:
    entry = find_entry(spec)
    if entry is not None and entry.builtin:
        raise ModelError(f"{entry.id} ships with the app: there is nothing to download")
    return entry.id if entry is not None else validate_repo_id(spec.strip())


class _Holder:
    """The model's file lock, released when the last of the pull and its worker lets go: a worker
    still blocked on the network after a cancel keeps the files to itself until it stops."""

    def __init__(self, lock: Any) -> None:
        self._lock, self._count, self._mutex = lock, 0, threading.Lock()

    def try_acquire(self) -> bool:
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            return False
        self._count = 1
        return True

    def enter(self) -> None:
        with self._mutex:
            self._count += 1

    def leave(self) -> None:
        with self._mutex:
            self._count -= 1
            if self._count == 0:
                self._lock.release()


class _Live:
    """What the worker thread reports to the generator."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.fetched = 0  # bytes written by this run (all files)
        self.file_have = 0  # bytes of the current file on disk
        self.hashed = 0
        self.phase = "download"
        self.stop = False
        self.error: BaseException | None = None

    def on_bytes(self, n: int) -> None:
        with self.mutex:
            self.fetched += n
            self.file_have += n

    def on_hashed(self, n: int) -> None:
        with self.mutex:
            self.hashed += n


def pull(
    layout: DataLayout,
    spec: str,
    revision: str | None = None,
    *,
    cancel: CancelToken | None = None,
    settings: ModelSettings | None = None,
    remote: RemoteModel | None = None,
    lock_wait: float = 15.0,
) -> Generator[DownloadProgress, None, PullResult]:
    """Download ``spec`` (a hub id or catalogue alias) at ``revision`` into the models folder.

    Stops at the next yield once ``cancel`` is set (or the generator is closed) and returns a result
    with ``cancelled=True``: everything fetched is kept for the next pull (pause = cancel + pull
    again). Raises a :class:`ModelError` subclass for everything a person must act on. ``remote``:
    the listing :func:`inspect_remote` already fetched (saves asking twice).
    """
    cancel = cancel or CancelToken()
    settings = settings or load_settings(layout)
    repo_id = _repo_id(spec)
    settings.require_online(f"download {repo_id}")
    endpoint = settings.effective_endpoint
    started = time.monotonic()
    yield DownloadProgress("resolve", 0, 0, repo_id=repo_id, message=f"Asking {endpoint} for {repo_id}…")
    token = resolve_token(layout)
    if remote is None or remote.endpoint != endpoint:
        remote = fetch_remote(repo_id, revision, endpoint=endpoint, token=token)
    repo_id, store = remote.repo_id, ModelStore(layout)
    holder = _Holder(store.lock(repo_id))
    deadline = time.monotonic() + lock_wait
    while not holder.try_acquire():
        if time.monotonic() > deadline:
            raise ModelBusyError(
                f"{repo_id} is being downloaded by another window or command; wait for it to finish"
            )
        yield DownloadProgress(
            "wait",
            0,
            remote.total_bytes,
            repo_id=repo_id,
            message="Waiting for the other download of it to stop…",
        )
        if cancel.wait(0.25):
            return PullResult(repo_id, None, cancelled=True, seconds=time.monotonic() - started)
    try:
        return (yield from _pull_locked(store, remote, token, cancel, holder, started))
    finally:
        holder.leave()


def _pull_locked(
    store: ModelStore,
    remote: RemoteModel,
    token: str | None,
    cancel: CancelToken,
    holder: _Holder,
    started: float,
) -> Generator[DownloadProgress, None, PullResult]:
    repo_id, total = remote.repo_id, remote.total_bytes
    installed = installed_copy(store, repo_id)
    if installed is not None and same_files(installed.path, remote):
        return PullResult(
            repo_id, installed, up_to_date=True, kept_bytes=total, seconds=time.monotonic() - started
        )
    partial = store.partial_folder(repo_id)
    todo, kept = prepare(partial, remote, installed)
    check_space(store, remote, partial, todo)
    headers = request_headers(token)
    live, meter = _Live(), RateMeter()
    done_files = len(remote.files) - len(todo)
    base = sum(f.size for f in remote.files if f not in todo)  # verified already
    for f in todo:
        inc = partial / (f.path + INCOMPLETE)
        live.file_have = inc.stat().st_size if inc.exists() else 0
        live.hashed, live.phase = 0, "download"
        holder.enter()
        worker = threading.Thread(
            target=_work, args=(live, holder, lambda f=f: _fetch(f, partial, remote, headers, live, cancel)),
            name=f"pull {repo_id}", daemon=True,
        )  # fmt: skip
        worker.start()
        try:
            last = live.fetched
            while worker.is_alive():
                worker.join(POLL_SECONDS)
                if cancel.cancelled:
                    live.stop = True
                    worker.join(1.0)
                    break
                meter.update(live.fetched - last)
                last = live.fetched
                yield _report(remote, f, live, meter, base, done_files)
        finally:
            live.stop = live.stop or worker.is_alive()  # closed at a yield: the worker stops too
        if cancel.cancelled or isinstance(live.error, Cancelled):
            return PullResult(repo_id, None, cancelled=True, downloaded_bytes=live.fetched, kept_bytes=kept,
                              seconds=time.monotonic() - started)  # fmt: skip
        if live.error is not None:
            _raise(live.error, f, inc, store, remote, token)
        base += f.size
        done_files += 1
        record_verified(partial, f)
    final = finish(store, partial, remote)
    yield DownloadProgress("done", total, total, repo_id=repo_id, files_done=done_files, files_total=done_files,
                           message=f"{repo_id} is ready")  # fmt: skip
    return PullResult(
        repo_id, final, downloaded_bytes=live.fetched, kept_bytes=kept, seconds=time.monotonic() - started
    )


def _work(live: _Live, holder: _Holder, job: Callable[[], None]) -> None:
    try:
        job()
    except BaseException as exc:  # handed to the generator, which words it
        live.error = exc
    finally:
        holder.leave()


def _fetch(
    f: RemoteFile,
    partial: Path,
    remote: RemoteModel,
    headers: dict[str, str],
    live: _Live,
    cancel: CancelToken,
) -> None:
    """Fetch (or continue) one file into ``<file>.incomplete``, check it, then give it its name."""
    final = partial / f.path
    inc = final.with_name(final.name + INCOMPLETE)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():  # here but never checked (a crash between rename and record): check it again
        os.replace(final, inc)
        live.file_have = f.size

    def stop() -> bool:
        return live.stop or cancel.cancelled

    download(file_url(remote, f.path), inc, size=f.size, headers=headers, on_bytes=live.on_bytes, stop=stop)
    live.phase = "verify"
    algorithm, want = f.checksum
    got = digest(inc, algorithm, live.on_hashed, stop)
    if got != want:
        inc.unlink(missing_ok=True)
        raise ChecksumError(
            f"{f.path} of {remote.repo_id} failed its checksum ({algorithm} {got[:12]}…, the hub says "
            f"{want[:12]}…): the file was discarded. Pull again to fetch it afresh; if it fails again, "
            f"{remote.endpoint} serves a damaged copy"
        )
    os.replace(inc, final)


def _report(
    remote: RemoteModel, f: RemoteFile, live: _Live, meter: RateMeter, base: int, done_files: int
) -> DownloadProgress:
    with live.mutex:
        have, hashed, phase = live.file_have, live.hashed, live.phase
    done = base + min(have, f.size)
    remaining = remote.total_bytes - done
    verb = "Checking" if phase == "verify" else "Downloading"
    return DownloadProgress(
        phase, done, remote.total_bytes, meter.rate, meter.eta(remaining) if phase == "download" else None,
        f"{verb} {f.path}", repo_id=remote.repo_id, file=f.path,
        file_done=hashed if phase == "verify" else min(have, f.size), file_total=f.size,
        files_done=done_files, files_total=len(remote.files),
    )  # fmt: skip


def _raise(
    exc: BaseException, f: RemoteFile, inc: Path, store: ModelStore, remote: RemoteModel, token: str | None
) -> None:
    """Word the worker's failure; the files fetched so far stay for the next pull."""
    have = inc.stat().st_size if inc.exists() else 0
    kept = f" ({human_bytes(have)} of {f.path} kept: the same pull continues from there)" if have else ""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        free = free_bytes(store.root)
        left = remote.total_bytes - verified_bytes(store.partial_folder(remote.repo_id), remote) - have
        raise DiskSpaceError(
            f"the disk filled while downloading {remote.repo_id}: {human_bytes(free)} free at {store.root}, "
            f"{human_bytes(left)} still to fetch. Nothing was marked usable; free space and pull again{kept}, "
            f"or `vrag-desktop models rm {remote.repo_id}` to discard the partial download"
        ) from None
    err = hub_error(exc, repo_id=remote.repo_id, endpoint=remote.endpoint, has_token=bool(token))
    if isinstance(err, NetworkError):
        raise NetworkError(f"{err}{kept}") from None
    if err is not None:
        raise err from None
    if isinstance(exc, OSError) and "onsistency check" in str(exc):
        raise ModelError(f"{remote.endpoint} sent {f.path} short or long: pull again{kept}") from None
    raise exc


def sized_entry(model: InstalledModel) -> CatalogueEntry:
    """An installed model's entry, sized from its real files (for :func:`fits`)."""
    return entry_from_folder(model.path, model.id)
