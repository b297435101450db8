"""The one search-hit type, from the engine to the agent, the saved run and the screen.

A hit is born in :class:`~vrag_desktop.core.search.engine.SearchEngine` (or parsed from a search
server's JSON), handed to the agent by its searcher unchanged, labelled with how the model saw it
("Image 1") and recorded in the run's ``search_results`` event, which the ask panel, the history and
the reasoning graph draw. Only the HTTP API converts it, to the original engine's JSON records.

This module imports nothing heavy, so agents and events can use it without loading the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

#: How much of a hit's text travels with it into a run's events (the whole text stays in the index).
SNIPPET_CHARS = 500


@dataclass(frozen=True)
class Location:
    """Another place the same content is indexed: a byte-identical copy of the file in another
    corpus. The engine returns one hit per content, so the copies are named on it, not repeated."""

    corpus: str
    source: str
    item_id: int | None = None


def _locations(value: Iterable[Any] | None) -> tuple[Location, ...]:
    """``also_in`` as :class:`Location` s, from themselves or from their dicts (a saved run's events,
    a search server's JSON); anything else there is a bug or a foreign server: refused."""
    if value is None:
        return ()
    if isinstance(value, str | bytes | Mapping):
        raise TypeError(f"also_in must be a list of locations, not {value!r}")
    out = []
    for v in value:
        if isinstance(v, Location):
            out.append(v)
        elif (
            isinstance(v, Mapping)
            and isinstance(v.get("corpus", ""), str)
            and isinstance(v.get("source"), str)
        ):
            item_id = v.get("item_id")
            out.append(
                Location(
                    str(v.get("corpus") or ""), v["source"], item_id if isinstance(item_id, int) else None
                )
            )
        else:
            raise TypeError(f"also_in holds {v!r}: expected {{'corpus', 'source', 'item_id'}}")
    return tuple(out)


@dataclass(frozen=True)
class Hit:
    """One retrieved item. Only ``score``, ``name``, ``source`` and ``modality`` are always known
    (a legacy search server gives no more)."""

    score: float  # the ranking score: cosine, the fused vote (hybrid), the reranker's score; 0.0 if unknown
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
    #: The reranker's relevance score (a logit: higher is more relevant), also the ranking ``score``;
    #: None when no reranker read this hit (core/search/rerank.py).
    rerank_score: float | None = None
    #: What the item is, wherever it is indexed: the file's SHA-256, the item's kind and place in it
    #: (None when unknown: a legacy import, a foreign server). Equal ids are the same page or image.
    content_id: str | None = None
    also_in: tuple[Location, ...] = ()  # byte-identical copies in other corpora

    def __post_init__(self) -> None:
        if not isinstance(self.also_in, tuple) or any(not isinstance(x, Location) for x in self.also_in):
            object.__setattr__(self, "also_in", _locations(self.also_in))

    @property
    def reranked(self) -> bool:
        """Whether ``score`` is the reranker's (core/search/rerank.py)."""
        return self.rerank_score is not None

    @property
    def fused(self) -> bool:
        """Whether ``score`` is the hybrid vote (reciprocal-rank fusion), not a cosine."""
        return not self.reranked and (
            self.lexical_score is not None
            or (self.dense_score is not None and self.score != self.dense_score)
        )

    @property
    def score_text(self) -> str:
        """The ranking score as people read it: a list sorted by it reads in order. The fused vote is
        small (about 0.03), so it gets a fourth digit; a cosine or a reranker's score three."""
        return f"{self.score:.4f}" if self.fused else f"{self.score:.3f}"

    @property
    def cosine_text(self) -> str:
        """``cosine 0.382`` for a fused or reranked hit whose embedding similarity is known, else
        empty: it says how well the item matches, but only labelled, beside the score that ranks."""
        shown = self.fused or self.reranked
        return f"cosine {self.dense_score:.3f}" if shown and self.dense_score is not None else ""

    @property
    def score_note(self) -> str:
        """What :attr:`score_text` is, in words (a tooltip, a legend)."""
        if self.reranked:
            return "ranking score: the reranker's relevance score" + (
                f" ({self.cosine_text})" if self.cosine_text else ""
            )
        if self.fused:
            return "ranking score: the fused vote of the embedding and keyword rankings" + (
                f" ({self.cosine_text})" if self.cosine_text else ""
            )
        if self.dense_score is not None:
            return "ranking score: the cosine similarity of the embeddings"
        return "ranking score, as the search server gave it"

    @property
    def sources(self) -> tuple[str, ...]:
        """Every file this hit was found in: its own, then its copies in other corpora."""
        return (self.source, *(x.source for x in self.also_in))

    def also_in_text(self, limit: int = 3, *, paths: bool = True) -> str:
        """``also in 'docs' (/home/me/report.pdf)`` for a hit with copies elsewhere (without
        ``paths``: the corpora only), else empty."""
        if not self.also_in:
            return ""
        shown = [
            (f"'{x.corpus}' ({x.source})" if paths else f"'{x.corpus}'") if x.corpus else x.source
            for x in self.also_in[:limit]
        ]
        more = len(self.also_in) - limit
        return "also in " + ", ".join(shown) + (f" and {more} more" if more > 0 else "")

    def labelled(self, label: str) -> Hit:
        """This hit as the agent records it: with its label, and a text snippet rather than a whole
        document (runs stay small; the index keeps the full text)."""
        return replace(self, score=float(self.score), label=label, text=self.text[:SNIPPET_CHARS])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["SNIPPET_CHARS", "Hit", "Location"]
