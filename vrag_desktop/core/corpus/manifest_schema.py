"""The manifest's schema and rows: the SQLite tables, the status values, the row types, how paths
are stored, and the read-only connection and error sentences that readers outside
:class:`~vrag_desktop.core.corpus.manifest.Manifest` (status, integrity checks) use without opening
one. Split from :mod:`vrag_desktop.core.corpus.manifest`, which re-exports every name."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TypeVar

SCHEMA_VERSION = 1

# Source status
S_PENDING = "pending"  # new or changed: items must be (re)derived and embedded
S_INDEXED = "indexed"  # all items derived; each item is embedded or failed
S_FAILED = "failed"  # the whole file could not be read (error says why)
S_DUPLICATE = "duplicate"  # same content as another source (duplicate_of)
S_UNSUPPORTED = "unsupported"  # not a file type the corpus handles (error names the extension)

# Item status
I_EMBEDDED = "embedded"
I_FAILED = "failed"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS roots (
    path TEXT PRIMARY KEY,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS sources (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    kind TEXT,
    size INTEGER,
    mtime_ns INTEGER,
    sha256 TEXT,
    status TEXT NOT NULL,
    error TEXT,
    duplicate_of INTEGER,
    n_expected INTEGER,
    updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS sources_sha ON sources(sha256);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    source_id INTEGER NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    t_start REAL,
    t_end REAL,
    image_path TEXT,
    media_path TEXT,
    width INTEGER,
    height INTEGER,
    text TEXT,
    text_source TEXT,
    status TEXT NOT NULL,
    error TEXT,
    UNIQUE (source_id, ordinal)
);
CREATE INDEX IF NOT EXISTS items_status ON items(status);
CREATE TABLE IF NOT EXISTS vectors (
    id INTEGER PRIMARY KEY,
    item_id INTEGER NOT NULL REFERENCES items(id) ON DELETE CASCADE,
    chunk INTEGER NOT NULL,
    UNIQUE (item_id, chunk)
);
CREATE INDEX IF NOT EXISTS vectors_item ON vectors(item_id);
"""


@dataclass
class SourceRow:
    id: int
    path: str
    kind: str | None
    size: int | None
    mtime_ns: int | None
    sha256: str | None
    status: str
    error: str | None
    duplicate_of: int | None
    n_expected: int | None


@dataclass
class NewItem:
    """An item derived from a source, ready to be committed with its vectors."""

    source_id: int
    ordinal: int
    name: str
    kind: str
    status: str
    t_start: float | None = None
    t_end: float | None = None
    image_path: str | None = None
    media_path: str | None = None
    width: int | None = None
    height: int | None = None
    text: str | None = None
    text_source: str | None = None
    error: str | None = None


@dataclass(kw_only=True)
class ItemRow(NewItem):
    """An item as stored: the columns of a :class:`NewItem` and the row id it was given."""

    id: int


# Columns holding file paths: stored by :func:`encode_path`, so read back through :func:`decode_path`.
_PATH_COLUMNS = ("path", "image_path", "media_path")
_ITEM_COLUMNS = tuple(f.name for f in fields(NewItem))
# SQLite's limit on ``?`` parameters in one statement is 999 in older builds.
_MAX_PARAMS = 900
_Row = TypeVar("_Row", SourceRow, ItemRow)


def encode_path(path: str) -> str | bytes:
    """Paths go into SQLite as text, or as the raw bytes when the name is not valid UTF-8."""
    try:
        path.encode("utf-8")
        return path
    except UnicodeEncodeError:
        return os.fsencode(path)


def decode_path(value: str | bytes) -> str:
    """A path as :func:`encode_path` stored it, back as ``str`` (undecodable bytes surrogate-escaped)."""
    return os.fsdecode(value) if isinstance(value, bytes) else value


def connect_read_only(path: Path, *, shared: bool = False, timeout: float = 10) -> sqlite3.Connection:
    """A connection that cannot write. On a read-only or full disk SQLite cannot make the WAL index it
    needs even to read, so the file is then read as it stands (its last writer checkpointed it)."""
    if not Path(path).is_file():
        raise FileNotFoundError(2, "no corpus manifest", str(path))
    uri = "file:" + urllib.parse.quote(str(path))
    db = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=timeout, check_same_thread=not shared)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError:
        db.close()
        db = sqlite3.connect(
            uri + "?mode=ro&immutable=1", uri=True, timeout=timeout, check_same_thread=not shared
        )
    db.row_factory = sqlite3.Row
    return db


def newer_message(path: Path, version: object) -> str:
    """The one sentence for a manifest a newer app wrote (never repaired, never changed)."""
    return (
        f"{path} was written by a newer VRAG Desktop (manifest schema {version}; this version reads "
        f"{SCHEMA_VERSION}). Nothing was changed: open it with the newer version."
    )


def damaged_message(path: Path, exc: BaseException) -> str:
    """The one sentence for a manifest SQLite cannot read, with what to do about it."""
    name = Path(path).parent.name
    return (
        f"corpus '{name}' is damaged: its manifest {path} cannot be read ({exc}). Your files are "
        f"untouched; rebuild its index with: vrag-desktop corpus check '{name}' --repair "
        "(or Check… on the corpus in the app)"
    )


def _from_row(cls: type[_Row], r: sqlite3.Row) -> _Row:
    """A row as ``cls``: the columns named like its fields, paths decoded (see :func:`encode_path`)."""
    values = {f.name: r[f.name] for f in fields(cls)}
    for name in _PATH_COLUMNS:
        if values.get(name) is not None:
            values[name] = decode_path(values[name])
    return cls(**values)
