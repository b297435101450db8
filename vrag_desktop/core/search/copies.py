"""One search result per content: byte-identical copies of a file in several corpora are one hit.

Why: a person who adds a folder holding a copy of a report already in another corpus would get the
same page twice in a top 3 (same score, a wasted slot), an agent would be shown it twice, and an
evaluation would count it twice. Each corpus indexes a file's content once already (the manifest's
``duplicate`` status); across corpora the engine does the same at search time.

A page's identity is the SHA-256 of its file (the manifest's ``sources.sha256``, stored since the
first manifest schema, so every index built by the app has it) with the item's kind and place in the
file (page number; a clip's time span too, since corpora may cut videos differently). An item
without a hash (imported from an original VRAG index) is its own identity and is never merged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from vrag_desktop.core.corpus.kinds import ITEM_CLIP
from vrag_desktop.core.corpus.manifest import I_EMBEDDED, ItemRow, SourceRow
from vrag_desktop.core.search.hit import Location

if TYPE_CHECKING:
    from vrag_desktop.core.corpus.corpus import Corpus

#: One candidate item: (corpus name, item id).
Key = tuple[str, int]

__all__ = ["Identities", "Key", "best_first", "group_ranking"]


class Identities:
    """The content ids of one search's candidates; each source row is read once per search."""

    def __init__(self, corpora: Sequence[Corpus]) -> None:
        self._corpora = list(corpora)
        self._sources: dict[tuple[str, int], SourceRow | None] = {}

    def source(self, c: Corpus, row: ItemRow) -> SourceRow | None:
        key = (c.name, row.source_id)
        if key not in self._sources:
            self._sources[key] = c.manifest.source(row.source_id)
        return self._sources[key]

    def content_id(self, c: Corpus, row: ItemRow) -> str | None:
        """``<sha256>:<kind>:<ordinal>`` (a clip adds its span); None when the file has no hash."""
        src = self.source(c, row)
        if src is None or not src.sha256:
            return None
        span = f"@{row.t_start:g}-{row.t_end:g}" if row.kind == ITEM_CLIP else ""
        return f"{src.sha256}:{row.kind}:{row.ordinal}{span}"

    def group(self, c: Corpus, row: ItemRow) -> str:
        """What candidates are merged by: the content id, or the item itself when it has none."""
        return self.content_id(c, row) or f"item:{c.name}\0{row.id}"

    def copies(self, c: Corpus, row: ItemRow, skip: Iterable[str]) -> list[Location]:
        """The same content in the corpora not in ``skip`` (those not among the candidates): an
        indexed file of the same hash there, with an embedded item at the same place."""
        content = self.content_id(c, row)
        src = self.source(c, row)
        if content is None or src is None or src.sha256 is None:
            return []
        out: list[Location] = []
        skipped = set(skip)
        for other in self._corpora:
            if other.name in skipped:
                continue
            twin = other.manifest.source_by_sha(src.sha256)
            item = None if twin is None else other.manifest.item_at(twin.id, row.ordinal)
            if twin is None or item is None or item.status != I_EMBEDDED:
                continue
            self._sources[(other.name, twin.id)] = twin
            if self.content_id(other, item) == content:
                out.append(Location(other.name, twin.path, item.id))
        return out


def group_ranking(ranking: Mapping[Key, float], group_of: Mapping[Key, str]) -> dict[str, float]:
    """A best-first ranking of items with their scores as a best-first ranking of contents, each
    once (at its best copy's rank, with its score), so a copy neither takes a rank nor pushes the
    next item down."""
    out: dict[str, float] = {}
    for key, score in ranking.items():
        out.setdefault(group_of[key], float(score))
    return out


def best_first(
    members: Iterable[Key],
    dense: Mapping[Key, float],
    lexical: Mapping[Key, float],
    corpus_order: Mapping[str, int],
) -> list[Key]:
    """The copies of one content, the one to show first: the best embedding score, then the best
    BM25 score (its statistics differ per corpus), then the corpora's order, then the item id.
    Embedding scores are compared to 5 decimals: a copy's vector can differ from the other's in its
    last bits (it was embedded in another batch), which must not decide."""

    def rank(key: Key) -> tuple[float, float, int, int]:
        return (
            -round(dense.get(key, -math.inf), 5),
            -lexical.get(key, -math.inf),
            corpus_order.get(key[0], len(corpus_order)),
            key[1],
        )

    return sorted(members, key=rank)
