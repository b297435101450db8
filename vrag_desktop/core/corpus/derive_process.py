"""Deriving (rendering PDF pages, decoding images and video, OCR) in a child process.

Why a process and not a thread: PyMuPDF renders a page with the GIL held (10–100 ms a page, more
for scans), and OCR's pre- and post-processing is Python; in the app's process that time is taken
from the GUI thread, which cannot run a single Python slot meanwhile (the stalls of
docs/benchmarks.md §5). In a child process it costs the window nothing. It also contains what a
hostile or broken file can do to a decoder: a crash in MuPDF or OpenCV ends the child, the source is
recorded as failed with a plain message, and the next source gets a new child.

The child is a fresh interpreter started with :mod:`subprocess` (``python -m`` this module, or the
frozen app with :data:`CHILD_FLAG`), talking over a socket pair with :mod:`multiprocessing`'s
connection protocol. Not ``multiprocessing``'s ``spawn``: that re-imports the caller's main module,
so a user's script without an ``if __name__ == "__main__"`` guard would index itself recursively.
Never ``fork``: the app has threads, Qt and torch. The child runs on idle CPU time only (Linux's
``SCHED_IDLE``; elsewhere at a lower priority than the app) and
streams each :class:`~.derive.Derived` back as soon as it is ready, exactly as
:func:`~.derive.derive` yields them in-process; it ends when the parent does (its socket closes).

The protocol, per file: ``("item", Derived)`` for each item, then ``("done", error, note)``:
``error`` the file's failure (None when it was read), ``note`` what :func:`~.derive.derive` returned
(a page limit reached, a video that stopped decoding; None when there is nothing to say).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Generator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from vrag_desktop.core.corpus.derive import Derived, DeriveOptions, SourceError
from vrag_desktop.core.priority import background_deriving, run_when_idle, thread_nice_max

#: How long the parent waits between checks that the child is still alive.
_POLL = 0.2
#: The frozen app's entry point runs :func:`child_entry` when its first argument is this.
CHILD_FLAG = "--vrag-derive-child"


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
    """The child: derive each job it receives and send back ("item", Derived) … ("done", error, note)."""
    if nice > 0 and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(nice)  # where there is no idle class (not Linux): below the app, at least
        run_when_idle()
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
        note: str | None = None
        try:
            items = derive(
                Path(job.path),
                job.kind,
                Path(job.out_dir),
                job.opts,
                set(job.skip),
                ocr_fn if job.ocr else None,
            )
            while True:
                try:
                    d = next(items)
                except StopIteration as end:
                    note = end.value
                    break
                conn.send(("item", d))
        except SourceError as exc:
            err = str(exc)
        except OSError as exc:
            err = os_error_message(exc)
        except Exception as exc:  # a decoder bug must not end the child
            err = f"unexpected error: {type(exc).__name__}: {exc}"
        conn.send(("done", err, note))


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
        return proc.pid if proc is not None and proc.poll() is None else None

    def _start(self) -> None:
        parent, child = socket.socketpair()
        try:
            proc = subprocess.Popen(
                [*_child_command(), str(child.fileno()), str(self.nice)],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                env=_child_env(),
            )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        if self.nice > 0:
            run_when_idle(proc.pid)  # from its first instruction on: its start-up is work too
        self._proc, self._conn = proc, Connection(parent.detach())

    def derive(
        self,
        path: Path,
        kind: str,
        out_dir: Path,
        opts: DeriveOptions,
        skip: set[int],
        ocr: bool,
        stop: threading.Event,
    ) -> Generator[Derived, None, str | None]:
        """Derived items of ``path``, and the file's note, as :func:`~.derive.derive` gives them;
        raises :class:`SourceError` (or :class:`DeriveCrashed`) for a file that cannot be used.
        Returns early (no note), stopping the child, when ``stop`` is set."""
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            proc, conn = self._proc, self._conn
        conn.send(_Job(str(path), kind, str(out_dir), opts, frozenset(skip), ocr))
        while True:
            while not conn.poll(_POLL):
                if stop.is_set():
                    self.close(kill=True)
                    return None
                if proc.poll() is not None:
                    self._forget()
                    raise DeriveCrashed(_crash_message(proc.returncode))
            try:
                kind_, *payload = conn.recv()
            except (EOFError, OSError) as exc:
                _wait(proc)
                self._forget()
                raise DeriveCrashed(_crash_message(proc.returncode)) from exc
            if kind_ == "item":
                yield payload[0]
                if stop.is_set():
                    self.close(kill=True)
                    return None
            else:
                err, note = payload
                if err is not None:
                    raise SourceError(err)
                return note

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
            _wait(proc)
        if proc.poll() is None:
            proc.kill()
            _wait(proc)
        with contextlib.suppress(OSError):
            conn.close()


def _wait(proc: subprocess.Popen[bytes], timeout: float = 5.0) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)


def _child_command() -> list[str]:
    if getattr(sys, "frozen", False):  # a PyInstaller bundle: its executable dispatches CHILD_FLAG
        return [sys.executable, CHILD_FLAG]
    return [sys.executable, "-m", __name__]


def _child_env() -> dict[str, str]:
    """The parent's environment, with this package importable however the parent found it."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def child_entry(argv: list[str]) -> None:
    """The child's entry: ``argv`` is ``[socket fd, nice]``. It ends quietly when the app is gone
    (closed or killed while a file was being derived): nobody is left to report to."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        _child_main(Connection(int(argv[0])), int(argv[1]))


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


# ---------------------------------------------------------------- a pool of idle children
#: An idle child is ended after this many seconds (it holds the OCR engine: a few hundred MB).
IDLE_SECONDS = 120.0
_idle: list[tuple[DeriveProcess, threading.Timer]] = []
_idle_lock = threading.Lock()


def acquire() -> DeriveProcess:
    """A child for one build: an idle one (started, OCR loaded) or a new one. Give it back with
    :func:`release`; several builds at once get one child each."""
    with _idle_lock:
        if _idle:
            worker, timer = _idle.pop()
            timer.cancel()
            return worker
    # the app's children run on idle CPU time only, unless a ceiling of 0 keeps every worker at the
    # GUI's priority (priority.thread_nice_max: a machine kept busy by other work starved them);
    # the command line's at its own priority
    if background_deriving() and thread_nice_max() > 0:
        return DeriveProcess()
    return DeriveProcess(nice=0)


def release(worker: DeriveProcess) -> None:
    """Keep ``worker`` for the next build (one idle child at most), ended after IDLE_SECONDS."""
    if worker.pid is None:
        return
    with _idle_lock:
        if not _idle:
            timer = threading.Timer(IDLE_SECONDS, _expire, args=(worker,))
            timer.daemon = True
            _idle.append((worker, timer))
            timer.start()
            return
    worker.close()


def _expire(worker: DeriveProcess) -> None:
    with _idle_lock:
        for i, (w, _) in enumerate(_idle):
            if w is worker:
                del _idle[i]
                break
        else:
            return
    worker.close()


def shutdown() -> None:
    """End the idle children (at exit; tests)."""
    with _idle_lock:
        idle = list(_idle)
        _idle.clear()
    for w, timer in idle:
        timer.cancel()
        w.close()


atexit.register(shutdown)

__all__ = ["CHILD_FLAG", "DeriveCrashed", "DeriveProcess", "acquire", "child_entry", "release", "shutdown"]

if __name__ == "__main__":
    child_entry(sys.argv[1:])
