"""The store's compressed base for large corpora: an IVF index of compressed codes in RAM, the full
float32 vectors in a file on disk that only re-scores each query's few best candidates.

Why: at 1M × 2048-d the exact vectors are 8 GB, more than a laptop can hold beside everything
else. Scalar-quantised codes (of a PCA rotation's leading dimensions at 2048-d) are 8-32x smaller;
ranking by them alone loses recall, so each query's top ``refine × k`` candidates are re-scored
exactly from the full vectors, read by ``pread`` (page
cache, not this process's memory). The codec and its parameters are chosen by measurement
(bench/compressed_index.py, docs/benchmarks.md). On disk a compressed base is two immutable files
listed by the catalogue: ``base-<gen>.faiss`` (the codes, with the ids) and ``full-<gen>.f32``
(the vectors as raw rows, sorted by id). Vectors added since go to an exact delta (the segments),
searched beside the base and merged.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.fsutil import atomic_open
from vrag_desktop.core.index.catalogue import Entry, StoreError
from vrag_desktop.core.index.ivf import default_nprobe, ivf_nlist

# Compress once the float32 vectors pass 1 GiB (e.g. 131k × 2048-d, 700k × 384-d).
DEFAULT_COMPRESS_THRESHOLD = 2**28
TRAIN_PER_LIST = 39  # faiss' minimum k-means points per centroid
PCA_TRAIN = 20_000
CHUNK_BYTES = 64 << 20  # rows streamed per step when writing, training and adding
SLACK_BYTES = 128 << 20


class CompactionRefused(StoreError):
    """Not enough memory to compact: refused before anything was written."""


@dataclass(frozen=True)
class Spec:
    """A compressed index: ``nlist`` IVF cells of scalar-quantised codes (``codec`` SQ8 / SQ4),
    optionally in ``dred`` dimensions (an uncentred PCA rotation, 0: none), with ``refine`` × k
    candidates re-scored exactly from the full vectors and ``nprobe`` cells visited per query."""

    nlist: int
    dred: int
    codec: str
    refine: int
    nprobe: int

    def factory(self, dim: int) -> str:
        pca = f"PCAR{self.dred}," if self.dred else ""
        return f"{pca}IVF{self.nlist},{self.codec}"

    def code_size(self, dim: int) -> int:
        return (self.dred or dim) * int(self.codec[2:]) // 8

    def min_train(self) -> int:
        """Vectors needed to train it: k-means needs ~39 points per cell."""
        return max(self.nlist * TRAIN_PER_LIST, self.dred)


def choose_spec(n: int, dim: int) -> Spec:
    """Measured with bench/compressed_index.py (docs/benchmarks.md §2): at ≥ 1024-d, 8-bit codes of
    the 256 leading uncentred principal directions and 5 × k candidates re-scored (1M × 2048-d:
    recall@10 0.9995, p50 3.1 ms, 0.34 GiB); below, 4-bit codes of every dimension and 10 × k (a
    low-rank cut loses on real 384-d MiniLM vectors: their top 192 directions hold 94.5 % of the
    energy, and a PCAR192,SQ8 code ranks worse than SQ4 of all 384 dimensions, for no less CPU in
    the store at 1M — docs/benchmarks.md, issue 33). Half the cells of an IVF-Flat: training and
    encoding cost grow with the cells. (8-bit PQ codes trained and encoded far too slowly on a loaded
    2-core machine: 10k training vectors took > 5 minutes; 4-bit fast-scan PQ scans faster but
    ranks far worse: codes-only recall@10 0.50, 0.94 after 10 × k re-scoring.) The 4-bit codes
    visit the usual number of cells, not twice: recall@10 stays ≥ 0.98 (1M: 0.994, 3M: 0.985, 10M:
    0.981) and at 10M × 384 a query takes 3.1 ms instead of 4.9 (4.0 instead of 5.7 with the full
    vectors out of the page cache; docs/benchmarks.md §2), within issue 33's 5 ms."""
    nlist = max(16, ivf_nlist(n) // 2)
    if dim >= 1024:
        return Spec(nlist=nlist, dred=256, codec="SQ8", refine=5, nprobe=2 * default_nprobe(nlist))
    return Spec(nlist=nlist, dred=0, codec="SQ4", refine=10, nprobe=default_nprobe(nlist))


def compaction_need(n: int, dim: int, spec: Spec, *, retrain: bool, source_copy: bool) -> int:
    """Bytes a compressed compaction of ``n`` vectors needs beyond what the process holds now."""
    chunk = max(1, CHUNK_BYTES // (4 * dim))
    need = n * (spec.code_size(dim) + 8) + 8 * n + 3 * chunk * dim * 4 + SLACK_BYTES
    if retrain:
        need += min(n, spec.min_train() * 2) * dim * 4 * 2 + spec.nlist * dim * 4
    if source_copy:
        need += n * dim * 4
    return need


def memory_available() -> int:
    """Bytes the system can give without swapping (MemAvailable)."""
    import psutil

    return int(psutil.virtual_memory().available)


_SEEK_LOCK = threading.Lock()


def _pread(fd: int, size: int, offset: int) -> bytes:
    """``os.pread`` where there is one; elsewhere (Windows) a seek and a read under a lock."""
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    with _SEEK_LOCK:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.read(fd, size)


def _advise(fd: int, offset: int, length: int, advice: str) -> None:
    """``posix_fadvise`` where there is one (not on Windows or macOS): a hint, never an error."""
    call, value = getattr(os, "posix_fadvise", None), getattr(os, advice, None)
    if call is not None and value is not None:
        with contextlib.suppress(OSError):
            call(fd, offset, length, value)


def _faiss() -> Any:
    from vrag_desktop.core.index.faiss_lib import load_faiss

    return load_faiss()


class FullVectors:
    """The full vectors of a compressed base: raw float32 rows sorted by id, read with ``pread``."""

    def __init__(self, path: Path, dim: int, ids: np.ndarray) -> None:
        self.path, self.dim = path, dim
        self.ids = ids  # sorted
        self.row_bytes = 4 * dim
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        size = os.fstat(self._fd).st_size
        if size != len(ids) * self.row_bytes:
            os.close(self._fd)
            raise StoreError(f"{path.name} holds {size} bytes, expected {len(ids)} × {self.row_bytes}")
        # A query re-scores ~100 scattered rows: read-ahead around each would fetch pages nobody asked for.
        _advise(self._fd, 0, 0, "POSIX_FADV_RANDOM")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        self.close()

    def positions(self, ids: np.ndarray) -> np.ndarray:
        """Rows of ``ids``; -1 for an id not in the file."""
        pos = np.searchsorted(self.ids, ids)
        pos = np.minimum(pos, max(len(self.ids) - 1, 0))
        ok = (len(self.ids) > 0) & (self.ids[pos] == ids) if len(self.ids) else np.zeros(len(ids), bool)
        return np.where(ok, pos, -1)

    def rows(self, pos: np.ndarray) -> np.ndarray:
        """Rows at ``pos``: one read for a dense range, else one read per row."""
        out = np.empty((len(pos), self.dim), dtype=np.float32)
        if len(pos) == 0:
            return out
        lo, hi = int(pos.min()), int(pos.max()) + 1
        if hi - lo <= 2 * len(pos):
            buf = _pread(self._fd, (hi - lo) * self.row_bytes, lo * self.row_bytes)
            block = np.frombuffer(buf, dtype=np.float32).reshape(hi - lo, self.dim)
            out[:] = block[pos - lo]
            return out
        # Every row's read is queued first, so a disk serves them together rather than one after
        # another where the file is not in the page cache (a laptop's RAM cannot hold a 15 GB file):
        # 10M × 384, nprobe 46, 100 rows re-scored: p50 13.4 -> 5.6 ms cold, 4.4 ms either way warm
        # (docs/benchmarks.md §2).
        rows = pos.tolist()
        for p in rows:
            _advise(self._fd, p * self.row_bytes, self.row_bytes, "POSIX_FADV_WILLNEED")
        view = out.view(np.uint8).reshape(len(pos), self.row_bytes)
        for i, p in enumerate(rows):
            view[i] = np.frombuffer(_pread(self._fd, self.row_bytes, p * self.row_bytes), np.uint8)
        return out


class CompressedIndex:
    """A compressed base plus an exact delta, with the few calls of a faiss index the store makes."""

    def __init__(self, base: Any, full: FullVectors, refine: int, nprobe: int) -> None:
        faiss = _faiss()
        self.base, self.full, self.refine, self.nprobe = base, full, refine, nprobe
        self.d = int(base.d)
        self.delta = faiss.IndexIDMap2(faiss.IndexFlatIP(self.d))

    @property
    def ntotal(self) -> int:
        return int(self.base.ntotal) + int(self.delta.ntotal)

    @property
    def nlist(self) -> int:
        return int(_faiss().extract_index_ivf(self.base).nlist)

    def add_with_ids(self, vecs: np.ndarray, ids: np.ndarray) -> None:
        self.delta.add_with_ids(vecs, ids)

    def remove_ids(self, selector: Any) -> int:
        return int(self.base.remove_ids(selector)) + int(self.delta.remove_ids(selector))

    def base_ids(self) -> np.ndarray:
        from vrag_desktop.core.index.ivf import ids_of

        return ids_of(self.base)

    def ids(self) -> np.ndarray:
        from vrag_desktop.core.index.ivf import ids_of

        return np.concatenate([ids_of(self.base), ids_of(self.delta)])

    def delta_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        from vrag_desktop.core.index.ivf import all_vectors

        return all_vectors(self.delta)

    def reconstruct(self, id_: int) -> np.ndarray:
        pos = self.full.positions(np.array([id_], dtype=np.int64))
        if pos[0] >= 0:
            return self.full.rows(pos)[0]
        return np.asarray(self.delta.reconstruct(id_))

    def search(self, q: np.ndarray, k: int, nprobe: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top ``k`` by exact inner product: the base's ``refine × k`` best by code, re-scored from
        the full vectors, merged with the delta's exact top ``k``."""
        faiss = _faiss()
        faiss.extract_index_ivf(self.base).nprobe = nprobe or self.nprobe
        kb = max(k, self.refine * k) if self.refine else k
        kb = min(kb, max(1, int(self.base.ntotal)))
        cd, ci = self.base.search(q, kb)
        scores = np.full((len(q), k), -np.inf, dtype=np.float32)
        labels = np.full((len(q), k), -1, dtype=np.int64)
        dd, di = self.delta.search(q, k) if self.delta.ntotal else (None, None)
        for r in range(len(q)):
            ids = ci[r][ci[r] >= 0]
            if self.refine and len(ids):
                pos = self.full.positions(ids)
                ids = ids[pos >= 0]
                s = self.full.rows(pos[pos >= 0]) @ q[r]
            else:
                s = cd[r][: len(ids)]
            if di is not None and dd is not None:
                ids = np.concatenate([ids, di[r][di[r] >= 0]])
                s = np.concatenate([s, dd[r][di[r] >= 0]])
            top = np.argsort(-s, kind="stable")[:k]
            scores[r, : len(top)], labels[r, : len(top)] = s[top], ids[top]
        return scores, labels


# ------------------------------------------------------------------------------------ building
@dataclass
class Source:
    """Every vector of the new base in id order: ``ids`` sorted, and ``rows(a, b)`` the vectors of
    sorted positions a..b (from the flat index in RAM, or the old full file merged with the delta)."""

    ids: np.ndarray
    rows: Callable[[int, int], np.ndarray]


def source_from_arrays(ids: np.ndarray, vecs: np.ndarray) -> Source:
    order = np.argsort(ids, kind="stable")
    return Source(ids[order], lambda a, b: np.ascontiguousarray(vecs[order[a:b]]))


def source_merged(old: CompressedIndex) -> Source:
    """The base's live vectors (removals dropped) from its full file, plus the delta."""
    alive = np.sort(old.base_ids())
    old_pos = old.full.positions(alive)
    d_ids, d_vecs = old.delta_vectors()
    ids = np.concatenate([alive, d_ids])
    where = np.concatenate([old_pos, -1 - np.arange(len(d_ids))])  # >= 0: old row; < 0: delta row
    order = np.argsort(ids, kind="stable")

    def rows(a: int, b: int) -> np.ndarray:
        w = where[order[a:b]]
        out = np.empty((b - a, old.d), dtype=np.float32)
        o = w >= 0
        out[o] = old.full.rows(w[o])
        out[~o] = d_vecs[-1 - w[~o]]
        return out

    return Source(ids[order], rows)


@dataclass
class Built:
    index: CompressedIndex
    base: Entry
    full: Entry


def build(
    directory: Path,
    gen: int,
    dim: int,
    source: Source,
    spec: Spec,
    grow: tuple[Any, np.ndarray, np.ndarray] | None = None,
) -> Generator[tuple[str, int, int], None, Built]:
    """Write ``full-<gen>.f32`` and ``base-<gen>.faiss`` (new names: nothing listed is touched, so a
    kill leaves only leftovers the next writer removes). Yields (phase, done, total); returns
    :class:`Built`. ``grow``: (old base index, ids, vectors): the new base is a copy of the old one
    with these added (no re-training, no re-encoding of what it holds)."""
    import xxhash

    faiss = _faiss()
    n = len(source.ids)
    chunk = max(1, CHUNK_BYTES // (4 * dim))
    full_name, base_name = f"full-{gen:08d}.f32", f"base-{gen:08d}.faiss"
    h = xxhash.xxh3_128()
    with atomic_open(directory / full_name, "wb", sole_writer=True) as fh:
        for a in range(0, n, chunk):
            data = source.rows(a, min(n, a + chunk)).tobytes()
            fh.write(data)
            h.update(data)
            yield "write", min(n, a + chunk), n
    full = FullVectors(directory / full_name, dim, source.ids)
    full_entry = Entry(full_name, n * 4 * dim, h.hexdigest(), n)
    if grow is not None:
        index = faiss.clone_index(grow[0])
        for a in range(0, len(grow[1]), chunk):
            index.add_with_ids(np.ascontiguousarray(grow[2][a : a + chunk]), grow[1][a : a + chunk])
            yield "encode", a, len(grow[1])
    else:
        d = spec.dred or dim
        index = faiss.index_factory(d, f"IVF{spec.nlist},{spec.codec}", faiss.METRIC_INNER_PRODUCT)
        ntrain = min(n, spec.min_train())
        pick = np.sort(np.random.default_rng(0).choice(n, ntrain, replace=False))
        yield "train", 0, ntrain
        sample = np.concatenate([full.rows(pick[a : a + chunk]) for a in range(0, ntrain, chunk)])
        faiss.extract_index_ivf(index).cp.niter = 10
        if spec.dred:
            # PCA of the second moment, not the covariance (trained on x and -x: mean 0), so the
            # projection is a plain rotation + cut and keeps inner products' order.
            pca = faiss.PCAMatrix(dim, d, 0, False)
            few = sample[: max(PCA_TRAIN, d)]  # the leading directions settle long before this
            pca.train(np.concatenate([few, -few]))
            index = faiss.IndexPreTransform(pca, index)
        index.train(sample)
        del sample
        yield "train", ntrain, ntrain
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            with open(full.path, "rb") as f:
                f.seek(a * 4 * dim)
                x = np.fromfile(f, dtype=np.float32, count=(b - a) * dim).reshape(b - a, dim)
            index.add_with_ids(x, source.ids[a:b])
            yield "encode", b, n
    faiss.extract_index_ivf(index).nprobe = spec.nprobe
    h = xxhash.xxh3_128()
    size = 0
    with atomic_open(directory / base_name, "wb", sole_writer=True) as fh:

        def put(data: bytes) -> int:
            nonlocal size
            fh.write(data)
            h.update(data)
            size += len(data)
            return len(data)

        faiss.write_index(index, faiss.PyCallbackIOWriter(put))
    yield "write", n, n
    built = CompressedIndex(index, full, spec.refine, spec.nprobe)
    return Built(built, Entry(base_name, size, h.hexdigest(), n), full_entry)


def run_build(steps: Generator[tuple[str, int, int], None, Built]) -> Built:
    """Drive a :func:`build` to its end (for callers that do not show progress)."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


@dataclass
class Plan:
    """How to compact ``index`` into a compressed base: what to build from and what it costs."""

    spec: Spec
    source: Source
    grow: tuple[Any, np.ndarray, np.ndarray] | None
    need: int  # bytes of memory beyond what the process holds


def plan_compaction(index: Any, dim: int) -> Plan:
    """A compressed base for everything in ``index`` (flat, IVF-flat or compressed + delta): the
    old codes grown by the delta, or (first time, or grown 4x past its cells) trained anew."""
    faiss = _faiss()
    from vrag_desktop.core.index.ivf import all_vectors, ids_of

    n = int(index.ntotal)
    spec = choose_spec(n, dim)
    if isinstance(index, CompressedIndex):
        source = source_merged(index)
        if ivf_nlist(n) < 4 * index.nlist:
            d_ids, d_vecs = index.delta_vectors()
            spec = Spec(index.nlist, spec.dred, spec.codec, index.refine, index.nprobe)
            need = compaction_need(n, dim, spec, retrain=False, source_copy=False)
            return Plan(spec, source, (index.base, d_ids, d_vecs), need)
        return Plan(spec, source, None, compaction_need(n, dim, spec, retrain=True, source_copy=False))
    if isinstance(index, faiss.IndexIDMap2 | faiss.IndexIDMap):
        # The flat vectors in place (no copy): faiss' own array, read through a numpy view.
        vecs = faiss.rev_swig_ptr(faiss.downcast_index(index.index).get_xb(), n * dim).reshape(n, dim)
        source = source_from_arrays(ids_of(index), vecs)
        return Plan(spec, source, None, compaction_need(n, dim, spec, retrain=True, source_copy=False))
    source = source_from_arrays(*all_vectors(index))
    return Plan(spec, source, None, compaction_need(n, dim, spec, retrain=True, source_copy=True))
