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
import threading
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.fsutil import atomic_open, atomic_write_bytes, fsync_dir
from vrag_desktop.core.index.catalogue import (
    FORMAT,
    META,
    Catalogue,
    Damage,
    Entry,
    StoreError,
    checksum,
    file_checksum,
    quick_damage,
)
from vrag_desktop.core.index.compressed import (
    DEFAULT_COMPRESS_THRESHOLD,
    CompactionRefused,
    CompressedIndex,
    build,
    choose_spec,
    memory_available,
    plan_compaction,
)
from vrag_desktop.core.index.ivf import all_vectors, default_nprobe, is_ivf, ivf_nlist
from vrag_desktop.core.index.snapshot import DAMAGED, SnapshotReader, _faiss

# Flat search cost grows with ntotal*dim; past ~20M floats (e.g. 52k×384 or 10k×2048) a flat scan
# takes several ms per query on a 2-core machine, so an IVF index takes over.
DEFAULT_ANN_THRESHOLD = 20_000_000
COMPACT_SEGMENTS = 32


class VectorStore(SnapshotReader):
    """One corpus's vectors. ``read_only``: never writes a byte (searches, listings); otherwise the
    caller is the corpus's one writer. Searches may run beside a writer in-process (a lock guards).
    Reading, checking and repairing the files: :class:`~vrag_desktop.core.index.snapshot.SnapshotReader`."""

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
        self._gpu_index = None
        self.nprobe: int | None = None
        #: Files left out of the index because they are damaged (a reader reports; a writer repairs).
        self.damage = []
        #: What a writer found damaged on open and dropped (its vectors' items are then re-embedded).
        self.repaired = []
        if not read_only:
            self.dir.mkdir(parents=True, exist_ok=True)
        self._signature = self._meta_signature()
        self._cat = self._read_catalogue()
        self._index, self._loaded = self._load(self._cat)
        if not read_only:
            self._settle()

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
            self._take_late_check()
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
    "DAMAGED",
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
