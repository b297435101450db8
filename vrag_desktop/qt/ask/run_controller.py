"""Starts and stops agent runs for the window; events arrive as a Qt signal on the GUI thread.

The agent (core, async) runs on the :class:`AsyncRunner` loop. Stop cancels its task: the core
closes the HTTP stream, saves the run as cancelled and ends within a second.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from vrag_desktop.core.agents.events import AgentError, AgentEvent, Answer
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.infra.async_runner import AsyncRunner, async_runner

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


class RunController(QObject):
    """One run at a time. ``finished(status, run_id)`` always follows ``started(run_id)``."""

    started = Signal(str)
    event = Signal(object)
    finished = Signal(str, str)
    _ended = Signal(str)

    def __init__(
        self, ctx: AppContext, parent: QObject | None = None, runner: AsyncRunner | None = None
    ) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.runner = runner or async_runner()
        self._future: concurrent.futures.Future[Any] | None = None
        self._agent: Any = None
        self._status = ""
        self._task: asyncio.Task[None] | None = None
        self._cancel_pending = False
        self.stop_requested_at: float | None = None
        self._ended.connect(self._on_ended)

    @property
    def running(self) -> bool:
        return self._future is not None

    def start(self, request: RunRequest) -> None:
        if self._future is not None:
            raise RuntimeError("a run is already in progress; stop it first")
        if not request.question.strip():
            raise ValueError("the question is empty")
        self._agent = self._make_agent(request)
        self._status = NO_ANSWER
        self.stop_requested_at = None
        self._task = None
        self._cancel_pending = False
        self._future = self.runner.submit(self._main(request.question))
        self.started.emit("")

    def stop(self) -> None:
        """Cancel the run; ``finished`` follows once the core has wound down (saved as cancelled)."""
        if self._future is not None and self.stop_requested_at is None:
            self.stop_requested_at = time.monotonic()
            self.runner.loop.call_soon_threadsafe(self._cancel_task)

    def _cancel_task(self) -> None:  # on the runner thread
        self._cancel_pending = True
        if self._task is not None:
            self._task.cancel()

    def wait(self, timeout_s: float = 5.0) -> bool:
        """Block until the run ended (shutdown and tests only)."""
        fut = self._future
        if fut is None:
            return True
        try:
            fut.result(timeout_s)
        except concurrent.futures.TimeoutError:
            return False
        except BaseException:
            pass
        return True

    # ---- internals
    def _make_agent(self, r: RunRequest) -> Any:
        from vrag_desktop.api import VRAG, VimRAG
        from vrag_desktop.core.run.assemble import Endpoint, SearchSource

        ctx = self.ctx
        endpoint = Endpoint.from_profile(ctx.profiles, r.profile)
        corpora = list(r.corpora) if r.corpora else None

        def make_searcher() -> Any:
            # the app's loaded model when the corpora were built with it (loaded here, off the GUI thread)
            return SearchSource(
                engine=None, corpora=corpora, data_dir=ctx.data_dir, reuse=ctx.embedder()
            ).searcher()

        common: dict[str, Any] = {
            "search_url": None,
            "model_name": endpoint.model_name,
            "api_key": None,
            "corpora": corpora,
            "data_dir": ctx.data_dir,
            "endpoint": endpoint,
            "search": SearchSource(factory=make_searcher),
            "max_steps": r.max_steps,
            "top_k": r.top_k,
        }
        if r.agent == "vimrag":
            return VimRAG(base_url="", enable_thinking=r.thinking, **common)
        return VRAG(base_url="", **common)

    async def _pump(self, question: str) -> None:
        agent = self._agent
        announced = False
        async for ev in agent.arun(question):
            if not announced and agent.run_id:
                announced = True
                self.started.emit(agent.run_id)
            self._note(ev)
            self.event.emit(ev)

    def _note(self, ev: AgentEvent) -> None:
        if isinstance(ev, Answer) and not ev.forced:
            self._status = ANSWERED
        elif isinstance(ev, AgentError) and not ev.recoverable and self._status != ANSWERED:
            self._status = FAILED

    async def _main(self, question: str) -> None:
        """Always completes normally, and always announces the end (even when cancelled)."""
        self._task = asyncio.current_task()
        try:
            if self._cancel_pending:
                raise asyncio.CancelledError
            await self._pump(question)
        except asyncio.CancelledError:
            self._status = CANCELLED
        except Exception as exc:
            from vrag_desktop.qt.infra.errors import error_sink

            error_sink().report("The run failed", exc)
            self._status = FAILED
        finally:
            self._ended.emit(self._status)

    def _on_ended(self, status: str) -> None:
        run_id = (self._agent.run_id if self._agent is not None else None) or ""
        self._future = None
        self._agent = None
        self.finished.emit(status, run_id)
