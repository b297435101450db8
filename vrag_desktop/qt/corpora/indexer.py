"""Background indexing for the app: a queue of corpora, one at a time, each scanned then built.

Each job runs as a generator task (``tasks.run_generator``) in a thread that opens its *own* corpus
(its own SQLite connection, its own write lock) — the GUI never shares a connection with it.
Cancelling stops at the next batch and keeps everything embedded so far; a corpus left with pending
work is queued again by :meth:`Indexer.resume_pending` at the next start, which is how quitting
mid-index resumes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from vrag_desktop.core.corpus.errors import disk_problem, is_disk_error
from vrag_desktop.core.corpus.scan import display_path
from vrag_desktop.core.corpus.status import corpora_to_resume, missing_root_message, progress_text
from vrag_desktop.core.progress import CancelToken, Progress
from vrag_desktop.qt.infra.controllers import Controller
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import Task, run_call, run_generator

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.job import JobResult
    from vrag_desktop.qt.context import AppContext

TITLE = "Indexing"


class EmbedderLoadError(RuntimeError):
    """The embedder named in the settings could not be loaded (message says which and why)."""


@dataclass
class Job:
    """One unit of queued work on a corpus. Jobs for the same corpus merge while queued."""

    name: str
    paths: list[str] = field(default_factory=list)
    remove_roots: list[str] = field(default_factory=list)
    retry_failed: bool = False
    create: bool = False
    repair: bool = False  # asked for by Check… → Repair: rebuild a manifest that cannot be read

    def merge(self, other: Job) -> None:
        self.paths += [p for p in other.paths if p not in self.paths]
        self.remove_roots += [p for p in other.remove_roots if p not in self.remove_roots]
        self.retry_failed |= other.retry_failed
        self.create |= other.create
        self.repair |= other.repair


def run_job(ctx: AppContext, job: Job, token: CancelToken) -> Generator[object, None, JobResult]:
    """The work of one job (runs on the worker thread): the core indexing job with the app's embedder."""
    from vrag_desktop.core.corpus.job import IndexRequest, index_job  # numpy & co.: not before the window

    request = IndexRequest(
        job.name,
        paths=list(job.paths),
        remove_roots=list(job.remove_roots),
        retry_failed=job.retry_failed,
        create=job.create,
        repair=job.repair,
        skip_missing=True,
    )
    # ctx.library raises CorpusError with the path when the data directory is unusable
    return (yield from index_job(ctx.library, request, lambda recorded: _load_embedder(ctx, recorded), token))


def _load_embedder(ctx: AppContext, recorded: str | None = None) -> Any:
    """The corpus's own embedder (``recorded``: chosen when it was made, or what built it), else the
    settings' default: a corpus keeps its embedder when the default changes."""
    from vrag_desktop.core.embedders import same_embedder

    own = recorded if recorded and not same_embedder(recorded, ctx.settings.embedder) else None
    try:
        return ctx.embedder(own) if own else ctx.embedder()
    except Exception as exc:
        raise EmbedderLoadError(
            f"could not load the embedder '{own or ctx.settings.embedder}': {describe(exc)}"
        ) from exc


class Indexer(Controller):
    """Queue of indexing jobs; signals arrive on the GUI thread.

    ``progress(name, Progress)`` per batch, ``changed(name)`` whenever the corpus on disk changed
    (refresh views), ``busyChanged(busy, text)`` for a status bar, ``indexed(name)`` when a corpus
    finished, ``jobEnded(name, outcome)`` with outcome ``done`` / ``cancelled`` / ``failed``, and
    ``repaired(name, lines)`` when a job found damage and mended it (also said in the messages).
    """

    progress = Signal(str, object)
    changed = Signal(str)
    busyChanged = Signal(bool, str)
    indexed = Signal(str)
    jobStarted = Signal(str)
    jobEnded = Signal(str, str)
    repaired = Signal(str, object)

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(ctx, parent)
        self._queue: list[Job] = []
        self._job: Job | None = None
        self._worker: Task | None = None
        self._outcome = "done"
        self._after: dict[str, list[Callable[[], None]]] = {}
        # Paths of a job that failed (full disk, busy corpus) are kept and go with the next job for
        # that corpus, so "free some space, then Re-scan" loses nothing the person dropped.
        self._unsaved: dict[str, Job] = {}
        self._closed = False
        self.last_progress: Progress | None = None
        self._busy_text = ""

    # ---------------------------------------------------------------- queue
    def enqueue(
        self,
        name: str,
        paths: Iterable[str] = (),
        *,
        retry_failed: bool = False,
        create: bool = False,
        remove_roots: Iterable[str] = (),
        repair: bool = False,
    ) -> None:
        """Queue work on ``name`` (merged with work already queued for it). ``repair``: the corpus
        is rebuilt from its folders if its manifest cannot be read (damaged index files are mended
        by every job)."""
        if self._closed:
            return
        job = Job(name, list(paths), list(remove_roots), retry_failed, create, repair)
        unsaved = self._unsaved.pop(name, None)
        if unsaved is not None:
            job.merge(unsaved)
        for queued in self._queue:
            if queued.name == name:
                queued.merge(job)
                break
        else:
            self._queue.append(job)
        self._next()

    def resume_pending(self) -> None:
        """Queue every corpus with work left (pending files or an unfinished scan)."""

        def found(names: list[str]) -> None:
            for n in names:
                if n != self.current() and n not in self.queued():
                    self.enqueue(n)

        def failed(exc: BaseException) -> None:
            from vrag_desktop.core.corpus.corpus import CorpusError

            if not isinstance(exc, CorpusError):  # an unusable data directory is the panel's to report
                error_sink().report("Cannot resume indexing", exc)

        run_call(lambda: corpora_to_resume(self.ctx.library.corpora_dir), on_done=found, on_error=failed)

    def current(self) -> str | None:
        return self._job.name if self._job is not None else None

    def queued(self) -> list[str]:
        return [j.name for j in self._queue]

    def is_busy(self) -> bool:
        return self._job is not None

    def busy_text(self) -> str:
        return self._busy_text

    # ---------------------------------------------------------------- stopping
    def cancel(self, name: str | None = None) -> None:
        """Stop the running job (if it is ``name``'s, or any when None) and drop queued ones."""
        self._queue = [j for j in self._queue if name is not None and j.name != name]
        if self._worker is not None and (name is None or self.current() == name):
            self._outcome = "cancelled"
            self._worker.cancel()

    def stop_then(self, name: str, fn: Callable[[], None]) -> None:
        """Run ``fn`` (GUI thread) once nothing indexes ``name``: at once, or after cancelling it."""
        self._queue = [j for j in self._queue if j.name != name]
        if self.current() != name:
            fn()
            return
        self._after.setdefault(name, []).append(fn)
        self.cancel(name)

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """Cancel everything and wait for the worker (window closing). True when it stopped."""
        self._closed = True
        self._queue.clear()
        worker = self._worker
        if worker is None:
            return True
        self._outcome = "cancelled"
        worker.cancel()
        return worker.wait(timeout_s)

    # ---------------------------------------------------------------- running
    def _next(self) -> None:
        if self._job is not None or not self._queue or self._closed:
            return
        job = self._job = self._queue.pop(0)
        self._outcome = "done"
        self.last_progress = None
        ctx = self.ctx
        self._set_busy(f"Indexing {job.name}…")
        self.jobStarted.emit(job.name)
        self._worker = run_generator(
            lambda token: run_job(ctx, job, token),
            f"index-{job.name}",
            nice=10,
            on_progress=self._on_progress,
            on_done=self._on_finished,
            on_error=self._on_failed,
            on_cancelled=self._on_cancelled,
            on_end=self._on_done,
        )

    def _set_busy(self, text: str) -> None:
        if text != self._busy_text or not text:
            self._busy_text = text
            self.busyChanged.emit(bool(text), text)

    def _on_progress(self, value: object) -> None:
        from vrag_desktop.core.corpus.job import MissingPaths, Repaired, ScanDone  # loaded by the job

        job = self._job
        if job is None:
            return
        if isinstance(value, Progress):
            self.last_progress = value
            self._set_busy(progress_text(job.name, value, short=True))
            self.progress.emit(job.name, value)
            if value.phase == "index":
                self.changed.emit(job.name)
        elif isinstance(value, MissingPaths):
            for p in value.paths:
                error_sink().report(f"Not added to {job.name}", f"{p} was not found", "warning")
        elif isinstance(value, Repaired):
            # asked for (Check… → Repair): the check banner says more; found by chance: it stays
            error_sink().report(
                "Corpus repaired",
                f"'{job.name}': " + " ".join(_sentence(line) for line in value.lines),
                "info" if job.repair else "warning",
            )
            self.repaired.emit(job.name, list(value.lines))
        elif isinstance(value, ScanDone):
            for root, kept in value.missing:
                error_sink().report("Corpus folder missing", missing_root_message(root, kept), "warning")
            self.changed.emit(job.name)

    def _on_finished(self, result: object) -> None:
        from vrag_desktop.core.corpus.job import JobResult

        if not isinstance(result, JobResult):
            return
        name = result.name
        if result.disk_failures:
            n = len(result.disk_failures)
            error_sink().report(
                "Data directory full or read-only",
                f"{n} file{'s' if n != 1 else ''} of '{name}' could not be written to the data directory "
                f"{self.ctx.data_dir}: {result.disk_failures[0][1]}. Everything indexed before is kept; "
                "free some space (or choose another data directory), then Re-scan.",
            )
        new = result.new_failures
        if len(new) == 1:
            path, reason = new[0]
            error_sink().report(
                TITLE,
                f"{display_path(os.path.basename(path))} in '{name}' could not be indexed: {reason}",
                "warning",
            )
        elif new:
            error_sink().report(
                TITLE,
                f"{len(new)} files in '{name}' could not be indexed; the Corpora panel lists the reasons",
                "warning",
            )
        b = result.build
        if b is not None and b.failed_items:
            n = b.failed_items
            error_sink().report(
                TITLE,
                f"{n} page{'s' if n != 1 else ''} or clip{'s' if n != 1 else ''} in '{name}' could not be "
                "read; the Corpora panel lists the reasons",
                "warning",
            )

    def _on_failed(self, exc: object) -> None:
        self._outcome = "failed"
        name = self.current() or "?"
        if self._job is not None and (self._job.paths or self._job.remove_roots):
            self._unsaved[name] = self._job
        if not isinstance(exc, BaseException):
            return
        error_sink().report(*failure_message(name, exc, self.ctx.data_dir))

    def _on_cancelled(self) -> None:
        error = self._worker.error if self._worker is not None else None
        if error is not None:  # it failed while stopping: that is what to report
            self._on_failed(error)
            return
        self._outcome = "cancelled"
        name = self.current()
        if name is not None and not self._closed and name not in self._after:
            error_sink().report(
                TITLE,
                f"Indexing of '{name}' stopped: everything indexed so far is kept. "
                "It resumes at the next start, or now with Re-scan.",
                "info",
            )

    def _on_done(self) -> None:
        job = self._job
        self._job = self._worker = None
        if job is None:
            return
        outcome = self._outcome
        self.changed.emit(job.name)
        self.jobEnded.emit(job.name, outcome)
        if outcome == "done":
            self.indexed.emit(job.name)
        for fn in self._after.pop(job.name, []):
            fn()
        if self._queue and not self._closed:
            self._next()
        else:
            self._set_busy("")


def _sentence(line: str) -> str:
    line = line.strip()
    return line if line.endswith((".", "!", "?")) else line + "."


def failure_message(name: str, exc: BaseException, data_dir: os.PathLike[str] | str) -> tuple[str, str, str]:
    """(title, message, level) for a job that raised: say what happened and what still holds."""
    from vrag_desktop.core.corpus.corpus import CorpusBusy, CorpusError

    if isinstance(exc, CorpusBusy):
        return (
            "Corpus busy",
            f"{exc}. Nothing was changed; press Re-scan once it has finished.",
            "warning",
        )
    if isinstance(exc, EmbedderLoadError):
        return ("Could not load the embedder", f"{exc}. Nothing indexed so far is lost.", "error")
    disk = disk_problem(data_dir)
    text = describe(exc)
    if disk or isinstance(exc, OSError) or is_disk_error(text):
        words = disk or (exc.strerror if isinstance(exc, OSError) and exc.strerror else text)
        where = ""
        if isinstance(exc, OSError) and exc.filename:
            # a file of the data directory (a corpus's lock, its index) is its to explain; one
            # elsewhere (a source the person added) is named
            inside = os.path.abspath(os.fsdecode(exc.filename)).startswith(os.path.abspath(data_dir) + os.sep)
            where = "" if inside else f" ({exc.filename})"
        detail = f" ({text})" if disk and disk not in text else ""
        return (
            "Cannot write to the data directory",
            f"Indexing '{name}' stopped: {words}{where} — data directory {data_dir}{detail}. "
            "Everything indexed before is kept; free some space or choose another data directory, "
            "then Re-scan.",
            "error",
        )
    if isinstance(exc, CorpusError):
        return (TITLE, str(exc), "error")
    return (TITLE, f"Indexing '{name}' failed: {describe(exc)}. Everything indexed before is kept.", "error")
