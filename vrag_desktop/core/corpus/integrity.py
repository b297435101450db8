"""Checking a corpus for damage, and rebuilding one whose manifest is beyond reading.

:func:`check_corpus` is a reader: it reads every byte of the index (checksums) and every page of the
manifest (SQLite's ``quick_check``) and changes nothing. Repair is the indexing job's: a writer that
opens a damaged index drops the damaged files and re-embeds their items (see
:class:`~vrag_desktop.core.index.store.VectorStore` and :meth:`Corpus.store`), so
``corpus check --repair`` and the app's *Check…* → *Repair* run the ordinary job with
``IndexRequest(repair=True)``. Only a manifest SQLite cannot read needs more: :func:`set_aside` keeps
it (with the index) in a hidden folder, salvages the folder list and settings it can still read, and
starts the corpus afresh from them — every file is then derived and embedded again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_desktop.core.corpus.errors import CorpusError, ManifestTooNew
from vrag_desktop.core.corpus.manifest import Manifest, connect_read_only, damaged_message
from vrag_desktop.core.index.store import Damage, StoreError

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.library import Library

MANIFEST = "manifest.sqlite"
#: Meta keys carried over to a rebuilt corpus: what was chosen for it, not what was derived.
_KEPT_META = ("embedder_id", "embedder_model", "dim", "clip_seconds", "max_pages", "watch")


@dataclass
class CheckReport:
    """What :func:`check_corpus` found. ``ok`` when nothing needs repair."""

    name: str
    newer: str | None = None  # a newer app wrote the manifest: not damage, and never repaired here
    manifest_problem: str | None = None
    damage: list[Damage] = field(default_factory=list)
    missing_vectors: int = 0  # the manifest lists them; the index (or its readable part) lacks them
    unknown_vectors: int = 0  # in the index, unknown to the manifest (an indexing job's, or leftovers)
    items: int = 0
    vectors: int = 0
    indexing: bool = False  # another process held the corpus lock while it was checked

    @property
    def ok(self) -> bool:
        return self.newer is None and self.repairable is False

    @property
    def repairable(self) -> bool:
        """Something is damaged, and repair can mend it."""
        return self.newer is None and bool(self.manifest_problem or self.damage or self.missing_vectors)

    def lines(self) -> list[str]:
        """The report in sentences, the verdict first."""
        if self.newer:
            return [f"Corpus '{self.name}' was made by a newer VRAG Desktop; it is not damaged.", self.newer]
        if self.manifest_problem:
            return [
                f"Corpus '{self.name}' is damaged: its manifest cannot be read ({self.manifest_problem}).",
                "Repair rebuilds it: the folder list and settings are kept where they can be read, and "
                "every file is indexed again (the damaged copy is kept aside).",
            ]
        out = [
            f"Corpus '{self.name}': {self.items} items, {self.vectors} vectors — "
            + ("no damage found." if self.ok else "damaged.")
        ]
        out += [f"  damaged index file {d}" for d in self.damage]
        if self.missing_vectors:
            out.append(f"  {self.missing_vectors} vectors listed in the manifest are not in the index")
        if self.unknown_vectors:
            why = " (an indexing job is writing it now)" if self.indexing else " (a repair drops them)"
            out.append(f"  {self.unknown_vectors} vectors in the index are not in the manifest{why}")
        if self.repairable:
            out.append("Repair re-embeds the items whose vectors are lost; nothing else is redone.")
        return out


def check_corpus(library: Library, name: str) -> CheckReport:
    """Read all of corpus ``name`` and say what is damaged. Never writes."""
    report = CheckReport(name)
    try:
        corpus = library.open(name, read_only=True)
    except ManifestTooNew as exc:
        report.newer = str(exc)
        return report
    except CorpusError as exc:
        report.manifest_problem = _cause(str(exc))
        return report
    try:
        report.indexing = _locked(corpus.dir)
        problem = corpus.manifest.quick_check()
        if problem is not None:
            report.manifest_problem = problem
            return report
        c = corpus.manifest.counts()
        report.items, report.vectors = c["items"], c["vectors"]
        if corpus.dim is None:
            return report
        store = corpus.store()
        store.finish_checks()  # a large file a reader checks in the background: this check waits for it
        report.damage = list(store.damage)
        listed = set(corpus.manifest.vector_ids())
        held = set(store.ids().tolist())
        report.missing_vectors = len(listed - held)
        report.unknown_vectors = len(held - listed)
    except sqlite3.DatabaseError as exc:
        report.manifest_problem = str(exc)
    except StoreError as exc:
        report.damage.append(Damage("index", str(exc)))
    finally:
        corpus.close()
    return report


def _cause(message: str) -> str:
    """The SQLite words inside :func:`damaged_message`'s sentence (or the whole message)."""
    start, end = message.find("cannot be read ("), message.rfind("). Your files")
    return message[start + len("cannot be read (") : end] if start >= 0 and end > start else message


def _locked(corpus_dir: Path) -> bool:
    """Whether a process holds the corpus's write lock (tested without creating the lock file)."""
    lock = corpus_dir / ".lock"
    if not lock.exists():
        return False
    from filelock import FileLock, Timeout

    probe = FileLock(lock, timeout=0, thread_local=False)
    try:
        probe.acquire()
    except Timeout:
        return True
    except OSError:  # a lock file this user cannot open: no one can be writing with it either
        return False
    probe.release()
    return False


def manifest_readable(corpus_dir: Path) -> str | None:
    """None when the manifest opens and passes ``quick_check``; else why not (for the repair).
    Raises :class:`ManifestTooNew` for a newer app's manifest: that is never rebuilt."""
    try:
        m = Manifest(corpus_dir / MANIFEST, read_only=True)
    except ManifestTooNew:
        raise
    except CorpusError as exc:
        return _cause(str(exc))
    try:
        return m.quick_check()
    finally:
        m.close()


@dataclass(frozen=True)
class SetAside:
    """A damaged corpus moved aside by :func:`set_aside`: where it went, and what was salvaged."""

    kept_at: Path
    roots: list[str]
    meta: dict[str, str]


def set_aside(library: Library, name: str) -> SetAside:
    """Move corpus ``name`` (its manifest unreadable) to a hidden folder and start it afresh with the
    folders and settings that can still be read. The caller holds no connection to it."""
    from filelock import FileLock, Timeout

    from vrag_desktop.core.corpus.errors import CorpusBusy

    src = library.corpus_dir(name)
    roots, meta = _salvage(src / MANIFEST)
    kept = src.parent / f".damaged-{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    lock = FileLock(src / ".lock", timeout=0, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        raise CorpusBusy(f"corpus '{name}' is being indexed by another process") from None
    try:
        os.replace(src, kept)
        shutil.rmtree(kept / "derived", ignore_errors=True)  # re-derived anyway; can be large
        fresh = Manifest(src / MANIFEST)
        try:
            with fresh.transaction():
                for key, value in meta.items():
                    fresh.set_meta(key, value)
                for root in roots:
                    fresh.add_root(root)
        finally:
            fresh.close()
    except OSError as exc:
        raise CorpusError(f"cannot rebuild corpus '{name}': {exc.strerror or exc}") from exc
    finally:
        lock.release(force=True)
    return SetAside(kept, roots, meta)


def _salvage(path: Path) -> tuple[list[str], dict[str, str]]:
    """The folders and the chosen settings a damaged manifest still yields. Each table is read on
    its own (a damaged page elsewhere does not cost them); a truncated file is first padded back to
    the size its header declares (in a temporary copy), or SQLite refuses to read any of it."""
    roots, meta = _read_salvage(path)
    if roots or meta:
        return roots, meta
    import struct
    import tempfile

    try:
        raw = path.read_bytes()
        size = struct.unpack(">H", raw[16:18])[0]
        page = 65536 if size == 1 else size
        declared = struct.unpack(">I", raw[28:32])[0]
    except (OSError, struct.error):
        return roots, meta
    if not page or declared * page <= len(raw) or declared * page > 1 << 32:
        return roots, meta
    with tempfile.TemporaryDirectory(prefix="vrag-salvage-") as tmp:
        copy = Path(tmp) / MANIFEST
        copy.write_bytes(raw + bytes(declared * page - len(raw)))
        return _read_salvage(copy)


def _read_salvage(path: Path) -> tuple[list[str], dict[str, str]]:
    from vrag_desktop.core.corpus.manifest import decode_path

    roots: list[str] = []
    meta: dict[str, str] = {}
    try:
        db = connect_read_only(path)
    except (sqlite3.Error, OSError):
        return roots, meta
    try:
        with contextlib.suppress(sqlite3.Error):
            roots = [decode_path(r[0]) for r in db.execute("SELECT path FROM roots ORDER BY path")]
        with contextlib.suppress(sqlite3.Error):
            meta = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta") if k in _KEPT_META}
    finally:
        db.close()
    return roots, meta


__all__ = [
    "CheckReport",
    "SetAside",
    "check_corpus",
    "damaged_message",
    "manifest_readable",
    "set_aside",
]
