"""The one way the app runs work off the GUI thread, and hears back on it.

Three kinds of work, one :class:`Task` handle:

* :func:`run_generator` — a core generator yielding progress (see :mod:`vrag_desktop.core.progress`),
  in its own thread, optionally below the GUI's priority. Cancelling sets the :class:`CancelToken`
  it watches and closes it at its next yield: what was done is kept, as core promises.
* :func:`run_call` — a plain blocking call (file stats, keyring, run lists) on a small shared pool;
  :func:`run_decode` — an image decode (pages, thumbnails) on one thread, the page in view first.
* :func:`run_coroutine` — a core coroutine (agents, vLLM supervision, HTTP) on a private asyncio loop
  thread: agents do 20–120 ms of CPU work between awaits, which would stall the window on the GUI
  thread's qasync loop. Cancelling cancels its asyncio task.

Every outcome comes back through one immortal dispatcher on the GUI thread, so callbacks run there
(even for tasks created on another thread) and nothing Qt is collected with deliveries pending (a
QObject collected on a pool thread with queued signals pending segfaulted the suite). A task ends
once: finished, failed or cancelled; after :meth:`Task.cancel` neither ``on_done`` nor ``on_error``
runs. A failure goes to ``on_error``, else to the awaiting coroutine, else to the error sink.

GUI-side ``async`` handlers run on the qasync loop (:func:`run_handler`) and ``await`` tasks there.
See docs/threading.md.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, TypedDict

from PySide6.QtCore import QCoreApplication, QObject, Qt, Signal

from vrag_desktop.core.priority import lower_thread_priority
from vrag_desktop.core.progress import CancelToken
from vrag_desktop.qt.infra.alive import unless_deleted
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.workers import decode_lane, loop_thread, pool

if TYPE_CHECKING:
    import asyncio

    from typing_extensions import Unpack

PROGRESS, FINISHED, FAILED, CANCELLED = "progress", "finished", "failed", "cancelled"
_ENDINGS = (FINISHED, FAILED, CANCELLED)


def _cancelled_error(error: BaseException | None) -> bool:
    """A cancellation, from a thread's future or an asyncio task (asyncio is imported on first use,
    after the window shows: no asyncio error can exist before)."""
    aio = sys.modules.get("asyncio")
    return isinstance(error, concurrent.futures.CancelledError) or (
        aio is not None and isinstance(error, aio.CancelledError)
    )


_LIVE: set[Task] = set()  # started, outcome not yet delivered on the GUI thread
_LIVE_LOCK = threading.Lock()
_HANDLERS: set[asyncio.Task[Any]] = set()  # asyncio keeps only weak references to tasks
_HELD: list[tuple[Task, Callable[[], object]]] | None = None  # started while held: launched on release


def hold_starts() -> None:
    """Queue the work of tasks started from now on until :func:`release_starts`. The app holds it
    while the window is built: the panels' first look-ups (keyring, GPU, leftover servers) import
    hundreds of milliseconds of libraries holding the GIL, which slowed the window's first show."""
    global _HELD
    with _LIVE_LOCK:
        if _HELD is None:
            _HELD = []


def release_starts() -> None:
    """Launch the work queued by :func:`hold_starts`, in the order it was started."""
    global _HELD
    with _LIVE_LOCK:
        held, _HELD = _HELD or [], None
    for task, launch in held:
        try:
            launch()
        except Exception as exc:  # heard as the task's failure (its caller is long gone)
            task._finish(exc)


class _Dispatcher(QObject):
    """Lives on the GUI thread for the whole process; carries every task's news there."""

    relay = Signal(object, str, object)  # task, kind, value

    def __init__(self) -> None:
        super().__init__()
        self.relay.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def _deliver(self, task: Task, kind: str, value: object) -> None:
        task._deliver(kind, value)


_DISPATCHER: list[_Dispatcher] = []  # exactly one, never collected
_DISPATCHER_LOCK = threading.Lock()


def _dispatcher() -> _Dispatcher:
    if not _DISPATCHER:
        with _DISPATCHER_LOCK:
            if not _DISPATCHER:
                d = _Dispatcher()
                app = QCoreApplication.instance()
                if app is not None and d.thread() is not app.thread():
                    d.moveToThread(app.thread())  # made off the GUI thread: deliver on the GUI thread anyway
                _DISPATCHER.append(d)
    return _DISPATCHER[0]


class TaskOptions(TypedDict, total=False):
    """What every ``run_*`` takes besides the work itself (see :class:`Task`)."""

    on_progress: Callable[[Any], None] | None
    on_done: Callable[[Any], None] | None
    on_error: Callable[[BaseException], None] | None
    on_cancelled: Callable[[], None] | None
    on_end: Callable[[], None] | None
    error_title: str | None
    report: bool


class Task:
    """One piece of work off the GUI thread: cancel it, wait for it, or ``await`` it on the GUI loop.

    Callbacks run on the GUI thread: ``on_progress(value)`` (generators), then exactly one of
    ``on_done(result)``, ``on_error(exc)`` or ``on_cancelled()``, then ``on_end()``.
    """

    def __init__(
        self,
        name: str,
        *,
        on_progress: Callable[[Any], None] | None = None,
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        on_cancelled: Callable[[], None] | None = None,
        on_end: Callable[[], None] | None = None,
        error_title: str | None = None,
        report: bool = True,
    ) -> None:
        self.name = name
        self.token = CancelToken()
        self.result: Any = None
        self.error: BaseException | None = None
        self.outcome: str | None = None  # finished | failed | cancelled, once delivered
        self._on_progress, self._on_done = unless_deleted(on_progress), unless_deleted(on_done)
        self._on_error, self._on_cancelled = unless_deleted(on_error), unless_deleted(on_cancelled)
        self._on_end = unless_deleted(on_end)
        self._error_title = error_title or "Background task failed"
        self._report = report
        self._ended = threading.Event()  # the work itself is over (set on the worker's side)
        self._started = False
        self._cancel_hook: Callable[[], None] | None = None
        self._waiters: list[asyncio.Future[Any]] = []

    def __repr__(self) -> str:
        return f"<Task {self.name!r} {self.outcome or ('running' if self.is_running() else 'pending')}>"

    # ---- control (any thread)
    def cancel(self) -> None:
        """Ask the work to stop; what it finished is kept. Its ``on_done``/``on_error`` will not run."""
        self.token.cancel()
        if self._cancel_hook is not None:
            self._cancel_hook()

    @property
    def cancelled(self) -> bool:
        return self.token.cancelled

    def done(self) -> bool:
        """True once the work is over (its outcome may still be on its way to the GUI thread)."""
        return self._ended.is_set()

    def is_running(self) -> bool:
        return self._started and not self._ended.is_set()

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the work is over (shutdown and tests only; never on the loop thread for a
        coroutine). True when it is."""
        return self._ended.wait(timeout_s) if self._started else True

    def __await__(self) -> Generator[Any, None, Any]:
        """``await task`` in a coroutine on the GUI thread's loop: its result, its exception, or
        ``CancelledError`` when it was cancelled. Cancelling the awaiting coroutine cancels the task."""
        import asyncio

        fut = asyncio.get_running_loop().create_future()
        if self.outcome is not None:
            self._resolve(fut)
        else:
            self._waiters.append(fut)
        try:
            return (yield from fut.__await__())
        except asyncio.CancelledError:
            if self.outcome is None:
                self.cancel()
            raise

    # ---- worker side
    def _start(self, launch: Callable[[], object]) -> Task:
        if self._started:
            raise RuntimeError(f"task {self.name!r} already started")
        _dispatcher()  # on the caller's thread first, so the GUI-thread carrier exists before any news
        self._started = True
        with _LIVE_LOCK:
            _LIVE.add(self)
            if _HELD is not None:  # the window is being built: its work starts once it shows
                _HELD.append((self, launch))
                return self
        self._launch(launch)
        return self

    def _launch(self, launch: Callable[[], object]) -> None:
        try:
            launch()
        except BaseException:
            with _LIVE_LOCK:
                _LIVE.discard(self)
            self._ended.set()
            raise

    def _post(self, kind: str, value: object = None) -> None:
        _dispatcher().relay.emit(self, kind, value)

    def _end(self, kind: str, value: object = None) -> None:
        """Record the outcome; the last thing the worker does."""
        if kind == FINISHED:
            self.result = value
        elif isinstance(value, BaseException):
            self.error = value  # kept even when cancelled: a handler may want to know
        self._ended.set()  # first: callbacks on the GUI thread see the work over
        self._post(kind, value)

    def _settle(self, run: Callable[[], Any]) -> None:
        """Run ``run()`` and end with its outcome."""
        try:
            result = run()
        except BaseException as exc:
            self._finish(exc)
        else:
            self._finish(None, result)

    def _finish(self, error: BaseException | None, result: Any = None) -> None:
        """End with the outcome of work that returned ``result`` or raised ``error``: once cancelled,
        it counts as cancelled whatever happened (the error is kept in :attr:`error`)."""
        if _cancelled_error(error):
            self._end(CANCELLED)
        elif error is not None:
            self._end(CANCELLED if self.token.cancelled else FAILED, error)
        else:
            self._end(CANCELLED if self.token.cancelled else FINISHED, result)

    # ---- GUI side
    def _deliver(self, kind: str, value: object) -> None:
        if kind == PROGRESS:
            if self._on_progress is not None:
                self._on_progress(value)
            return
        self.outcome = kind
        with _LIVE_LOCK:
            _LIVE.discard(self)
        waiters, self._waiters = self._waiters, []
        try:
            if kind == FINISHED and self._on_done is not None:
                self._on_done(value)
            elif kind == CANCELLED and self._on_cancelled is not None:
                self._on_cancelled()
            elif kind == FAILED and isinstance(value, BaseException):
                if self._on_error is not None:
                    self._on_error(value)
                elif self._report and not waiters:
                    error_sink().report(self._error_title, value)
        finally:
            for fut in waiters:
                self._wake(fut)
            if self._on_end is not None:
                self._on_end()

    def _wake(self, fut: asyncio.Future[Any]) -> None:
        """Resolve ``fut`` on its own loop (the GUI thread's, or another thread's)."""
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody is waiting
            fut.get_loop().call_soon_threadsafe(self._resolve, fut)

    def _resolve(self, fut: asyncio.Future[Any]) -> None:
        if fut.done():
            return
        if self.outcome == FINISHED:
            fut.set_result(self.result)
        elif self.outcome == FAILED and self.error is not None:
            fut.set_exception(self.error)
        else:
            fut.cancel()


def run_generator(
    make: Callable[[CancelToken], Generator[Any, None, Any]],
    name: str,
    *,
    nice: int = 0,
    **options: Unpack[TaskOptions],
) -> Task:
    """Drive ``make(token)`` in a new thread; ``nice`` > 0 runs it (and threads it starts) below the
    GUI thread's priority. Keyword arguments as for :class:`Task`."""
    task = Task(name, **options)

    def drive() -> Any:
        lower_thread_priority(nice)
        if task.token.cancelled:
            return None
        gen = make(task.token)
        try:
            while not task.token.cancelled:
                try:
                    value = next(gen)
                except StopIteration as stop:
                    return stop.value
                task._post(PROGRESS, value)
            return None
        finally:
            with contextlib.suppress(BaseException):  # an error in flight is the one to report
                gen.close()

    def launch() -> None:
        thread = threading.Thread(target=task._settle, args=(drive,), name=f"vrag-{name}", daemon=True)
        thread.start()

    return task._start(launch)


def run_call(
    fn: Callable[..., Any], *args: Any, name: str | None = None, **options: Unpack[TaskOptions]
) -> Task:
    """Call ``fn(*args)`` on the shared pool. Cancelled before it starts, it never runs; cancelled
    while it runs, its result is dropped. Keyword arguments as for :class:`Task`."""
    task = Task(name or "Background task", **options)
    return task._start(lambda: pool().submit(_call_job(task, fn, args)))


def run_decode(
    fn: Callable[..., Any],
    *args: Any,
    urgent: bool = False,
    name: str | None = None,
    **options: Unpack[TaskOptions],
) -> Task:
    """:func:`run_call` for an image decode, on :func:`decode_lane`: ``urgent`` for what the user
    is looking at now (it runs before the thumbnails queued earlier)."""
    task = Task(name or "Reading an image", **options)
    return task._start(lambda: decode_lane().submit(_call_job(task, fn, args), urgent=urgent))


def _call_job(task: Task, fn: Callable[..., Any], args: tuple[Any, ...]) -> Callable[[], None]:
    """``fn(*args)`` settling ``task``; skipped when the task was cancelled before its turn."""

    def job() -> None:
        task._settle(lambda: None if task.token.cancelled else fn(*args))

    return job


def run_coroutine(
    coro: Coroutine[Any, Any, Any], *, name: str | None = None, **options: Unpack[TaskOptions]
) -> Task:
    """Run ``coro`` on the private loop thread; cancelling cancels its asyncio task (the core treats
    that as "stop now"). Keyword arguments as for :class:`Task`."""
    import asyncio

    task = Task(name or "Background task", **options)
    runner = loop_thread()
    current: list[asyncio.Task[Any]] = []  # touched on the loop thread only

    async def drive() -> None:
        if task.token.cancelled:  # cancelled before it began: never start it
            coro.close()
            task._end(CANCELLED)
            return
        me = asyncio.current_task()
        assert me is not None
        current.append(me)
        try:
            result = await coro
        except BaseException as exc:
            task._finish(exc)
        else:
            task._finish(None, result)

    def cancel_in_loop() -> None:  # on the loop thread: before drive() began, or while it runs
        for t in current:
            t.cancel()

    task._cancel_hook = lambda: runner.call_soon(cancel_in_loop)
    return task._start(lambda: asyncio.run_coroutine_threadsafe(drive(), runner.loop))


class TaskSlot:
    """The one task of a kind that an object runs at a time (an agent run, an evaluation, the reading
    of a list): :attr:`task` while it runs, ``None`` again before its ``on_end``.

    :meth:`start` cancels the task before and hears only the new one: a superseded task's
    ``on_progress``, ``on_done`` and ``on_error`` never run, even when its outcome was already on its
    way to the GUI thread (its ``on_cancelled`` and ``on_end`` do). Work that must not be replaced
    checks :attr:`running` first.
    """

    def __init__(self) -> None:
        self.task: Task | None = None

    @property
    def running(self) -> bool:
        return self.task is not None

    def start(self, run: Callable[..., Task], *args: Any, **options: Any) -> Task:
        """``run(*args, **options)`` (:func:`run_generator`, :func:`run_call` or :func:`run_coroutine`)
        in place of the task before, which is dropped."""
        self.drop()
        mine: list[Task] = []  # filled before any news: it is delivered on the GUI thread, later

        def heard(cb: Callable[..., None] | None) -> Callable[..., None] | None:
            cb = unless_deleted(cb)
            if cb is None:
                return None

            def call(*values: Any) -> None:
                if self.task is mine[0]:
                    cb(*values)

            return call

        on_end = unless_deleted(options.pop("on_end", None))

        def end() -> None:
            if self.task is mine[0]:
                self.task = None
            if on_end is not None:
                on_end()

        for key in ("on_progress", "on_done", "on_error"):
            if options.get(key) is not None:
                options[key] = heard(options[key])
        task = self.task = run(*args, on_end=end, **options)
        mine.append(task)
        return task

    def cancel(self) -> None:
        """Ask the task to stop (it stays in the slot until its ``on_end``)."""
        if self.task is not None:
            self.task.cancel()

    def drop(self) -> None:
        """Cancel the task and stop hearing it, as :meth:`start` does with the one before; the slot is
        empty at once."""
        self.cancel()
        self.task = None

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the task's work is over (shutdown and tests only). True when it is."""
        return self.task is None or self.task.wait(timeout_s)


def run_handler(
    coro: Coroutine[Any, Any, Any], *, error_title: str = "Unexpected error"
) -> asyncio.Task[Any]:
    """Run a GUI-side ``async`` handler on the GUI thread's (qasync) loop, where it may ``await``
    tasks. An exception it lets escape goes to the error sink; cancellation ends it quietly."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    handler = loop.create_task(coro)
    _HANDLERS.add(handler)

    def finished(t: asyncio.Task[Any]) -> None:
        _HANDLERS.discard(t)
        if not t.cancelled() and t.exception() is not None:
            error_sink().report(error_title, t.exception() or RuntimeError(error_title))

    handler.add_done_callback(finished)
    return handler


def live_tasks() -> list[Task]:
    """Tasks whose work is still going."""
    with _LIVE_LOCK:
        return [t for t in _LIVE if t.is_running()]


def shutdown(timeout_s: float = 5.0, loop_timeout_s: float = 3.0) -> list[str]:
    """Cancel every task and wait for them (bounded), then stop the private loop. Returns the names
    of tasks still running."""
    with _LIVE_LOCK:
        held = [task for task, _ in _HELD or []]
    for task in held:  # a window closed before it painted: its held look-ups end as cancelled
        task.cancel()
    release_starts()
    tasks = live_tasks()
    for t in tasks:
        t.cancel()
    deadline = time.monotonic() + timeout_s
    stuck = [t.name for t in tasks if not t.wait(max(0.0, deadline - time.monotonic()))]
    loop_thread().stop(loop_timeout_s)
    return stuck
