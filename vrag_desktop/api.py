"""The original system's Python API shape, on top of the core agents.

    from vrag_desktop import VRAG
    for event in VRAG(base_url=..., search_url=..., model_name=..., api_key=...).run(question):
        if event["event"] == "answer":
            print(event["content"])

``run`` is a plain generator (the agents are async inside: each run gets its own event loop in a
worker thread); closing it early cancels the run. As in the original README,
``VRAG(..., generator=False).run(q)`` returns the answer's text. Code written for the original demos:
``VRAG.run_original`` yields their ``(kind, content, extra)`` tuples and returns ``('answer', …)``;
``VimRAG.run_original`` yields their dict events (``search_done``, ``memorize``, ``answer`` with its
``sample``); typed events also answer to the original keys (``ev["query"]``, ``ev["summary"]``).
``arun`` is the async form. The search side is an HTTP search URL (such as
``vrag-desktop serve-search``'s) or, with ``search_url=None``, the local corpora in process;
``endpoint=`` / ``search=`` (see :mod:`vrag_desktop.core.run.assemble`) take an endpoint profile or a
ready search engine. Every run is saved (see :mod:`vrag_desktop.core.run.store`) unless
``save=False``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Sequence
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents import vimrag_prompts as P
from vrag_desktop.core.agents.events import AgentError, AgentEvent, Answer
from vrag_desktop.core.agents.original import OriginalSample, vrag_tuples
from vrag_desktop.core.run.assemble import AgentOptions, Endpoint, SearchSource
from vrag_desktop.core.run.session import RunSession, RunSpec, iterate_in_thread


def _with_sample(events: Iterator[AgentEvent], question: str) -> Iterator[AgentEvent]:
    """``events`` with the original ``sample`` put in the ``Answer`` (saved runs keep it out)."""
    fold = OriginalSample(question)
    try:
        for ev in events:
            fold.add(ev)
            if isinstance(ev, Answer):
                ev = dataclasses.replace(ev, sample=fold.sample())
            yield ev
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


class _Base:
    agent_name = ""

    def __init__(
        self,
        base_url: str,
        search_url: str | None,
        model_name: str,
        api_key: str | None,
        *,
        corpora: Sequence[str] | None = None,
        data_dir: str | Path | None = None,
        save: bool = True,
        extra_body: dict[str, Any] | None = None,
        model_factory: Callable[[], Any] | None = None,
        searcher_factory: Callable[[], Any] | None = None,
        endpoint: Endpoint | None = None,
        search: SearchSource | None = None,
    ) -> None:
        self.base_url = base_url
        self.search_url = search_url
        self.model_name = model_name
        self.api_key = api_key
        self.corpora = list(corpora) if corpora else None
        self.data_dir = data_dir
        self.save = save
        self.extra_body = extra_body
        # Which model answers: ``endpoint`` (e.g. an endpoint profile with a keyring key), else a
        # ``model_factory`` building the client inside the run's loop, else base_url/model_name/api_key.
        if endpoint is None and model_factory is not None:
            endpoint = Endpoint.from_factory(model_factory, model_name, base_url)
        self.endpoint = endpoint
        if endpoint is not None:
            self.model_name = endpoint.model_name or model_name
        # Where searches go: ``search``, else ``searcher_factory``, else search_url or the local corpora.
        if search is not None:
            self.search_url = search.url
        elif searcher_factory is not None:  # searches go to the factory's searcher; the URL is recorded
            search = SearchSource(url=search_url, factory=searcher_factory)
        else:
            search = SearchSource(url=search_url, corpora=self.corpora, data_dir=data_dir)
        self.search = search
        self.run_id: str | None = None  # id of the saved run, once ``run``/``arun`` has started

    # ---- pieces
    def _endpoint(self) -> Endpoint:
        if self.endpoint is not None:
            return self.endpoint
        return Endpoint.from_url(self.base_url, self.model_name, self.api_key, extra_body=self.extra_body)

    def _options(self) -> AgentOptions:
        raise NotImplementedError

    def session(self) -> RunSession:
        """The core's run session this object stands for (the one way every front door runs an agent)."""
        spec = RunSpec(
            self.agent_name, self._endpoint(), self.search, self._options(), self.data_dir, self.save
        )
        return RunSession(spec)

    # ---- running
    async def arun(self, question: str) -> AsyncIterator[AgentEvent]:
        """Async form of :meth:`run`."""
        session = self.session()
        stream = session.events(question)
        try:
            async for ev in stream:
                self.run_id = session.run_id
                yield ev
        finally:
            self.run_id = session.run_id
            await stream.aclose()

    def run(self, question: str) -> Iterator[AgentEvent]:
        """Events of one run, as they happen (a generator; close it to cancel the run). The final
        ``Answer`` carries the original VimRAG's ``sample`` (``ev["sample"]``)."""
        return _with_sample(iterate_in_thread(lambda: self.arun(question)), question)

    def answer(self, question: str) -> str:
        """Run to the end and return the answer's text (errors that end the run raise RuntimeError)."""
        fatal = None
        events = _Base.run(self, question)
        try:
            for ev in events:
                if isinstance(ev, Answer):
                    return ev.content
                if isinstance(ev, AgentError) and not ev.recoverable:
                    fatal = ev.content
        finally:
            events.close()  # type: ignore[attr-defined]
        raise RuntimeError(fatal or "the run ended without an answer")


class VRAG(_Base):
    """The VRAG agent (search + crop/zoom), compatible with the released Qwen2.5-VL-7B-VRAG model
    (``autumncc/Qwen2.5-VL-7B-VRAG``). ``model_name`` is the *served* name, which the original's demo
    fixed to ``Qwen/Qwen2.5-VL-7B-Instruct`` whatever checkpoint vLLM loaded; it is kept as the default
    so the original's serve commands keep working."""

    agent_name = "vrag"

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8002/v1",
        search_url: str | None = "http://127.0.0.1:8001/search",
        model_name: str = "Qwen/Qwen2.5-VL-7B-Instruct",
        api_key: str | None = "EMPTY",
        *,
        max_steps: int = 10,
        top_k: int = 3,
        generator: bool = True,
        **kw: Any,
    ) -> None:
        super().__init__(base_url, search_url, model_name, api_key, **kw)
        self.max_steps = max_steps
        self.top_k = top_k
        self.generator = generator

    def _options(self) -> AgentOptions:
        return AgentOptions(max_steps=self.max_steps, top_k=self.top_k)

    def run(self, question: str) -> Any:
        """Events of one run as they happen; with ``generator=False`` (as in the original README:
        ``answer = VRAG(..., generator=False).run(q)``) the answer's text once the run is over."""
        if not self.generator:
            return self.answer(question)
        return super().run(question)

    def run_original(self, question: str) -> Generator[tuple[str, Any, Any], None, tuple[str, str, str]]:
        """The original demo's stream of ``(kind, content, extra)`` tuples, whose return value is
        ``('answer', text, raw)`` (see :func:`vrag_desktop.core.agents.original.vrag_tuples`)."""
        return vrag_tuples(super().run(question))


class VimRAG(_Base):
    """The VimRAG agent (multimodal memory graph). ``run`` takes a question or ``{"query": ...}`` like
    the original's ``run(sample)``."""

    agent_name = "vimrag"

    def __init__(
        self,
        base_url: str = "https://dashscope.aliyuncs.com/compatible-mode/v1",
        search_url: str | None = "http://127.0.0.1:8001/search",
        model_name: str = "qwen3.5-plus",
        api_key: str | None = None,
        *,
        max_pixels_image: int = P.MAX_PIXELS_IMAGE,
        max_pixels_video: int = P.MAX_PIXELS_VIDEO,
        memory_buffer_pixels: int = P.MEMORY_BUFFER_PIXELS,
        search_top_k: int = 3,
        max_mem_steps: int = 20,
        enable_thinking: bool = True,
        top_k: int | None = None,
        max_steps: int | None = None,
        **kw: Any,
    ) -> None:
        if api_key is None:
            import os

            api_key = os.environ.get("DASHSCOPE_API_KEY")
        super().__init__(base_url, search_url, model_name, api_key, **kw)
        self.max_pixels_image = max_pixels_image
        self.max_pixels_video = max_pixels_video
        self.memory_buffer_pixels = memory_buffer_pixels
        self.search_top_k = top_k or search_top_k
        self.max_steps = max_steps or max_mem_steps
        self.enable_thinking = enable_thinking

    def _options(self) -> AgentOptions:
        pixels = (self.max_pixels_image, self.max_pixels_video, self.memory_buffer_pixels)
        return AgentOptions(self.max_steps, self.search_top_k, self.enable_thinking, *pixels)

    def run(self, question: str | dict[str, Any]) -> Iterator[AgentEvent]:
        if isinstance(question, dict):
            question = str(question.get("query", ""))
        return super().run(question)

    def run_original(self, question: str | dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The original demo's dict events (``search_done`` with ``results``, ``memorize`` with
        ``summary``, ``answer`` with ``sample``…); deltas, graph snapshots and timings, which the
        original did not emit under those names, are left out."""
        skip = {"graph", "timing", "usage"}
        return (ev.to_original() for ev in self.run(question) if ev.event not in skip)


__all__ = ["VRAG", "VimRAG", "iterate_in_thread"]
