"""Tasks: generators, blocking calls and coroutines run off the GUI thread; progress, results, errors
and cancellation arrive on the GUI thread as promised, and GUI-side handlers can await them."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import warnings
from collections.abc import Callable, Generator
from typing import Any

import pytest
import shiboken6

from vrag_desktop.core import priority
from vrag_desktop.core.progress import CancelToken
from vrag_desktop.qt.infra import tasks
from vrag_desktop.qt.infra.tasks import Task, TaskSlot, run_call, run_coroutine, run_generator, run_handler


def _count(n: int, done: list[int], delay: float = 0.0) -> Callable[[CancelToken], Generator[int, None, int]]:
    def make(token: CancelToken) -> Generator[int, None, int]:
        for i in range(n):
            if delay:
                time.sleep(delay)
            done.append(i)
            yield i
        return sum(done)

    return make


def _ended(task: Task) -> Callable[[], bool]:
    return lambda: task.outcome is not None


@pytest.fixture(autouse=True)
def fresh_loop_thread() -> Any:
    """Each test ends with the private loop stopped (it starts again on next use)."""
    yield
    tasks.loop_thread().stop(2)


# ---- generators ------------------------------------------------------------------------------
def test_progress_then_result_on_gui_thread(qtbot: Any) -> None:
    seen: list[tuple[Any, bool]] = []
    gui = threading.get_ident()
    order: list[str] = []
    result: list[Any] = []
    w = run_generator(
        _count(5, []),
        "count",
        on_progress=lambda v: seen.append((v, threading.get_ident() == gui)),
        on_done=lambda r: (result.append(r), order.append("finished")),
        on_end=lambda: order.append("end"),
    )
    qtbot.waitUntil(lambda: order == ["finished", "end"])
    assert [v for v, _ in seen] == [0, 1, 2, 3, 4]
    assert all(on_gui for _, on_gui in seen)
    assert result == [10]
    assert w.outcome == "finished" and w.result == 10 and w.done()


def test_cancel_stops_at_next_yield_and_keeps_work(qtbot: Any) -> None:
    done: list[int] = []
    order: list[str] = []
    box: list[Task] = []
    w = run_generator(
        _count(1000, done, delay=0.01),
        "slow",
        on_progress=lambda v: box[0].cancel() if v == 3 else None,
        on_done=lambda _r: order.append("finished"),
        on_cancelled=lambda: order.append("cancelled"),
        on_end=lambda: order.append("end"),
    )
    box.append(w)
    qtbot.waitUntil(lambda: order == ["cancelled", "end"], timeout=5000)
    assert 4 <= len(done) < 50
    assert w.wait(2)


def test_generator_error_reaches_the_sink(qtbot: Any, reports: list[tuple[str, str, str]]) -> None:
    def make(token: CancelToken) -> Generator[int, None, None]:
        yield 1
        raise OSError(28, "No space left on device", "/data/x")

    w = run_generator(make, "build", error_title="Indexing failed")
    qtbot.waitUntil(_ended(w))
    qtbot.waitUntil(lambda: bool(reports))
    assert reports[0] == ("error", "Indexing failed", "No space left on device (/data/x)")
    assert w.outcome == "failed" and isinstance(w.error, OSError)


def test_generator_cancelled_before_it_starts_never_runs(qtbot: Any) -> None:
    gate = threading.Event()
    ran: list[int] = []
    got: list[str] = []

    def make(token: CancelToken) -> Generator[int, None, None]:
        gate.wait(5)

        def body() -> Generator[int, None, None]:
            ran.append(1)
            yield 1

        return body()

    w = run_generator(
        make, "gated", on_done=lambda _r: got.append("done"), on_cancelled=lambda: got.append("c")
    )
    w.cancel()
    gate.set()
    qtbot.waitUntil(_ended(w))
    assert got == ["c"] and ran == []


# ---- blocking calls --------------------------------------------------------------------------
def test_run_call_callbacks(qtbot: Any, reports: list[tuple[str, str, str]]) -> None:
    got: list[Any] = []
    gui = threading.get_ident()
    run_call(
        lambda: threading.get_ident(), on_done=lambda r: got.append((r != gui, threading.get_ident() == gui))
    )
    qtbot.waitUntil(lambda: bool(got))
    assert got == [(True, True)]

    run_call(lambda: 1 / 0, error_title="Thumbnail failed")
    qtbot.waitUntil(lambda: bool(reports))
    assert reports[0][:2] == ("error", "Thumbnail failed")

    errors: list[BaseException] = []
    t = run_call(lambda: 1 / 0, on_error=errors.append, error_title="unused")
    qtbot.waitUntil(_ended(t))
    assert len(errors) == 1 and isinstance(errors[0], ZeroDivisionError) and len(reports) == 1


def test_call_cancelled_before_it_starts_never_runs(qtbot: Any) -> None:
    gate = threading.Event()
    blockers = [run_call(gate.wait, 5) for _ in range(tasks.pool()._max_workers)]
    ran: list[int] = []
    got: list[str] = []
    t = run_call(
        lambda: ran.append(1),
        on_done=got.append,
        on_error=got.append,
        on_cancelled=lambda: got.append("cancelled"),
    )
    t.cancel()
    gate.set()
    qtbot.waitUntil(lambda: _ended(t)() and all(b.outcome for b in blockers))
    assert ran == [] and got == ["cancelled"]


def test_callbacks_run_on_the_gui_thread_for_a_task_made_elsewhere(qtbot: Any) -> None:
    gui = threading.get_ident()
    got: list[bool] = []
    run_call(lambda: run_call(lambda: 1, on_done=lambda _r: got.append(threading.get_ident() == gui)))
    qtbot.waitUntil(lambda: bool(got))
    assert got == [True]


# ---- coroutines ------------------------------------------------------------------------------
def test_coroutine_result_error_and_cancel(qtbot: Any, reports: list[tuple[str, str, str]]) -> None:
    gui = threading.get_ident()
    got: list[Any] = []

    async def where() -> int:
        await asyncio.sleep(0.01)
        return threading.get_ident()

    run_coroutine(where(), on_done=lambda tid: got.append((tid != gui, threading.get_ident() == gui)))
    qtbot.waitUntil(lambda: bool(got))
    assert got == [(True, True)]

    async def boom() -> None:
        raise ValueError("bad base URL")

    run_coroutine(boom(), error_title="Connection test failed")
    qtbot.waitUntil(lambda: bool(reports))
    assert reports[0] == ("error", "Connection test failed", "bad base URL")

    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    called: list[Any] = []
    t = run_coroutine(forever(), on_done=called.append, on_error=called.append)
    qtbot.wait(50)
    t.cancel()
    assert cancelled.wait(2)
    qtbot.waitUntil(_ended(t))
    assert called == [] and t.outcome == "cancelled"


def test_coroutine_cancelled_before_it_starts_never_runs(qtbot: Any) -> None:
    async def hog() -> None:
        time.sleep(0.3)  # holds the loop thread, so the next coroutine waits its turn

    ran: list[int] = []

    async def later() -> None:
        ran.append(1)

    run_coroutine(hog())
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "coroutine ... was never awaited"
        t = run_coroutine(later(), on_done=ran.append)
        t.cancel()
        qtbot.waitUntil(_ended(t))
    assert ran == [] and t.outcome == "cancelled"


# ---- awaiting on the qasync loop -------------------------------------------------------------
def test_gui_handler_awaits_each_kind(qtbot: Any, reports: list[tuple[str, str, str]]) -> None:
    gui = threading.get_ident()
    got: list[Any] = []

    async def probe() -> str:
        await asyncio.sleep(0.01)
        return "ok"

    async def flow() -> None:
        checked = await run_coroutine(probe())
        got.append((checked, threading.get_ident() == gui))
        saved = await run_call(lambda: threading.get_ident())
        got.append(saved != gui)
        total = await run_generator(_count(3, []), "count")
        got.append(total)
        try:
            await run_call(lambda: 1 / 0)
        except ZeroDivisionError:
            got.append("raised")

    handler = run_handler(flow())
    qtbot.waitUntil(handler.done)
    assert got == [("ok", True), True, 3, "raised"]
    assert reports == []  # an awaited failure is the awaiter's to handle


def test_awaiting_a_cancelled_task_cancels_the_handler(qtbot: Any) -> None:
    gate = threading.Event()
    seen: list[str] = []

    async def flow() -> None:
        t = run_call(gate.wait, 5)
        t.cancel()
        gate.set()  # the work can end only once it was cancelled (set before, it could finish first)
        try:
            await t
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    handler = run_handler(flow())
    qtbot.waitUntil(handler.done)
    assert seen == ["cancelled"] and handler.cancelled()


def test_a_handler_that_fails_reports_to_the_sink(qtbot: Any, reports: list[tuple[str, str, str]]) -> None:
    async def flow() -> None:
        await run_call(lambda: int("x"))

    handler = run_handler(flow(), error_title="Could not save")
    qtbot.waitUntil(handler.done)
    qtbot.waitUntil(lambda: bool(reports))
    assert reports[0][:2] == ("error", "Could not save")


# ---- shutdown --------------------------------------------------------------------------------
def test_shutdown_cancels_everything_and_waits(qtbot: Any) -> None:
    done: list[int] = []
    w = run_generator(_count(1000, done, delay=0.01), "index-big")
    c = run_coroutine(asyncio.sleep(60))
    qtbot.waitUntil(lambda: len(done) >= 2)
    assert {t.name for t in tasks.live_tasks()} >= {"index-big"}
    assert tasks.shutdown(5) == []
    assert w.done() and c.done() and not tasks.live_tasks()
    qtbot.waitUntil(lambda: w.outcome == "cancelled" and c.outcome == "cancelled")


def test_a_deleted_objects_method_is_not_called(qtbot: Any) -> None:
    from PySide6.QtCore import QObject

    class Panel(QObject):
        def __init__(self) -> None:
            super().__init__()
            self.got: list[Any] = []

        def show(self, value: Any) -> None:
            self.got.append(value)

    gate = threading.Event()
    alive, closed = Panel(), Panel()
    got = closed.got
    a = run_call(lambda: 1, on_done=alive.show)
    b = run_call(lambda: gate.wait(5), on_done=closed.show)
    closed.deleteLater()
    qtbot.waitUntil(lambda: not shiboken6.isValid(closed))
    gate.set()
    qtbot.waitUntil(lambda: _ended(a)() and _ended(b)())
    assert alive.got == [1] and got == []


# ---- one task of a kind ----------------------------------------------------------------------
def test_a_slot_hears_only_its_newest_task_and_empties_before_on_end(qtbot: Any) -> None:
    slot = TaskSlot()
    got: list[Any] = []
    gate = threading.Event()
    old = slot.start(
        run_call, lambda: gate.wait(5) and "old", on_done=got.append, on_end=lambda: got.append("old end")
    )
    new = slot.start(
        run_call, lambda: "new", on_done=got.append, on_end=lambda: got.append(("new end", slot.running))
    )
    assert slot.running and slot.task is new and old.cancelled
    gate.set()
    qtbot.waitUntil(lambda: _ended(old)() and _ended(new)())
    assert "old" not in got and got.count("new") == 1 and ("new end", False) in got and "old end" in got
    assert not slot.running and slot.wait(0)


def test_a_superseded_result_already_on_its_way_is_not_heard(qtbot: Any) -> None:
    slot = TaskSlot()
    got: list[Any] = []
    old = slot.start(run_call, lambda: "old", on_done=got.append)
    assert old.wait(5)  # its outcome is posted, not yet delivered: cancelling it no longer helps
    slot.start(run_call, lambda: "new", on_done=got.append)
    qtbot.waitUntil(lambda: not slot.running)
    assert got == ["new"]


def test_a_dropped_task_is_not_heard(qtbot: Any) -> None:
    slot = TaskSlot()
    got: list[Any] = []
    t = slot.start(run_call, lambda: "late", on_done=got.append, on_end=lambda: got.append("end"))
    assert t.wait(5)
    slot.drop()
    assert not slot.running
    qtbot.waitUntil(_ended(t))
    assert got == ["end"]


@pytest.mark.skipif(not hasattr(os, "getpriority") or os.name != "posix", reason="thread niceness is Linux's")
def test_workers_run_below_the_gui_thread_and_the_gui_thread_keeps_its_priority(
    qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generator task with ``nice`` and the async loop thread (``VRAG_ASYNC_NICE``) lower their
    own thread only; a bad value of the variable falls back to the default. ``VRAG_THREAD_NICE_MAX``
    caps how far a worker goes (the suite sets it to 0; lifted here)."""
    monkeypatch.delenv(priority.THREAD_NICE_MAX_ENV, raising=False)
    gui = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    seen: dict[str, int] = {}

    def make(token: CancelToken) -> Generator[int, None, None]:
        seen["generator"] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        yield 1

    task = run_generator(make, "niced", nice=7)
    qtbot.waitUntil(_ended(task), timeout=5000)

    async def where() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    tasks.loop_thread().stop()
    monkeypatch.setenv(priority.ASYNC_NICE_ENV, "4")
    co = run_coroutine(where(), on_done=lambda v: seen.setdefault("loop", v))
    qtbot.waitUntil(_ended(co), timeout=5000)
    assert seen == {"generator": gui + 7, "loop": min(19, gui + 4)}
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == gui
    monkeypatch.setenv(priority.ASYNC_NICE_ENV, "fast")
    assert priority.async_nice() == priority._ASYNC_NICE

    monkeypatch.setenv(priority.THREAD_NICE_MAX_ENV, "3")
    capped = run_generator(make, "capped", nice=7)
    qtbot.waitUntil(_ended(capped), timeout=5000)
    assert seen["generator"] == max(gui, 3)
    monkeypatch.setenv(priority.THREAD_NICE_MAX_ENV, "many")
    assert priority.thread_nice_max() == 19


def test_held_starts_run_once_released_in_order_and_a_cancelled_one_never(qtbot: Any) -> None:
    """While the window is built (cold start) tasks are held; released, they run in the order they
    were started; one cancelled meanwhile never runs and ends cancelled."""
    ran: list[str] = []
    tasks.hold_starts()
    try:
        first = run_call(ran.append, "first")
        dropped = run_call(ran.append, "dropped")
        gen = run_generator(_count(2, []), "held-gen")
        time.sleep(0.2)
        assert ran == [] and first.is_running() and not gen.done()
        dropped.cancel()
    finally:
        tasks.release_starts()
    for t in (first, dropped, gen):
        qtbot.waitUntil(_ended(t), timeout=5000)
    assert ran == ["first"]
    assert (first.outcome, dropped.outcome, gen.outcome, gen.result) == (
        "finished",
        "cancelled",
        "finished",
        1,
    )
    late = run_call(ran.append, "not held")  # released: starts at once again
    qtbot.waitUntil(_ended(late), timeout=5000)
    assert ran == ["first", "not held"]
