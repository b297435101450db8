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
``ntotal * dim`` passes a threshold. With faiss-gpu and a GPU, search runs on the GPU. Stores of
format 1 (``base.faiss`` + ``seg-*.npz``, no checksums) are read as they are and upgraded to format
2 by the next writer.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vrag_desktop.core.fsutil import atomic_open, atomic_write_bytes, fsync_dir

META = "store.json"
DAMAGED = "damaged"
FORMAT = 2
_BASE_RE = re.compile(r"^base(-\d{8})?\.faiss$")
_SEG_RE = re.compile(r"^seg-(\d{8})\.npz$")
# Flat search cost grows with ntotal*dim; past ~20M floats (e.g. 52k×384 or 10k×2048) a flat scan
# takes several ms per query on a 2-core machine, so an IVF index takes over.
DEFAULT_ANN_THRESHOLD = 20_000_000
COMPACT_SEGMENTS = 32
# A reader that sees its snapshot change under it this many times in a row gives up and reports it.
_SNAPSHOT_TRIES = 20


class StoreError(RuntimeError):
    """The index cannot be used at all (dimension mismatch, unreadable catalogue for a reader)."""


@dataclass(frozen=True)
class Damage:
    """One index file that could not be used: which, why, and how many vectors it held (if known)."""

    file: str
    problem: str
    vectors: int | None = None

    def __str__(self) -> str:
        held = f"; it held {self.vectors} vectors" if self.vectors else ""
        return f"{self.file}: {self.problem}{held}"


@dataclass(frozen=True)
class _Entry:
    file: str
    size: int | None = None
    checksum: str | None = None  # XXH3-128, hex; None for a format-1 file (never checked)
    vectors: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "bytes": self.size, "xxh3_128": self.checksum, "vectors": self.vectors}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> _Entry:
        name = str(d["file"])
        if "/" in name or "\\" in name or not (_BASE_RE.match(name) or _SEG_RE.match(name)):
            raise ValueError(f"unexpected file name {name!r}")
        return cls(name, d.get("bytes"), d.get("xxh3_128"), d.get("vectors"))


@dataclass(frozen=True)
class _Catalogue:
    format: int
    generation: int
    base: _Entry | None
    segments: tuple[_Entry, ...]
    problem: str | None = None  # why store.json could not be used (its files were read unchecked)

    def files(self) -> list[_Entry]:
        return ([self.base] if self.base else []) + list(self.segments)


class _SnapshotMoved(Exception):
    """A file the snapshot lists changed under the reader: a writer committed meanwhile."""


def _faiss() -> Any:
    import faiss

    return faiss


def checksum(data: bytes | memoryview) -> str:
    """The checksum written beside every index file (XXH3-128: ~10 GB/s, so checking is cheap)."""
    import xxhash

    return xxhash.xxh3_128(data).hexdigest()


def file_checksum(path: Path, chunk: int = 1 << 24) -> str:
    import xxhash

    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


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
    ) -> None:
        self.dir = Path(directory)
        self.dim = int(dim)
        self.ann_threshold = ann_threshold
        self.read_only = read_only
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

    def _read_catalogue(self) -> _Catalogue:
        path = self.dir / META
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            if self.read_only or any(self._data_files()):
                return self._format1_catalogue()
            cat = _Catalogue(FORMAT, 0, None, ())
            self._write_catalogue(cat)
            return cat
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
        try:
            meta = json.loads(raw)
            dim = int(meta["dim"])
            fmt = int(meta.get("format", 1))
        except (ValueError, KeyError, TypeError) as exc:
            # The catalogue itself is damaged: read the files as format 1 would (unchecked), and let a
            # writer rewrite it from what loads.
            return self._format1_catalogue(f"unreadable ({exc}); the index files were read unchecked")
        if dim != self.dim:
            raise StoreError(f"index in {self.dir} has dimension {dim}, expected {self.dim}")
        if fmt < FORMAT:
            return self._format1_catalogue()
        if fmt > FORMAT:
            raise StoreError(f"index in {self.dir} has format {fmt}, newer than this app reads ({FORMAT})")
        try:
            base = _Entry.from_json(meta["base"]) if meta.get("base") else None
            segs = tuple(_Entry.from_json(s) for s in meta.get("segments", []))
        except (ValueError, KeyError, TypeError) as exc:
            return self._format1_catalogue(f"unreadable ({exc}); the index files were read unchecked")
        return _Catalogue(fmt, int(meta.get("generation", 0)), base, segs)

    def _data_files(self) -> list[str]:
        try:
            names = os.listdir(self.dir)
        except OSError:
            return []
        return [n for n in names if _BASE_RE.match(n) or _SEG_RE.match(n)]

    def _format1_catalogue(self, problem: str | None = None) -> _Catalogue:
        """What the folder holds, unchecked: format 1, or a lost catalogue. The newest base wins."""
        names = self._data_files()
        # base.faiss (format 1) is older than any base-<generation>.faiss
        bases = sorted((int(n[5:13]) if n != "base.faiss" else -1, n) for n in names if _BASE_RE.match(n))
        segs = sorted(n for n in names if _SEG_RE.match(n))
        gen = max([g for g, _ in bases] + [int(n[4:12]) for n in segs] + [0])
        base = _Entry(bases[-1][1]) if bases else None
        return _Catalogue(1, gen, base, tuple(_Entry(n) for n in segs), problem)

    def _write_catalogue(self, cat: _Catalogue) -> None:
        doc = {
            "format": FORMAT,
            "dim": self.dim,
            "generation": cat.generation,
            "base": cat.base.to_json() if cat.base else None,
            "segments": [s.to_json() for s in cat.segments],
        }
        atomic_write_bytes(self.dir / META, json.dumps(doc, indent=1).encode(), sole_writer=True)
        self._signature = self._meta_signature()

    # ---------------------------------------------------------------- loading
    def _new_flat(self) -> Any:
        faiss = _faiss()
        return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))

    def _load(self, cat: _Catalogue) -> tuple[Any, set[str]]:
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

    def _load_files(self, cat: _Catalogue, damage: list[Damage]) -> tuple[Any, set[str]]:
        index = self._load_base(cat.base, damage) if cat.base is not None else None
        loaded = {cat.base.file} if index is not None and cat.base is not None else set()
        if index is None:
            index = self._new_flat()
        known = set(_ids_of(index).tolist())
        for seg in cat.segments:
            got = self._read_segment(seg, damage)
            if got is None:
                continue
            ids, vecs = got
            # An id in the base and in a segment is loaded once (a format-1 compaction cut short).
            keep = np.array([i not in known for i in ids.tolist()], dtype=bool)
            if keep.any():
                index.add_with_ids(np.ascontiguousarray(vecs[keep]), ids[keep])
                known.update(ids[keep].tolist())
            loaded.add(seg.file)
        return index, loaded

    def _load_base(self, entry: _Entry, damage: list[Damage]) -> Any:
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

    def _read_segment(self, seg: _Entry, damage: list[Damage]) -> tuple[np.ndarray, np.ndarray] | None:
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

    def _segment_bytes(self, entry: _Entry, damage: list[Damage]) -> bytes | None:
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
            segs = tuple(self._checked_entry(s) for s in cat.segments if s.file not in bad)
            for name in sorted(bad):
                self._keep_damaged(name)
            self._cat = _Catalogue(FORMAT, cat.generation, base, segs)
            self._write_catalogue(self._cat)
            self.damage = []
        listed = {e.file for e in self._cat.files()}
        for name in self._data_files():
            if name not in listed:
                (self.dir / name).unlink(missing_ok=True)

    def _checked_entry(self, entry: _Entry) -> _Entry:
        if entry.checksum is not None:
            return entry
        path = self.dir / entry.file
        vectors = None
        if _SEG_RE.match(entry.file):
            with np.load(path) as z:
                vectors = len(z["ids"])
        return _Entry(entry.file, path.stat().st_size, file_checksum(path), vectors)

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
            if new.base == old.base and new.segments[: len(old.segments)] == old.segments and not self.damage:
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
        existing = _ids_of(self._index)
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
        return "ivf" if _is_ivf(self._index) else "flat"

    def ids(self) -> np.ndarray:
        with self._lock:
            return _ids_of(self._index)

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
        ids = np.concatenate(self._pending_ids)
        vecs = np.concatenate(self._pending_vecs)
        buf = io.BytesIO()
        np.savez(buf, ids=ids, vecs=vecs)
        data = buf.getvalue()
        gen = self._cat.generation + 1
        name = f"seg-{gen:08d}.npz"
        atomic_write_bytes(self.dir / name, data, sole_writer=True)
        entry = _Entry(name, len(data), checksum(data), len(ids))
        self._cat = _Catalogue(FORMAT, gen, self._cat.base, (*self._cat.segments, entry))
        self._write_catalogue(self._cat)
        self._loaded.add(name)
        self._pending_ids, self._pending_vecs = [], []
        if len(self._cat.segments) >= COMPACT_SEGMENTS:
            self.compact()

    def compact(self) -> None:
        """Write everything into a new base (switching to IVF when large) and drop the segments."""
        self._writable()
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
        gen = self._cat.generation + 1
        name = f"base-{gen:08d}.faiss"
        view = memoryview(data)
        with atomic_open(self.dir / name, "wb", sole_writer=True) as fh:
            fh.write(view)
        old = self._cat.files()
        self._cat = _Catalogue(FORMAT, gen, _Entry(name, len(view), checksum(view), n), ())
        self._write_catalogue(self._cat)
        for e in old:
            (self.dir / e.file).unlink(missing_ok=True)
        fsync_dir(self.dir)
        self._loaded = {name}
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


def quick_damage(directory: Path) -> list[Damage]:
    """What a listing can tell without reading the index: a catalogue that does not parse, listed
    files missing or of the wrong size. (Checksums need every byte: :func:`~vrag_desktop.core.corpus.
    integrity.check_corpus` and every open verify them.) Never writes."""
    path = Path(directory) / META
    try:
        meta = json.loads(path.read_bytes())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        return [Damage(META, f"unreadable ({exc})")]
    if not isinstance(meta, dict) or int(meta.get("format", 1)) < FORMAT:
        return []
    out = []
    try:
        entries = ([meta["base"]] if meta.get("base") else []) + list(meta.get("segments", []))
        for e in map(_Entry.from_json, entries):
            try:
                size = (Path(directory) / e.file).stat().st_size
            except FileNotFoundError:
                out.append(Damage(e.file, "missing", e.vectors))
                continue
            if e.size is not None and size != e.size:
                what = "truncated" if size < e.size else "longer than written"
                out.append(Damage(e.file, f"{what}: {size} of {e.size} bytes", e.vectors))
    except (KeyError, TypeError, ValueError) as exc:
        return [Damage(META, f"unreadable ({exc})")]
    return out


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
