"""The original demos' output shapes, folded from our one typed event stream.

Why: code written against the original keeps working — the VRAG demo's ``run`` yielded
``(kind, content, extra)`` tuples and *returned* the answer; the VimRAG demo emitted dict events and
put a ``sample`` (trajectory, search_results, graph, generate, generate_times) in its answer. Our
agents emit typed events with more detail; these folds rebuild the original shapes from them, so the
agents stay one implementation and the compatibility lives in one place (used by :mod:`vrag_desktop.api`).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

from vrag_desktop.core.agents.events import (
    AgentEvent,
    Answer,
    BBox,
    ContentDelta,
    Crop,
    GraphChanged,
    ImageShown,
    Memorize,
    SearchResults,
    SearchStarted,
    ThinkDelta,
    Timing,
)

#: How the VRAG demo marked a crop on the previous image (reference §3.4).
CROP_OUTLINE = (160, 32, 240)
CROP_OUTLINE_WIDTH = 7


def action_graph(ev: GraphChanged, question: str) -> list[dict[str, Any]]:
    """The graph as the original's ``action_graph`` list (order = time; edges as ``parent_ids``)."""
    out: list[dict[str, Any]] = []
    for n in ev.nodes:
        if n.kind == "root":
            out.append(
                {"id": "root", "name": "Initial Node", "content": f"Initial query from user: {question}"}
            )
        elif n.kind == "answer":
            out.append({"id": "answer", "parent_ids": list(n.parents)})
        else:
            node: dict[str, Any] = {"id": n.id, "parent_ids": list(n.parents), "query": n.query or n.label}
            node["summary"] = n.summary
            if n.kind != "search":
                node["type"] = n.kind  # VRAG chains: think and crop steps
            out.append(node)
    return out


class OriginalSample:
    """Fold of one run's events into the original VimRAG answer's ``sample``.

    ``generate`` is the model's raw output per model call and ``generate_times`` its seconds;
    ``search_results`` one entry per search (query, node, hits as the original engine's records);
    ``graph`` the final action graph; ``trajectory`` the turns in order: the model's raw output
    (``assistant``) and what the tools returned (``tool``)."""

    def __init__(self, question: str) -> None:
        self.question = question
        self._text: dict[int, list[str]] = {}
        self.generate_times: list[float] = []
        self.search_results: list[dict[str, Any]] = []
        self.trajectory: list[dict[str, Any]] = []
        self.graph: list[dict[str, Any]] = []

    def add(self, ev: AgentEvent) -> None:
        if isinstance(ev, ContentDelta):
            self._text.setdefault(ev.step, []).append(ev.content)
        elif isinstance(ev, Timing):
            self.generate_times.append(ev.model_seconds)
            raw = "".join(self._text.get(ev.step, []))
            self.trajectory.append({"role": "assistant", "step": ev.step, "content": raw})
        elif isinstance(ev, SearchResults):
            results = [
                {
                    "type": {"clip": "video", "text": "text"}.get(h.modality, "image"),
                    "file_path": h.image or h.source,
                }
                | {"score": h.score, "name": h.name, "label": h.label}
                for h in ev.hits
            ]
            self.search_results.append({"query": ev.content, "node_id": ev.node_id, "results": results})
            self.trajectory.append(
                {"role": "tool", "name": "search", "query": ev.content, "results": results}
            )
        elif isinstance(ev, Memorize):
            self.trajectory.append({"role": "tool", "name": "summarize_and_memorize", "summary": ev.content})
        elif isinstance(ev, GraphChanged):
            self.graph = action_graph(ev, self.question)

    @property
    def generate(self) -> list[str]:
        return ["".join(self._text[s]) for s in sorted(self._text)]

    def sample(self) -> dict[str, Any]:
        return {
            "query": self.question,
            "trajectory": list(self.trajectory),
            "search_results": list(self.search_results),
            "graph": list(self.graph),
            "generate": self.generate,
            "generate_times": list(self.generate_times),
        }


def vrag_tuples(events: Iterable[AgentEvent]) -> Generator[tuple[str, Any, Any], None, tuple[str, str, str]]:
    """The VRAG demo's stream: ``('think', text, raw)``, ``('search', query, raw)``, ``('bbox',
    '[x1, y1, x2, y2]', raw)``, ``('search_image', image_shown, raw_image)``, ``('crop_image', crop,
    previous_image_with_the_box_drawn)``; returns ``('answer', text, raw)`` (the demo's
    ``StopIteration.value``). ``raw`` is the model's whole reply of that step; images are PIL images."""
    from PIL import Image, ImageDraw

    think: dict[int, list[str]] = {}
    text: dict[int, list[str]] = {}
    thought_sent: set[int] = set()
    previous: str | None = None  # the last image shown to the model
    box: tuple[float, float, float, float] | None = None

    def raw(step: int) -> str:
        return "".join(text.get(step, []))

    for ev in events:
        if isinstance(ev, ThinkDelta):
            think.setdefault(ev.step, []).append(ev.content)
            continue
        if isinstance(ev, ContentDelta):
            text.setdefault(ev.step, []).append(ev.content)
            continue
        if (
            isinstance(ev, SearchStarted | BBox | Answer)
            and ev.step not in thought_sent
            and think.get(ev.step)
        ):
            thought_sent.add(ev.step)
            yield ("think", "".join(think[ev.step]).strip(), raw(ev.step))
        if isinstance(ev, SearchStarted):
            yield ("search", ev.content, raw(ev.step))
        elif isinstance(ev, BBox):
            box = ev.box
            yield ("bbox", ev.content, raw(ev.step))
        elif isinstance(ev, ImageShown):
            previous = ev.image
            yield ("search_image", Image.open(ev.image), Image.open(ev.raw) if ev.raw else None)
        elif isinstance(ev, Crop):
            marked = None
            if previous is not None:
                with Image.open(previous) as im:
                    marked = im.convert("RGB")
                if box is not None:
                    ImageDraw.Draw(marked).rectangle(box, outline=CROP_OUTLINE, width=CROP_OUTLINE_WIDTH)
            previous = ev.image
            yield ("crop_image", Image.open(ev.image), marked)
        elif isinstance(ev, Answer):
            return ("answer", ev.content, raw(ev.step))
    return ("answer", "", "")


__all__ = ["CROP_OUTLINE", "OriginalSample", "action_graph", "vrag_tuples"]
