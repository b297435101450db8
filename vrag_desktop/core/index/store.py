"""A crash-safe, self-checking FAISS store: inner product over L2-normalised vectors, 64-bit ids.

On disk a store is immutable data files and one small catalogue that lists them (format 2)::

    store.json               {"format": 2, "dim", "generation", "base": entry | null, "segments": [entry…]}
    base-<generation>.faiss  the FAISS index of everything up to the last compaction
    seg-<generation>.npz     the vectors (``ids`` int64, ``vecs`` float32) of one checkpoint since

Each entry names a file with its size, its vector count and its XXH3-128 checksum. A writer (one
process, under the corpus lock) writes a data file under a name never used before, then replaces
``store.json`` atomically — the commit point — and only then deletes what the catalogue no longer
lists. So a crash leaves the old catalogue or the new one, never half of either; leftovers are
removed by the next writer. A reader takes ``store.json`` as a snapshot and never writes: a file it
lists that vanished or changed under it means a compaction ran meanwhile, and it reads the new
snapshot; one that is short or fails its checksum *without* the catalogue moving is damage. Damaged
files are left out of the index and reported (:attr:`VectorStore.damage`); a writer moves them to
``damaged/`` and drops them from the catalogue, and the corpus re-embeds their items (see
:meth:`vrag_desktop.core.corpus.corpus.Corpus.store`).

The store is exact (``IndexFlatIP``) while small and switches to an inverted-file index (IVF) once
``ntotal * dim`` passes a threshold, and to a compressed base (IVF codes in RAM, full vectors
on disk; :mod:`~vrag_desktop.core.index.compressed`, format 3) past a second one. With faiss-gpu
and a GPU, search runs on the GPU (flat and IVF). Stores of
format 1 (``base.faiss`` + ``seg-*.npz``, no checksums) are read as they are and upgraded to format
2 by the next writer.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.fsutil import atomic_open, atomic_write_bytes, fsync_dir
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
    quick_damage,
    read_catalogue,
    write_catalogue,
)
from vrag_desktop.core.index.compressed import (
    DEFAULT_COMPRESS_THRESHOLD,
    CompactionRefused,
    CompressedIndex,
    FullVectors,
    build,
    choose_spec,
    memory_available,
    plan_compaction,
)
from vrag_desktop.core.index.ivf import all_vectors, default_nprobe, ids_of, is_ivf, ivf_nlist

DAMAGED = "damaged"
# Flat search cost grows with ntotal*dim; past ~20M floats (e.g. 52k×384 or 10k×2048) a flat scan
# takes several ms per query on a 2-core machine, so an IVF index takes over.
DEFAULT_ANN_THRESHOLD = 20_000_000
COMPACT_SEGMENTS = 32
# A reader that sees its snapshot change under it this many times in a row gives up and reports it.
_SNAPSHOT_TRIES = 20


class _SnapshotMoved(Exception):
    """A file the snapshot lists changed under the reader: a writer committed meanwhile."""


def _faiss() -> Any:
    from vrag_desktop.core.index.faiss_lib import load_faiss

    return load_faiss()


class VectorStore:
    """One corpus's vectors. ``read_only``: never writes a byte (searches, listings); otherwise the
    caller is the corpus's one writer. Searches may run beside a writer in-process (a lock guards)."""

    def __init__(
        self,
        directory: Path,
        dim: int,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
        *,
        read_only: bool = False,
        compress_threshold: int = DEFAULT_COMPRESS_THRESHOLD,
        memory: Callable[[], int] = memory_available,
    ) -> None:
        self.dir = Path(directory)
        self.dim = int(dim)
        self.ann_threshold = ann_threshold
        self.read_only = read_only
        self.compress_threshold = compress_threshold
        self._memory = memory
        #: Why a store past the compression threshold is not compressed yet (e.g. too few vectors to train).
        self.compress_pending: str | None = None
        self._lock = threading.RLock()
        self._pending_ids: list[np.ndarray] = []
        self._pending_vecs: list[np.ndarray] = []
        self._removed_since_base = False
        self._gpu_index: Any = None
        self.nprobe: int | None = None
        #: Files left out of the index because they are damaged (a reader reports; a writer repairs).
        self.damage: list[Damage] = []
        #: What a writer found damaged on open and dropped (its vectors' items are then re-embedded).
        self.repaired: list[Damage] = []
        if not read_only:
            self.dir.mkdir(parents=True, exist_ok=True)
        self._signature = self._meta_signature()
        self._cat = self._read_catalogue()
        self._index, self._loaded = self._load(self._cat)
        if not read_only:
            self._settle()

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
            size = path.stat().st_size
            if entry.size is not None and size != entry.size:
                what = "truncated" if size < entry.size else "longer than written"
                self._moved_or(
                    damage, Damage(entry.file, f"{what}: {size} of {entry.size} bytes", entry.vectors)
                )
                return None
            if entry.checksum is not None and file_checksum(path) != entry.checksum:
                self._moved_or(
                    damage, Damage(entry.file, "checksum mismatch (damaged on disk)", entry.vectors)
                )
                return None
            index = _faiss().read_index(str(path))
        except FileNotFoundError:
            self._moved_or(damage, Damage(entry.file, "missing", entry.vectors))
            return None
        except OSError as exc:
            damage.append(Damage(entry.file, f"cannot be read ({exc.strerror or exc})", entry.vectors))
            return None
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
        try:
            size = path.stat().st_size
            if size != full.size:
                what = "truncated" if size < (full.size or 0) else "longer than written"
                problem = f"{what}: {size} of {full.size} bytes"
            elif file_checksum(path) != full.checksum:
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
        return CompressedIndex(
            base, FullVectors(path, self.dim, ids), choose_spec(len(ids), self.dim).refine, nprobe
        )

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
        path = self.dir / entry.file
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            self._moved_or(damage, Damage(entry.file, "missing", entry.vectors))
            return None
        except OSError as exc:
            damage.append(Damage(entry.file, f"cannot be read ({exc.strerror or exc})", entry.vectors))
            return None
        if entry.size is not None and len(data) != entry.size:
            what = "truncated" if len(data) < entry.size else "longer than written"
            self._moved_or(
                damage, Damage(entry.file, f"{what}: {len(data)} of {entry.size} bytes", entry.vectors)
            )
            return None
        if entry.checksum is not None and checksum(data) != entry.checksum:
            self._moved_or(damage, Damage(entry.file, "checksum mismatch (damaged on disk)", entry.vectors))
            return None
        return data

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

    # ---------------------------------------------------------------- properties
    @property
    def ntotal(self) -> int:
        with self._lock:
            return int(self._index.ntotal)

    @property
    def kind(self) -> str:
        if isinstance(self._index, CompressedIndex):
            return "compressed"
        return "ivf" if is_ivf(self._index) else "flat"

    def ids(self) -> np.ndarray:
        with self._lock:
            return self._ids(self._index)

    def files(self) -> list[str]:
        """The data files the catalogue lists (for checks and tests)."""
        return [e.file for e in self._cat.files()]

    # ---------------------------------------------------------------- writing
    def _writable(self) -> None:
        if self.read_only:
            raise StoreError("this index was opened for reading; only the indexing job writes it")

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        """Add vectors (searchable at once); durable after the next :meth:`checkpoint`."""
        self._writable()
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim or len(ids) != len(vecs):
            raise StoreError(f"expected ({len(ids)}, {self.dim}) vectors, got {vecs.shape}")
        if len(ids) == 0:
            return
        with self._lock:
            self._index.add_with_ids(vecs, ids)
            self._gpu_index = None
        self._pending_ids.append(ids)
        self._pending_vecs.append(vecs)

    def remove(self, ids: Iterable[int]) -> int:
        """Remove vectors by id; durable after the next :meth:`checkpoint` (which then compacts)."""
        self._writable()
        arr = np.fromiter(ids, dtype=np.int64)
        if len(arr) == 0:
            return 0
        faiss = _faiss()
        with self._lock:
            n = int(self._index.remove_ids(faiss.IDSelectorBatch(arr)))
            self._gpu_index = None
        if n:
            self._removed_since_base = True
            gone = set(arr.tolist())
            kept = list(zip(self._pending_ids, self._pending_vecs, strict=True))
            self._pending_ids, self._pending_vecs = [], []
            for i, v in kept:
                mask = np.array([x not in gone for x in i.tolist()], dtype=bool)
                if mask.any():
                    self._pending_ids.append(i[mask])
                    self._pending_vecs.append(v[mask])
        return n

    def checkpoint(self) -> None:
        """Make everything added or removed so far durable: one new segment, or a compaction."""
        self._writable()
        if self._removed_since_base:
            self.compact()
            return
        if not self._pending_ids:
            return
        entry = self._write_segment(np.concatenate(self._pending_ids), np.concatenate(self._pending_vecs))
        cat = self._cat
        self._cat = Catalogue(FORMAT, cat.generation + 1, cat.base, (*cat.segments, entry), full=cat.full)
        self._write_catalogue(self._cat)
        self._loaded.add(entry.file)
        self._pending_ids, self._pending_vecs = [], []
        if len(self._cat.segments) >= COMPACT_SEGMENTS:
            index = self._index
            if isinstance(index, CompressedIndex) and index.delta.ntotal * 8 < index.base.ntotal:
                self._merge_segments()  # a small delta: rewriting the full vectors can wait
            else:
                self.compact()

    def _write_segment(self, ids: np.ndarray, vecs: np.ndarray) -> Entry:
        buf = io.BytesIO()
        np.savez(buf, ids=ids, vecs=vecs)
        data = buf.getvalue()
        name = f"seg-{self._cat.generation + 1:08d}.npz"
        atomic_write_bytes(self.dir / name, data, sole_writer=True)
        return Entry(name, len(data), checksum(data), len(ids))

    def _merge_segments(self) -> None:
        """A compressed store's segments rewritten as one (cheap: the base and its full vectors stay)."""
        assert isinstance(self._index, CompressedIndex)
        entry = self._write_segment(*self._index.delta_vectors())
        cat, old = self._cat, self._cat.segments
        self._cat = Catalogue(FORMAT, cat.generation + 1, cat.base, (entry,), full=cat.full)
        self._write_catalogue(self._cat)
        for e in old:
            (self.dir / e.file).unlink(missing_ok=True)
        self._loaded = {e.file for e in self._cat.files()}

    def compact(self) -> None:
        """Write everything into a new base (switching to IVF, then to a compressed base, when large)
        and drop the segments."""
        for _ in self.compact_steps():
            pass

    def compact_steps(self) -> Generator[tuple[str, int, int], None, None]:
        """:meth:`compact`, yielding (phase, done, total) while a compressed base is built (minutes at
        a million vectors). Raises :class:`CompactionRefused` before writing if memory is short."""
        self._writable()
        faiss = _faiss()
        n = int(self._index.ntotal)
        compressed = isinstance(self._index, CompressedIndex)
        if compressed or n * self.dim >= self.compress_threshold:
            need = choose_spec(n, self.dim).min_train()
            if compressed or n >= need:
                self.compress_pending = None
                yield from self._compress()
                return
            self.compress_pending = f"{n} vectors are too few to train a compressed index ({need} needed)"
        with self._lock:
            if not is_ivf(self._index) and n * self.dim >= self.ann_threshold:
                self._index = self._to_ivf(*all_vectors(self._index))
            elif is_ivf(self._index) and ivf_nlist(n) >= 4 * faiss.extract_index_ivf(self._index).nlist:
                # Grown far past the cells it was trained with (e.g. 16k -> 1M): lists get long and
                # every query slow (bench/search_latency.py "grown" rows). Re-train for the new size.
                self._index = self._to_ivf(*all_vectors(self._index))
            data = faiss.serialize_index(self._index)
        gen = self._cat.generation + 1
        name = f"base-{gen:08d}.faiss"
        view = memoryview(data)
        with atomic_open(self.dir / name, "wb", sole_writer=True) as fh:
            fh.write(view)
        old = self._cat.files()
        self._cat = Catalogue(FORMAT, gen, Entry(name, len(view), checksum(view), n), ())
        self._write_catalogue(self._cat)
        for e in old:
            (self.dir / e.file).unlink(missing_ok=True)
        fsync_dir(self.dir)
        self._loaded = {name}
        self._pending_ids, self._pending_vecs = [], []
        self._removed_since_base = False

    def _compress(self) -> Generator[tuple[str, int, int], None, None]:
        """Build a compressed base beside the current files, then commit it (one catalogue write)."""
        plan = plan_compaction(self._index, self.dim)
        avail = self._memory()
        if plan.need > avail:
            raise CompactionRefused(
                f"compacting the index ({len(plan.source.ids):,} vectors) needs about "
                f"{plan.need / 2**30:.2f} GiB of memory, but only {avail / 2**30:.2f} GiB is available; "
                "nothing was changed (close other programs and index again)"
            )
        gen = self._cat.generation + 1
        built = yield from build(self.dir, gen, self.dim, plan.source, plan.spec, plan.grow)
        old = self._cat.files()
        self._cat = Catalogue(FORMAT, gen, built.base, (), full=built.full)
        self._write_catalogue(self._cat)
        with self._lock:
            prev, self._index = self._index, built.index
            self._gpu_index = None
        if isinstance(prev, CompressedIndex):
            prev.full.close()
        for e in old:
            (self.dir / e.file).unlink(missing_ok=True)
        fsync_dir(self.dir)
        self._loaded = {built.base.file, built.full.file}
        self._pending_ids, self._pending_vecs = [], []
        self._removed_since_base = False

    def _to_ivf(self, ids: np.ndarray, vecs: np.ndarray) -> Any:
        faiss = _faiss()
        n = len(ids)
        nlist = ivf_nlist(n)
        quantizer = faiss.IndexFlatIP(self.dim)
        ivf = faiss.IndexIVFFlat(quantizer, self.dim, nlist, faiss.METRIC_INNER_PRODUCT)
        rng = np.random.default_rng(0)
        sample = vecs if n <= nlist * 64 else vecs[rng.choice(n, nlist * 64, replace=False)]
        ivf.train(np.ascontiguousarray(sample))
        ivf.add_with_ids(np.ascontiguousarray(vecs), ids)
        ivf.nprobe = default_nprobe(nlist)
        return ivf

    # ---------------------------------------------------------------- searching
    def search(self, queries: np.ndarray, k: int, nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids), each ``(len(queries), k)``; missing results have id -1."""
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        with self._lock:
            if isinstance(self._index, CompressedIndex):
                k = max(1, min(k, self._index.ntotal or 1))
                return self._index.search(q, k, nprobe or self.nprobe)
            index = self._search_index()
            if is_ivf(self._index):
                _faiss().extract_index_ivf(index).nprobe = (
                    nprobe or self.nprobe or default_nprobe(self._index.nlist)
                )
            k = max(1, min(k, int(self._index.ntotal) or 1))
            return index.search(q, k)  # type: ignore[no-any-return]

    def _search_index(self) -> Any:
        faiss = _faiss()
        if not hasattr(faiss, "StandardGpuResources") or faiss.get_num_gpus() == 0:
            return self._index
        if self._gpu_index is None:
            try:
                self._gpu_res = getattr(self, "_gpu_res", None) or faiss.StandardGpuResources()
                self._gpu_index = faiss.index_cpu_to_gpu(self._gpu_res, 0, self._index)
            except Exception:  # no usable GPU after all: stay on the CPU index
                return self._index
        return self._gpu_index

    def vectors(self, ids: Iterable[int]) -> np.ndarray:
        """Stored vectors for ``ids`` (for exports and tests)."""
        with self._lock:
            index = self._index
            if isinstance(index, CompressedIndex):
                return np.stack([index.reconstruct(int(i)) for i in ids])
            if is_ivf(index):
                index.make_direct_map()
            return np.stack([index.reconstruct(int(i)) for i in ids])


__all__ = [
    "META",
    "CompactionRefused",
    "Damage",
    "StoreError",
    "VectorStore",
    "checksum",
    "default_nprobe",
    "file_checksum",
    "ivf_nlist",
    "quick_damage",
]
