"""Search one or more corpora with the embedder that built them, returning typed hits.

Dense scores are cosine similarities (inner product of L2-normalised vectors); an item with several
vectors (text chunks) scores as its best chunk. Hybrid search fuses that ranking with BM25's by
reciprocal rank (:mod:`.fusion`) and its scores are the fused ones; it is the default because on
scanned reports it put the evidence page in the top 5 far more often (docs/benchmarks.md §7).
Corpora built by different embedders cannot be searched together: their scores live in different
spaces, so the engine refuses with a message.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from vrag_desktop.core.corpus.corpus import Corpus, embedder_mismatch
from vrag_desktop.core.corpus.kinds import ITEM_CLIP, ITEM_PAGE
from vrag_desktop.core.corpus.library import Library
from vrag_desktop.core.corpus.manifest import ItemRow
from vrag_desktop.core.embedders import Embedder, create_embedder
from vrag_desktop.core.search.hit import Hit


class SearchError(RuntimeError):
    """The search cannot run as asked (no corpus, embedder mismatch …); message says why."""


class SearchEngine:
    """Holds the corpora's stores and one embedder; thread-safe (searches are serialised)."""

    def __init__(
        self,
        library: Library,
        corpora: Sequence[str] | None = None,
        embedder: Embedder | None = None,
        *,
        hybrid: bool = True,
        device: str | None = None,
        reuse: Embedder | None = None,
    ) -> None:
        """``embedder`` must be the one the corpora were built with; ``reuse`` is an already loaded one
        taken only when it is (the app's shared model), else the right one is loaded."""
        names = list(corpora) if corpora else library.names()
        if not names:
            raise SearchError("there is no corpus yet: index some files first (vrag-desktop index PATH)")
        self._lock = threading.Lock()
        self.corpora: list[Corpus] = []
        for name in names:
            c = library.open(name, shared=True)
            if c.embedder_id is None:
                if corpora:
                    raise SearchError(f"corpus '{name}' has not been indexed yet")
                continue
            self.corpora.append(c)
        if not self.corpora:
            raise SearchError("no corpus has been indexed yet: run vrag-desktop index PATH first")
        ids = {c.embedder_id for c in self.corpora}
        if len(ids) > 1:
            detail = ", ".join(f"'{c.name}' ({c.embedder_id})" for c in self.corpora)
            raise SearchError(
                f"these corpora were built with different embedders and cannot be searched together: {detail}"
            )
        wanted = ids.pop()
        if embedder is None and reuse is not None and reuse.info.id == wanted:
            embedder = reuse
        if embedder is None:
            model = self.corpora[0].manifest.get_meta("embedder_model") or wanted
            embedder = create_embedder(model, device=device)
        problem = embedder_mismatch(self.corpora[0].name, wanted, embedder.info.id)
        if problem:
            raise SearchError(problem)
        self.embedder = embedder
        self.hybrid = hybrid
        self._lexical: dict[str, Any] = {}
        for c in self.corpora:
            c.store()  # load + reconcile now, not on the first query

    def close(self) -> None:
        for c in self.corpora:
            c.close()

    # ---------------------------------------------------------------- search
    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """Top-``k`` hits per query; all queries share one embedder forward pass."""
        if k < 1:
            raise SearchError("k must be at least 1")
        queries = [str(q) for q in queries]
        if not queries:
            return []
        qv = self.embedder.embed_queries(queries)
        with self._lock:
            return [self._search_one(q, qv[i : i + 1], k) for i, q in enumerate(queries)]

    def _search_one(self, query: str, qvec: np.ndarray, k: int) -> list[Hit]:
        dense: list[tuple[float, Corpus, ItemRow]] = []
        for c in self.corpora:
            store = c.store()
            if store.ntotal == 0:
                continue
            # Several vectors can belong to one item (chunks): over-fetch, then keep each item's best.
            scores, ids = store.search(qvec, min(store.ntotal, k * 4))
            rows = c.manifest.items_for_vectors(int(i) for i in ids[0] if i >= 0)
            best: dict[int, tuple[float, ItemRow]] = {}
            for s, vid in zip(scores[0].tolist(), ids[0].tolist(), strict=True):
                row = rows.get(vid)
                if row is not None and (row.id not in best or s > best[row.id][0]):
                    best[row.id] = (s, row)
            dense += [(s, c, row) for s, row in best.values()]
        dense.sort(key=lambda t: -t[0])
        if not self.hybrid:
            return [_hit(c, row, s, dense_score=s) for s, c, row in dense[:k]]
        return self._fuse(query, dense, k)

    def _fuse(self, query: str, dense: list[tuple[float, Corpus, ItemRow]], k: int) -> list[Hit]:
        """Weighted reciprocal-rank fusion of dense and BM25 results (see :mod:`.fusion`)."""
        from vrag_desktop.core.search.fusion import rrf
        from vrag_desktop.core.search.lexical import LexicalIndex

        rows: dict[tuple[str, int], tuple[Corpus, ItemRow]] = {}
        dense_scores: dict[tuple[str, int], float] = {}
        for s, c, row in dense:
            rows[(c.name, row.id)] = (c, row)
            dense_scores[(c.name, row.id)] = s
        lexical: list[tuple[float, Corpus, int]] = []
        for c in self.corpora:
            if c.name not in self._lexical:
                self._lexical[c.name] = LexicalIndex.build(c.manifest)
            lexical += [(s, c, item_id) for s, item_id in self._lexical[c.name].search(query, k * 4)]
        lexical.sort(key=lambda t: -t[0])
        lexical_scores: dict[tuple[str, int], float] = {}
        for s, c, item_id in lexical:
            key = (c.name, item_id)
            if key not in rows:
                lexical_row = c.manifest.item(item_id)
                if lexical_row is None:
                    continue
                rows[key] = (c, lexical_row)
            lexical_scores[key] = s
        fused = rrf(list(dense_scores), list(lexical_scores))
        ranked = sorted(fused.items(), key=lambda t: -t[1])[:k]
        return [
            _hit(*rows[key], score, dense_score=dense_scores.get(key), lexical_score=lexical_scores.get(key))
            for key, score in ranked
        ]

    # ---------------------------------------------------------------- files
    def known_files(self) -> set[str]:
        """Every image/media path the corpora know: the only files the HTTP server will serve."""
        out: set[str] = set()
        with self._lock:
            for c in self.corpora:
                for row in c.manifest.items():
                    out.update(p for p in (row.image_path, row.media_path) if p)
        return out

    def total_vectors(self) -> int:
        return sum(c.store().ntotal for c in self.corpora)


def _hit(
    c: Corpus,
    row: ItemRow,
    score: float,
    *,
    dense_score: float | None = None,
    lexical_score: float | None = None,
) -> Hit:
    src = c.manifest.source(row.source_id)
    return Hit(
        score=float(score),
        corpus=c.name,
        item_id=row.id,
        name=row.name,
        source=src.path if src else "",
        modality=row.kind,
        page=row.ordinal if row.kind == ITEM_PAGE else None,
        clip=row.ordinal if row.kind == ITEM_CLIP else None,
        t_start=row.t_start,
        t_end=row.t_end,
        image=row.image_path,
        media=row.media_path,
        text=row.text or "",
        dense_score=None if dense_score is None else float(dense_score),
        lexical_score=None if lexical_score is None else float(lexical_score),
    )
