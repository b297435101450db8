"""The library: every corpus under the data directory, by name."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from vrag_desktop.core.corpus.errors import CorpusError
from vrag_desktop.core.paths import DataLayout

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.corpus import Corpus

DEFAULT_CORPUS = "default"
_NAME_RE = re.compile(r"^[\w][\w .@+-]{0,63}$")


def check_name(name: str) -> str:
    """A corpus name becomes a directory name: letters, digits, space, ``_ . @ + -``; ≤ 64 chars."""
    name = name.strip()
    if not _NAME_RE.match(name) or name in (".", ".."):
        raise CorpusError(
            f"invalid corpus name {name!r}: use up to 64 letters, digits, spaces, or _ . @ + - "
            "(not starting with a space or punctuation)"
        )
    return name


class Library:
    """All corpora in the data directory's corpora folder (:attr:`DataLayout.corpora`), by name."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None) -> None:
        layout = DataLayout.resolve(data_dir)
        self.data_dir = layout.root
        self.corpora_dir = layout.corpora
        try:
            if not self.corpora_dir.is_dir():  # an existing one on a read-only disk is still read
                self.corpora_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CorpusError(
                f"cannot create the data directory {self.data_dir}: {exc.strerror or exc}"
            ) from exc

    def names(self) -> list[str]:
        from vrag_desktop.core.corpus.status import corpus_names

        return corpus_names(self.corpora_dir)

    def exists(self, name: str) -> bool:
        return (self.corpora_dir / check_name(name) / "manifest.sqlite").exists()

    def open(
        self, name: str, create: bool = False, *, shared: bool = False, read_only: bool = False
    ) -> Corpus:
        """``read_only``: for readers (search, listing, check, export), which must never write."""
        name = check_name(name)
        path = self.corpora_dir / name
        if not (path / "manifest.sqlite").exists() and not create:
            known = ", ".join(self.names()) or "none yet"
            raise CorpusError(f"no corpus named '{name}' (corpora: {known})")
        from vrag_desktop.core.corpus.corpus import Corpus  # numpy & co.: not needed to list names

        return Corpus(path, name, shared=shared, read_only=read_only and not create)

    def remove(self, name: str) -> None:
        """Delete a corpus's folder (never the person's files) — a damaged one too: its lock is taken
        without opening its manifest, which may be unreadable."""
        from filelock import FileLock, Timeout

        from vrag_desktop.core.corpus.errors import CorpusBusy

        path = self.corpus_dir(name)
        if not (path / "manifest.sqlite").exists():
            raise CorpusError(f"no corpus named '{name}' (corpora: {', '.join(self.names()) or 'none yet'})")
        lock = FileLock(path / ".lock", timeout=0, thread_local=False)
        try:
            lock.acquire()  # refuses while another process indexes it
        except Timeout:
            raise CorpusBusy(f"corpus '{name}' is being indexed by another process") from None
        try:
            shutil.rmtree(path, ignore_errors=True)
        finally:
            lock.release(force=True)

    def rename(self, old: str, new: str) -> None:
        new = check_name(new)
        src = self.corpora_dir / check_name(old)
        dst = self.corpora_dir / new
        if not (src / "manifest.sqlite").exists():
            raise CorpusError(f"no corpus named '{old}'")
        if dst.exists():
            raise CorpusError(f"a corpus named '{new}' already exists")
        # Derived paths are stored absolute; rewrite them after the move.
        shutil.move(str(src), str(dst))
        from vrag_desktop.core.corpus.corpus import Corpus

        corpus = Corpus(dst, new)
        try:
            db = corpus.manifest._db
            old_prefix, new_prefix = str(src) + os.sep, str(dst) + os.sep
            db.execute(
                "UPDATE items SET image_path = ? || substr(image_path, ?) WHERE image_path LIKE ? || '%'",
                (new_prefix, len(old_prefix) + 1, old_prefix),
            )
            db.execute(
                "UPDATE items SET media_path = ? || substr(media_path, ?) WHERE media_path LIKE ? || '%'",
                (new_prefix, len(old_prefix) + 1, old_prefix),
            )
        finally:
            corpus.close()

    def corpus_dir(self, name: str) -> Path:
        return self.corpora_dir / check_name(name)
