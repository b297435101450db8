"""A corpus: the files a person added, what was derived from them, and their vectors.

Layout of a corpus directory (inside the app's data directory, never in the user's folders)::

    manifest.sqlite   sources, items, vector ids (the source of truth)
    index/            FAISS base + segments (see vrag_desktop.core.index.store)
    derived/<id>/     page renders, image copies, clips, keyframes of source <id>
    .lock             held while a process writes the corpus

Indexing is :meth:`Corpus.scan` (what changed) then :meth:`Corpus.build` (derive + embed). Both are
generators yielding :class:`Progress`; build overlaps rendering/decoding with embedding and
checkpoints every few seconds, so it can be killed at any moment and resumed with no item lost or
duplicated.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import shutil
import threading
import time
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.derive import (
    DEFAULT_CLIP_SECONDS,
    Derived,
    DeriveOptions,
    SourceError,
    derive,
    expected_count,
)
from vrag_desktop.core.corpus.manifest import (
    I_EMBEDDED,
    I_FAILED,
    S_DUPLICATE,
    S_FAILED,
    S_INDEXED,
    S_PENDING,
    S_UNSUPPORTED,
    Manifest,
    NewItem,
    SourceRow,
)
from vrag_desktop.core.corpus.scan import ScanReport, os_error_message, sha256_file, walk
from vrag_desktop.core.embedders.base import Embedder, EmbedderError, EmbedInput
from vrag_desktop.core.index.store import VectorStore
from vrag_desktop.core.progress import CancelToken, Progress, RateMeter


class CorpusError(RuntimeError):
    """A corpus-level problem the person must act on (message says what to do)."""


class CorpusBusy(CorpusError):
    """Another process is indexing this corpus right now."""


@dataclass
class BuildReport:
    items: int = 0
    failed_items: int = 0
    failed_sources: int = 0
    seconds: float = 0.0
    cancelled: bool = False
    embed_seconds: float = 0.0
    wait_seconds: float = 0.0  # time the embedder sat idle waiting for derived input
    changed_during: list[str] = field(default_factory=list)


@dataclass
class _Result:
    source_id: int
    derived: Derived
    vectors: np.ndarray | None  # None: the item failed


class Corpus:
    """One named corpus on disk. Use from one thread at a time (the GUI runs it in a worker)."""

    def __init__(self, directory: Path, name: str | None = None, *, shared: bool = False) -> None:
        self.dir = Path(directory)
        self.name = name or self.dir.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest = Manifest(self.dir / "manifest.sqlite", shared=shared)
        self.derived_dir = self.dir / "derived"
        self._store: VectorStore | None = None
        self._lock_file: IO[str] | None = None

    def close(self) -> None:
        self.unlock()
        self.manifest.close()

    # ---------------------------------------------------------------- identity
    @property
    def embedder_id(self) -> str | None:
        return self.manifest.get_meta("embedder_id")

    @property
    def dim(self) -> int | None:
        v = self.manifest.get_meta("dim")
        return None if v is None else int(v)

    def bind_embedder(self, embedder: Embedder) -> None:
        """Record which embedder builds this corpus; refuse a different one."""
        info = embedder.info
        current = self.embedder_id
        if current is None:
            self.manifest.set_meta("embedder_id", info.id)
            self.manifest.set_meta("embedder_model", info.model)
            self.manifest.set_meta("dim", str(info.dim))
        elif current != info.id:
            raise CorpusError(
                f"corpus '{self.name}' is indexed with embedder '{current}', not '{info.id}'. "
                f"Use --embedder {current}, or index into a new corpus."
            )

    # ---------------------------------------------------------------- locking
    def lock(self) -> None:
        """Take the corpus's write lock (released by the OS if the process dies)."""
        if self._lock_file is not None:
            return
        f = open(self.dir / ".lock", "w")  # noqa: SIM115 - held for the lock's lifetime
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise CorpusBusy(f"corpus '{self.name}' is being indexed by another process") from None
        self._lock_file = f

    def unlock(self) -> None:
        if self._lock_file is not None:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
            self._lock_file = None

    # ---------------------------------------------------------------- store
    def store(self) -> VectorStore:
        """The vector store, reconciled with the manifest on first use."""
        if self._store is None:
            dim = self.dim
            if dim is None:
                raise CorpusError(f"corpus '{self.name}' has not been indexed yet")
            self._store = VectorStore(self.dir / "index", dim)
            self._reconcile(self._store)
        return self._store

    def _reconcile(self, store: VectorStore) -> None:
        """Make the index and the manifest agree after any crash (see module docstring)."""
        store_ids = set(store.ids().tolist())
        missing = set(self.manifest.vector_ids()) - store_ids
        if missing:
            with self.manifest.transaction():
                self.manifest.forget_vectors(missing)
        orphans = store_ids - set(self.manifest.vector_ids())
        if orphans:
            store.remove(orphans)
            store.checkpoint()

    # ---------------------------------------------------------------- roots
    def add_paths(self, paths: Iterable[str | os.PathLike[str]]) -> list[str]:
        """Add files/folders (absolute, symlinks kept as given). Raises CorpusError for missing ones."""
        added, missing = [], []
        for p in paths:
            ap = os.path.abspath(os.fspath(p))
            if not os.path.lexists(ap):
                missing.append(ap)
                continue
            self.manifest.add_root(ap)
            added.append(ap)
        if missing:
            raise CorpusError("not found: " + ", ".join(missing))
        return added

    def remove_paths(self, paths: Iterable[str | os.PathLike[str]]) -> int:
        return sum(self.manifest.remove_root(os.path.abspath(os.fspath(p))) for p in paths)

    # ---------------------------------------------------------------- scan
    def scan(
        self, cancel: CancelToken | None = None, retry_failed: bool = False
    ) -> Generator[Progress, None, ScanReport]:
        """Compare the roots with the manifest: new, changed, deleted files. Cheap when nothing changed."""
        report = ScanReport()
        m = self.manifest
        opts = DeriveOptions(clip_seconds=self.clip_seconds)
        roots = m.roots()
        present_roots = []
        seen: set[str] = set()
        removed_ids: list[int] = []
        n = 0
        for root in roots:
            if not os.path.lexists(root):
                report.missing_roots.append(root)  # an unplugged drive must not wipe its index entries
                continue
            present_roots.append(root)
            for f in walk(root):
                if cancel is not None and cancel.cancelled:
                    return report
                if f.path in seen:
                    continue
                seen.add(f.path)
                n += 1
                removed_ids += self._scan_one(f, opts, report, retry_failed)
                if n % 50 == 0:
                    yield Progress("scan", n, 0, message=f.path)
        # Sources gone from disk (or whose root was removed) leave the corpus.
        with m.transaction():
            for src in m.sources():
                if src.path in seen:
                    continue
                if any(_under(src.path, r) for r in report.missing_roots):
                    continue
                removed_ids += m.delete_source(src.id)
                report.removed += 1
            # A duplicate whose original left is indexed in its own right now.
            for src in m.sources(S_DUPLICATE):
                orig = m.source(src.duplicate_of) if src.duplicate_of is not None else None
                if orig is None or orig.status == S_DUPLICATE:
                    m.update_source(src.id, status=S_PENDING, duplicate_of=None, error=None)
        for src in m.sources(S_PENDING):
            if src.n_expected is None:
                try:
                    m.update_source(src.id, n_expected=expected_count(Path(src.path), src.kind or "", opts))
                except SourceError as exc:
                    m.update_source(src.id, status=S_FAILED, error=str(exc))
                except OSError as exc:
                    m.update_source(src.id, status=S_FAILED, error=os_error_message(exc))
        if removed_ids and self.dim is not None:
            store = self.store()
            store.remove(removed_ids)
            store.checkpoint()
        yield Progress("scan", n, n)
        return report

    @property
    def clip_seconds(self) -> float:
        """Video clip length, fixed per corpus so a rescan never re-cuts unchanged videos."""
        return float(self.manifest.get_meta("clip_seconds") or DEFAULT_CLIP_SECONDS)

    @clip_seconds.setter
    def clip_seconds(self, seconds: float) -> None:
        if not seconds > 0:
            raise CorpusError("clip length must be a positive number of seconds")
        if float(seconds) == self.clip_seconds:
            return
        m = self.manifest
        removed: list[int] = []
        with m.transaction():
            m.set_meta("clip_seconds", repr(float(seconds)))
            for src in m.sources():  # videos already cut to the old length are cut again
                if src.kind == kinds.VIDEO and src.status == S_INDEXED:
                    removed += m.clear_items(src.id)
                    m.update_source(src.id, status=S_PENDING, n_expected=None)
        if removed:
            self.store().remove(removed)
            self.store().checkpoint()

    def _scan_one(self, f, opts: DeriveOptions, report: ScanReport, retry_failed: bool) -> list[int]:  # type: ignore[no-untyped-def]
        m = self.manifest
        row = m.source_by_path(f.path)
        same_stat = row is not None and row.size == f.size and row.mtime_ns == f.mtime_ns
        if f.error:
            report.failed += 1
            ids = m.clear_items(row.id) if row else []
            m.upsert_source(
                f.path, kind=f.kind, status=S_FAILED, error=f.error, size=None, mtime_ns=None, sha256=None
            )
            return ids
        if f.kind is None:
            report.unsupported += 1
            ext = Path(f.path).suffix or "(no extension)"
            m.upsert_source(
                f.path,
                kind=None,
                size=f.size,
                mtime_ns=f.mtime_ns,
                status=S_UNSUPPORTED,
                error=f"unsupported file type {ext}; supported: {', '.join(sorted(kinds.EXTENSIONS))}",
            )
            return []
        if row is not None and same_stat and not (retry_failed and row.status == S_FAILED):
            if row.status == S_PENDING:
                report.changed += 1
            else:
                report.unchanged += 1
            return []
        if f.size == 0:
            report.failed += 1
            ids = m.clear_items(row.id) if row else []
            m.upsert_source(
                f.path,
                kind=f.kind,
                size=0,
                mtime_ns=f.mtime_ns,
                sha256=None,
                status=S_FAILED,
                error="empty file (0 bytes)",
            )
            return ids
        try:
            sha = sha256_file(f.path)
        except OSError as exc:
            report.failed += 1
            ids = m.clear_items(row.id) if row else []
            m.upsert_source(
                f.path,
                kind=f.kind,
                status=S_FAILED,
                error=os_error_message(exc),
                size=f.size,
                mtime_ns=f.mtime_ns,
                sha256=None,
            )
            return ids
        if row is not None and row.sha256 == sha and row.status in (S_INDEXED, S_DUPLICATE):
            m.update_source(row.id, size=f.size, mtime_ns=f.mtime_ns)  # touched, not changed
            report.unchanged += 1
            return []
        ids = m.clear_items(row.id) if row else []
        dup = m.source_by_sha(sha, exclude_id=row.id if row else None)
        if dup is not None and dup.status not in (S_FAILED, S_UNSUPPORTED):
            report.duplicates += 1
            m.upsert_source(
                f.path,
                kind=f.kind,
                size=f.size,
                mtime_ns=f.mtime_ns,
                sha256=sha,
                status=S_DUPLICATE,
                duplicate_of=dup.id,
                error=None,
                n_expected=0,
            )
            return ids
        if row is None:
            report.added += 1
        else:
            report.changed += 1
        m.upsert_source(
            f.path,
            kind=f.kind,
            size=f.size,
            mtime_ns=f.mtime_ns,
            sha256=sha,
            status=S_PENDING,
            error=None,
            duplicate_of=None,
            n_expected=None,
        )
        return ids

    # ---------------------------------------------------------------- build
    def pending_work(self) -> int:
        """Items still to derive and embed (for progress totals)."""
        total = 0
        for src in self.manifest.sources(S_PENDING):
            total += max(0, (src.n_expected or 1) - len(self.manifest.done_ordinals(src.id)))
        return total

    def build(
        self,
        embedder: Embedder,
        cancel: CancelToken | None = None,
        *,
        checkpoint_seconds: float = 10.0,
        checkpoint_items: int = 512,
        ocr: bool | None = None,
    ) -> Generator[Progress, None, BuildReport]:
        """Derive and embed every pending source. Yields progress; closing the generator or setting
        ``cancel`` stops at the next batch, keeping everything embedded so far."""
        self.bind_embedder(embedder)
        store = self.store()
        cancel = cancel or CancelToken()
        use_ocr = (not embedder.info.is_multimodal) if ocr is None else ocr
        opts = DeriveOptions(
            render_pixels=embedder.info.render_pixels, ocr=use_ocr, clip_seconds=self.clip_seconds
        )
        report = BuildReport()
        started = time.perf_counter()
        # Ids only grow (a high-water mark in the manifest), so a removed vector's id is never reused.
        next_id = max(
            int(store.ids().max(initial=-1)) + 1,
            self.manifest.max_vector_id() + 1,
            int(self.manifest.get_meta("next_vector_id") or 0),
        )
        total = self.pending_work()
        done = 0
        meter = RateMeter()
        attempts: dict[int, int] = {}
        while True:
            sources = [s for s in self.manifest.sources(S_PENDING) if attempts.get(s.id, 0) < 2]
            if not sources:
                break
            for s in sources:
                attempts[s.id] = attempts.get(s.id, 0) + 1
            pipeline = _Pipeline(self, sources, opts, embedder, use_ocr)
            buffer: list[_Result] = []
            finished: dict[int, str | None] = {}
            last_ckpt = time.perf_counter()

            def checkpoint(
                pipeline: _Pipeline = pipeline, finished: dict[int, str | None] = finished
            ) -> None:
                nonlocal next_id, buffer
                next_id = self._commit(store, buffer, finished, pipeline.in_flight_sources(), next_id, report)
                buffer = []

            try:
                for kind, payload in pipeline.run(cancel, report):
                    if kind == "results":
                        buffer.extend(payload)  # type: ignore[arg-type]
                        n = len(payload)  # type: ignore[arg-type]
                        done += n
                        rate = meter.update(n)
                        last = payload[-1].derived  # type: ignore[index]
                        yield Progress(
                            "index",
                            done,
                            max(total, done),
                            rate,
                            meter.eta(max(total - done, 0)),
                            message=last.name,
                            failed=report.failed_items + report.failed_sources,
                        )
                    else:  # a source finished: its final status is committed with its last items
                        sid, err = payload  # type: ignore[misc]
                        finished[sid] = err
                    now = time.perf_counter()
                    if len(buffer) >= checkpoint_items or now - last_ckpt >= checkpoint_seconds:
                        checkpoint()
                        last_ckpt = now
            finally:
                pipeline.stop()
                checkpoint()
            if cancel.cancelled:
                report.cancelled = True
                break
        store.checkpoint()
        report.seconds = time.perf_counter() - started
        return report

    def _commit(
        self,
        store: VectorStore,
        results: list[_Result],
        finished: dict[int, str | None],
        in_flight: set[int],
        next_id: int,
        report: BuildReport,
    ) -> int:
        """Persist results: vectors first (durable segment), then the manifest in one transaction."""
        ids_all, vecs_all, rows = [], [], []
        for r in results:
            vids: list[int] = []
            if r.vectors is not None:
                vids = list(range(next_id, next_id + len(r.vectors)))
                next_id += len(vids)
                ids_all.append(np.array(vids, dtype=np.int64))
                vecs_all.append(r.vectors)
            rows.append((r, vids))
        if ids_all:
            store.add(np.concatenate(ids_all), np.concatenate(vecs_all))
            store.checkpoint()
        m = self.manifest
        done_sources = {sid: err for sid, err in finished.items() if sid not in in_flight}
        redo: list[int] = []
        with m.transaction():
            for r, vids in rows:
                d = r.derived
                item_id = m.insert_item(
                    NewItem(
                        source_id=r.source_id,
                        ordinal=d.ordinal,
                        name=d.name,
                        kind=d.kind,
                        status=I_EMBEDDED if vids else I_FAILED,
                        t_start=d.t_start,
                        t_end=d.t_end,
                        image_path=str(d.image_path) if d.image_path else None,
                        media_path=str(d.media_path) if d.media_path else None,
                        width=d.width,
                        height=d.height,
                        text=d.text,
                        text_source=d.text_source,
                        error=d.error,
                    )
                )
                for chunk, vid in enumerate(vids):
                    m.insert_vector(vid, item_id, chunk)
            m.set_meta("next_vector_id", str(next_id))
            for sid, err in done_sources.items():
                finished.pop(sid)
                src = m.source(sid)
                if src is None:
                    continue
                if err is not None:
                    report.failed_sources += 1
                    m.update_source(sid, status=S_FAILED, error=err)
                    redo += m.clear_items(sid)
                elif _stat_changed(src):
                    # Edited while we read it: what we derived may mix two versions. Start over.
                    report.changed_during.append(src.path)
                    redo += m.clear_items(sid)
                    st = _stat(src.path)
                    m.update_source(
                        sid,
                        status=S_PENDING,
                        n_expected=None,
                        error="changed while indexing",
                        size=st.st_size if st else None,
                        mtime_ns=st.st_mtime_ns if st else None,
                    )
                    with contextlib.suppress(SourceError, OSError):
                        m.update_source(
                            sid, n_expected=expected_count(Path(src.path), src.kind or "", DeriveOptions())
                        )
                else:
                    m.update_source(sid, status=S_INDEXED, error=None)
        if redo:
            store.remove(redo)
            store.checkpoint()
        return next_id

    # ---------------------------------------------------------------- info
    def stats(self) -> dict[str, object]:
        c = self.manifest.counts()
        return {
            "name": self.name,
            "embedder": self.embedder_id,
            "dim": self.dim,
            "roots": self.manifest.roots(),
            "source_files": c["sources"],
            "indexed_files": c["sources_indexed"],
            "pending_files": c["sources_pending"],
            "failed_files": c["sources_failed"],
            "duplicate_files": c["sources_duplicate"],
            "unsupported_files": c["sources_unsupported"],
            "items": c["items"],
            "failed_items": c["items_failed"],
            "vectors": c["vectors"],
            "failures": c["sources_failed"] + c["items_failed"],
        }

    def delete_files(self) -> None:
        """Remove the corpus directory (derived images, index, manifest)."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class _Pipeline:
    """Derive in a producer thread while the caller's thread embeds, so the embedder never waits
    for pages it could have had rendered meanwhile. Yields ("results", [...]) and ("done", (id, err))."""

    _END = object()

    def __init__(
        self, corpus: Corpus, sources: list[SourceRow], opts: DeriveOptions, embedder: Embedder, use_ocr: bool
    ) -> None:
        self.corpus = corpus
        self.sources = sources
        self.opts = opts
        self.embedder = embedder
        self.use_ocr = use_ocr
        self.q: queue.Queue[object] = queue.Queue(maxsize=max(8, 2 * embedder.batch_size))
        self.stop_event = threading.Event()
        self.thread: threading.Thread | None = None
        self._open: set[int] = set()
        self._open_lock = threading.Lock()
        self._error: BaseException | None = None
        # done ordinals read here, on the caller's thread (SQLite connections stay on their thread)
        self._skip = {s.id: corpus.manifest.done_ordinals(s.id) for s in sources}

    def in_flight_sources(self) -> set[int]:
        with self._open_lock:
            return set(self._open)

    def _put(self, msg: object) -> bool:
        while not self.stop_event.is_set():
            try:
                self.q.put(msg, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        ocr_fn = None
        if self.use_ocr:
            from vrag_desktop.core.corpus.ocr import OCRUnavailable, ocr_image

            def ocr_fn(p: Path) -> str:
                try:
                    return ocr_image(p)
                except OCRUnavailable:
                    return ""

        try:
            for src in self.sources:
                if self.stop_event.is_set():
                    return
                with self._open_lock:
                    self._open.add(src.id)
                err: str | None = None
                try:
                    out_dir = self.corpus.derived_dir / str(src.id)
                    for d in derive(
                        Path(src.path), src.kind or "", out_dir, self.opts, self._skip[src.id], ocr_fn
                    ):
                        if not self._put(("item", src.id, d)):
                            return
                except SourceError as exc:
                    err = str(exc)
                except OSError as exc:
                    err = os_error_message(exc)
                except Exception as exc:  # a decoder bug must not kill the whole build
                    err = f"unexpected error: {type(exc).__name__}: {exc}"
                if not self._put(("done", src.id, err)):
                    return
        except BaseException as exc:  # pragma: no cover - surfaced on the consumer side
            self._error = exc
        finally:
            self._put(self._END)

    def run(self, cancel: CancelToken, report: BuildReport) -> Generator[tuple[str, object], None, None]:
        self.thread = threading.Thread(target=self._produce, name="vrag-derive", daemon=True)
        self.thread.start()
        batch: list[tuple[int, Derived]] = []
        ended = False
        while not ended:
            if cancel.cancelled:
                return
            # Fill a batch: block for the first message, then take what arrives until the batch is full.
            pending_done: list[tuple[int, str | None]] = []
            failed: list[_Result] = []
            while len(batch) < self.embedder.batch_size:
                t_wait = time.perf_counter()
                try:
                    msg = self.q.get(timeout=0.05 if batch else 0.2)
                except queue.Empty:
                    report.wait_seconds += time.perf_counter() - t_wait
                    if cancel.cancelled:
                        return
                    if batch or pending_done or failed:
                        break
                    continue
                report.wait_seconds += time.perf_counter() - t_wait
                if msg is self._END:
                    ended = True
                    break
                kind, sid, payload = msg  # type: ignore[misc]
                if kind == "item":
                    d: Derived = payload
                    if d.error:
                        failed.append(_Result(sid, d, None))
                    else:
                        batch.append((sid, d))
                else:
                    pending_done.append((sid, payload))
            if self._error is not None:
                raise self._error
            report.items += len(failed)
            report.failed_items += len(failed)
            results = failed + self._embed(batch, report)
            batch = []
            # Sources are "open" until all their items are out of the pipeline.
            with self._open_lock:
                for sid, _ in pending_done:
                    self._open.discard(sid)
            if results:
                yield "results", results
            for sid_err in pending_done:
                yield "done", sid_err

    def _embed(self, batch: list[tuple[int, Derived]], report: BuildReport) -> list[_Result]:
        if not batch:
            return []
        inputs = [_embed_input(d) for _, d in batch]
        t0 = time.perf_counter()
        try:
            vecs = self.embedder.embed_items(inputs)
            out = [_Result(sid, d, v) for (sid, d), v in zip(batch, vecs, strict=True)]
        except EmbedderError:
            out = []
            for (sid, d), inp in zip(batch, inputs, strict=True):  # isolate the bad item
                try:
                    out.append(_Result(sid, d, self.embedder.embed_items([inp])[0]))
                except EmbedderError as exc:
                    d.error = f"could not embed: {exc}"
                    out.append(_Result(sid, d, None))
        report.embed_seconds += time.perf_counter() - t0
        for r in out:
            report.items += 1
            if r.vectors is None:
                report.failed_items += 1
        return out

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread is not None:
            self.thread.join(timeout=30)


def _embed_input(d: Derived) -> EmbedInput:
    kind = {kinds.ITEM_CLIP: "video", kinds.ITEM_TEXT: "text"}.get(d.kind, "image")
    return EmbedInput(
        kind=kind,
        text=d.text,
        image_path=d.image_path,
        frames=d.frames or None,
        timestamps=d.timestamps or None,
    )


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _stat_changed(src: SourceRow) -> bool:
    st = _stat(src.path)
    return st is None or st.st_size != src.size or st.st_mtime_ns != src.mtime_ns


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
