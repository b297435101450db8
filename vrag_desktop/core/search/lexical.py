"""BM25 over item text (text layer, OCR, text files), for hybrid retrieval."""

from __future__ import annotations

from typing import Any

from vrag_desktop.core.corpus.manifest import I_EMBEDDED, Manifest


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
        tokens = bm25s.tokenize([r.text or "" for r in rows], stopwords="en", show_progress=False)
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
