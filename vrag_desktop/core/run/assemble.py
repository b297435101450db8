"""Assembling an agent — chat model, searcher, agent class and options — in one place.

The Python API (``from vrag_desktop import VRAG``), the CLI's ``ask`` and the app's run controller
all describe a run the same way: an :class:`Endpoint` (an endpoint profile, or an explicit URL or
client), a :class:`SearchSource` (corpora by name, a ready :class:`SearchEngine`, or a search URL),
the agent kind and its :class:`AgentOptions`. :func:`assemble` turns that into a running agent; the
trainer and evaluation build their agents through it too.

Clients are created inside the run's event loop (an async HTTP client is bound to the loop it
runs in), so an endpoint gives a *factory*, called by :func:`assemble`, not a client.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vrag_desktop.core.agents import vimrag_prompts as P

if TYPE_CHECKING:
    from vrag_desktop.core.agents.searchers import Searcher
    from vrag_desktop.core.embedders.base import Embedder
    from vrag_desktop.core.endpoints.base import ChatModel
    from vrag_desktop.core.endpoints.profiles import ProfileStore
    from vrag_desktop.core.search.engine import SearchEngine

VRAG, VIMRAG = "vrag", "vimrag"
AGENT_KINDS = (VRAG, VIMRAG)
#: Steps a run may take when the person did not say: the original VRAG demo's 10, VimRAG's 20 memory
#: steps (``max_mem_steps``).
DEFAULT_MAX_STEPS = {VRAG: 10, VIMRAG: 20}


class AssembleError(ValueError):
    """The run cannot be assembled as described (message says what is missing)."""


@dataclass(frozen=True)
class Endpoint:
    """Which chat model answers: an endpoint profile, an OpenAI-compatible URL, or a client factory.

    Build one with :meth:`from_profile`, :meth:`from_url` or :meth:`from_factory`.
    """

    model_name: str
    make: Callable[[], ChatModel] = field(repr=False)
    base_url: str = ""

    @classmethod
    def from_profile(
        cls, profiles: ProfileStore, name: str | None = None, model: str | None = None
    ) -> Endpoint:
        """Profile ``name`` (None: the active one); ``model`` overrides its served model name.
        Raises ProfileError for an unknown profile, here rather than once the run has started."""
        chosen = name or profiles.active
        profile = profiles.get(chosen)

        def make() -> ChatModel:
            from vrag_desktop.core.long_lived import long_lived

            with long_lived():  # the first call imports the OpenAI SDK
                client = profiles.to_model(chosen)
            if model:
                client.model_name = model
            return client

        return cls(model or profile.model, make, profile.base_url or "")

    @classmethod
    def from_url(
        cls,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        extra_body: dict[str, Any] | None = None,
    ) -> Endpoint:
        """Any OpenAI-compatible server; ``api_key`` None, "" or "EMPTY" sends no key."""
        if not base_url or not model:
            raise AssembleError("an endpoint URL needs both the base URL and the served model name")
        key = None if api_key in (None, "", "EMPTY") else api_key

        def make() -> ChatModel:
            from vrag_desktop.core.endpoints.client import OpenAIChatModel

            return OpenAIChatModel(base_url, model, key, extra_body=extra_body)

        return cls(model, make, base_url)

    @classmethod
    def from_factory(
        cls, make: Callable[[], ChatModel], model_name: str = "", base_url: str = ""
    ) -> Endpoint:
        """A ready client factory (tests, an embedding application)."""
        return cls(model_name, make, base_url)


@dataclass(frozen=True)
class SearchSource:
    """Where the agent's searches go. One of: ``url`` (an HTTP search server such as
    ``serve-search``), ``engine`` (a ready engine, shared), ``factory`` (any searcher), or the
    local corpora ``corpora`` (None: all) under ``data_dir``. ``reuse`` is an already loaded
    embedder taken when the corpora were built with it (the app's shared model)."""

    url: str | None = None
    engine: SearchEngine | None = None
    corpora: Sequence[str] | None = None
    data_dir: str | os.PathLike[str] | None = None
    reuse: Embedder | None = None
    factory: Callable[[], Searcher] | None = field(default=None, repr=False)

    def searcher(self) -> Searcher:
        """Build the searcher (may load an embedder: call off a GUI thread)."""
        from vrag_desktop.core.agents.searchers import EngineSearcher, HttpSearcher

        if self.factory is not None:
            return self.factory()
        if self.url:
            return HttpSearcher(self.url)
        if self.engine is not None:
            return EngineSearcher(self.engine)
        from vrag_desktop.core.corpus.library import Library
        from vrag_desktop.core.search.engine import SearchEngine

        names = list(self.corpora) if self.corpora else None
        return EngineSearcher(SearchEngine(Library(self.data_dir), names, reuse=self.reuse))


@dataclass(frozen=True)
class AgentOptions:
    """The knobs a person sets for a run; each agent takes the ones it has (VimRAG: all, by name)."""

    max_steps: int = 10
    top_k: int = 3
    enable_thinking: bool = True  # VimRAG
    max_pixels_image: int = P.MAX_PIXELS_IMAGE  # VimRAG
    max_pixels_video: int = P.MAX_PIXELS_VIDEO  # VimRAG
    memory_buffer_pixels: int = P.MEMORY_BUFFER_PIXELS  # VimRAG

    @classmethod
    def for_agent(
        cls,
        kind: str,
        *,
        max_steps: int | None = None,
        top_k: int | None = None,
        enable_thinking: bool = True,
    ) -> AgentOptions:
        """The options a person gave, the agent's own defaults for the rest."""
        return cls(
            max_steps=max_steps if max_steps is not None else DEFAULT_MAX_STEPS.get(kind, 10),
            top_k=top_k if top_k is not None else 3,
            enable_thinking=enable_thinking,
        )

    def record(self, kind: str) -> dict[str, Any]:
        """What a saved run records of them."""
        out: dict[str, Any] = {"max_steps": self.max_steps, "top_k": self.top_k}
        if kind == VIMRAG:
            out["enable_thinking"] = self.enable_thinking
        return out


@dataclass
class Assembled:
    """An agent ready to ``run(question)``, with the client to close when the run ends."""

    agent: Any
    model: ChatModel
    searcher: Searcher

    async def aclose(self) -> None:
        await close_model(self.model)


async def close_model(model: ChatModel) -> None:
    """Close a client's connections (a test double may have nothing to close)."""
    close = getattr(model, "aclose", None)
    if close is not None:
        await close()


def build_agent(
    kind: str, model: ChatModel, searcher: Searcher, image_dir: Path, options: AgentOptions
) -> Any:
    """The agent of ``kind`` (vrag | vimrag) over a model and a searcher."""
    if kind == VRAG:
        from vrag_desktop.core.agents.vrag import VRAGAgent

        return VRAGAgent(
            model, searcher, image_dir=image_dir, max_steps=options.max_steps, top_k=options.top_k
        )
    if kind == VIMRAG:
        from vrag_desktop.core.agents.vimrag import VimRAGAgent

        knobs = asdict(options)  # every option is a VimRAGAgent argument of the same name, but top_k
        knobs["search_top_k"] = knobs.pop("top_k")
        return VimRAGAgent(model, searcher, image_dir=image_dir, **knobs)
    raise AssembleError(f"unknown agent {kind!r}: use one of {', '.join(AGENT_KINDS)}")


async def assemble(
    kind: str, endpoint: Endpoint, search: SearchSource, options: AgentOptions, image_dir: Path
) -> Assembled:
    """Client, searcher and agent for one run, in the run's event loop. Whatever fails (unknown
    profile, no corpus), no client is left open."""
    if kind not in AGENT_KINDS:
        raise AssembleError(f"unknown agent {kind!r}: use one of {', '.join(AGENT_KINDS)}")
    model = endpoint.make()
    try:
        searcher = search.searcher()
        agent = build_agent(kind, model, searcher, image_dir, options)
    except BaseException:
        await close_model(model)
        raise
    return Assembled(agent, model, searcher)


__all__ = [
    "AGENT_KINDS",
    "DEFAULT_MAX_STEPS",
    "VIMRAG",
    "VRAG",
    "AgentOptions",
    "AssembleError",
    "Assembled",
    "Endpoint",
    "SearchSource",
    "assemble",
    "build_agent",
    "close_model",
]
