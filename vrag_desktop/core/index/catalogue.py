"""The index's catalogue, ``store.json``: which immutable files make up an index, with their sizes,
vector counts and checksums — the commit point every writer replaces and every reader snapshots
(see :mod:`vrag_desktop.core.index.store`). Also what a listing can tell from it alone
(:func:`quick_damage`), and the one checksum."""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.fsutil import atomic_write_bytes

META = "store.json"
FORMAT = 2
# A store with a compressed base (a "full" vectors file beside it) is written as format 3, so an app
# that predates it refuses it instead of misreading it.
FORMAT_COMPRESSED = 3
BASE_RE = re.compile(r"^base(-\d{8})?\.faiss$")
SEG_RE = re.compile(r"^seg-(\d{8})\.npz$")
FULL_RE = re.compile(r"^full-(\d{8})\.f32$")


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
class Entry:
    file: str
    size: int | None = None
    checksum: str | None = None  # XXH3-128, hex; None for a format-1 file (never checked)
    vectors: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "bytes": self.size, "xxh3_128": self.checksum, "vectors": self.vectors}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Entry:
        name = str(d["file"])
        if (
            "/" in name
            or "\\" in name
            or not (BASE_RE.match(name) or SEG_RE.match(name) or FULL_RE.match(name))
        ):
            raise ValueError(f"unexpected file name {name!r}")
        return cls(name, d.get("bytes"), d.get("xxh3_128"), d.get("vectors"))


@dataclass(frozen=True)
class Catalogue:
    format: int
    generation: int
    base: Entry | None
    segments: tuple[Entry, ...]
    problem: str | None = None  # why store.json could not be used (its files were read unchecked)
    full: Entry | None = None  # a compressed base's full vectors (see core/index/compressed.py)

    def files(self) -> list[Entry]:
        return ([self.base] if self.base else []) + ([self.full] if self.full else []) + list(self.segments)


def read_catalogue(directory: Path, dim: int) -> Catalogue | None:
    """``directory``'s catalogue; None for a new store (no catalogue, no files). A damaged or
    format-1 catalogue yields the files found, unchecked (format 1), with the problem if any."""
    path = directory / META
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return format1_catalogue(directory) if data_files(directory) else None
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        meta = json.loads(raw)
        found_dim = int(meta["dim"])
        fmt = int(meta.get("format", 1))
    except (ValueError, KeyError, TypeError) as exc:
        # The catalogue itself is damaged: read the files as format 1 would (unchecked), and let a
        # writer rewrite it from what loads.
        return format1_catalogue(directory, f"unreadable ({exc}); the index files were read unchecked")
    if found_dim != dim:
        raise StoreError(f"index in {directory} has dimension {found_dim}, expected {dim}")
    if fmt < FORMAT:
        return format1_catalogue(directory)
    if fmt > FORMAT_COMPRESSED:
        raise StoreError(f"index in {directory} has format {fmt}, newer than this app reads ({FORMAT})")
    try:
        base = Entry.from_json(meta["base"]) if meta.get("base") else None
        segs = tuple(Entry.from_json(s) for s in meta.get("segments", []))
        full = Entry.from_json(meta["full"]) if meta.get("full") else None
    except (ValueError, KeyError, TypeError) as exc:
        return format1_catalogue(directory, f"unreadable ({exc}); the index files were read unchecked")
    return Catalogue(FORMAT, int(meta.get("generation", 0)), base, segs, full=full)


def data_files(directory: Path) -> list[str]:
    """The index data files in ``directory``, listed or not."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    return [n for n in names if data_files_named(n)]


def data_files_named(name: str) -> bool:
    """Whether ``name`` is an index data file's name."""
    return bool(BASE_RE.match(name) or SEG_RE.match(name) or FULL_RE.match(name))


def format1_catalogue(directory: Path, problem: str | None = None) -> Catalogue:
    """What the folder holds, unchecked: format 1, or a lost catalogue. The newest base wins."""
    names = data_files(directory)
    # base.faiss (format 1) is older than any base-<generation>.faiss
    bases = sorted((int(n[5:13]) if n != "base.faiss" else -1, n) for n in names if BASE_RE.match(n))
    segs = sorted(n for n in names if SEG_RE.match(n))
    gen = max([g for g, _ in bases] + [int(n[4:12]) for n in segs] + [0])
    base = Entry(bases[-1][1]) if bases else None
    return Catalogue(1, gen, base, tuple(Entry(n) for n in segs), problem)


def write_catalogue(directory: Path, dim: int, cat: Catalogue) -> None:
    """Replace ``store.json`` (atomically: this is a writer's commit)."""
    doc = {
        "format": FORMAT_COMPRESSED if cat.full else FORMAT,
        "dim": dim,
        "generation": cat.generation,
        "base": cat.base.to_json() if cat.base else None,
        "segments": [s.to_json() for s in cat.segments],
        **({"full": cat.full.to_json()} if cat.full else {}),
    }
    atomic_write_bytes(directory / META, json.dumps(doc, indent=1).encode(), sole_writer=True)


def checksum(data: bytes | memoryview) -> str:
    """The checksum written beside every index file (XXH3-128: ~10 GB/s, so checking is cheap)."""
    import xxhash

    return xxhash.xxh3_128(data).hexdigest()


def file_checksum(path: Path, stop: threading.Event | None = None) -> str | None:
    """:func:`checksum` of a file, read through memory maps: no copy and no read calls, so a large
    base costs little more than the hash itself (bench/store_integrity.py: a third of chunked reads).
    Mapped a window at a time, so checking a multi-GB file never adds it to this process's RSS.
    None when ``stop`` was set before the end (a check in the background that is no longer wanted);
    the hash releases the GIL, so such a check does not hold up the threads beside it."""
    import mmap

    import xxhash

    window = 256 * mmap.ALLOCATIONGRANULARITY  # 16 MiB with 64 KiB granularity, 1 MiB with 4 KiB
    window = max(window, 64 << 20) // mmap.ALLOCATIONGRANULARITY * mmap.ALLOCATIONGRANULARITY
    h = xxhash.xxh3_128()
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for off in range(0, size, window):
            if stop is not None and stop.is_set():
                return None
            with mmap.mmap(f.fileno(), min(window, size - off), access=mmap.ACCESS_READ, offset=off) as m:
                h.update(m)
    return h.hexdigest()


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
        entries = [meta[k] for k in ("base", "full") if meta.get(k)] + list(meta.get("segments", []))
        for e in map(Entry.from_json, entries):
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
