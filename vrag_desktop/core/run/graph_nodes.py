"""One node of the reasoning graph as the view draws it, the drawing grid, and what an event changed.

Split from :mod:`.reasoning_graph` (which builds and places the nodes event by event) so the view's
code can name these small value types without the builder's rules around them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vrag_desktop.core.agents.events import BBox, Crop, Evidence, HitRef, ImageShown, MemoryItem

KIND_CAPTIONS = {"root": "Question", "think": "Think", "search": "Search", "crop": "Crop", "answer": "Answer"}
_VRAG_ID = re.compile(r"^s(\d+)-[a-z]+$")  # VRAG chain ids: s3-search, s2-crop, s1-think
_SPACES = re.compile(r"\s+")
Edge = tuple[str, str]


@dataclass(frozen=True)
class Layout:
    """Node size and spacing in scene units. ``TB``: layers go down the page; ``LR``: to the right."""

    node_width: float = 210.0
    node_height: float = 84.0
    sibling_gap: float = 30.0  # between neighbours of one layer
    layer_gap: float = 60.0  # between consecutive layers
    direction: str = "TB"

    def __post_init__(self) -> None:
        if self.direction not in ("TB", "LR"):
            raise ValueError(f"direction must be 'TB' or 'LR', not {self.direction!r}")
        if min(self.node_width, self.node_height) <= 0 or min(self.sibling_gap, self.layer_gap) < 0:
            raise ValueError("node sizes must be positive and gaps not negative")

    @property
    def slot_pitch(self) -> float:
        """Distance between the centres of two neighbours in a layer."""
        return (self.node_width if self.direction == "TB" else self.node_height) + self.sibling_gap

    @property
    def layer_pitch(self) -> float:
        return (self.node_height if self.direction == "TB" else self.node_width) + self.layer_gap


@dataclass
class NodeInfo:
    """One node and everything the run said about it. ``x``, ``y`` is its centre (never changes)."""

    id: str
    kind: str
    parents: tuple[str, ...] = ()
    label: str = ""
    query: str = ""
    summary: str = ""
    step: int = 0  # the model turn that created it
    time: float = 0.0  # seconds since the run started, when it appeared
    layer: int = 0
    x: float = 0.0
    y: float = 0.0
    removed: bool = False  # dropped by a later snapshot (a VimRAG search that failed)
    synthetic: bool = False  # drawn for a forced answer the agent gave without an answer node
    searched: bool = False  # a SearchResults arrived for it (possibly with no hits)
    hits: tuple[HitRef, ...] = ()
    shown: tuple[int, ...] = ()  # indices into hits given to the model
    images: list[ImageShown] = field(default_factory=list)
    memory: tuple[MemoryItem, ...] = ()
    boxes: list[BBox] = field(default_factory=list)
    crops: list[Crop] = field(default_factory=list)
    answer: str | None = None
    evidence: tuple[Evidence, ...] = ()
    forced: bool = False
    errors: list[str] = field(default_factory=list)
    think_parts: list[str] = field(default_factory=list, repr=False)  # shared with the graph's step buffer

    @property
    def thinking(self) -> str:
        """The model's reasoning in the turn that created this node."""
        return "".join(self.think_parts).strip()

    @property
    def caption(self) -> str:
        return KIND_CAPTIONS.get(self.kind, self.kind.title() or "Node")

    @property
    def tag(self) -> str:
        """A short name beside the caption: the step for VRAG chains, the model's id for VimRAG nodes."""
        if self.kind == "root":
            return ""
        if _VRAG_ID.match(self.id) or self.id == "answer" or self.synthetic:
            return f"step {self.step}" if self.step else ""
        return self.id

    @property
    def text(self) -> str:
        """The node's main line: the question, thought, query, crop region or answer."""
        if self.kind == "crop" and self.crops:
            x1, y1, x2, y2 = self.crops[-1].region
            where = f" · p.{self.crops[-1].page}" if self.crops[-1].page is not None else ""
            body = f"[{x1}, {y1}, {x2}, {y2}]{where}"
        else:
            order = {
                "root": (self.query, self.label),
                "think": (self.summary, self.label),
                "search": (self.query, self.label),
                "crop": (self.label, self.query),
                "answer": (self.answer or "", self.summary, self.label),
            }.get(self.kind, (self.label, self.summary, self.query))
            body = next((t for t in order if t and t.strip()), "")
        return _SPACES.sub(" ", body).strip()

    @property
    def badge(self) -> str:
        """A few words of status: hits and memory for searches, size for crops, forced answers."""
        if self.kind == "search":
            parts = []
            if self.searched:
                parts.append(f"{len(self.hits)} hit{'s' if len(self.hits) != 1 else ''}")
            if self.memory:
                kept = sum(1 for m in self.memory if m.useful)
                parts.append(f"{kept}/{len(self.memory)} useful")
            if self.errors:
                parts.append("error")
            return " · ".join(parts)
        if self.kind == "crop" and self.crops:
            x1, y1, x2, y2 = self.crops[-1].region
            return f"{x2 - x1}×{y2 - y1} px"
        if self.kind == "answer":
            if self.forced:
                return "forced"
            return f"{len(self.evidence)} evidence" if self.evidence else ""
        return "error" if self.errors else ""


@dataclass(frozen=True)
class GraphDelta:
    """What one event changed. ``changed``: drawn content (text, badge); ``details``: anything a
    details panel shows (a superset of ``changed`` for nodes that still exist)."""

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    added_edges: tuple[Edge, ...] = ()
    removed_edges: tuple[Edge, ...] = ()
    details: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.added
            or self.changed
            or self.removed
            or self.added_edges
            or self.removed_edges
            or self.details
        )


__all__ = ["KIND_CAPTIONS", "Edge", "GraphDelta", "Layout", "NodeInfo"]
