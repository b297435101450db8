"""A crash-safe FAISS store: inner product over L2-normalised vectors, addressed by 64-bit ids.

On disk a store is a *base* index file plus *segment* files, each written atomically (temp file,
fsync, rename). A checkpoint appends one small segment (cost proportional to what is new, not to the
index size); compaction folds segments into a new base. A vector id found both in the base and in a
segment is loaded once, so a crash during compaction duplicates nothing.

The store is exact (``IndexFlatIP``) while small and switches to an inverted-file index (IVF) once
``ntotal * dim`` passes a threshold. With faiss-gpu and a GPU, search runs on the GPU.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.fsutil import atomic_write_bytes, fsync_dir

BASE = "base.faiss"
META = "store.json"
_SEG_RE = re.compile(r"^seg-(\d{8})\.npz$")
# Flat search cost grows with ntotal*dim; past ~20M floats (e.g. 52k×384 or 10k×2048) a flat scan
# takes several ms per query on a 2-core machine, so an IVF index takes over.
DEFAULT_ANN_THRESHOLD = 20_000_000
COMPACT_SEGMENTS = 32


class StoreError(RuntimeError):
    """The index files are missing, damaged, or do not match (dimension)."""


def _faiss() -> Any:
    import faiss

    return faiss


class VectorStore:
    """One corpus's vectors. Not thread-safe for writers; searches may run alongside (a lock guards)."""

    def __init__(self, directory: Path, dim: int, ann_threshold: int = DEFAULT_ANN_THRESHOLD) -> None:
        self.dir = Path(directory)
        self.dim = int(dim)
        self.ann_threshold = ann_threshold
        self._lock = threading.RLock()
        self._pending_ids: list[np.ndarray] = []
        self._pending_vecs: list[np.ndarray] = []
        self._removed_since_base = False
        self._gpu_index: Any = None
        self.nprobe: int | None = None
        self.dir.mkdir(parents=True, exist_ok=True)
        meta_path = self.dir / META
        if meta_path.exists():
            meta = json.loads(meta_path.read_text())
            if int(meta["dim"]) != self.dim:
                raise StoreError(f"index in {self.dir} has dimension {meta['dim']}, expected {self.dim}")
        else:
            atomic_write_bytes(meta_path, json.dumps({"dim": self.dim, "format": 1}).encode())
        self._index = self._load()

    # ---------------------------------------------------------------- loading
    def _new_flat(self) -> Any:
        faiss = _faiss()
        return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))

    def _load(self) -> Any:
        faiss = _faiss()
        base = self.dir / BASE
        if base.exists():
            try:
                index = faiss.read_index(str(base))
            except Exception as exc:
                raise StoreError(f"cannot read {base}: {exc}") from exc
            if index.d != self.dim:
                raise StoreError(f"{base} has dimension {index.d}, expected {self.dim}")
        else:
            index = self._new_flat()
        known = set(_ids_of(index).tolist())
        for seg in self._segments():
            try:
                with np.load(seg) as z:
                    ids, vecs = z["ids"].astype(np.int64), z["vecs"].astype(np.float32)
            except Exception:
                # A segment is renamed into place only once complete, so a bad one is disk damage:
                # drop it; reconciliation re-embeds its items.
                seg.unlink(missing_ok=True)
                continue
            keep = np.array([i not in known for i in ids.tolist()], dtype=bool)
            if keep.any():
                index.add_with_ids(np.ascontiguousarray(vecs[keep]), ids[keep])
                known.update(ids[keep].tolist())
        return index

    def _segments(self) -> list[Path]:
        return sorted(p for p in self.dir.iterdir() if _SEG_RE.match(p.name))

    # ---------------------------------------------------------------- properties
    @property
    def ntotal(self) -> int:
        with self._lock:
            return int(self._index.ntotal)

    @property
    def kind(self) -> str:
        return "ivf" if _is_ivf(self._index) else "flat"

    def ids(self) -> np.ndarray:
        with self._lock:
            return _ids_of(self._index)

    # ---------------------------------------------------------------- writing
    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        """Add vectors (searchable at once); durable after the next :meth:`checkpoint`."""
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
            kept = [(i, v) for i, v in zip(self._pending_ids, self._pending_vecs, strict=True)]
            self._pending_ids, self._pending_vecs = [], []
            for i, v in kept:
                mask = np.array([x not in gone for x in i.tolist()], dtype=bool)
                if mask.any():
                    self._pending_ids.append(i[mask])
                    self._pending_vecs.append(v[mask])
        return n

    def checkpoint(self) -> None:
        """Make everything added or removed so far durable."""
        if self._removed_since_base:
            self.compact()
            return
        if not self._pending_ids:
            return
        ids = np.concatenate(self._pending_ids)
        vecs = np.concatenate(self._pending_vecs)
        segs = self._segments()
        n = int(_SEG_RE.match(segs[-1].name).group(1)) + 1 if segs else 1  # type: ignore[union-attr]
        import io

        buf = io.BytesIO()
        np.savez(buf, ids=ids, vecs=vecs)
        atomic_write_bytes(self.dir / f"seg-{n:08d}.npz", buf.getvalue(), sole_writer=True)
        self._pending_ids, self._pending_vecs = [], []
        if len(segs) + 1 >= COMPACT_SEGMENTS:
            self.compact()

    def compact(self) -> None:
        """Write everything into a new base (switching to IVF when large) and drop the segments."""
        faiss = _faiss()
        with self._lock:
            n = int(self._index.ntotal)
            if not _is_ivf(self._index) and n * self.dim >= self.ann_threshold:
                self._index = self._to_ivf(*_all_vectors(self._index))
            elif _is_ivf(self._index) and ivf_nlist(n) >= 4 * faiss.extract_index_ivf(self._index).nlist:
                # Grown far past the cells it was trained with (e.g. 16k -> 1M): lists get long and
                # every query slow (bench/search_latency.py "grown" rows). Re-train for the new size.
                self._index = self._to_ivf(*_all_vectors(self._index))
            data = faiss.serialize_index(self._index)
        segs = self._segments()
        atomic_write_bytes(self.dir / BASE, data.tobytes(), sole_writer=True)
        for s in segs:
            s.unlink(missing_ok=True)
        fsync_dir(self.dir)
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
            index = self._search_index()
            if _is_ivf(self._index):
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
            if _is_ivf(index):
                index.make_direct_map()
                return np.stack([index.reconstruct(int(i)) for i in ids])
            return np.stack([index.reconstruct(int(i)) for i in ids])


def ivf_nlist(n: int) -> int:
    """Number of IVF cells: ~4·√n rounded to a power of two, at least 39 training points per cell."""
    target = 4 * math.sqrt(max(n, 1))
    nlist = 2 ** max(4, round(math.log2(target)))
    while nlist > 16 and n < nlist * 39:
        nlist //= 2
    return int(min(nlist, 65536))


def default_nprobe(nlist: int) -> int:
    """Cells visited per query. Measured with bench/search_latency.py on clustered 2048-d data:
    nprobe 16 gives recall@10 0.9995 at nlist 1024 (100k vectors, p50 1.2 ms) and 0.987 at nlist
    4096 (1M vectors, p50 3.7 ms); larger indexes need proportionally more (~sqrt(nlist) / 4)."""
    return int(max(16, round(math.sqrt(nlist) / 4)))


def _is_ivf(index: Any) -> bool:
    faiss = _faiss()
    try:
        faiss.extract_index_ivf(index)
        return True
    except Exception:
        return False


def _all_vectors(index: Any) -> tuple[np.ndarray, np.ndarray]:
    """(ids, vectors) of every entry of a flat IDMap or an IVF-Flat index."""
    faiss = _faiss()
    if isinstance(index, faiss.IndexIDMap2 | faiss.IndexIDMap):
        n = int(index.ntotal)
        vecs = index.index.reconstruct_n(0, n) if n else np.zeros((0, index.d), np.float32)
        return _ids_of(index), vecs
    ivf = faiss.extract_index_ivf(index)
    invlists = ivf.invlists
    ids_parts, vec_parts = [], []
    for lst in range(ivf.nlist):
        size = invlists.list_size(lst)
        if size:
            ids_parts.append(np.array(faiss.rev_swig_ptr(invlists.get_ids(lst), size), dtype=np.int64))
            codes = faiss.rev_swig_ptr(invlists.get_codes(lst), size * invlists.code_size)
            vec_parts.append(np.frombuffer(bytes(codes), dtype=np.float32).reshape(size, ivf.d))
    if not ids_parts:
        return np.zeros(0, np.int64), np.zeros((0, ivf.d), np.float32)
    return np.concatenate(ids_parts), np.ascontiguousarray(np.concatenate(vec_parts))


def _ids_of(index: Any) -> np.ndarray:
    faiss = _faiss()
    if isinstance(index, (faiss.IndexIDMap2, faiss.IndexIDMap)):
        return faiss.vector_to_array(index.id_map).astype(np.int64)
    ivf = faiss.extract_index_ivf(index)
    invlists = ivf.invlists
    parts = []
    for lst in range(ivf.nlist):
        size = invlists.list_size(lst)
        if size:
            ptr = invlists.get_ids(lst)
            parts.append(np.array(faiss.rev_swig_ptr(ptr, size), dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
