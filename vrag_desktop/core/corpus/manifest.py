"""The SQLite manifest: every source file and every item derived from it, with status and errors.

The manifest is the source of truth for a corpus. The vector index is reconciled against it on open
(see :mod:`vrag_desktop.core.index.store`), so a crash between writing vectors and committing the
manifest can neither lose nor duplicate an item.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from vrag_desktop.core.corpus.errors import ManifestError, ManifestTooNew, storage_message
from vrag_desktop.core.corpus.manifest_schema import (
    _ITEM_COLUMNS,
    _MAX_PARAMS,
    _PATH_COLUMNS,
    _SCHEMA,
    I_EMBEDDED,
    I_FAILED,
    S_DUPLICATE,
    S_FAILED,
    S_INDEXED,
    S_PENDING,
    S_UNSUPPORTED,
    SCHEMA_VERSION,
    ItemRow,
    NewItem,
    SourceRow,
    _from_row,
    connect_read_only,
    damaged_message,
    decode_path,
    encode_path,
    newer_message,
)


class Manifest:
    """A corpus's SQLite catalogue. One connection per instance; use from one thread at a time."""

    def __init__(self, path: Path, *, shared: bool = False, read_only: bool = False) -> None:
        """``shared``: the connection may be used from several threads (the caller serialises).
        ``read_only``: a reader's connection, which can write nothing (searches, listings)."""
        self.path = Path(path)
        self.read_only = read_only
        try:
            if read_only:
                self._db = connect_read_only(self.path, shared=shared)
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(
                    str(self.path), timeout=30, isolation_level=None, check_same_thread=not shared
                )
                self._db.row_factory = sqlite3.Row
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA foreign_keys=ON")
            has_meta = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
            ).fetchone()
            version = self.get_meta("schema_version") if has_meta else None  # None: a new manifest
            if version is not None and int(version) > SCHEMA_VERSION:
                self._db.close()
                raise ManifestTooNew(newer_message(self.path, version))
            if not read_only:
                self._db.executescript(_SCHEMA)
                if version is None:
                    self.set_meta("schema_version", str(SCHEMA_VERSION))
        except sqlite3.OperationalError as exc:  # not damage: a disk that refuses (full, read-only)
            message = storage_message(exc, self.path.parent)
            if message is None:
                raise
            raise ManifestError(message) from exc
        except sqlite3.DatabaseError as exc:
            raise ManifestError(damaged_message(self.path, exc)) from exc
        except OSError as exc:
            raise ManifestError(
                f"cannot open the corpus manifest {self.path}: {exc.strerror or exc}"
            ) from exc
        except ValueError as exc:  # a schema_version that is not a number
            raise ManifestError(damaged_message(self.path, exc)) from exc

    def close(self) -> None:
        self._db.close()

    def data_version(self) -> int:
        """Changes whenever another connection commits (SQLite's ``PRAGMA data_version``): how a
        reader learns, for a few microseconds, that the corpus changed under it."""
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def quick_check(self) -> str | None:
        """SQLite's own structural check of every page (reads the whole file); None when sound."""
        try:
            rows = [r[0] for r in self._db.execute("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            return str(exc)
        return None if rows == ["ok"] else "; ".join(rows[:5])

    # ---- transactions
    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One atomic write: everything inside commits together or not at all."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    # ---- meta
    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # ---- roots (what the user added)
    def add_root(self, path: str) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO roots(path, added_at) VALUES (?, ?)", (encode_path(path), time.time())
        )

    def remove_root(self, path: str) -> bool:
        return self._db.execute("DELETE FROM roots WHERE path=?", (encode_path(path),)).rowcount > 0

    def roots(self) -> list[str]:
        return [decode_path(r[0]) for r in self._db.execute("SELECT path FROM roots ORDER BY path")]

    # ---- sources
    def sources(self, status: str | None = None) -> list[SourceRow]:
        sql = "SELECT * FROM sources"
        args: tuple[object, ...] = ()
        if status is not None:
            sql += " WHERE status=?"
            args = (status,)
        return [_from_row(SourceRow, r) for r in self._db.execute(sql + " ORDER BY path", args)]

    def source(self, source_id: int) -> SourceRow | None:
        row = self._db.execute("SELECT * FROM sources WHERE id=?", (source_id,)).fetchone()
        return None if row is None else _from_row(SourceRow, row)

    def source_by_path(self, path: str) -> SourceRow | None:
        row = self._db.execute("SELECT * FROM sources WHERE path=?", (encode_path(path),)).fetchone()
        return None if row is None else _from_row(SourceRow, row)

    def source_by_sha(self, sha256: str, exclude_id: int | None = None) -> SourceRow | None:
        row = self._db.execute(
            "SELECT * FROM sources WHERE sha256=? AND id IS NOT ? AND status != ? ORDER BY id LIMIT 1",
            (sha256, exclude_id, S_DUPLICATE),
        ).fetchone()
        return None if row is None else _from_row(SourceRow, row)

    def upsert_source(self, path: str, **fields: object) -> int:
        fields["updated_at"] = time.time()
        existing = self.source_by_path(path)
        if existing is None:
            cols = ["path", *fields]
            marks = ",".join("?" * len(cols))
            cur = self._db.execute(
                f"INSERT INTO sources({','.join(cols)}) VALUES ({marks})",
                (encode_path(path), *fields.values()),
            )
            return int(cur.lastrowid or 0)
        sets = ",".join(f"{k}=?" for k in fields)
        self._db.execute(f"UPDATE sources SET {sets} WHERE id=?", (*fields.values(), existing.id))
        return existing.id

    def update_source(self, source_id: int, **fields: object) -> None:
        fields["updated_at"] = time.time()
        sets = ",".join(f"{k}=?" for k in fields)
        self._db.execute(f"UPDATE sources SET {sets} WHERE id=?", (*fields.values(), source_id))

    def promote_duplicate(self, source_id: int, original_id: int | None) -> None:
        """``source_id``, a duplicate of ``original_id`` (which left, or could not be read), is
        indexed in its own right; the original's other duplicates now point to it."""
        self.update_source(source_id, status=S_PENDING, duplicate_of=None, error=None, n_expected=None)
        if original_id is not None:
            self._db.execute(
                "UPDATE sources SET duplicate_of=? WHERE duplicate_of=? AND status=?",
                (source_id, original_id, S_DUPLICATE),
            )

    def adopt_copy(self, source_id: int) -> str | None:
        """``source_id`` left its path, and a file of the same content and kind is here as its
        duplicate (it was moved or renamed, or a copy stays): the source takes the copy's path, its
        items follow (their names and the raw file they point at), and the copy's row goes. Returns
        the path taken; None when there is no such copy."""
        src = self.source(source_id)
        if src is None:
            return None
        row = self._db.execute(
            "SELECT * FROM sources WHERE duplicate_of=? AND status=? AND kind IS ? ORDER BY id LIMIT 1",
            (source_id, S_DUPLICATE, src.kind),
        ).fetchone()
        if row is None:
            return None
        copy = _from_row(SourceRow, row)
        self._db.execute("DELETE FROM sources WHERE id=?", (copy.id,))
        self._db.execute("UPDATE sources SET duplicate_of=? WHERE duplicate_of=?", (source_id, copy.id))
        self.update_source(source_id, size=copy.size, mtime_ns=copy.mtime_ns)
        self._db.execute("UPDATE sources SET path=? WHERE id=?", (encode_path(copy.path), source_id))
        from vrag_desktop.core.corpus.derive import safe_stem

        old, new = safe_stem(Path(src.path)), safe_stem(Path(copy.path))
        for item in self.items(source_id):
            name = new + item.name[len(old) :] if item.name.startswith(old) else item.name
            media = copy.path if item.media_path == src.path else item.media_path  # the raw file itself
            self._db.execute(
                "UPDATE items SET name=?, media_path=? WHERE id=?",
                (name, media and encode_path(media), item.id),
            )
        return copy.path

    def first_duplicate(self, original_id: int) -> int | None:
        """The oldest duplicate of ``original_id`` (None when it has none)."""
        row = self._db.execute(
            "SELECT id FROM sources WHERE duplicate_of=? AND status=? ORDER BY id LIMIT 1",
            (original_id, S_DUPLICATE),
        ).fetchone()
        return None if row is None else int(row[0])

    def delete_source(self, source_id: int) -> list[int]:
        """Delete a source with its items; return the vector ids that must leave the index."""
        ids = self.vector_ids_of_source(source_id)
        self._db.execute("DELETE FROM sources WHERE id=?", (source_id,))
        return ids

    def clear_items(self, source_id: int) -> list[int]:
        """Forget a source's derived items (it changed); return their vector ids."""
        ids = self.vector_ids_of_source(source_id)
        self._db.execute("DELETE FROM items WHERE source_id=?", (source_id,))
        return ids

    # ---- items
    def items(self, source_id: int | None = None, status: str | None = None) -> list[ItemRow]:
        where: list[str] = []
        args: list[int | str] = []
        if source_id is not None:
            where.append("source_id=?")
            args.append(source_id)
        if status is not None:
            where.append("status=?")
            args.append(status)
        sql = "SELECT * FROM items" + (" WHERE " + " AND ".join(where) if where else "")
        return [_from_row(ItemRow, r) for r in self._db.execute(sql + " ORDER BY source_id, ordinal", args)]

    def item(self, item_id: int) -> ItemRow | None:
        row = self._db.execute("SELECT * FROM items WHERE id=?", (item_id,)).fetchone()
        return None if row is None else _from_row(ItemRow, row)

    def item_at(self, source_id: int, ordinal: int) -> ItemRow | None:
        """The item at ``ordinal`` (1-based page, clip …) of a source, if it was derived."""
        row = self._db.execute(
            "SELECT * FROM items WHERE source_id=? AND ordinal=?", (source_id, ordinal)
        ).fetchone()
        return None if row is None else _from_row(ItemRow, row)

    def done_ordinals(self, source_id: int) -> set[int]:
        rows = self._db.execute("SELECT ordinal FROM items WHERE source_id=?", (source_id,))
        return {r[0] for r in rows}

    def insert_item(self, item: NewItem) -> int:
        values: list[object] = []
        for column in _ITEM_COLUMNS:
            value = getattr(item, column)
            values.append(encode_path(value) if value and column in _PATH_COLUMNS else value)
        cur = self._db.execute(
            f"INSERT INTO items({','.join(_ITEM_COLUMNS)}) VALUES ({','.join('?' * len(values))})", values
        )
        return int(cur.lastrowid or 0)

    # ---- vectors
    def insert_vector(self, vector_id: int, item_id: int, chunk: int) -> None:
        self._db.execute(
            "INSERT INTO vectors(id, item_id, chunk) VALUES (?, ?, ?)", (vector_id, item_id, chunk)
        )

    def vector_ids(self) -> list[int]:
        return [r[0] for r in self._db.execute("SELECT id FROM vectors")]

    def max_vector_id(self) -> int:
        row = self._db.execute("SELECT MAX(id) FROM vectors").fetchone()
        return -1 if row[0] is None else int(row[0])

    def vector_ids_of_source(self, source_id: int) -> list[int]:
        rows = self._db.execute(
            "SELECT v.id FROM vectors v JOIN items i ON v.item_id=i.id WHERE i.source_id=?", (source_id,)
        )
        return [r[0] for r in rows]

    def items_for_vectors(self, vector_ids: Iterable[int]) -> dict[int, ItemRow]:
        """Map vector id → item row (one query for a whole result list)."""
        ids = list(vector_ids)
        if not ids:
            return {}
        rows = self._in_chunks(
            "SELECT v.id AS vid, i.* FROM vectors v JOIN items i ON v.item_id=i.id WHERE v.id IN ({marks})",
            ids,
        )
        return {r["vid"]: _from_row(ItemRow, r) for r in rows}

    def forget_vectors(self, vector_ids: Iterable[int]) -> int:
        """Drop vector rows whose vectors are not in the index, and mark their items for redo.

        Returns the number of items reset. Used by reconciliation after a crash.
        """
        ids = list(vector_ids)
        if not ids:
            return 0
        affected = {r[0] for r in self._in_chunks("SELECT item_id FROM vectors WHERE id IN ({marks})", ids)}
        # An item with a missing vector is deleted entirely (its other vectors go by cascade and then
        # leave the index as orphans); its source goes back to pending so the item is redone.
        for item_id in affected:
            row = self._db.execute("SELECT source_id FROM items WHERE id=?", (item_id,)).fetchone()
            if row is None:
                continue
            self._db.execute("DELETE FROM items WHERE id=?", (item_id,))
            self._db.execute("UPDATE sources SET status=? WHERE id=?", (S_PENDING, row[0]))
        return len(affected)

    def _in_chunks(self, sql: str, ids: list[int]) -> Iterator[sqlite3.Row]:
        """The rows of ``sql`` (``{marks}`` stands for an IN list) over ``ids``, a chunk at a time."""
        for start in range(0, len(ids), _MAX_PARAMS):
            chunk = ids[start : start + _MAX_PARAMS]
            yield from self._db.execute(sql.format(marks=",".join("?" * len(chunk))), chunk)

    # ---- statistics
    def counts(self) -> dict[str, int]:
        """Rows per table, and sources per status (``sources_<status>``) and failed items."""

        def count(sql: str, *args: str) -> int:
            return int(self._db.execute(sql, args).fetchone()[0])

        out = {"sources": count("SELECT COUNT(*) FROM sources")}
        for status in (S_INDEXED, S_PENDING, S_FAILED, S_DUPLICATE, S_UNSUPPORTED):
            out[f"sources_{status}"] = count("SELECT COUNT(*) FROM sources WHERE status=?", status)
        out["items"] = count("SELECT COUNT(*) FROM items")
        out["items_failed"] = count("SELECT COUNT(*) FROM items WHERE status=?", I_FAILED)
        out["sources_noted"] = count(
            "SELECT COUNT(*) FROM sources WHERE status=? AND error IS NOT NULL", S_INDEXED
        )
        out["vectors"] = count("SELECT COUNT(*) FROM vectors")
        return out

    def notes(self) -> list[tuple[str, str]]:
        """(path, note) of indexed sources only partly indexed (a page limit, a video cut short)."""
        return [
            (decode_path(r[0]), r[1])
            for r in self._db.execute(
                "SELECT path, error FROM sources WHERE status=? AND error IS NOT NULL ORDER BY path",
                (S_INDEXED,),
            )
        ]

    def failures(self) -> list[tuple[str, str, str]]:
        """(path, what, error) for every failed source, partly indexed source, failed item and duplicate."""
        out: list[tuple[str, str, str]] = []
        for r in self._db.execute(
            "SELECT path, error FROM sources WHERE status IN (?, ?) ORDER BY path", (S_FAILED, S_UNSUPPORTED)
        ):
            out.append((decode_path(r[0]), "file", r[1] or "failed"))
        out += [(path, "file", note) for path, note in self.notes()]
        for r in self._db.execute(
            "SELECT s.path, i.name, i.error FROM items i JOIN sources s ON i.source_id=s.id"
            " WHERE i.status=? ORDER BY s.path, i.ordinal",
            (I_FAILED,),
        ):
            out.append((decode_path(r[0]), r[1], r[2] or "failed"))
        for r in self._db.execute(
            "SELECT s.path, d.path FROM sources s JOIN sources d ON s.duplicate_of=d.id WHERE s.status=?"
            " ORDER BY s.path",
            (S_DUPLICATE,),
        ):
            out.append(
                (decode_path(r[0]), "file", f"duplicate of {decode_path(r[1])} (same content; indexed once)")
            )
        return out


__all__ = [
    "I_EMBEDDED",
    "I_FAILED",
    "SCHEMA_VERSION",
    "S_DUPLICATE",
    "S_FAILED",
    "S_INDEXED",
    "S_PENDING",
    "S_UNSUPPORTED",
    "ItemRow",
    "Manifest",
    "ManifestError",
    "NewItem",
    "SourceRow",
    "connect_read_only",
    "damaged_message",
    "decode_path",
    "encode_path",
    "newer_message",
]
