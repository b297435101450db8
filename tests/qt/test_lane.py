"""The decode lane: image decodes run one at a time, the page in view before queued thumbnails, and a
job that raises never stops the lane."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest

from vrag_desktop.qt.infra import tasks
from vrag_desktop.qt.infra.tasks import Task, run_decode
from vrag_desktop.qt.infra.workers import Lane


def _settled(ts: list[Task]) -> Any:
    return lambda: all(t.outcome is not None for t in ts)


def test_one_worker_runs_one_job_at_a_time_and_urgent_jobs_first() -> None:
    lane = Lane("test-lane", workers=1)
    gate, order, done = threading.Event(), [], threading.Event()
    lane.submit(gate.wait)  # holds the only thread while the rest queue
    for i in range(3):
        lane.submit(lambda i=i: order.append(f"thumb{i}"))
    lane.submit(lambda: order.append("page"), urgent=True)
    lane.submit(lambda: order.append("crop"), urgent=True)
    lane.submit(done.set)
    assert lane.pending() == 6
    gate.set()
    assert done.wait(5)
    assert order == ["page", "crop", "thumb0", "thumb1", "thumb2"]


def test_a_job_that_raises_is_logged_and_the_lane_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    lane = Lane("test-lane", workers=1)
    done = threading.Event()
    with caplog.at_level(logging.ERROR, logger="vrag_desktop.qt.infra.workers"):
        lane.submit(lambda: 1 / 0)
        lane.submit(done.set)
        assert done.wait(5)
    assert "test-lane" in caplog.text and "ZeroDivisionError" in caplog.text


def test_a_lane_needs_a_worker() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Lane("none", workers=0)


def test_decodes_never_overlap_and_a_cancelled_one_never_runs(qtbot: Any) -> None:
    running, most, lock = [0], [0], threading.Lock()
    ran: list[int] = []

    def decode(i: int) -> int:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.01)  # a decode releases the GIL, as QImageReader.read does
        with lock:
            running[0] -= 1
        ran.append(i)
        return i

    gate = threading.Event()
    blocker = run_decode(gate.wait, 5)
    ts = [run_decode(decode, i) for i in range(6)]
    ts[2].cancel()
    urgent = run_decode(decode, 99, urgent=True)
    gate.set()
    qtbot.waitUntil(_settled([blocker, urgent, *ts]), timeout=5000)
    assert most[0] == 1
    assert ran == [99, 0, 1, 3, 4, 5]
    assert [t.result for t in ts] == [0, 1, None, 3, 4, 5] and ts[2].outcome == tasks.CANCELLED
    assert tasks.decode_lane().workers == 1
