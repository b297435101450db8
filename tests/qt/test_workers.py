"""GeneratorWorker / run_in_thread: results and errors arrive on the GUI thread; cancel keeps what was done."""

from __future__ import annotations

import threading
import time
from typing import Any

from PySide6.QtCore import QThread

from vrag_desktop.core.progress import CancelToken
from vrag_desktop.qt.infra.workers import GeneratorWorker, run_in_thread


def _count(n: int, done: list[int], delay: float = 0.0):  # type: ignore[no-untyped-def]
    def make(token: CancelToken):  # type: ignore[no-untyped-def]
        for i in range(n):
            if delay:
                time.sleep(delay)
            done.append(i)
            yield i
        return sum(done)

    return make


def test_progress_then_result_on_gui_thread(qtbot: Any) -> None:
    seen: list[tuple[Any, bool]] = []
    w = GeneratorWorker(_count(5, []), "count")
    gui = QThread.currentThread()
    result: list[Any] = []
    w.progress.connect(lambda v: seen.append((v, QThread.currentThread() is gui)))
    w.finished.connect(result.append)
    with qtbot.waitSignals([w.finished, w.done], order="strict"):
        w.start()
    assert [v for v, _ in seen] == [0, 1, 2, 3, 4]
    assert all(on_gui for _, on_gui in seen)
    assert result == [10]


def test_cancel_stops_at_next_yield_and_keeps_work(qtbot: Any) -> None:
    done: list[int] = []
    w = GeneratorWorker(_count(1000, done, delay=0.01), "slow")
    w.progress.connect(lambda v: w.cancel() if v == 3 else None)
    with qtbot.waitSignals([w.cancelled, w.done], order="strict", timeout=5000):
        w.start()
    assert 4 <= len(done) < 50
    assert w.wait(2)


def test_error_reaches_the_sink(qtbot: Any, reports: list[tuple[str, str, str]]) -> None:
    def make(token: CancelToken):  # type: ignore[no-untyped-def]
        yield 1
        raise OSError(28, "No space left on device", "/data/x")

    w = GeneratorWorker(make, "build", error_title="Indexing failed")
    with qtbot.waitSignals([w.failed, w.done], order="strict"):
        w.start()
    qtbot.waitUntil(lambda: bool(reports))
    assert reports[0] == ("error", "Indexing failed", "No space left on device (/data/x)")


def test_run_in_thread_callbacks(qtbot: Any, reports: list[tuple[str, str, str]]) -> None:
    got: list[Any] = []
    gui = threading.get_ident()
    run_in_thread(
        lambda: threading.get_ident(), on_done=lambda r: got.append((r != gui, threading.get_ident() == gui))
    )
    qtbot.waitUntil(lambda: bool(got))
    assert got == [(True, True)]

    run_in_thread(lambda: 1 / 0, error_title="Thumbnail failed")
    qtbot.waitUntil(lambda: bool(reports))
    assert reports[0][:2] == ("error", "Thumbnail failed")
