"""Reading a store's snapshot: the catalogue, loading and checking the files it lists, the damage
found (a reader reports it; a writer moves it aside on open), and taking in what a writer committed
since. Split from :mod:`vrag_desktop.core.index.store` (which adds writing, compaction and search):
everything here only reads, except a writer's repair on open (:meth:`SnapshotReader._settle`)."""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from vrag_desktop.core.index.catalogue import (
    FORMAT,
    META,
    SEG_RE,
    Catalogue,
    Damage,
    Entry,
    StoreError,
    checksum,
    data_files,
    data_files_named,
    file_checksum,
    read_catalogue,
    write_catalogue,
)
from vrag_desktop.core.index.compressed import CompressedIndex, FullVectors, choose_spec
from vrag_desktop.core.index.ivf import ids_of

DAMAGED = "damaged"
_Read = TypeVar("_Read")
# A reader that sees its snapshot change under it this many times in a row gives up and reports it.
_SNAPSHOT_TRIES = 20


class _SnapshotMoved(Exception):
    """A file the snapshot lists changed under the reader: a writer committed meanwhile."""


def _faiss() -> Any:
    from vrag_desktop.core.index.faiss_lib import load_faiss

    return load_faiss()


#: A reader checks a full-vectors file at least this large in the background rather than before its
#: first search: at 10M × 384 the file is 15.4 GB and reading it took 19 s from disk
#: (docs/benchmarks.md §2); every process that opens the store (the app, ``serve-search``, each
#: ``vrag-desktop search``) paid it. Writers and :meth:`SnapshotReader.finish_checks` still check first.
LATE_CHECK_BYTES = 1 << 30


class _LateCheck(threading.Thread):
    """A full-vectors file's checksum, read in the background by a reader that already searches it.
    What it finds (``problem``) is taken in by the reader's next search: it reloads, checking first,
    so the damage is reported and left out as if found on open. Rows read before that may have come
    from the damaged file; nothing is written either way."""

    def __init__(self, path: Path, expected: str) -> None:
        super().__init__(name=f"vrag-check-{path.name}", daemon=True)
        self.path, self.expected = path, expected
        self.stop = threading.Event()
        self.problem: str | None = None

    def run(self) -> None:
        try:
            got = file_checksum(self.path, self.stop)
        except OSError:  # gone: a writer replaced it, and the next refresh reads the new catalogue
            return
        if got is not None and got != self.expected:
            self.problem = "checksum mismatch (damaged on disk)"


class SnapshotReader:
    """The reading half of :class:`~vrag_desktop.core.index.store.VectorStore` (which sets these
    attributes up in its ``__init__``)."""

    dir: Path
    dim: int
    read_only: bool
    damage: list[Damage]
    repaired: list[Damage]
    _lock: threading.RLock
    _signature: tuple[int, int, int] | None
    _cat: Catalogue
    _index: Any
    _loaded: set[str]
    _gpu_index: Any
    _late_check: _LateCheck | None = None
    _check_now = False  # check every file before using it, whatever its size

    # ---------------------------------------------------------------- catalogue
    def _meta_signature(self) -> tuple[int, int, int] | None:
        """Changes whenever a writer commits (store.json is replaced by a rename each time)."""
        try:
            st = os.stat(self.dir / META)
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def _read_catalogue(self) -> Catalogue:
        cat = read_catalogue(self.dir, self.dim)
        if cat is None:  # a new store
            if self.read_only:
                return Catalogue(FORMAT, 0, None, ())
            cat = Catalogue(FORMAT, 0, None, ())
            self._write_catalogue(cat)
        return cat

    def _data_files(self) -> list[str]:
        return data_files(self.dir)

    def _write_catalogue(self, cat: Catalogue) -> None:
        write_catalogue(self.dir, self.dim, cat)
        self._signature = self._meta_signature()

    # ---------------------------------------------------------------- loading
    def _new_flat(self) -> Any:
        faiss = _faiss()
        return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))

    def _load(self, cat: Catalogue) -> tuple[Any, set[str]]:
        """The index of ``cat``'s files and the names loaded; a reader retries a moved snapshot."""
        for _ in range(_SNAPSHOT_TRIES):
            damage: list[Damage] = []
            try:
                index, loaded = self._load_files(cat, damage)
            except _SnapshotMoved:
                if self.read_only and self._meta_signature() != self._signature:
                    self._signature = self._meta_signature()
                    cat = self._cat = self._read_catalogue()
                    continue
                raise AssertionError("unreachable: a snapshot only moves under a reader") from None
            self.damage = ([Damage(META, cat.problem)] if cat.problem else []) + damage
            return index, loaded
        raise StoreError(f"the index in {self.dir} kept changing while it was read; try again")

    def _load_files(self, cat: Catalogue, damage: list[Damage]) -> tuple[Any, set[str]]:
        self._stop_late_check()
        index = self._load_base(cat.base, damage) if cat.base is not None else None
        loaded = {cat.base.file} if index is not None and cat.base is not None else set()
        if index is not None and cat.full is not None:
            index = self._load_compressed(index, cat.full, damage)
            loaded = loaded | {cat.full.file} if index is not None else set()
        if index is None:
            index = self._new_flat()
        base_ids = np.sort(self._ids(index))
        known: set[int] = set()
        for seg in cat.segments:
            got = self._read_segment(seg, damage)
            if got is None:
                continue
            ids, vecs = got
            # An id in the base and in a segment is loaded once (a format-1 compaction cut short).
            pos = np.minimum(np.searchsorted(base_ids, ids), max(len(base_ids) - 1, 0))
            in_base = base_ids[pos] == ids if len(base_ids) else np.zeros(len(ids), bool)
            keep = np.array([not b and i not in known for i, b in zip(ids.tolist(), in_base, strict=True)])
            if keep.any():
                index.add_with_ids(np.ascontiguousarray(vecs[keep]), ids[keep])
                known.update(ids[keep].tolist())
            loaded.add(seg.file)
        return index, loaded

    def _load_base(self, entry: Entry, damage: list[Damage]) -> Any:
        """The base index, checked first by streaming it once (then read from the page cache: a
        multi-GB base is never held twice in memory)."""
        path = self.dir / entry.file
        try:
            checked = self._checked(
                entry, damage, path.stat, lambda st: st.st_size, lambda _: file_checksum(path)
            )
            if checked is None:
                return None
            index = _faiss().read_index(str(path))
        except _SnapshotMoved:  # the catalogue moved under a reader: _load re-reads it
            raise
        except Exception as exc:  # faiss: not an index (a format-1 file has no checksum to catch it)
            if not path.exists():
                self._moved_or(damage, Damage(entry.file, "missing", entry.vectors))
                return None
            damage.append(Damage(entry.file, f"not a readable FAISS index ({exc})", entry.vectors))
            return None
        if index.d != self.dim:
            raise StoreError(f"{entry.file} has dimension {index.d}, expected {self.dim}")
        return index

    def _load_compressed(self, base: Any, full: Entry, damage: list[Damage]) -> CompressedIndex | None:
        """The compressed base over its full vectors; if those are damaged, the base goes too."""
        path = self.dir / full.file
        problem = None
        later = (
            self.read_only
            and not self._check_now
            and full.checksum is not None
            and (full.size or 0) >= LATE_CHECK_BYTES
        )
        try:
            size = path.stat().st_size
            if size != full.size:
                what = "truncated" if size < (full.size or 0) else "longer than written"
                problem = f"{what}: {size} of {full.size} bytes"
            elif not later and file_checksum(path) != full.checksum:
                problem = "checksum mismatch (damaged on disk)"
        except FileNotFoundError:
            problem = "missing"
        if problem is not None:
            self._moved_or(damage, Damage(full.file, problem, full.vectors))
            assert self._cat.base is not None
            damage.append(
                Damage(self._cat.base.file, f"its full vectors ({full.file}) are {problem}", full.vectors)
            )
            return None
        ids = np.sort(ids_of(base))
        nprobe = int(_faiss().extract_index_ivf(base).nprobe)
        index = CompressedIndex(
            base, FullVectors(path, self.dim, ids), choose_spec(len(ids), self.dim).refine, nprobe
        )
        if later and full.checksum is not None:
            self._late_check = _LateCheck(path, full.checksum)
            self._late_check.start()
        return index

    def finish_checks(self) -> None:
        """Wait for a check still running in the background and take in what it found (a store's
        integrity check: :func:`~vrag_desktop.core.corpus.integrity.check_corpus`)."""
        check = self._late_check
        if check is not None:
            check.join()
        with self._lock:
            self._take_late_check()

    def _take_late_check(self) -> None:
        """Under the lock, before a search: a background check that found damage makes the reader
        load again, checking every file first (the damage then goes where damage found on open goes)."""
        check = self._late_check
        if check is None or check.is_alive():
            return
        self._late_check = None
        if check.problem is not None:
            self._check_now = True
            try:
                self._reload()
            finally:
                self._check_now = False

    def stop_checks(self) -> None:
        """Stop a check running in the background (its store is being closed: reading GBs on for
        nobody would only slow the disk for the next one)."""
        self._stop_late_check()

    def _stop_late_check(self) -> None:
        if self._late_check is not None:
            self._late_check.stop.set()
            self._late_check = None

    @staticmethod
    def _ids(index: Any) -> np.ndarray:
        return index.ids() if isinstance(index, CompressedIndex) else ids_of(index)

    def _read_segment(self, seg: Entry, damage: list[Damage]) -> tuple[np.ndarray, np.ndarray] | None:
        data = self._segment_bytes(seg, damage)
        if data is None:
            return None
        try:
            with np.load(io.BytesIO(data)) as z:
                ids, vecs = z["ids"].astype(np.int64), z["vecs"].astype(np.float32)
            if vecs.ndim != 2 or vecs.shape[1] != self.dim or len(ids) != len(vecs):
                raise ValueError(f"holds vectors of shape {vecs.shape}, expected (n, {self.dim})")
        except Exception as exc:
            damage.append(Damage(seg.file, f"not a readable segment ({exc})", seg.vectors))
            return None
        return ids, vecs

    def _segment_bytes(self, entry: Entry, damage: list[Damage]) -> bytes | None:
        """A segment's bytes if they are whole and match their checksum; else None + damage."""
        return self._checked(entry, damage, (self.dir / entry.file).read_bytes, len, checksum)

    def _checked(
        self,
        entry: Entry,
        damage: list[Damage],
        read: Callable[[], _Read],
        size: Callable[[_Read], int],
        digest: Callable[[_Read], str | None],
    ) -> _Read | None:
        """What ``read`` gives of ``entry``'s file if it is there, readable, and of the size and
        checksum the catalogue lists; else None + damage. One place for the base (``read`` a stat,
        ``digest`` streaming the file: never held in memory) and segments (``read`` their bytes)."""
        try:
            got = read()
            n = size(got)
            if entry.size is not None and n != entry.size:
                what = "truncated" if n < entry.size else "longer than written"
                problem = f"{what}: {n} of {entry.size} bytes"
            elif entry.checksum is not None and digest(got) != entry.checksum:
                problem = "checksum mismatch (damaged on disk)"
            else:
                return got
        except FileNotFoundError:
            problem = "missing"
        except OSError as exc:
            damage.append(Damage(entry.file, f"cannot be read ({exc.strerror or exc})", entry.vectors))
            return None
        self._moved_or(damage, Damage(entry.file, problem, entry.vectors))
        return None

    def _moved_or(self, damage: list[Damage], found: Damage) -> None:
        """A reader whose catalogue moved re-reads it; otherwise what it found is damage."""
        if self.read_only and self._meta_signature() != self._signature:
            raise _SnapshotMoved
        damage.append(found)

    def _settle(self) -> None:
        """Writer only, on open: drop damaged files (kept in ``damaged/``), upgrade format 1, and
        remove files no catalogue lists (left by a crash)."""
        cat = self._cat
        bad = {d.file for d in self.damage if d.file != META}
        if bad or cat.format < FORMAT or self.damage:
            self.repaired = list(self.damage)
            base = None
            if cat.base is not None and cat.base.file not in bad:
                base = self._checked_entry(cat.base)
            full = (
                cat.full if base is not None and cat.full is not None and cat.full.file not in bad else None
            )
            segs = tuple(self._checked_entry(s) for s in cat.segments if s.file not in bad)
            for name in sorted(bad):
                self._keep_damaged(name)
            self._cat = Catalogue(FORMAT, cat.generation, base, segs, full=full)
            self._write_catalogue(self._cat)
            self.damage = []
        listed = {e.file for e in self._cat.files()}
        for name in self._data_files():
            if name not in listed:
                (self.dir / name).unlink(missing_ok=True)
        for name in os.listdir(self.dir):  # a base killed mid-write (a compressed one's full vectors: GBs)
            if (
                name.startswith((".base-", ".full-"))
                and name.endswith(".tmp")
                and data_files_named(name[1:-4])
            ):
                (self.dir / name).unlink(missing_ok=True)

    def _checked_entry(self, entry: Entry) -> Entry:
        if entry.checksum is not None:
            return entry
        path = self.dir / entry.file
        vectors = None
        if SEG_RE.match(entry.file):
            with np.load(path) as z:
                vectors = len(z["ids"])
        return Entry(entry.file, path.stat().st_size, file_checksum(path), vectors)

    def _keep_damaged(self, name: str) -> None:
        """Move a damaged file aside (for a person to inspect); only the latest few are kept."""
        src = self.dir / name
        if not src.exists():
            return
        folder = self.dir / DAMAGED
        folder.mkdir(exist_ok=True)
        os.replace(src, folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}")
        for old in sorted(folder.iterdir())[:-8]:
            old.unlink(missing_ok=True)

    def refresh(self) -> bool:
        """Take in what a writer committed since this store was read (readers; cheap when nothing
        changed: one ``stat``). Returns whether the vectors changed."""
        sig = self._meta_signature()
        if sig == self._signature or (sig is None and self._cat.format < FORMAT):
            return False
        self._signature = sig
        new = self._read_catalogue()
        old = self._cat
        with self._lock:
            if (
                new.base == old.base
                and new.full == old.full
                and new.segments[: len(old.segments)] == old.segments
                and not self.damage
            ):
                damage: list[Damage] = []
                try:
                    for seg in new.segments[len(old.segments) :]:
                        got = self._read_segment(seg, damage)
                        if got is not None:
                            self._add_new(*got)
                            self._loaded.add(seg.file)
                except _SnapshotMoved:
                    return self._reload()
                self.damage = damage
                self._cat = new
            else:
                self._cat = new
                self._index, self._loaded = self._load(new)
            self._gpu_index = None
        return True

    def _add_new(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        """Add a segment committed after this reader loaded (ids only grow, so a check is rare)."""
        existing = self._ids(self._index)
        if len(existing) and len(ids) and ids.min() <= existing.max():
            keep = ~np.isin(ids, existing)
            ids, vecs = ids[keep], vecs[keep]
        if len(ids):
            self._index.add_with_ids(np.ascontiguousarray(vecs), ids)

    def _reload(self) -> bool:
        self._signature = self._meta_signature()
        self._cat = self._read_catalogue()
        self._index, self._loaded = self._load(self._cat)
        self._gpu_index = None
        return True
