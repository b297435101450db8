"""One run of an agent, start to end: recorded in History, assembled, its events streamed, its
outcome known — written once for every front door.

The app's Ask panel, ``vrag-desktop ask``, evaluations (CLI and app) and the Python API all run an
agent this way: the recorder is opened first (so a run that cannot even be assembled — no corpus, an
unknown profile — is a saved run with its error too), the agent is assembled in the run's own event
loop (:func:`~vrag_desktop.core.run.assemble.assemble`), every event is recorded as it comes, and a
run that is stopped is saved as cancelled. :class:`vrag_desktop.api.VRAG` is a thin adapter over
this; nothing above core builds a run another way.
"""

from __future__ import annotations

import asyncio
import os
import queue
import tempfile
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents.events import AgentError, AgentEvent
from vrag_desktop.core.run.assemble import AgentOptions, Endpoint, SearchSource, assemble
from vrag_desktop.core.run.store import CANCELLED, RUNNING, RunStore, fold_status

__all__ = ["RunSession", "RunSpec", "iterate_in_thread"]


@dataclass(frozen=True)
class RunSpec:
    """Everything a run needs besides its question. ``data_dir``: where it is saved (None: the
    default data directory); ``save=False`` keeps no record (its images go to a temporary folder)."""

    agent: str  # vrag | vimrag
    endpoint: Endpoint
    search: SearchSource
    options: AgentOptions = field(default_factory=AgentOptions)
    data_dir: str | os.PathLike[str] | None = None
    save: bool = True

    def settings(self) -> dict[str, Any]:
        """What the saved run records of how it was made (``run.json``'s ``settings``)."""
        search = self.search
        corpora = list(search.corpora) if search.corpora else None
        if search.engine is not None:
            corpora = [c.name for c in search.engine.corpora]
        return {
            "model": self.endpoint.model_name,
            "base_url": self.endpoint.base_url,
            "search_url": search.url,
            "corpora": corpora,
            **self.options.record(self.agent),
        }


class RunSession:
    """Runs of ``spec``'s agent, one question at a time (an evaluation asks many with one session).
    ``run_id`` is the latest run's saved id once :meth:`events` started (None when not saved);
    ``status`` ends as its saved status (``answered``, ``max_steps``, ``failed``, ``cancelled``,
    ``interrupted``)."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.run_id: str | None = None
        self.status = RUNNING

    async def events(self, question: str) -> AsyncGenerator[AgentEvent, None]:
        """The run's events as they happen. Cancelling the task (or closing this generator) ends the
        run within a second; it is saved as cancelled."""
        from vrag_desktop.core.paths import DataLayout

        spec = self.spec
        self.status = RUNNING
        recorder = None
        if spec.save:
            runs = RunStore(DataLayout.resolve(spec.data_dir).runs)
            recorder = runs.recorder(spec.agent, question, spec.settings())
        self.run_id = recorder.id if recorder else None
        image_dir = recorder.image_dir if recorder else Path(tempfile.mkdtemp(prefix="vrag-run-"))
        parts = None
        final: str | None = None
        try:
            parts = await assemble(spec.agent, spec.endpoint, spec.search, spec.options, image_dir)
            async for ev in parts.agent.run(question):
                self._record(recorder, ev)
                yield ev
        except (asyncio.CancelledError, GeneratorExit):
            final = CANCELLED
            raise
        except Exception as exc:  # a setup failure (no corpus, bad URL) is an event too
            ev = AgentError(content=str(exc), kind="internal", recoverable=False)
            self._record(recorder, ev)
            yield ev
        finally:
            if recorder is not None:
                self.status = recorder.finish(final).status
            else:
                self.status = final or (self.status if self.status != RUNNING else "interrupted")
            if parts is not None:
                await parts.aclose()

    def _record(self, recorder: Any, ev: AgentEvent) -> None:
        if recorder is not None:
            recorder.record(ev)
            self.status = recorder.summary.status
        else:
            self.status = fold_status(self.status, ev)

    def run(self, question: str) -> Generator[AgentEvent, None, None]:
        """The same events from synchronous code (the agent runs in a private event loop on a worker
        thread); closing the iterator cancels the run."""
        return iterate_in_thread(lambda: self.events(question))


_DONE = object()


def iterate_in_thread(make: Callable[[], AsyncIterator[AgentEvent]]) -> Generator[AgentEvent, None, None]:
    """Run an async event stream in a private loop on a worker thread; yield its events here.

    Closing this generator cancels the async stream and waits for it to wind down.
    """
    q: queue.Queue[object] = queue.Queue()
    loop = asyncio.new_event_loop()
    task_box: list[asyncio.Task[None]] = []

    async def pump() -> None:
        try:
            async for ev in make():
                q.put(ev)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # surfaced on the caller's side
            q.put(exc)
        finally:
            q.put(_DONE)

    def main() -> None:
        asyncio.set_event_loop(loop)
        task_box.append(loop.create_task(pump()))
        try:
            loop.run_until_complete(task_box[0])
        finally:
            # As asyncio.run does: cancel what is left (e.g. an HTTP request) and let it finish.
            leftover = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in leftover:
                t.cancel()
            if leftover:
                loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    thread = threading.Thread(target=main, name="vrag-agent", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item  # type: ignore[misc]
    finally:
        if thread.is_alive():
            while not task_box and thread.is_alive():
                thread.join(0.01)
            if task_box and not loop.is_closed():
                loop.call_soon_threadsafe(task_box[0].cancel)
            thread.join(timeout=10)
