"""One model turn for an agent: stream the reply as events, retry recoverable endpoint errors.

Shared by the VRAG and VimRAG agents (their runs mix in :class:`ModelTurns`). The model call runs as
its own task; deltas (which a client may deliver from another thread) are queued back to the agent's
loop and yielded as ``ThinkDelta`` / ``ContentDelta`` events in order, then ``Usage`` and the
``ChatResult``. Cancelling the consumer cancels the request and waits for it to close its connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents import vrag_protocol as vp
from vrag_desktop.core.agents.events import AgentError, AgentEvent, ContentDelta, ThinkDelta, Timing, Usage
from vrag_desktop.core.agents.searchers import Searcher
from vrag_desktop.core.endpoints.base import ChatModel, ChatResult, EndpointError

#: endpoint failures no retry can fix: the run ends with a clear error
FATAL_ENDPOINT_KINDS = frozenset({"auth", "unreachable", "not_found", "bad_request"})
_DONE = object()


class Fatal(Exception):
    """The endpoint is gone for good: raised out of :meth:`ModelTurns.turn`, it ends the run, and
    :func:`guarded` makes its message the run's last (unrecoverable) error event."""


async def guarded(
    run: ModelTurns | Callable[[], ModelTurns], log: logging.Logger, what: str
) -> AsyncGenerator[AgentEvent, None]:
    """A run's events, as an agent's ``run(question)`` returns them: they end with ``Answer`` or a
    fatal ``AgentError`` and never raise — an exception (a bug, an unwritable image folder) becomes
    the last event, an unrecoverable internal ``AgentError``, instead of reaching the caller's UI.
    To cancel, close the stream (``await stream.aclose()``, or iterate inside
    ``contextlib.aclosing``) or cancel the consuming task: the model request is cancelled at once
    and nothing more is emitted. ``run`` may be a factory: the run (and its clock) then starts when
    the stream is first read."""
    if not isinstance(run, ModelTurns):
        run = run()
    try:
        async with aclosing(run.events()) as events:
            async for ev in events:
                yield ev
    except Fatal as fatal:  # the endpoint is gone: the error is the run's last event
        yield run.timing()
        yield run.ev(AgentError, kind="endpoint", content=str(fatal), recoverable=False)
    except Exception as exc:
        log.exception("%s run failed", what)
        yield run.ev(AgentError, kind="internal", content=f"internal error: {exc!r}", recoverable=False)
    finally:
        run.finish()


@dataclass(frozen=True)
class TurnPolicy:
    """How an agent treats model turns that fail: one policy for the VRAG and VimRAG agents."""

    max_invalid: int = 3  # replies in the wrong format forgiven per run
    endpoint_retries: int = 1  # further tries of a failed model call
    retry_delay: float = 1.0  # seconds before a retry, times the attempt

    def __post_init__(self) -> None:
        if self.max_invalid < 0 or self.endpoint_retries < 0 or self.retry_delay < 0:
            raise ValueError(
                f"need max_invalid >= 0, endpoint_retries >= 0, retry_delay >= 0 (got {self.max_invalid}, "
                f"{self.endpoint_retries}, {self.retry_delay})"
            )


class BaseAgent:
    """What :class:`ModelTurns` reads from an agent (the model and the parameters sent with every
    request, how failed turns are handled, where shown images go, the step budget), plus its
    searcher: set in one place, so the VRAG and VimRAG agents cannot drift apart on them.
    ``sampling`` is the agent's own parameters; ``params`` override them."""

    def __init__(
        self,
        model: ChatModel,
        searcher: Searcher,
        image_dir: Path,
        sampling: Mapping[str, Any],
        *,
        max_steps: int,
        params: Mapping[str, Any] | None,
        turns: TurnPolicy | None,
    ) -> None:
        self.model = model
        self.searcher = searcher
        self.image_dir = Path(image_dir)
        self.params = dict(sampling) | dict(params or {})
        self.max_steps = max_steps
        self.turns = turns or TurnPolicy()


class ModelTurns:
    """Base of an agent's run state: the question, the clock, the step, the run id naming its
    images, the per-turn timings, the step budget, and the model turn itself."""

    def __init__(self, agent: BaseAgent, question: str) -> None:
        self.a = agent
        self.question = question
        self.t0 = time.monotonic()
        self.step = 0
        self.run_id = uuid.uuid4().hex[:8]
        self.messages: list[dict[str, Any]] = []
        self.model_seconds = 0.0
        self.tool_seconds = 0.0
        self.steps_left: int = agent.max_steps
        self.free_invalid: int = agent.turns.max_invalid
        self.free_retry = False  # the turn just spent was a free retry (an invalid reply, no step used)
        self.final = False  # the turn under way comes after the step budget: it must answer

    reply: ChatResult  # the last model reply (set by :meth:`turn`)

    def events(self) -> AsyncGenerator[AgentEvent, None]:  # pragma: no cover - provided by the run
        raise NotImplementedError

    def next_step(self) -> bool:
        """Begin a turn: the step counter and its timings move on. True when the step budget is
        spent, i.e. this is the turn that must answer."""
        self.step += 1
        self.model_seconds = self.tool_seconds = 0.0
        self.free_retry = False
        self.final = self.steps_left <= 0
        return self.final

    def spend_step(self, valid: bool) -> None:
        """A turn is over: a valid action uses a step; an invalid one uses a free retry while any
        are left (``turns.max_invalid`` per run), so a model that never gets the format right still ends."""
        if valid or self.free_invalid <= 0:
            self.steps_left -= 1
        else:
            self.free_invalid -= 1
            self.free_retry = True  # said in the turn's Timing: views number steps, not retries

    def finish(self) -> None:
        """Hook: the run is over (answered, failed or closed); stop its background work."""

    def now(self) -> float:
        """Seconds since the run started, as events carry them."""
        return round(time.monotonic() - self.t0, 4)

    def ev(self, cls: type[AgentEvent], **kw: Any) -> AgentEvent:
        return cls(step=self.step, time=self.now(), **kw)

    def timing(self) -> AgentEvent:
        return self.ev(
            Timing,
            model_seconds=round(self.model_seconds, 4),
            tool_seconds=round(self.tool_seconds, 4),
            free_retry=self.free_retry,
            final=self.final,
        )

    def out_path(self, what: str, suffix: str = ".jpg") -> Path:
        """Where an image of this step goes (every image the model is shown is kept, by run and step)."""
        return Path(self.a.image_dir) / f"{self.run_id}-{self.step:02d}-{what}{suffix}"

    async def turn(self, messages: list[dict[str, Any]]) -> AsyncGenerator[AgentEvent, None]:
        """One model call's events; its reply is left on :attr:`reply`. Raises :class:`Fatal` when
        the endpoint is gone for good (the run ends there: see :func:`guarded`)."""
        async with aclosing(self.call_model(messages)) as calls:
            async for item in calls:
                if isinstance(item, ChatResult):
                    self.reply = item
                else:
                    yield item

    def on_content(self, text_so_far: str, chunk: str) -> list[AgentEvent]:
        """Hook: extra events while the reply streams (VimRAG draws a new node early). Default: none."""
        return []

    async def call_model(
        self, messages: list[dict[str, Any]]
    ) -> AsyncGenerator[AgentEvent | ChatResult, None]:
        """Deltas while the model writes, then Usage and the ChatResult. A recoverable endpoint error is
        reported (``AgentError(recoverable=True)``) and the same request retried: the model said
        nothing, so there is nothing to correct (the client already retried transport failures).
        Raises :class:`Fatal` when the endpoint is gone for good."""
        attempt = 0
        while True:
            t = time.monotonic()
            try:
                async with aclosing(self.stream_once(messages)) as stream:
                    async for item in stream:
                        yield item
                return
            except Exception as exc:  # EndpointError, or any failure of a client we do not own
                self.model_seconds += time.monotonic() - t
                kind = exc.kind if isinstance(exc, EndpointError) else "other"
                recoverable = kind not in FATAL_ENDPOINT_KINDS and attempt < self.a.turns.endpoint_retries
                msg = (
                    f"model endpoint error ({kind}): {exc}" if str(exc) else f"model endpoint error ({kind})"
                )
                if not recoverable:
                    raise Fatal(msg) from exc
                yield self.ev(AgentError, kind="endpoint", content=msg, recoverable=True)
                attempt += 1
                await asyncio.sleep(self.a.turns.retry_delay * attempt)

    async def stream_once(
        self, messages: list[dict[str, Any]]
    ) -> AsyncGenerator[AgentEvent | ChatResult, None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()
        splitter = vp.ThinkSplitter()
        streamed = False
        text = ""

        def put(item: Any) -> None:
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is loop:
                queue.put_nowait(item)
            else:  # a client calling back from another thread
                loop.call_soon_threadsafe(queue.put_nowait, item)

        def on_delta(kind: str, chunk: str) -> None:
            nonlocal streamed, text
            if not chunk:
                return
            streamed = True
            if kind == "think":
                put(self.ev(ThinkDelta, content=chunk))
                return
            put(self.ev(ContentDelta, content=chunk))
            inner = splitter.feed(chunk)
            if inner:
                put(self.ev(ThinkDelta, content=inner))
            text += chunk
            for extra in self.on_content(text, chunk):
                put(extra)

        t = time.monotonic()
        task = asyncio.ensure_future(
            self.a.model.chat(messages, stream=True, on_delta=on_delta, **self.a.params)
        )
        task.add_done_callback(lambda _: put(_DONE))
        try:
            while (item := await queue.get()) is not _DONE:
                yield item
            result = task.result()
        finally:
            if not task.done():
                task.cancel()
                # Let the cancelled request close its connection now, not when the loop is torn down.
                await asyncio.wait({task}, timeout=5)
        self.model_seconds += result.model_seconds or (time.monotonic() - t)
        if not streamed:  # a non-streaming model: same events, all at once
            if result.reasoning:
                yield self.ev(ThinkDelta, content=result.reasoning)
            if result.content:
                yield self.ev(ContentDelta, content=result.content)
                inner = splitter.feed(result.content)
                if inner:
                    yield self.ev(ThinkDelta, content=inner)
        tail = splitter.flush()
        if tail:
            yield self.ev(ThinkDelta, content=tail)
        yield self.ev(Usage, prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens)
        yield result
