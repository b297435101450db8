"""What a corpus looks like to a person: summaries, per-file states, items to preview, drop checks.

The desktop app's corpora panel renders these; nothing here imports Qt. Reads open their own short
read-only SQLite connection (it can neither create nor change a file), so they run on any thread
beside an indexing worker's connection, and a late read of a corpus that was just removed cannot
bring it back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus import manifest as mf
from vrag_desktop.core.corpus.context import CONTEXT_DOCUMENT, CONTEXT_META
from vrag_desktop.core.corpus.errors import ManifestTooNew, is_disk_error
from vrag_desktop.core.corpus.scan import display_path, walk
from vrag_desktop.core.corpus.watch import WATCH_META, watch_enabled
from vrag_desktop.core.progress import Progress

MANIFEST = "manifest.sqlite"
# Meta key set when paths are added and cleared when a scan completes: a corpus whose scan was cut
# short (the app quit) is scanned again at the next start even if no source is pending yet.
SCAN_NEEDED = "gui_scan_needed"
_KIND_LABELS = {kinds.PDF: "PDF", kinds.IMAGE: "images", kinds.VIDEO: "videos"}


def supported_types_text() -> str:
    """``"PDF, images, videos, .txt/.md"``, derived from :mod:`kinds` so it never goes stale."""
    by_kind: dict[str, list[str]] = {}
    for ext, kind in kinds.EXTENSIONS.items():
        by_kind.setdefault(kind, []).append(ext)
    return ", ".join(_KIND_LABELS.get(k, "/".join(exts)) for k, exts in by_kind.items())


def unsupported_message(path: str | os.PathLike[str]) -> str:
    return f"{Path(path).name} is not a file type VRAG Desktop indexes ({supported_types_text()})"


def missing_root_message(root: str, kept: int) -> str:
    files = "file is" if kept == 1 else "files are"
    return (
        f"{display_path(root)} is missing; its {kept} indexed {files} kept — "
        "reconnect it or remove it from the corpus"
    )


# ---------------------------------------------------------------- drops
@dataclass
class DropPlan:
    """What to add from a drop or a file dialog, and a message for each path left out."""

    accepted: list[str] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)  # (level, text)


def plan_drop(paths: Iterable[str | os.PathLike[str]]) -> DropPlan:
    """Check dropped paths before anything is written. A folder is walked only until its first
    supported file, so a big folder is cheap; one without any is refused with the reason."""
    plan = DropPlan()
    for p in paths:
        ap = os.path.abspath(os.fspath(p))
        if not os.path.lexists(ap):
            plan.messages.append(("warning", f"{display_path(ap)} was not found"))
        elif not os.path.isdir(ap):
            if kinds.kind_of(Path(ap)) is None:
                plan.messages.append(("warning", unsupported_message(ap)))
            else:
                plan.accepted.append(ap)
        else:
            others = 0
            for f in walk(ap):
                if f.kind is not None:
                    plan.accepted.append(ap)
                    break
                others += 1  # noqa: SIM113 - counted only until the first supported file
            else:
                if others == 0:
                    plan.messages.append(("warning", f"no files found in {display_path(ap)}"))
                else:
                    plan.messages.append(
                        (
                            "warning",
                            f"no files VRAG Desktop indexes in {display_path(ap)} ({others} other "
                            f"file{'s' if others != 1 else ''}; it indexes {supported_types_text()})",
                        )
                    )
    return plan


# ---------------------------------------------------------------- progress wording
def format_eta(seconds: float | None) -> str:
    if seconds is None or seconds != seconds or seconds < 0:
        return "–"
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def progress_text(corpus: str, p: Progress, *, short: bool = False) -> str:
    """One line for a progress bar (``short``: for a status bar)."""
    if p.phase == "scan":
        return f"Scanning {corpus}: {p.done} files checked" if p.done else f"Scanning {corpus}…"
    if p.phase == "load":
        return f"Loading the embedder for {corpus}…"
    text = f"Indexing {corpus}: {p.done} / {p.total}"
    if short:
        return text
    text += " items"
    if p.rate > 0:
        text += f" · {p.rate:.1f} items/s · ETA {format_eta(p.eta)}"
    if p.failed:
        text += f" · {p.failed} failed"
    return text


# ---------------------------------------------------------------- reading a corpus
@contextlib.contextmanager
def _read(corpus_dir: Path) -> Iterator[sqlite3.Connection]:
    path = Path(corpus_dir) / MANIFEST
    db = mf.connect_read_only(path)
    try:
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is not None and int(row[0]) > mf.SCHEMA_VERSION:
            raise ManifestTooNew(mf.newer_message(path, row[0]))
    except BaseException:
        db.close()
        raise
    try:
        yield db
    finally:
        db.close()


@dataclass(frozen=True)
class CorpusSummary:
    name: str
    files: int = 0
    indexed: int = 0
    pending: int = 0
    failed: int = 0
    duplicate: int = 0
    unsupported: int = 0
    items: int = 0
    failed_items: int = 0
    vectors: int = 0
    pending_items: int = 0
    roots: tuple[str, ...] = ()
    missing_roots: tuple[str, ...] = ()
    embedder: str | None = None
    scan_needed: bool = False
    problem: str | None = None  # set when the corpus could not be read at all (counts unknown)
    newer: bool = False  # ... because a newer app wrote it (not damage: never repaired)
    damage: str | None = None  # its index files are damaged (the corpus is searched without them)
    watch: bool = True  # its folders are watched while the app runs (meta ``watch``; core/corpus/watch.py)
    plain_chunks: bool = False  # embedded before document context (core/corpus/context.py)

    @property
    def needs_indexing(self) -> bool:
        return self.pending > 0 or self.scan_needed

    @property
    def state(self) -> str:
        """``unreadable`` / ``damaged`` / ``pending`` / ``failed`` / ``indexed`` / ``empty`` (the
        panel adds ``indexing`` live)."""
        if self.problem:
            return "unreadable"
        if self.damage:
            return "damaged"
        if self.needs_indexing:
            return "pending"
        if self.failed:
            return "failed"
        return "indexed" if self.files else "empty"

    def badge(self) -> str:
        if self.problem:
            return "unreadable"
        if self.damage:
            return "damaged"
        if self.pending:
            return f"pending {self.pending}"
        if self.scan_needed:
            return "pending"
        if self.failed:
            return f"failed {self.failed}"
        return "indexed" if self.files else "empty"

    def counts_text(self) -> str:
        if self.problem:
            return f"cannot read: {self.problem}"
        return f"{_n(self.files, 'file')} · {_n(self.items, 'item')}"

    def details(self) -> str:
        parts = []
        if self.damage:
            parts.append(f"damaged index: {self.damage}")
        if self.missing_roots:
            parts.append(f"{_n(len(self.missing_roots), 'folder')} missing")
        if self.failed and self.pending:
            parts.append(f"{self.failed} failed")
        if self.failed_items:
            parts.append(f"{_n(self.failed_items, 'item')} failed")
        if self.duplicate:
            parts.append(f"{self.duplicate} duplicate")
        if self.unsupported:
            parts.append(f"{self.unsupported} unsupported")
        if self.plain_chunks:
            parts.append("indexed before document context: re-index it to find pages by their document")
        return " · ".join(parts)


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def read_summary(corpus_dir: Path, name: str | None = None) -> CorpusSummary:
    """Counts of one corpus (a few aggregate queries: fast even for large corpora)."""
    corpus_dir = Path(corpus_dir)
    with _read(corpus_dir) as db:
        by_status = dict(db.execute("SELECT status, COUNT(*) FROM sources GROUP BY status").fetchall())
        n_items, n_failed_items = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(status = 'failed'), 0) FROM items"
        ).fetchone()
        vectors = db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
        pending_items = db.execute(
            "SELECT COALESCE(SUM(MAX(COALESCE(s.n_expected, 1) - "
            "(SELECT COUNT(*) FROM items i WHERE i.source_id = s.id), 0)), 0) FROM sources s WHERE status = ?",
            (mf.S_PENDING,),
        ).fetchone()[0]
        roots = tuple(mf.decode_path(r[0]) for r in db.execute("SELECT path FROM roots ORDER BY path"))
        meta = dict(
            db.execute(
                "SELECT key, value FROM meta WHERE key IN ('embedder_id', 'embedder_model', ?, ?, ?)",
                (SCAN_NEEDED, WATCH_META, CONTEXT_META),
            ).fetchall()
        )
    return CorpusSummary(
        name=name or corpus_dir.name,
        files=sum(by_status.values()),
        indexed=by_status.get(mf.S_INDEXED, 0),
        pending=by_status.get(mf.S_PENDING, 0),
        failed=by_status.get(mf.S_FAILED, 0),
        duplicate=by_status.get(mf.S_DUPLICATE, 0),
        unsupported=by_status.get(mf.S_UNSUPPORTED, 0),
        items=n_items,
        failed_items=n_failed_items,
        vectors=vectors,
        pending_items=pending_items,
        roots=roots,
        missing_roots=tuple(r for r in roots if not os.path.lexists(r)),
        embedder=meta.get("embedder_id") or meta.get("embedder_model"),  # chosen, nothing built yet
        scan_needed=meta.get(SCAN_NEEDED) == "1",
        damage=_index_damage(corpus_dir),
        watch=watch_enabled(meta.get(WATCH_META)),
        plain_chunks=vectors > 0 and meta.get(CONTEXT_META) != CONTEXT_DOCUMENT,
    )


def _index_damage(corpus_dir: Path) -> str | None:
    from vrag_desktop.core.index.store import quick_damage  # numpy: not at the app's start-up

    return "; ".join(str(d) for d in quick_damage(corpus_dir / "index")) or None


def corpus_names(corpora_dir: Path) -> list[str]:
    """Names of the corpora under ``corpora_dir`` (as :meth:`Library.names`, without creating it)."""
    try:
        entries = list(Path(corpora_dir).iterdir())
    except FileNotFoundError:
        return []
    # A hidden folder (a damaged corpus kept aside by a repair) is not a corpus.
    return sorted(p.name for p in entries if not p.name.startswith(".") and (p / MANIFEST).is_file())


def read_summaries(corpora_dir: Path) -> list[CorpusSummary]:
    """Every corpus. One that cannot be read is listed with the reason, never dropped from view;
    one that vanished meanwhile (renamed, removed) is left out."""
    out = []
    for name in corpus_names(corpora_dir):
        try:
            out.append(read_summary(Path(corpora_dir) / name, name))
        except FileNotFoundError:
            continue
        except mf.ManifestError as exc:
            out.append(CorpusSummary(name=name, problem=str(exc), newer=isinstance(exc, ManifestTooNew)))
        except (sqlite3.Error, OSError) as exc:
            out.append(
                CorpusSummary(name=name, problem=mf.damaged_message(Path(corpora_dir) / name / MANIFEST, exc))
            )
    return out


def corpora_to_resume(corpora_dir: Path) -> list[str]:
    """Corpora with work left: pending files, or a scan that did not finish (the app quit)."""
    return [s.name for s in read_summaries(corpora_dir) if s.needs_indexing and not s.problem]


@dataclass(frozen=True)
class FileRow:
    """One source file of a corpus as the panel lists it."""

    source_id: int
    path: str
    root: str | None  # the folder or file the person added that holds it
    kind: str | None
    status: str
    error: str | None
    duplicate_of: str | None
    duplicate_of_id: int | None
    items: int
    failed_items: int
    expected: int | None

    @property
    def display(self) -> str:
        """The path inside the folder it was added with (``sub/x.pdf``); a file added alone: its name."""
        if self.root and self.root != self.path:
            return display_path(os.path.relpath(self.path, self.root))
        return display_path(os.path.basename(self.path))

    @property
    def state_text(self) -> str:
        if self.status == mf.S_PENDING and self.items and self.expected:
            return f"pending {self.items}/{self.expected}"
        if self.status == mf.S_INDEXED and self.failed_items:
            return f"indexed, {self.failed_items} failed"
        return self.status

    @property
    def reason(self) -> str:
        """Why the file is not (fully) indexed, in the core's own words; empty when all is well."""
        if self.status == mf.S_DUPLICATE:
            orig = display_path(self.duplicate_of) if self.duplicate_of else "another file"
            return f"duplicate of {orig} (same content; indexed once)"
        if self.status in (mf.S_FAILED, mf.S_UNSUPPORTED):
            return self.error or self.status
        if self.status == mf.S_PENDING and self.error:
            return self.error  # e.g. "changed while indexing"
        if self.status == mf.S_INDEXED and self.error:  # partly indexed: a page limit, a video cut short
            more = f"; {_n(self.failed_items, 'item')} could not be read" if self.failed_items else ""
            return self.error + more
        if self.failed_items:
            return f"{_n(self.failed_items, 'item')} could not be read"
        return ""

    @property
    def short_reason(self) -> str:
        """:attr:`reason` fit for one line (the full one goes in a tooltip)."""
        if self.status == mf.S_DUPLICATE and self.duplicate_of:
            return f"duplicate of {display_path(os.path.basename(self.duplicate_of))} (same content)"
        if self.status == mf.S_UNSUPPORTED:
            return f"not a file type VRAG Desktop indexes ({supported_types_text()})"
        return self.reason

    def contents(self) -> str:
        unit = {kinds.PDF: "page", kinds.VIDEO: "clip"}.get(self.kind or "")
        if unit is None:
            return {kinds.IMAGE: "image", kinds.TEXT: "text"}.get(self.kind or "", "")
        n = self.items if self.status != mf.S_PENDING or not self.expected else self.expected
        return _n(n, unit) if n else ""


def owning_root(path: str, roots: Iterable[str]) -> str | None:
    best = None
    for r in roots:
        if (path == r or path.startswith(r.rstrip(os.sep) + os.sep)) and (best is None or len(r) > len(best)):
            best = r
    return best


def read_files(corpus_dir: Path) -> list[FileRow]:
    """Every source file with its state, reason and item counts (two queries)."""
    with _read(Path(corpus_dir)) as db:
        roots = [mf.decode_path(r[0]) for r in db.execute("SELECT path FROM roots")]
        counts = {
            r[0]: (r[1], r[2])
            for r in db.execute(
                "SELECT source_id, COUNT(*), COALESCE(SUM(status = 'failed'), 0) FROM items GROUP BY source_id"
            )
        }
        rows = db.execute(
            "SELECT s.id, s.path, s.kind, s.status, s.error, s.n_expected, d.path AS dup, d.id AS dup_id "
            "FROM sources s LEFT JOIN sources d ON s.duplicate_of = d.id ORDER BY s.path"
        ).fetchall()
    out = []
    for r in rows:
        path = mf.decode_path(r["path"])
        n, nf = counts.get(r["id"], (0, 0))
        out.append(
            FileRow(
                source_id=r["id"],
                path=path,
                root=owning_root(path, roots),
                kind=r["kind"],
                status=r["status"],
                error=r["error"],
                duplicate_of=mf.decode_path(r["dup"]) if r["dup"] is not None else None,
                duplicate_of_id=r["dup_id"],
                items=n,
                failed_items=nf,
                expected=r["n_expected"],
            )
        )
    return out


@dataclass(frozen=True)
class PreviewItem:
    """An item to show as a thumbnail: its rendered image (None for text) and a caption."""

    item_id: int
    source_id: int
    name: str
    kind: str
    ordinal: int
    image_path: str | None
    status: str
    error: str | None
    text: str
    t_start: float | None
    t_end: float | None

    @property
    def caption(self) -> str:
        if self.kind == kinds.ITEM_PAGE:
            return f"p. {self.ordinal}"
        if self.kind == kinds.ITEM_CLIP and self.t_start is not None:
            return f"{format_eta(self.t_start)}–{format_eta(self.t_end)}"
        return self.name


def read_items(
    corpus_dir: Path, source_id: int | None = None, limit: int = 120
) -> tuple[list[PreviewItem], int]:
    """Up to ``limit`` items of one source (or of the whole corpus) in order, and how many there are."""
    where, args = ("WHERE source_id = ?", (source_id,)) if source_id is not None else ("", ())
    with _read(Path(corpus_dir)) as db:
        total = db.execute(f"SELECT COUNT(*) FROM items {where}", args).fetchone()[0]
        rows = db.execute(
            "SELECT id, source_id, name, kind, ordinal, image_path, status, error, substr(text, 1, 300) AS text,"
            f" t_start, t_end FROM items {where} ORDER BY source_id, ordinal LIMIT ?",
            (*args, limit),
        ).fetchall()
    items = [
        PreviewItem(
            item_id=r["id"],
            source_id=r["source_id"],
            name=r["name"],
            kind=r["kind"],
            ordinal=r["ordinal"],
            image_path=mf.decode_path(r["image_path"]) if r["image_path"] is not None else None,
            status=r["status"],
            error=r["error"],
            text=" ".join((r["text"] or "").split()),
            t_start=r["t_start"],
            t_end=r["t_end"],
        )
        for r in rows
    ]
    return items, total


# ---------------------------------------------------------------- writes the indexer makes
def set_scan_needed(manifest: mf.Manifest, needed: bool) -> None:
    manifest.set_meta(SCAN_NEEDED, "1" if needed else "0")


def indexed_under(manifest: mf.Manifest, root: str) -> int:
    """Indexed files under ``root`` (what a missing folder still contributes to search)."""
    return sum(1 for s in manifest.sources(mf.S_INDEXED) if owning_root(s.path, [root]) is not None)


def disk_failures(manifest: mf.Manifest) -> list[tuple[str, str]]:
    """(path, error) of files that failed because the data directory refused writes (full, read-only)."""
    return [(s.path, s.error or "") for s in manifest.sources(mf.S_FAILED) if is_disk_error(s.error)]
