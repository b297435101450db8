"""The one search-hit type, from the engine to the agent, the saved run and the screen.

A hit is born in :class:`~vrag_desktop.core.search.engine.SearchEngine` (or parsed from a search
server's JSON), handed to the agent by its searcher unchanged, labelled with how the model saw it
("Image 1") and recorded in the run's ``search_results`` event, which the ask panel, the history and
the reasoning graph draw. Only the HTTP API converts it, to the original engine's JSON records.

This module imports nothing heavy, so agents and events can use it without loading the engine.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

#: How much of a hit's text travels with it into a run's events (the whole text stays in the index).
SNIPPET_CHARS = 500


@dataclass(frozen=True)
class Hit:
    """One retrieved item. Only ``score``, ``name``, ``source`` and ``modality`` are always known
    (a legacy search server gives no more)."""

    score: float  # ranking score: cosine similarity, or the fused score in hybrid mode; 0.0 if unknown
    name: str  # original-compatible id: "{stem}_{page}", "{stem}_{clip}", or the stem
    source: str  # the user's file
    modality: str  # page | image | clip | text
    image: str | None = None  # image to show (page render, image copy, clip contact sheet)
    page: int | None = None  # 1-based PDF page
    clip: int | None = None  # 1-based clip number
    t_start: float | None = None  # clip span in seconds
    t_end: float | None = None
    label: str = ""  # how the model saw it: "Picture 1", "Text 2", "Video 1" (set by the agent)
    corpus: str = ""
    item_id: int | None = None
    media: str | None = None  # raw media: original image, clip video, text file
    text: str = ""
    dense_score: float | None = None
    lexical_score: float | None = None

    @property
    def similarity(self) -> float:
        """The score to show a person: the embedding similarity (cosine) when known — a fused
        hybrid score is only a rank vote (~0.03) and says nothing about how well the item matches;
        the ranking itself stays the fused one."""
        return self.score if self.dense_score is None else self.dense_score

    def labelled(self, label: str) -> Hit:
        """This hit as the agent records it: with its label, and a text snippet rather than a whole
        document (runs stay small; the index keeps the full text)."""
        return replace(self, score=float(self.score), label=label, text=self.text[:SNIPPET_CHARS])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["SNIPPET_CHARS", "Hit"]
