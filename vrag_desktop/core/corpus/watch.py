"""Watching corpus folders while the app runs: which places to watch, which changes matter, and when
a corpus is due for a rescan. Never imports Qt; the app's ``qt/corpora/folder_watch.py`` brings the
news to the GUI thread and starts the rescan through its indexer.

Why the ``watchdog`` package and not Qt's ``QFileSystemWatcher``: a corpus folder is a tree, and
watchdog watches a tree on every platform through the system's own interface (inotify on Linux,
FSEvents on macOS, ReadDirectoryChangesW on Windows), adding folders made later by itself, and it
says *which* file changed. QFileSystemWatcher watches one folder at a time (each sub-folder added
by hand, kept up to date as folders come and go; on macOS one open file per folder) and says only
that a folder changed, so hidden files and ``.vragignore`` could not be told apart without listing
the folder again.

The policy, in numbers: a corpus is rescanned once its folders have been quiet for
:attr:`Debounce.quiet_s` (2 s: a copy of many files is one rescan, not one per file), but never
later than :attr:`Debounce.max_wait_s` (20 s) after the first change, so a folder that never goes
quiet (a log written every second) is still picked up. Changes to hidden files, to what a
``.vragignore`` excludes and inside the app's own data directory are not changes. A folder that is
missing (an unplugged drive) is not watched; its nearest existing parent is, so that it coming back
is noticed. Whether a corpus is watched at all is its manifest's ``watch`` meta key (``"0"``: off;
absent or ``"1"``: on), read by :func:`~vrag_desktop.core.corpus.status.read_summary`.

Nothing here re-embeds anything: it only says *that* a corpus changed; the ordinary indexing job's
scan works out what (renames keep their items, missing folders are kept).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from vrag_desktop.core.corpus.scan import IGNORE_FILE, ignored, read_ignore

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.library import Library

#: The manifest meta key that turns watching off for one corpus ("0").
WATCH_META = "watch"

K = TypeVar("K", bound=Hashable)


def watch_enabled(value: str | None) -> bool:
    """The meta value as a flag: only an explicit ``"0"`` turns watching off."""
    return value != "0"


def set_watching(library: Library, name: str, on: bool) -> None:
    """Turn watching of corpus ``name``'s folders on or off (one small write to its manifest)."""
    corpus = library.open(name)
    try:
        corpus.manifest.set_meta(WATCH_META, "1" if on else "0")
    finally:
        corpus.close()


# ---------------------------------------------------------------- when
@dataclass
class Debounce(Generic[K]):
    """When each key (a corpus) is due: ``quiet_s`` after its last change, at most ``max_wait_s``
    after its first. Pure bookkeeping on the times it is given, so it is tested without waiting."""

    quiet_s: float = 2.0
    max_wait_s: float = 20.0
    _first: dict[K, float] = field(default_factory=dict)
    _last: dict[K, float] = field(default_factory=dict)

    def touch(self, key: K, now: float) -> bool:
        """Record a change; True when ``key`` had none pending (the caller arms its timer)."""
        new = key not in self._first
        if new:
            self._first[key] = now
        self._last[key] = now
        return new

    def deadline(self, key: K) -> float:
        return min(self._last[key] + self.quiet_s, self._first[key] + self.max_wait_s)

    def next_due(self) -> float | None:
        """The earliest deadline of any pending key (None: nothing pending)."""
        return min((self.deadline(k) for k in self._first), default=None)

    def take_due(self, now: float) -> list[K]:
        """The keys whose deadline has passed, forgotten (a later change starts afresh)."""
        due = [k for k in self._first if self.deadline(k) <= now]
        for k in due:
            self.forget(k)
        return due

    def forget(self, key: K) -> None:
        self._first.pop(key, None)
        self._last.pop(key, None)

    def pending(self) -> list[K]:
        return list(self._first)


# ---------------------------------------------------------------- where
@dataclass(frozen=True)
class Watched:
    """One corpus to watch: its folders (and files added alone), and which of them are missing."""

    name: str
    roots: tuple[str, ...]
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Place:
    """One watch the system keeps: a folder, with or without everything below it."""

    path: str
    recursive: bool


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _existing_parent(path: str) -> str | None:
    parent = os.path.dirname(path.rstrip(os.sep))
    while parent and not os.path.isdir(parent):
        up = os.path.dirname(parent)
        if up == parent:
            return None
        parent = up
    return parent or None


def plan_places(corpora: Iterable[Watched]) -> set[Place]:
    """The watches that cover ``corpora``: a folder recursively; a file added alone through its
    folder; a missing one through its nearest existing parent (to see it come back). A place inside
    another watched tree is left to that tree's watch (one event, not two)."""
    trees: set[str] = set()
    flat: set[str] = set()
    for c in corpora:
        for root in c.roots:
            if root in c.missing or not os.path.lexists(root):
                parent = _existing_parent(root)
                if parent:
                    flat.add(parent)
            elif os.path.isdir(root):
                trees.add(root)
            else:
                flat.add(os.path.dirname(root))
    tops = {t for t in trees if not any(o != t and _under(t, o) for o in trees)}
    places = {Place(t, True) for t in tops}
    places |= {Place(f, False) for f in flat if not any(_under(f, t) for t in tops)}
    return places


# ---------------------------------------------------------------- what
class Relevance:
    """Which changed paths matter to which corpus. Keeps each folder's ``.vragignore`` rules once
    read (a change to that file forgets them), so a burst of changes reads each rule file once."""

    MAX_CACHED = 10_000

    def __init__(self, corpora: Iterable[Watched], data_dir: str | os.PathLike[str] | None) -> None:
        self.corpora = list(corpora)
        self.excluded: set[str] = set()
        if data_dir is not None:
            d = os.path.abspath(os.fspath(data_dir))
            self.excluded = {d, os.path.realpath(d)}
        self._rules: dict[str, list[str]] = {}

    def corpora_touched(self, path: str) -> dict[str, set[str]]:
        """{corpus: roots} that a change of ``path`` concerns (empty when it concerns none)."""
        out: dict[str, set[str]] = {}
        if not path or any(_under(path, d) for d in self.excluded):
            return out
        if os.path.basename(path) == IGNORE_FILE:
            self._rules.pop(os.path.dirname(path), None)
        for c in self.corpora:
            for root in c.roots:
                if self._matters(path, root):
                    out.setdefault(c.name, set()).add(root)
        return out

    def _matters(self, path: str, root: str) -> bool:
        if path == root or _under(root, path):  # the root itself, or a folder above it, came or went
            return True
        if not _under(path, root):
            return False
        parts = os.path.relpath(path, root).split(os.sep)
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            if part.startswith(".") and not (last and part == IGNORE_FILE):
                return False
        if len(self._rules) > self.MAX_CACHED:
            self._rules.clear()
        folder = root
        rules: tuple[tuple[str, str], ...] = ()
        for part in parts:
            if folder not in self._rules:
                self._rules[folder] = read_ignore(folder)
            rules = rules + tuple((folder, p) for p in self._rules[folder])
            here = os.path.join(folder, part)
            if part != IGNORE_FILE and rules and ignored(here, part, rules):
                return False
            folder = here
        return True


# ---------------------------------------------------------------- the watcher
class FolderWatcher:
    """The system's watches over every watched corpus, and their changes debounced per corpus.

    :meth:`sync` (any thread; it walks new trees, so not the GUI thread) makes the watches match
    the corpora. The system's thread records each change that matters and calls ``on_pending()``
    when a corpus gets its first change since it was last due: the caller then asks
    :meth:`next_due` and, at that time, :meth:`take_due`. ``on_pending`` must be quick and must not
    call back into the watcher (it runs under the watcher's lock, so none is made after
    :meth:`close`).
    """

    def __init__(
        self, on_pending: Callable[[], None], quiet_s: float = 2.0, max_wait_s: float = 20.0
    ) -> None:
        self._on_pending = on_pending
        # _lock guards the pending changes, held for microseconds (the GUI thread asks for the
        # due corpora under it); _sync_lock lets one sync at a time add watches, which can take a while.
        self._lock = threading.Lock()
        self._sync_lock = threading.Lock()
        self._debounce: Debounce[str] = Debounce(quiet_s, max_wait_s)
        self._roots: dict[str, set[str]] = {}  # corpus -> roots touched since it was last due
        self._relevance = Relevance((), None)
        self._observer: Any = None
        self._watches: dict[Place, Any] = {}
        self._closed = False
        self.problems: list[str] = []  # places the system refused to watch (said once each)

    @property
    def debounce(self) -> Debounce[str]:
        return self._debounce

    def places(self) -> set[Place]:
        with self._sync_lock:
            return set(self._watches)

    def sync(self, corpora: Iterable[Watched], data_dir: str | os.PathLike[str] | None) -> list[str]:
        """Watch exactly what ``corpora`` need; returns the new problems (a place that could not be
        watched: too many folders for the system's limit, no permission)."""
        corpora = list(corpora)
        wanted = plan_places(corpora)
        new_problems: list[str] = []
        with self._sync_lock:
            with self._lock:
                if self._closed:
                    return []
                self._relevance = Relevance(corpora, data_dir)
                names = {c.name for c in corpora}
                for name in [n for n in self._debounce.pending() if n not in names]:
                    self._debounce.forget(name)
                    self._roots.pop(name, None)
            for place in [p for p in self._watches if p not in wanted]:
                self._unschedule(self._watches.pop(place))
            for place in sorted(wanted - set(self._watches), key=lambda p: p.path):
                try:
                    watch = self._schedule(place)
                except OSError as exc:
                    problem = f"{place.path}: {exc.strerror or exc}"
                    if problem not in self.problems:
                        self.problems.append(problem)
                        new_problems.append(problem)
                    continue
                if watch is not None:
                    self._watches[place] = watch
        return new_problems

    def next_due(self) -> float | None:
        """When (``time.monotonic()``) the next corpus is due; None when none is pending."""
        with self._lock:
            return self._debounce.next_due()

    def take_due(self, now: float | None = None) -> dict[str, set[str]]:
        """{corpus: the roots its changes were under} for every corpus whose changes settled."""
        with self._lock:
            due = self._debounce.take_due(time.monotonic() if now is None else now)
            return {name: self._roots.pop(name, set()) for name in due}

    def close(self) -> None:
        """Stop watching; no ``on_pending`` call is made after this returns."""
        with self._lock:
            self._closed = True
            observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)

    # ---- the system's side (watchdog), imported once there is something to watch
    def _schedule(self, place: Place) -> Any:
        with self._lock:
            if self._closed:
                return None
            if self._observer is None:
                from watchdog.observers import Observer

                self._observer = Observer()
                self._observer.daemon = True
                self._observer.name = "vrag-watch"
                self._observer.start()
            observer = self._observer
        return observer.schedule(
            _Handler(self), place.path, recursive=place.recursive, event_filter=_event_types()
        )

    def _unschedule(self, watch: Any) -> None:
        with self._lock:
            observer = self._observer
        if observer is not None:
            # KeyError/OSError: its folder is gone, and the system dropped the watch itself
            with contextlib.suppress(KeyError, OSError):
                observer.unschedule(watch)

    def _changed(self, paths: Iterable[str]) -> None:
        """(The system's thread.) Record the paths of one event. Which corpora they concern is worked
        out outside the lock (it may read a ``.vragignore``): the GUI thread never waits on a disk."""
        with self._lock:
            relevance = self._relevance
        touched: dict[str, set[str]] = {}
        for p in paths:
            for name, roots in relevance.corpora_touched(p).items():
                touched.setdefault(name, set()).update(roots)
        if not touched:
            return
        with self._lock:
            if self._closed:
                return
            now = time.monotonic()
            first = False
            for name, roots in touched.items():
                first |= self._debounce.touch(name, now)
                self._roots.setdefault(name, set()).update(roots)
            if first:
                self._on_pending()


def _event_types() -> list[Any]:
    """What is worth waking up for: files and folders made, removed, renamed, written (on Linux the
    close after writing, one event per file instead of one per block written). Never reads: the
    indexer reading a file must not look like a change."""
    import sys

    from watchdog import events as ev

    types: list[Any] = [
        ev.FileCreatedEvent,
        ev.DirCreatedEvent,
        ev.FileDeletedEvent,
        ev.DirDeletedEvent,
        ev.FileMovedEvent,
        ev.DirMovedEvent,
    ]
    types += [ev.FileClosedEvent] if sys.platform.startswith("linux") else [ev.FileModifiedEvent]
    return types


class _Handler:
    """watchdog's event handler (duck-typed: ``dispatch`` is all its observer calls)."""

    def __init__(self, watcher: FolderWatcher) -> None:
        self._watcher = watcher

    def dispatch(self, event: Any) -> None:
        paths = [os.fsdecode(event.src_path)]
        dest = getattr(event, "dest_path", "")
        if dest:
            paths.append(os.fsdecode(dest))
        self._watcher._changed(paths)
