"""Starts and stops agent runs for the window; events arrive as a Qt signal on the GUI thread.

The run is the core's :class:`~vrag_desktop.core.run.session.RunSession` (the same run path as
``ask`` and evaluations), an async stream run as a coroutine task on the private loop thread
(:mod:`..infra.tasks`).
Stop cancels its task: the core
closes the HTTP stream, saves the run as cancelled and ends within a second.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from vrag_desktop.core.agents.events import AgentError, AgentEvent, Answer
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.infra.controllers import SlotController
from vrag_desktop.qt.infra.tasks import run_coroutine

if TYPE_CHECKING:
    from vrag_desktop.core.run.session import RunSession

ANSWERED, NO_ANSWER, CANCELLED, FAILED = "answered", "no answer", "cancelled", "failed"


@dataclass(frozen=True)
class RunRequest:
    question: str
    agent: str = "vrag"  # vrag | vimrag
    profile: str | None = None  # endpoint profile; None: the active one
    corpora: tuple[str, ...] | None = None  # None: all
    top_k: int = 3
    max_steps: int = 10
    thinking: bool = True


class RunController(SlotController):
    """One run at a time. ``finished(status, run_id)`` always follows ``started(run_id)``."""

    started = Signal(str)
    agentEvent = Signal(object)
    finished = Signal(str, str)

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(ctx, parent)
        self._session: RunSession | None = None
        self._status = ""
        self.stop_requested_at: float | None = None

    def start(self, request: RunRequest) -> None:
        if self.running:
            raise RuntimeError("a run is already in progress; stop it first")
        if not request.question.strip():
            raise ValueError("the question is empty")
        self._session = self._make_session(request)
        self._status = CANCELLED  # until _main begins: a run stopped before it began was cancelled
        self.stop_requested_at = None
        self.slot.start(
            run_coroutine,
            self._main(request.question),
            name="run",
            on_end=self._on_ended,
            error_title="The run failed",
        )
        self.started.emit("")

    def stop(self) -> None:
        """Cancel the run; ``finished`` follows once the core has wound down (saved as cancelled)."""
        if self.slot.running and self.stop_requested_at is None:
            self.stop_requested_at = time.monotonic()
            self.slot.cancel()

    def wait(self, timeout_s: float = 5.0) -> bool:
        """Block until the run ended (shutdown and tests only)."""
        return self.slot.wait(timeout_s)

    # ---- internals
    def _make_session(self, r: RunRequest) -> RunSession:
        """The core's run session for the request (the same run path as ``ask`` and evaluations)."""
        from vrag_desktop.core.run.assemble import AgentOptions, Endpoint, SearchSource
        from vrag_desktop.core.run.session import RunSession, RunSpec

        ctx = self.ctx
        endpoint = Endpoint.from_profile(ctx.profiles, r.profile)
        corpora = list(r.corpora) if r.corpora else None

        def make_searcher() -> Any:
            # the app's loaded model when the corpora were built with it (loaded here, off the GUI thread)
            return SearchSource(corpora=corpora, data_dir=ctx.data_dir, reuse=ctx.embedder()).searcher()

        search = SearchSource(corpora=corpora, data_dir=ctx.data_dir, factory=make_searcher)
        options = AgentOptions.for_agent(
            r.agent, max_steps=r.max_steps, top_k=r.top_k, enable_thinking=r.thinking
        )
        return RunSession(RunSpec(r.agent, endpoint, search, options, ctx.data_dir))

    async def _pump(self, question: str) -> None:
        """The run's events to the window, streamed text joined (:mod:`core.run.coalesce`): a reply
        streamed at hundreds of pieces a second is not hundreds of calls on the GUI thread."""
        from vrag_desktop.core.run.coalesce import DeltaCoalescer

        session = self._session
        assert session is not None
        announced = False
        out = DeltaCoalescer(self.agentEvent.emit)
        try:
            async for ev in session.events(question):
                if not announced and session.run_id:
                    announced = True
                    self.started.emit(session.run_id)
                self._note(ev)
                out.push(ev)
        finally:
            out.flush()  # what was streamed before a stop or a failure still shows

    def _note(self, ev: AgentEvent) -> None:
        if isinstance(ev, Answer) and not ev.forced:
            self._status = ANSWERED
        elif isinstance(ev, AgentError) and not ev.recoverable and self._status != ANSWERED:
            self._status = FAILED

    async def _main(self, question: str) -> None:
        """Completes normally (even when cancelled), its outcome in ``_status``."""
        import asyncio  # loaded by the time a run starts; not before the window shows (cold start)

        self._status = NO_ANSWER
        try:
            await self._pump(question)
        except asyncio.CancelledError:
            self._status = CANCELLED
        except Exception as exc:
            from vrag_desktop.qt.infra.errors import error_sink

            error_sink().report("The run failed", exc)
            self._status = FAILED

    def _on_ended(self) -> None:
        run_id = (self._session.run_id if self._session is not None else None) or ""
        self._session = None
        self.finished.emit(self._status, run_id)
