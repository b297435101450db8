"""BM25 over item text (text layer, OCR, text files), for hybrid retrieval."""

from __future__ import annotations

from typing import Any

from vrag_desktop.core.corpus.context import CONTEXT_DOCUMENT, context_mode, document_context, with_context
from vrag_desktop.core.corpus.manifest import I_EMBEDDED, ItemRow, Manifest


def _headers(manifest: Manifest, rows: list[ItemRow]) -> list[str]:
    """Each row's document header (:mod:`~vrag_desktop.core.corpus.context`), as the build made it."""
    headers: dict[int, str] = {}
    for sid in {r.source_id for r in rows}:
        src, first = manifest.source(sid), manifest.item_at(sid, 1)
        headers[sid] = document_context(src.path if src else "", first.text if first else None)
    return [headers[r.source_id] for r in rows]


class LexicalIndex:
    """An in-memory bm25s index of one corpus's embedded items."""

    def __init__(self, retriever: Any, item_ids: list[int]) -> None:
        self._retriever = retriever
        self._item_ids = item_ids

    @classmethod
    def build(cls, manifest: Manifest) -> LexicalIndex:
        import bm25s

        rows = [r for r in manifest.items(status=I_EMBEDDED) if (r.text or "").strip()]
        if not rows:
            return cls(None, [])
        texts = [r.text or "" for r in rows]
        if context_mode(manifest) == CONTEXT_DOCUMENT:  # each page names its document, as embedded
            texts = [with_context(h, t) for h, t in zip(_headers(manifest, rows), texts, strict=True)]
        tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
        retriever = bm25s.BM25()
        retriever.index(tokens, show_progress=False)
        return cls(retriever, [r.id for r in rows])

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
