"""The one typed event stream both agents emit; runs are saved as these events, and replayed.

Each event is a frozen dataclass with an ``event`` kind. Events also read like the original VRAG /
VimRAG dicts (``ev["event"] == "answer"``, ``ev["content"]``), so code written for the original demo
keeps working. ``to_dict`` / ``event_from_dict`` give the JSON form used in saved runs: images are
referenced by path (saved beside the run), never inlined.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from vrag_desktop.core.search.hit import Hit


@dataclass(frozen=True)
class AgentEvent(Mapping[str, Any]):
    """Base of every event: ``step`` (1-based model turn) and ``time`` (seconds since run start)."""

    event: ClassVar[str] = "event"
    #: The original demo's name for this event, where it differs (VimRAG's ``search_done``).
    original: ClassVar[str] = ""
    #: The original's key names for fields of ours (``ev["query"]`` of a search is its ``content``).
    aliases: ClassVar[dict[str, str]] = {}
    step: int = 0
    time: float = 0.0

    # ---- Mapping interface: read like the original's dicts
    def __getitem__(self, key: str) -> Any:
        if key == "event":
            return self.event
        if key == "original_event":
            return self.original_event
        if key in self._names():
            return getattr(self, key)
        if key in self.aliases:
            return getattr(self, self.aliases[key])
        raise KeyError(key)

    @property
    def original_event(self) -> str:
        """The event's name in the original demos (``search_done`` for our ``search_results``)."""
        return self.original or self.event

    def to_original(self) -> dict[str, Any]:
        """This event as the original demos emitted it: their event name and keys (plus ours)."""
        d = self.to_dict()
        d["event"] = self.original_event
        for theirs, ours in self.aliases.items():
            d[theirs] = d.get(ours)
        return d

    def __iter__(self) -> Iterator[str]:
        yield "event"
        yield from self._names()

    def __len__(self) -> int:
        return 1 + len(self._names())

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (nested dataclasses become dicts)."""
        return {"event": self.event, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class TextDelta(AgentEvent):
    """A piece of streamed model text (the two kinds below)."""

    content: str = ""


@dataclass(frozen=True)
class ThinkDelta(TextDelta):
    """A piece of the model's reasoning (streamed ``reasoning_content`` or text inside <think>)."""

    event: ClassVar[str] = "think"


@dataclass(frozen=True)
class ContentDelta(TextDelta):
    """A piece of the model's visible output as it streams."""

    event: ClassVar[str] = "content"


#: A retrieved item as shown to the model and the person: the search engine's own hit type.
HitRef = Hit


@dataclass(frozen=True)
class SearchStarted(AgentEvent):
    event: ClassVar[str] = "search"
    aliases: ClassVar[dict[str, str]] = {"query": "content"}
    content: str = ""  # the query
    node_id: str | None = None  # VimRAG node this search belongs to


@dataclass(frozen=True)
class SearchResults(AgentEvent):
    """What a search returned (all hits with scores) and which of them were given to the model."""

    event: ClassVar[str] = "search_results"
    original: ClassVar[str] = "search_done"
    aliases: ClassVar[dict[str, str]] = {"query": "content", "results": "hits"}
    content: str = ""  # the query
    hits: tuple[HitRef, ...] = ()
    shown: tuple[int, ...] = ()  # indices into hits given to the model
    node_id: str | None = None


@dataclass(frozen=True)
class ImageShown(AgentEvent):
    """An image put in the model's context: the resized copy it sees, and the raw image behind it."""

    event: ClassVar[str] = "search_image"
    image: str = ""  # path of what the model saw
    raw: str = ""  # full-resolution image behind it
    width: int = 0  # size of what the model saw
    height: int = 0
    source: str = ""
    page: int | None = None


@dataclass(frozen=True)
class BBox(AgentEvent):
    """A region the model asked for, in the coordinates of the last image it was shown."""

    event: ClassVar[str] = "bbox"
    content: str = ""  # the raw text, e.g. "[10, 20, 300, 400]"
    box: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Crop(AgentEvent):
    """The crop actually taken: region in raw-image pixels (after padding and clamping)."""

    event: ClassVar[str] = "crop_image"
    region: tuple[int, int, int, int] = (0, 0, 0, 0)  # x1, y1, x2, y2 in raw pixels
    raw: str = ""  # the raw image cropped
    image: str = ""  # the crop as the model sees it (resized)
    width: int = 0
    height: int = 0
    source: str = ""
    page: int | None = None
    zoomed_from: str = ""  # pdf | image | video (the source) | page image (fallback; see note)
    note: str = ""  # why the crop did not come from the source


@dataclass(frozen=True)
class MemoryItem:
    information_id: str  # "Picture 3", "Video 1", "Text 2"
    useful: bool
    priority: int
    energy: float = 0.0
    pixel_budget: int = 0
    image: str | None = None
    timestamps: tuple[float, ...] = ()


@dataclass(frozen=True)
class Memorize(AgentEvent):
    event: ClassVar[str] = "memorize"
    aliases: ClassVar[dict[str, str]] = {"summary": "content"}
    content: str = ""  # the summary
    node_id: str | None = None
    # The field shadows Mapping.items(): saved runs and the UI read it by this name; ev["items"] works.
    items: tuple[MemoryItem, ...] = ()  # type: ignore[assignment]


@dataclass(frozen=True)
class GraphNode:
    id: str
    kind: str  # root | search | answer | think | crop (VRAG chains use think/search/crop/answer)
    parents: tuple[str, ...] = ()
    label: str = ""
    query: str = ""
    summary: str = ""


@dataclass(frozen=True)
class GraphChanged(AgentEvent):
    """The reasoning graph after a change (full snapshot: simple to render and to replay)."""

    event: ClassVar[str] = "graph"
    nodes: tuple[GraphNode, ...] = ()


@dataclass(frozen=True)
class Evidence:
    source: str
    image: str | None = None
    page: int | None = None
    region: tuple[int, int, int, int] | None = None  # raw pixels, when a crop supports the answer


@dataclass(frozen=True)
class Answer(AgentEvent):
    event: ClassVar[str] = "answer"
    content: str = ""
    evidence: tuple[Evidence, ...] = ()
    forced: bool = False  # produced after the step limit, or a graceful fallback
    #: The original VimRAG's ``sample`` (trajectory, search_results, graph, generate, generate_times),
    #: filled by the Python API from the run's events (:mod:`.original`); None in saved runs.
    sample: dict[str, Any] | None = dataclasses.field(default=None, compare=False)


@dataclass(frozen=True)
class AgentError(AgentEvent):
    """Something went wrong; ``recoverable`` errors lead to a corrective turn, not the end of the run."""

    event: ClassVar[str] = "error"
    content: str = ""
    kind: str = ""  # parse | bbox | tool | search | endpoint | cancelled | internal
    recoverable: bool = True


@dataclass(frozen=True)
class MaxSteps(AgentEvent):
    event: ClassVar[str] = "max_steps"
    content: str = "Reached maximum steps"


@dataclass(frozen=True)
class Timing(AgentEvent):
    """Per model turn, at its end: seconds in the model call and in tools (search, crop, graph), and
    whether the turn was a free retry (an invalid reply corrected without using a step of the budget,
    ``TurnPolicy.max_invalid`` per run): ``step`` counts every turn, the budget only the others.
    ``final``: the turn after the budget was spent, in which only an answer counts."""

    event: ClassVar[str] = "timing"
    model_seconds: float = 0.0
    tool_seconds: float = 0.0
    free_retry: bool = False
    final: bool = False


@dataclass(frozen=True)
class Usage(AgentEvent):
    event: ClassVar[str] = "usage"
    prompt_tokens: int = 0
    completion_tokens: int = 0


EVENT_TYPES: dict[str, type[AgentEvent]] = {
    cls.event: cls
    for cls in (
        ThinkDelta,
        ContentDelta,
        SearchStarted,
        SearchResults,
        ImageShown,
        BBox,
        Crop,
        Memorize,
        GraphChanged,
        Answer,
        AgentError,
        MaxSteps,
        Timing,
        Usage,
    )
}
_NESTED: dict[str, type] = {"hits": HitRef, "items": MemoryItem, "nodes": GraphNode, "evidence": Evidence}


def event_from_dict(d: Mapping[str, Any]) -> AgentEvent:
    """Rebuild an event from :meth:`AgentEvent.to_dict` output (unknown keys are ignored)."""
    cls = EVENT_TYPES.get(str(d.get("event")))
    if cls is None:
        raise ValueError(f"unknown event kind {d.get('event')!r}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in d:
            continue
        value = d[f.name]
        if f.name in _NESTED and isinstance(value, list | tuple):
            sub = _NESTED[f.name]
            value = tuple(sub(**_tuplify(sub, v)) for v in value)
        elif isinstance(value, list | tuple):
            value = tuple(value)
        kwargs[f.name] = value
    return cls(**kwargs)


def _tuplify(cls: type, d: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in d.items() if k in names}


__all__ = [name for name in list(globals()) if name[:1].isupper()] + ["event_from_dict"]
