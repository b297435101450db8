"""Streamed text pieces joined for a viewer: at most one delta per kind every ``window_s``.

Why: a model streams hundreds of pieces a second, and each event handed to the window is a call on
the GUI thread (transcript, graph, evidence view). A person cannot read faster than the window
repaints, so consecutive pieces of the same kind and step are joined into one event and handed on
when the window has passed or any other event arrives, so the order of events never changes and
nothing is lost. The run's saved events are not touched: they are written by the agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from vrag_desktop.core.agents.events import AgentEvent, TextDelta

#: How long a streamed piece may wait for the next ones (the transcript redraws every 100 ms).
WINDOW_S = 0.04


class DeltaCoalescer:
    """Hands events to ``emit`` in order, joining consecutive text deltas; use on one event loop.

    Call :meth:`push` for every event and :meth:`flush` when the stream ends (or is cancelled)."""

    def __init__(self, emit: Callable[[AgentEvent], None], window_s: float = WINDOW_S) -> None:
        self._emit = emit
        self.window_s = window_s
        self._pending: TextDelta | None = None
        self._timer: asyncio.TimerHandle | None = None

    def push(self, ev: AgentEvent) -> None:
        pending = self._pending
        if isinstance(ev, TextDelta):
            if pending is not None and type(pending) is type(ev) and pending.step == ev.step:
                self._pending = replace(pending, content=pending.content + ev.content)
                return
            self.flush()
            self._pending = ev
            if self.window_s > 0:
                self._timer = asyncio.get_running_loop().call_later(self.window_s, self.flush)
            else:
                self.flush()
            return
        self.flush()
        self._emit(ev)

    def flush(self) -> None:
        """Hand on the joined text now (the window passed, another event came, the stream ended)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, None
        if pending is not None:
            self._emit(pending)


__all__ = ["WINDOW_S", "DeltaCoalescer"]
