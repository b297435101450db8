"""Streamed text pieces joined for a viewer: at most one delta per kind every ``window_s``.

Why: a model streams hundreds of pieces a second, and each event handed to the window is a call on
the GUI thread (transcript, graph, evidence view). A person cannot read faster than the window
repaints, so the pieces of one step are joined, one event per kind (raw text and thinking come
interleaved: each raw piece is followed by the thinking inside it), and handed on in the order each
kind first came when the window has passed or any other event arrives. Every view keeps a block per
kind, so it draws the same; nothing is lost. The run's saved events are not touched: the agent
writes them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

from vrag_desktop.core.agents.events import AgentEvent, TextDelta

#: How long a streamed piece may wait for the next ones (the transcript redraws every 100 ms).
WINDOW_S = 0.04


class DeltaCoalescer:
    """Hands events to ``emit`` in order, joining a step's text deltas per kind; use on one loop.

    Call :meth:`push` for every event and :meth:`flush` when the stream ends (or is cancelled)."""

    def __init__(self, emit: Callable[[AgentEvent], None], window_s: float = WINDOW_S) -> None:
        self._emit = emit
        self.window_s = window_s
        # per kind, in the order the kinds first came: the first piece and every piece's text
        self._pending: dict[type, tuple[TextDelta, list[str]]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def push(self, ev: AgentEvent) -> None:
        if not isinstance(ev, TextDelta) or self.window_s <= 0:
            self.flush()
            self._emit(ev)
            return
        if self._pending and next(iter(self._pending.values()))[0].step != ev.step:
            self.flush()
        self._pending.setdefault(type(ev), (ev, []))[1].append(ev.content)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.window_s, self.flush)

    def flush(self) -> None:
        """Hand on the joined text now (the window passed, another event came, the stream ended)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, {}
        for first, parts in pending.values():
            self._emit(first if len(parts) == 1 else replace(first, content="".join(parts)))


__all__ = ["WINDOW_S", "DeltaCoalescer"]
