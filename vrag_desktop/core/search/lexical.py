"""BM25 over item text (text layer, OCR, text files), for hybrid retrieval."""

from __future__ import annotations

import math
import re
from typing import Any

from vrag_desktop.core.corpus.context import (
    CONTEXT_DOCUMENT,
    context_mode,
    document_context,
    page_header,
    with_context,
)
from vrag_desktop.core.corpus.manifest import I_EMBEDDED, ItemRow, Manifest

_TOKEN = re.compile(r"\w\w+")


def _firsts(manifest: Manifest, rows: list[ItemRow]) -> dict[int, tuple[str, str | None]]:
    """Each source's path and first page's text: what its header (core/corpus/context.py) is read from."""
    out: dict[int, tuple[str, str | None]] = {}
    for sid in {r.source_id for r in rows}:
        src, first = manifest.source(sid), manifest.item_at(sid, 1)
        out[sid] = (src.path if src else "", first.text if first else None)
    return out


class DocumentNames:
    """Which documents a query names: a query word found in few documents' headers (an issuer, a
    title word) names those documents, weighted by how few (inverse document frequency over the
    headers); a word in most headers ("document", "form", a year) or a stop word names none."""

    def __init__(self, headers: dict[int, str]) -> None:
        from bm25s.stopwords import STOPWORDS_EN

        self._stop = frozenset(STOPWORDS_EN)  # "the", "of": in a title, but they name nothing
        self._words = {sid: set(_TOKEN.findall(h.lower())) - self._stop for sid, h in headers.items()}
        df: dict[str, int] = {}
        for words in self._words.values():
            for w in words:
                df[w] = df.get(w, 0) + 1
        n = len(self._words)
        self._idf = {w: math.log(n / d) for w, d in df.items() if n >= 2 and d <= n / 2}

    def named(self, query: str) -> dict[int, float]:
        """Source id -> how strongly the query names it; only the sources it names."""
        asked = {w for w in _TOKEN.findall(query.lower()) if w in self._idf}
        out: dict[int, float] = {}
        for sid, words in self._words.items():
            score = sum(self._idf[w] for w in asked & words)
            if score > 0:
                out[sid] = score
        return out


class LexicalIndex:
    """An in-memory bm25s index of one corpus's embedded items."""

    def __init__(self, retriever: Any, item_ids: list[int], names: DocumentNames | None = None) -> None:
        self._retriever = retriever
        self._item_ids = item_ids
        self.names = names  # None: the corpus's chunks carry no document context

    @classmethod
    def build(cls, manifest: Manifest) -> LexicalIndex:
        import bm25s

        rows = [r for r in manifest.items(status=I_EMBEDDED) if (r.text or "").strip()]
        if not rows:
            return cls(None, [])
        texts = [r.text or "" for r in rows]
        names = None
        if context_mode(manifest) == CONTEXT_DOCUMENT:  # each page names its document, as embedded
            firsts = _firsts(manifest, rows)
            texts = [
                with_context(page_header(*firsts[r.source_id], r.ordinal), t)
                for r, t in zip(rows, texts, strict=True)
            ]
            names = DocumentNames({sid: document_context(*first) for sid, first in firsts.items()})
        tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        return cls(retriever, [r.id for r in rows], names)

    def search(self, query: str, k: int) -> list[tuple[float, int]]:
        """(bm25 score, item id), best first; only items sharing a term with the query."""
        if self._retriever is None or not query.strip():
            return []
        import bm25s

        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        if not tokens.ids or not tokens.ids[0]:
            return []
        k = min(k, len(self._item_ids))
        docs, scores = self._retriever.retrieve(tokens, k=k, show_progress=False)
        return [(float(s), self._item_ids[int(d)]) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]
