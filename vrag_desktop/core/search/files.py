"""Which files the search server may send: those the index knows, and only inside the corpus.

A file is served when (1) an item of a served corpus names it as its image or media path, looked up
in that corpus's manifest on every request (so a file removed from the corpus stops being served at
once, and nothing grows with the corpus in memory), and (2) its real path, after resolving every
symbolic link, lies inside the corpus's own folder (derived images) or inside one of the folders or
files the user added to it (its roots, also resolved). So a link inside a corpus folder that points
elsewhere (``notes.txt -> /etc/passwd``) may be indexed, but its target is never sent.

Lookups use a read-only SQLite connection of their own: the server never writes a manifest, and
never shares the engine's connection across threads.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_desktop.core.corpus.manifest import connect_read_only, decode_path, encode_path

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.corpus import Corpus

#: SQLite rowids are signed 64-bit; a bigger number can name no item (and would overflow SQLite).
MAX_ITEM_ID = 2**63 - 1


class FilesError(RuntimeError):
    """A corpus's manifest could not be read to decide; the message says which and why."""


@dataclass(frozen=True)
class Served:
    """The outcome of a lookup: ``path`` (the real path to send) when allowed, else ``why`` not."""

    path: str | None
    why: str = ""
    status: int = 200  # the HTTP answer: 200, 403 (indexed but outside the corpus), 404


@contextmanager
def _read_only(corpus: Corpus) -> Iterator[sqlite3.Connection]:
    """A short-lived read-only connection to ``corpus``'s manifest (``mode=ro``: cannot write)."""
    try:
        conn = connect_read_only(Path(corpus.manifest.path), shared=True)
    except (sqlite3.Error, OSError) as exc:
        raise FilesError(f"cannot read the manifest of corpus '{corpus.name}': {exc}") from exc
    with closing(conn):
        try:
            yield conn
        except sqlite3.Error as exc:
            raise FilesError(f"cannot read the manifest of corpus '{corpus.name}': {exc}") from exc


def _inside(real: str, folder: str) -> bool:
    """``real`` is ``folder`` itself or lies under it (both already resolved)."""
    try:
        return os.path.commonpath([real, folder]) == folder
    except ValueError:  # different drives on Windows, or one relative
        return False


def _allowed_roots(corpus: Corpus, conn: sqlite3.Connection) -> list[str]:
    """The corpus's folder and every root the user added, with links resolved."""
    roots = [os.path.realpath(corpus.dir)]
    for (value,) in conn.execute("SELECT path FROM roots"):
        roots.append(os.path.realpath(decode_path(value)))
    return roots


def _confined(corpus: Corpus, conn: sqlite3.Connection, path: str) -> Served:
    real = os.path.realpath(path)
    if not any(_inside(real, root) for root in _allowed_roots(corpus, conn)):
        return Served(
            None,
            f"this file is in corpus '{corpus.name}' but, once links are resolved, lies outside its "
            "folders; it is not served",
            403,
        )
    if not os.path.isfile(real):
        return Served(None, "the file is in the index but no longer on disk (rescan the corpus)", 404)
    return Served(real)


class ServedFiles:
    """The files the server may send for ``corpora`` (the engine's ``Corpus`` objects)."""

    def __init__(self, corpora: Sequence[Corpus]) -> None:
        self._corpora = corpora

    def by_path(self, path: str) -> Served:
        """``path`` exactly as a search result gave it (an item's image or media path)."""
        if not path or "\x00" in path:
            return Served(None, "no such file in the index", 404)
        stored = encode_path(path)
        for corpus in self._corpora:
            with _read_only(corpus) as conn:
                row = conn.execute(
                    "SELECT 1 FROM items WHERE image_path = ? OR media_path = ? LIMIT 1", (stored, stored)
                ).fetchone()
                if row is not None:
                    return _confined(corpus, conn, path)
        return Served(None, "no such file in the index", 404)

    def item_image(self, corpus_name: str, item_id: int) -> Served:
        """The image of item ``item_id`` of corpus ``corpus_name`` (a page render, image, contact sheet)."""
        missing = Served(None, f"no image for item {item_id} in corpus '{corpus_name}'", 404)
        if not 0 <= item_id <= MAX_ITEM_ID:
            return missing
        for corpus in self._corpora:
            if corpus.name != corpus_name:
                continue
            with _read_only(corpus) as conn:
                row = conn.execute("SELECT image_path FROM items WHERE id = ?", (item_id,)).fetchone()
                if row is None or not row[0]:
                    return missing
                return _confined(corpus, conn, decode_path(row[0]))
        return missing


__all__ = ["MAX_ITEM_ID", "FilesError", "Served", "ServedFiles"]
