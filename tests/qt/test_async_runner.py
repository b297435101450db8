"""AsyncRunner: coroutines run off the GUI thread; results, errors and cancellation as promised."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from vrag_desktop.qt.infra.async_runner import AsyncRunner


def test_result_error_and_cancel(qtbot: Any, reports: list[tuple[str, str, str]]) -> None:
    runner = AsyncRunner("test-async")
    gui = threading.get_ident()
    got: list[Any] = []

    async def where() -> int:
        await asyncio.sleep(0.01)
        return threading.get_ident()

    runner.call(where(), on_done=lambda tid: got.append((tid != gui, threading.get_ident() == gui)))
    qtbot.waitUntil(lambda: bool(got))
    assert got == [(True, True)]

    async def boom() -> None:
        raise ValueError("bad base URL")

    runner.call(boom(), error_title="Connection test failed")
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
    fut = runner.call(forever(), on_done=called.append, on_error=called.append)
    qtbot.wait(50)
    fut.cancel()
    assert cancelled.wait(2)
    qtbot.wait(50)
    assert called == []
    runner.stop(2)
