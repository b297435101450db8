"""A corpus: the files a person added, what was derived from them, and their vectors.

Layout of a corpus directory (inside the app's data directory, never in the user's folders)::

    manifest.sqlite   sources, items, vector ids (the source of truth)
    index/            FAISS base + segments (see vrag_desktop.core.index.store)
    derived/<id>/     page renders, image copies, clips, keyframes of source <id>
    .lock             held (an OS file lock) while a process writes the corpus

Indexing is :meth:`Corpus.scan` (what changed) then :meth:`Corpus.build` (derive + embed, in
:mod:`vrag_desktop.core.corpus.build`). Both are generators yielding :class:`Progress`; the whole
job (lock, scan, embedder check, build) is :mod:`vrag_desktop.core.corpus.job`.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterable
from pathlib import Path

from filelock import FileLock, Timeout

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.build import BuildReport, build_corpus
from vrag_desktop.core.corpus.derive import (
    DEFAULT_CLIP_SECONDS,
    DEFAULT_MAX_PAGES,
    DeriveOptions,
    SourceError,
    expected_count,
)
from vrag_desktop.core.corpus.errors import CorpusBusy, CorpusError
from vrag_desktop.core.corpus.manifest import (
    S_DUPLICATE,
    S_FAILED,
    S_INDEXED,
    S_PENDING,
    S_UNSUPPORTED,
    Manifest,
)
from vrag_desktop.core.corpus.scan import Found, ScanReport, os_error_message, sha256_file, walk
from vrag_desktop.core.embedders.base import Embedder
from vrag_desktop.core.index.store import Damage, VectorStore
from vrag_desktop.core.progress import CancelToken, Progress

__all__ = ["BuildReport", "Corpus", "CorpusBusy", "CorpusError", "embedder_mismatch"]


def embedder_mismatch(corpus: str, indexed_with: str | None, wanted: str) -> str | None:
    """The one sentence for "this corpus was built by another embedder" (None when they agree).

    Vectors of two models are not comparable, so adding to or searching a corpus with another
    embedder is refused everywhere (CLI, app, search engine) with this message, which names the
    remedy in both front ends.
    """
    if indexed_with is None or indexed_with == wanted:
        return None
    return (
        f"corpus '{corpus}' is indexed with embedder '{indexed_with}', not '{wanted}'. "
        f"Use '{indexed_with}' again (--embedder {indexed_with} on the command line, the embedder "
        "in the app's Settings), or index into a new corpus."
    )


class Corpus:
    """One named corpus on disk. Use from one thread at a time (the GUI runs it in a worker).

    ``read_only``: a reader (search, listing, check, export) — it opens the manifest and the index
    so that nothing can be written, never reconciles or compacts, and picks up what a writer commits
    meanwhile (:meth:`refresh`). A writer's :meth:`store` takes the corpus lock: only the one
    process that holds it may change the index or drop what it does not recognise."""

    def __init__(
        self, directory: Path, name: str | None = None, *, shared: bool = False, read_only: bool = False
    ) -> None:
        self.dir = Path(directory)
        self.name = name or self.dir.name
        self.read_only = read_only
        if not read_only:
            self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest = Manifest(self.dir / "manifest.sqlite", shared=shared, read_only=read_only)
        self.derived_dir = self.dir / "derived"
        self._store: VectorStore | None = None
        self._data_version = -1
        # An OS lock (flock / msvcrt), not a marker file: a crashed holder's lock dies with it, so
        # the ``.lock`` file it leaves behind never blocks the next indexing.
        self._lock = FileLock(self.dir / ".lock", timeout=0, thread_local=False)

    def close(self) -> None:
        if self._store is not None:
            self._store.stop_checks()
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
        problem = embedder_mismatch(self.name, self.embedder_id, info.id)
        if problem:
            raise CorpusError(problem)
        if self.embedder_id is None:
            self.manifest.set_meta("embedder_id", info.id)
            self.manifest.set_meta("embedder_model", info.model)
            self.manifest.set_meta("dim", str(info.dim))

    # ---------------------------------------------------------------- locking
    def lock(self) -> None:
        """Take the corpus's write lock (released by the OS if the process dies)."""
        if self._lock.is_locked:
            return
        try:
            self._lock.acquire()
        except Timeout:
            raise CorpusBusy(f"corpus '{self.name}' is being indexed by another process") from None

    def unlock(self) -> None:
        if self._lock.is_locked:
            self._lock.release(force=True)

    # ---------------------------------------------------------------- store
    def store(self) -> VectorStore:
        """The vector store. A writer's is reconciled with the manifest on first use (under the
        corpus lock, taken here); a reader's is read as it stands and never changed."""
        if self._store is None:
            dim = self.dim
            if dim is None:
                raise CorpusError(f"corpus '{self.name}' has not been indexed yet")
            if self.read_only:
                self._store = VectorStore(self.dir / "index", dim, read_only=True)
            else:
                self.lock()
                store = VectorStore(self.dir / "index", dim)
                self._reconcile(store)
                self._store = store
        return self._store

    @property
    def damage(self) -> list[Damage]:
        """Index files a reader found damaged and left out (their items are missing from search)."""
        return list(self._store.damage) if self._store is not None else []

    @property
    def repaired(self) -> list[Damage]:
        """Index files the writer found damaged on open and dropped; their items are re-embedded."""
        return list(self._store.repaired) if self._store is not None else []

    def refresh(self) -> bool:
        """A reader: take in what the indexer committed since (new vectors, a compaction). Cheap when
        nothing changed (a ``stat`` and a ``PRAGMA``); returns whether the manifest changed."""
        version = self.manifest.data_version()
        changed = version != self._data_version
        self._data_version = version
        if self._store is not None:
            self._store.refresh()
        return changed

    def _reconcile(self, store: VectorStore) -> None:
        """Make the index and the manifest agree after any crash or damage (writer only, locked):
        vectors the manifest does not know are dropped; items whose vectors are missing (a crash
        before their segment, or a damaged index file) go back to pending and are embedded again."""
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
        opts = DeriveOptions(clip_seconds=self.clip_seconds, max_pages=self.max_pages)
        roots = m.roots()
        inside = [os.path.realpath(r) for r in roots]  # links are followed only into these
        data_dir = os.path.realpath(self.dir.parent.parent)  # <data>/corpora/<name>: never indexed
        present_roots = []
        seen: set[str] = set()
        removed_ids: list[int] = []
        fresh: set[str] = set()  # files first seen in this scan, found to be copies of another
        n = 0
        for root in roots:
            if not os.path.lexists(root):
                report.missing_roots.append(root)  # an unplugged drive must not wipe its index entries
                continue
            present_roots.append(root)
            for f in walk(root, inside, data_dir):
                if cancel is not None and cancel.cancelled:
                    return report
                if f.path in seen:
                    continue
                seen.add(f.path)
                n += 1
                removed_ids += self._scan_one(f, report, retry_failed, fresh)
                if n % 50 == 0:
                    yield Progress("scan", n, 0, message=f.path)
        # Sources gone from disk (or whose root was removed) leave the corpus — unless the same
        # content is still here under another name (moved or renamed): then it keeps its items and
        # vectors under the new name, and nothing is derived or embedded again.
        with m.transaction():
            for src in m.sources():
                if src.path in seen:
                    continue
                if any(_under(src.path, r) for r in report.missing_roots):
                    continue
                adopted = m.adopt_copy(src.id) if src.status in (S_INDEXED, S_PENDING) else None
                if adopted is not None and adopted in fresh:
                    report.renamed += 1  # the new file the walk found is this one, moved
                    report.duplicates -= 1
                    continue
                if adopted is None:
                    removed_ids += m.delete_source(src.id)
                report.removed += 1  # (a copy that was already here keeps its items and vectors)
            # A duplicate whose original left or failed is indexed in its own right now.
            for listed in m.sources(S_DUPLICATE):
                dup = m.source(listed.id)  # an earlier promotion may have re-pointed it
                if dup is None or dup.status != S_DUPLICATE:
                    continue
                orig = m.source(dup.duplicate_of) if dup.duplicate_of is not None else None
                if orig is None or orig.status in (S_DUPLICATE, S_FAILED, S_UNSUPPORTED):
                    m.promote_duplicate(dup.id, dup.duplicate_of)
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

    @property
    def max_pages(self) -> int:
        """Pages indexed per document (the rest are named in the file's note), fixed per corpus."""
        return int(self.manifest.get_meta("max_pages") or DEFAULT_MAX_PAGES)

    @max_pages.setter
    def max_pages(self, pages: int) -> None:
        if int(pages) != pages or pages < 1:
            raise CorpusError("the page limit must be a whole number of pages, at least 1")
        old = self.max_pages
        if int(pages) == old:
            return
        m = self.manifest
        with m.transaction():
            m.set_meta("max_pages", str(int(pages)))
            for src in m.sources():  # counted again with the new limit at the next scan
                if src.kind != kinds.PDF:
                    continue
                if src.status == S_PENDING:
                    m.update_source(src.id, n_expected=None)
                elif src.status == S_INDEXED and pages > old and src.n_expected == old:
                    # cut at the old limit: its remaining pages are indexed, the first ones kept
                    m.update_source(src.id, status=S_PENDING, n_expected=None)

    def _scan_one(self, f: Found, report: ScanReport, retry_failed: bool, fresh: set[str]) -> list[int]:
        """Record one found file's state; returns vector ids to drop (its old items)."""
        m = self.manifest
        row = m.source_by_path(f.path)

        def fail(error: str, size: int | None, mtime_ns: int | None) -> list[int]:
            report.failed += 1
            ids = m.clear_items(row.id) if row else []
            m.upsert_source(
                f.path, kind=f.kind, status=S_FAILED, error=error, size=size, mtime_ns=mtime_ns, sha256=None
            )
            return ids

        if f.error:
            return fail(f.error, None, None)
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
        same_stat = row is not None and row.size == f.size and row.mtime_ns == f.mtime_ns
        if row is not None and same_stat and not (retry_failed and row.status == S_FAILED):
            if row.status == S_PENDING:
                report.changed += 1
            else:
                report.unchanged += 1
            return []
        if f.size == 0:
            return fail("empty file (0 bytes)", 0, f.mtime_ns)
        try:
            sha = sha256_file(f.path)
        except OSError as exc:
            return fail(os_error_message(exc), f.size, f.mtime_ns)
        if row is not None and row.sha256 == sha and row.status in (S_INDEXED, S_DUPLICATE):
            m.update_source(row.id, size=f.size, mtime_ns=f.mtime_ns)  # touched, not changed
            report.unchanged += 1
            return []
        ids = m.clear_items(row.id) if row else []
        dup = m.source_by_sha(sha, exclude_id=row.id if row else None)
        original = dup.id if dup is not None and dup.status not in (S_FAILED, S_UNSUPPORTED) else None
        if original is not None:
            report.duplicates += 1
            if row is None:
                fresh.add(f.path)
        elif row is None:
            report.added += 1
        else:
            report.changed += 1
        m.upsert_source(
            f.path,
            kind=f.kind,
            size=f.size,
            mtime_ns=f.mtime_ns,
            sha256=sha,
            status=S_PENDING if original is None else S_DUPLICATE,
            duplicate_of=original,
            error=None,
            n_expected=None if original is None else 0,
        )
        return ids

    # ---------------------------------------------------------------- build
    def pending_work(self) -> int:
        """Items still to derive and embed (for progress totals)."""
        total = 0
        for src in self.manifest.sources(S_PENDING):
            total += max(0, (src.n_expected or 1) - len(self.manifest.done_ordinals(src.id)))
        return total

    #: Derive and embed every pending source: see :func:`~vrag_desktop.core.corpus.build.build_corpus`.
    build = build_corpus

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
            "partial_files": c["sources_noted"],  # indexed in part: a page limit, a video cut short
        }

    def delete_files(self) -> None:
        """Remove the corpus directory (derived images, index, manifest)."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)
