"""Deriving (rendering PDF pages, decoding images and video, OCR) in a child process.

Why a process and not a thread: PyMuPDF renders a page with the GIL held (10–100 ms a page, more
for scans), and OCR's pre- and post-processing is Python; in the app's process that time is taken
from the GUI thread, which cannot run a single Python slot meanwhile (the stalls of
docs/benchmarks.md §5). In a child process it costs the window nothing. It also contains what a
hostile or broken file can do to a decoder: a crash in MuPDF or OpenCV ends the child, the source is
recorded as failed with a plain message, and the next source gets a new child.

The child is started with the ``spawn`` method (never ``fork``: the app has threads, Qt and torch),
runs at a lower priority than the app, and streams each :class:`~.derive.Derived` back as soon as it
is ready, exactly as :func:`~.derive.derive` yields them in-process.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.corpus.derive import Derived, DeriveOptions, SourceError

#: Seconds a child may take to start (importing PyMuPDF, Pillow; OpenCV and OCR load later).
START_TIMEOUT = 120.0
#: How long the parent waits between checks that the child is still alive.
_POLL = 0.2


class DeriveCrashed(SourceError):
    """The child process died while deriving a file (a decoder crash); the message says so."""


@dataclass(frozen=True)
class _Job:
    path: str
    kind: str
    out_dir: str
    opts: DeriveOptions
    skip: frozenset[int]
    ocr: bool


def _child_main(conn: Any, nice: int) -> None:
    """The child: derive each job it receives and send back ("item", Derived) … ("done", error)."""
    if nice > 0 and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(nice)
    from vrag_desktop.core.corpus.derive import derive
    from vrag_desktop.core.corpus.scan import os_error_message

    ocr_fn = None
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        if job is None:
            return
        if job.ocr and ocr_fn is None:
            from vrag_desktop.core.corpus.ocr import OCRUnavailable, ocr_image

            def ocr_fn(p: Path) -> str:
                try:
                    return ocr_image(p)
                except OCRUnavailable:
                    return ""

        err: str | None = None
        try:
            for d in derive(
                Path(job.path),
                job.kind,
                Path(job.out_dir),
                job.opts,
                set(job.skip),
                ocr_fn if job.ocr else None,
            ):
                conn.send(("item", d))
        except SourceError as exc:
            err = str(exc)
        except OSError as exc:
            err = os_error_message(exc)
        except Exception as exc:  # a decoder bug must not end the child
            err = f"unexpected error: {type(exc).__name__}: {exc}"
        conn.send(("done", err))


class DeriveProcess:
    """A child process that derives files on request; restarted after a crash. Use from one thread."""

    def __init__(self, nice: int = 10) -> None:
        self.nice = nice
        self._proc: Any = None
        self._conn: Any = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        proc = self._proc
        return proc.pid if proc is not None and proc.is_alive() else None

    def _start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe(duplex=True)
        proc = ctx.Process(target=_child_main, args=(child, self.nice), name="vrag-derive", daemon=True)
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent

    def derive(
        self,
        path: Path,
        kind: str,
        out_dir: Path,
        opts: DeriveOptions,
        skip: set[int],
        ocr: bool,
        stop: threading.Event,
    ) -> Iterator[Derived]:
        """Derived items of ``path``, as :func:`~.derive.derive` gives them; raises
        :class:`SourceError` (or :class:`DeriveCrashed`) for a file that cannot be used. Returns
        early, stopping the child, when ``stop`` is set."""
        with self._lock:
            if self._proc is None or not self._proc.is_alive():
                self._start()
            proc, conn = self._proc, self._conn
        conn.send(_Job(str(path), kind, str(out_dir), opts, frozenset(skip), ocr))
        while True:
            while not conn.poll(_POLL):
                if stop.is_set():
                    self.close(kill=True)
                    return
                if not proc.is_alive():
                    self._forget()
                    raise DeriveCrashed(_crash_message(proc.exitcode))
            try:
                kind_, payload = conn.recv()
            except (EOFError, OSError) as exc:
                proc.join(timeout=5)
                self._forget()
                raise DeriveCrashed(_crash_message(proc.exitcode)) from exc
            if kind_ == "item":
                yield payload
                if stop.is_set():
                    self.close(kill=True)
                    return
            else:
                if payload is not None:
                    raise SourceError(payload)
                return

    def _forget(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(OSError):
                    self._conn.close()
            self._proc = self._conn = None

    def close(self, kill: bool = False) -> None:
        """End the child: asked politely, or at once (``kill``: a cancelled build)."""
        with self._lock:
            proc, conn = self._proc, self._conn
            self._proc = self._conn = None
        if proc is None:
            return
        if not kill:
            with contextlib.suppress(OSError, BrokenPipeError):
                conn.send(None)
            proc.join(timeout=5)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5)
        with contextlib.suppress(OSError):
            conn.close()


def _crash_message(exitcode: int | None) -> str:
    import signal

    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        how = f"was killed by {name}"
    else:
        how = f"ended unexpectedly (exit code {exitcode})"
    return f"the decoder {how} while reading this file (a damaged or unsupported file); other files are not affected"


__all__ = ["DeriveCrashed", "DeriveProcess"]
