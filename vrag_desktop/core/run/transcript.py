"""A run's reasoning as readable blocks, built from the event stream.

The ask panel draws these; keeping the folding of deltas into blocks here (not in the widget) makes
the live view and a reopened run identical by construction, and testable without Qt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    BBox,
    ContentDelta,
    Crop,
    Evidence,
    HitRef,
    ImageShown,
    MaxSteps,
    Memorize,
    SearchResults,
    SearchStarted,
    ThinkDelta,
    Timing,
)

# Block kinds, in the order they usually appear within a step.
STEP, THINK, OUTPUT, SEARCH, RESULTS, IMAGE, REGION, CROP, MEMORY, ERROR, ANSWER = (
    "step",
    "think",
    "output",
    "search",
    "results",
    "image",
    "region",
    "crop",
    "memory",
    "error",
    "answer",
)

#: The header of a turn whose reply was invalid and corrected for free (no step of the budget used).
RETRY_LABEL = "Retry (invalid reply)"
#: The header of the turn after the step budget, which may only answer (not a step of the budget).
FINAL_LABEL = "Final answer (no steps left)"


@dataclass
class Block:
    id: int
    kind: str
    step: int
    text: str = ""
    data: Any = None
    seconds: float | None = None  # for step blocks: model + tool time, once known


@dataclass
class Transcript:
    """Blocks in order; ``apply`` returns the ids of blocks it created or changed."""

    blocks: list[Block] = field(default_factory=list)
    answer: Answer | None = None
    _open: dict[str, Block] = field(default_factory=dict, repr=False)  # streaming block per kind
    _step: int = -1
    _counted: set[int] = field(default_factory=set, repr=False)  # turns that used a step of the budget

    def _new(self, kind: str, step: int, text: str = "", data: Any = None) -> Block:
        b = Block(id=len(self.blocks), kind=kind, step=step, text=text, data=data)
        self.blocks.append(b)
        return b

    def _enter_step(self, step: int) -> list[int]:
        if step == self._step or step <= 0:
            return []
        self._step = step
        self._open.clear()
        # events number every model turn; a person counts the steps of the budget, which free
        # retries do not use (a turn is known to be one only at its end: see Timing)
        shown = len(self._counted - {step}) + 1
        return [self._new(STEP, step, f"Step {shown}").id]

    def apply(self, ev: AgentEvent) -> list[int]:
        changed = self._enter_step(ev.step)
        if isinstance(ev, ThinkDelta | ContentDelta):
            kind = THINK if isinstance(ev, ThinkDelta) else OUTPUT
            if not ev.content:
                return changed
            streaming = self._open.get(kind)
            if streaming is None:
                streaming = self._new(kind, ev.step)
                self._open[kind] = streaming
            streaming.text += ev.content
            return [*changed, streaming.id]
        # Any action ends the streaming text blocks of this step.
        self._open.clear()
        block: Block | None = None
        if isinstance(ev, SearchStarted):
            block = self._new(SEARCH, ev.step, ev.content, ev.node_id)
        elif isinstance(ev, SearchResults):
            block = self._new(RESULTS, ev.step, ev.content, (ev.hits, ev.shown))
        elif isinstance(ev, ImageShown):
            block = self._new(IMAGE, ev.step, _where(ev.source, ev.page), ev)
        elif isinstance(ev, BBox):
            block = self._new(REGION, ev.step, ev.content, ev.box)
        elif isinstance(ev, Crop):
            x1, y1, x2, y2 = ev.region
            text = f"{x2 - x1}×{y2 - y1} px at ({x1}, {y1}) of {_where(ev.source, ev.page)}"
            block = self._new(CROP, ev.step, text, ev)
        elif isinstance(ev, Memorize):
            block = self._new(MEMORY, ev.step, ev.content, ev)
        elif isinstance(ev, AgentError | MaxSteps):
            block = self._new(ERROR, ev.step, ev.content, ev)
        elif isinstance(ev, Answer):
            self.answer = ev
            block = self._new(ANSWER, ev.step, ev.content, ev)
        elif isinstance(ev, Timing):
            if ev.free_retry or ev.final:
                self._counted.discard(ev.step)
            else:
                self._counted.add(ev.step)
            for b in reversed(self.blocks):
                if b.kind == STEP and b.step == ev.step:
                    b.seconds = (b.seconds or 0.0) + ev.model_seconds + ev.tool_seconds
                    if ev.free_retry or ev.final:
                        b.text = FINAL_LABEL if ev.final else RETRY_LABEL
                    return [*changed, b.id]
        return [*changed, block.id] if block else changed

    def streaming(self, block_id: int) -> bool:
        """Whether the block still receives streamed text (its step's model reply is not over)."""
        return any(b.id == block_id for b in self._open.values())

    @classmethod
    def from_events(cls, events: Any) -> Transcript:
        t = cls()
        for ev in events:
            t.apply(ev)
        return t


def _where(source: str, page: int | None) -> str:
    name = Path(source).name if source else "image"
    return f"{name} p. {page}" if page else name


def hit_where(h: HitRef) -> str:
    """``report.pdf p. 3`` / ``talk.mp4 0:40–1:40`` / ``notes.md``."""
    name = Path(h.source).name if h.source else h.name
    if h.page:
        return f"{name} p. {h.page}"
    if h.t_start is not None and h.t_end is not None:
        return f"{name} {_clock(h.t_start)}–{_clock(h.t_end)}"
    return name


def evidence_label(e: Evidence) -> str:
    label = _where(e.source, e.page)
    if e.region:
        x1, y1, x2, y2 = e.region
        label += f" · region {x2 - x1}×{y2 - y1} at ({x1}, {y1})"
    return label


def _clock(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"
