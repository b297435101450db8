"""Walk the folders and files a person added and find what changed since the last scan.

Nothing here reads more than it must: a file whose size and mtime are unchanged is not even hashed.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from vrag_desktop.core.corpus import kinds


@dataclass
class Found:
    """A file found under a root: its path, kind (None: unsupported) and stat, or why it is unusable."""

    path: str
    kind: str | None
    size: int = 0
    mtime_ns: int = 0
    error: str | None = None


@dataclass
class ScanReport:
    added: int = 0
    changed: int = 0
    removed: int = 0
    unchanged: int = 0
    failed: int = 0
    duplicates: int = 0
    unsupported: int = 0
    renamed: int = 0  # moved or renamed: kept their items and vectors, nothing re-embedded
    missing_roots: list[str] = field(default_factory=list)

    @property
    def work(self) -> int:
        return self.added + self.changed


#: A plain-text file in a folder listing names or globs (one a line, ``#`` comments) of files and
#: folders to leave out, in that folder and below; e.g. a data set's ``questions.json``.
IGNORE_FILE = ".vragignore"

_Rules = tuple[tuple[str, str], ...]  # (folder the rule came from, pattern)


def read_ignore(folder: str) -> list[str]:
    """The patterns of ``folder``'s :data:`IGNORE_FILE` (none if it has none or it is unreadable)."""
    try:
        with open(os.path.join(folder, IGNORE_FILE), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    return [ln.strip().rstrip("/") for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def ignored(path: str, name: str, rules: _Rules) -> bool:
    """Whether ``rules`` (a folder's :data:`IGNORE_FILE` patterns and its parents') leave ``path``
    out (the scan and the folder watcher ask the same question)."""
    for base, pattern in rules:
        if "/" in pattern:
            rel = os.path.relpath(path, base).replace(os.sep, "/")
            if fnmatch.fnmatchcase(rel, pattern.lstrip("/")):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def walk(root: str, inside: list[str] | None = None, skip: str | None = None) -> Iterator[Found]:
    """Every file under ``root`` (or ``root`` itself), following symlinks but never looping.

    Hidden files and folders (``.name``) inside a folder are skipped, and so is what a folder's
    :data:`IGNORE_FILE` lists; a file named explicitly is not. A symbolic link is followed only to
    a place inside ``inside`` (real paths; default: ``root``'s own): a link in a corpus folder to
    ``/etc/passwd`` must not put that file into search results or the search server's reach, so it
    is reported instead (add the place it points to, to index it). ``skip`` (a real path, the app's
    data directory) is never walked: a data directory inside an added folder would index itself.
    """
    allowed = inside if inside is not None else [os.path.realpath(root)]
    try:
        st = os.stat(root)
    except FileNotFoundError:
        if os.path.islink(root):
            yield Found(root, kinds.kind_of(Path(root)), error="broken symbolic link")
        return
    except OSError as exc:
        yield Found(root, kinds.kind_of(Path(root)), error=_os_error(exc))
        return
    if not stat.S_ISDIR(st.st_mode):
        yield _found(root, st)
        return
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[str, _Rules]] = [(root, ())]
    while stack:
        folder, inherited = stack.pop()
        try:
            fst = os.stat(folder)
        except OSError as exc:
            yield Found(folder, None, error=_os_error(exc))
            continue
        key = (fst.st_dev, fst.st_ino)
        if key in seen:  # a symlink loop or a second link to a folder already walked
            continue
        seen.add(key)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            yield Found(folder, None, error=f"cannot list folder: {_os_error(exc)}")
            continue
        rules = inherited + tuple((folder, p) for p in read_ignore(folder))
        subdirs = []
        for entry in entries:
            if entry.name.startswith(".") or (rules and ignored(entry.path, entry.name, rules)):
                continue
            if entry.is_symlink() and not _inside(os.path.realpath(entry.path), allowed):
                yield Found(entry.path, None, error=outside_message(entry.path))
                continue
            try:
                est = os.stat(entry.path)  # follows symlinks
            except FileNotFoundError:
                if entry.is_symlink():
                    yield Found(entry.path, kinds.kind_of(Path(entry.path)), error="broken symbolic link")
                continue
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    yield Found(entry.path, None, error="symbolic link loop")
                else:
                    yield Found(entry.path, kinds.kind_of(Path(entry.path)), error=_os_error(exc))
                continue
            if stat.S_ISDIR(est.st_mode):
                if skip is None or os.path.realpath(entry.path) != skip:
                    subdirs.append((entry.path, rules))
            elif stat.S_ISREG(est.st_mode):
                yield _found(entry.path, est)
        stack.extend(reversed(subdirs))


def outside_message(link: str) -> str:
    """Why a link out of the corpus's folders is not indexed, and what to do instead."""
    target = display_path(os.path.realpath(link))
    return (
        f"symbolic link to {target}, outside the folders added to this corpus: not indexed "
        "(add that location itself to index it)"
    )


def _inside(path: str, folders: list[str]) -> bool:
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def _found(path: str, st: os.stat_result) -> Found:
    return Found(path, kinds.kind_of(Path(path)), size=st.st_size, mtime_ns=st.st_mtime_ns)


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _os_error(exc: OSError) -> str:
    if isinstance(exc, PermissionError) or exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied (cannot read this file)"
    if exc.errno == errno.ELOOP:
        return "symbolic link loop"
    return exc.strerror or str(exc)


def os_error_message(exc: OSError) -> str:
    """A short, plain message for an OSError met while reading a source."""
    if isinstance(exc, FileNotFoundError):
        return "file disappeared while indexing"
    return _os_error(exc)


def display_path(path: str) -> str:
    """A path fit for printing: undecodable bytes shown as U+FFFD instead of crashing the terminal."""
    return os.fsencode(path).decode("utf-8", "replace")


#: Files counted in a folder before the count says "N+": a person wants the size of what they add,
#: not to wait for a walk of a whole disk.
COUNT_LIMIT = 100_000


def count_indexable(folder: str | os.PathLike[str], limit: int = COUNT_LIMIT) -> tuple[int, bool]:
    """How many files under ``folder`` the app indexes (supported kinds, readable), stopping at
    ``limit``; ``(count, stopped)``."""
    n = 0
    for f in walk(os.fspath(folder)):
        if f.kind is not None and f.error is None:
            n += 1
            if n >= limit:
                return n, True
    return n, False


def paths_summary(paths: Iterable[str | os.PathLike[str]], limit: int = COUNT_LIMIT) -> str:
    """What a person gave, in words: ``1 folder (12 files)``, ``2 files``, ``1 folder (3 files) and
    1 file`` (a folder's files counted as the app indexes them: "given 1 file" for a folder misled)."""
    folders, files, inside, more = 0, 0, 0, False
    for p in paths:
        if os.path.isdir(p):
            folders += 1
            n, stopped = count_indexable(p, limit)
            inside, more = inside + n, more or stopped
        else:
            files += 1
    parts = []
    if folders:
        counted = f"{inside:,}{'+' if more else ''} file{'s' if inside != 1 or more else ''}"
        parts.append(f"{folders} folder{'s' if folders != 1 else ''} ({counted})")
    if files:
        parts.append(f"{files} file{'s' if files != 1 else ''}")
    return " and ".join(parts) or "nothing"
