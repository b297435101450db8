"""Search one or more corpora with the embedder that built them, returning typed hits.

Dense scores are cosine similarities (inner product of L2-normalised vectors); an item with several
vectors (text chunks) scores as its best chunk. Hybrid search fuses that ranking with BM25's by
reciprocal rank (:mod:`.fusion`) and its scores are the fused ones; it is the default because on
scanned reports it put the evidence page in the top 5 far more often (docs/benchmarks.md §7).
Corpora built by different embedders cannot be searched together: their scores live in different
spaces, so the engine refuses with a message. A file byte-identical in several corpora gives one hit
per page, naming the other copies (:mod:`.copies`). A reranker, when one is set (``config/search.json``,
:mod:`.settings`) or asked for, reorders the fused top candidates (:mod:`.rerank`); every entry
point builds its engine here, so they all rank a query alike.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from vrag_desktop.core.corpus.corpus import Corpus, embedder_mismatch
from vrag_desktop.core.corpus.errors import CorpusError
from vrag_desktop.core.corpus.kinds import ITEM_CLIP, ITEM_PAGE
from vrag_desktop.core.corpus.library import Library
from vrag_desktop.core.corpus.manifest import ItemRow, SourceRow, damaged_message
from vrag_desktop.core.embedders import Embedder, create_embedder
from vrag_desktop.core.index.store import Damage, StoreError
from vrag_desktop.core.search.copies import Identities, Key, best_first, group_ranking
from vrag_desktop.core.search.fusion import DEFAULT_FUSION, DEFAULT_HYBRID
from vrag_desktop.core.search.hit import Hit, Location

if TYPE_CHECKING:
    from vrag_desktop.core.search.lexical import LexicalIndex
    from vrag_desktop.core.search.rerank import Reranking


class SearchError(RuntimeError):
    """The search cannot run as asked (no corpus, embedder mismatch …); message says why."""


#: A query longer than this is refused (the embedders read a few hundred tokens of it anyway; a
#: megabyte of text would only cost memory and time).
MAX_QUERY_CHARS = 10_000


def check_query(query: str) -> str:
    """``query`` if it is text the embedder and BM25 can take; else SearchError saying why."""
    if len(query) > MAX_QUERY_CHARS:
        raise SearchError(f"the query is too long: {len(query):,} characters (at most {MAX_QUERY_CHARS:,})")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SearchError(
            f"the query is not valid text: it holds an unpaired surrogate at character {exc.start + 1}"
        ) from None
    return query


class SearchEngine:
    """Reads the corpora's stores with one embedder; thread-safe (searches are serialised).

    A reader: it opens every corpus read-only and never changes one, and before each search picks up
    what an indexing job committed since (new vectors, removed files), so a long-lived engine — the
    app's, ``serve-search`` — always searches the corpus as it is now. A corpus that cannot be read
    (damaged manifest, newer app) or whose index is partly damaged is reported in :attr:`problems`;
    when the corpora were not named, the others are still searched."""

    def __init__(
        self,
        library: Library,
        corpora: Sequence[str] | None = None,
        embedder: Embedder | None = None,
        *,
        hybrid: bool = DEFAULT_HYBRID,
        device: str | None = None,
        reuse: Embedder | None = None,
        rerank: str | None = None,
    ) -> None:
        """``embedder`` must be the one the corpora were built with; ``reuse`` is an already loaded one
        taken only when it is (the app's shared model), else the right one is loaded. ``rerank``: the
        reranker (a model id or folder; "" none); None: the data directory's setting."""
        names = list(corpora) if corpora else library.names()
        if not names:
            raise SearchError("there is no corpus yet: index some files first (vrag-desktop index PATH)")
        self._lock = threading.Lock()
        self.corpora: list[Corpus] = []
        self._left_out: list[str] = []  # corpora that could not be read, one sentence each
        for name in names:
            c = self._open(library, name, named=bool(corpora))
            if c is None:
                continue
            if c.embedder_id is None:
                c.close()
                if corpora:
                    raise SearchError(f"corpus '{name}' has not been indexed yet")
                continue
            self.corpora.append(c)
        if not self.corpora:
            self.close()
            detail = f" ({'; '.join(self._left_out)})" if self._left_out else ""
            raise SearchError(f"no corpus has been indexed yet: run vrag-desktop index PATH first{detail}")
        ids = {c.embedder_id for c in self.corpora}
        if len(ids) > 1:
            detail = ", ".join(f"'{c.name}' ({c.embedder_id})" for c in self.corpora)
            self.close()
            raise SearchError(
                f"these corpora were built with different embedders and cannot be searched together: {detail}"
            )
        wanted = ids.pop()
        if embedder is None and reuse is not None and reuse.info.id == wanted:
            embedder = reuse
        if embedder is None:
            model = self.corpora[0].manifest.get_meta("embedder_model") or wanted
            embedder = create_embedder(model, device=device, data_dir=library.data_dir)
        problem = embedder_mismatch(self.corpora[0].name, wanted, embedder.info.id)
        if problem:
            self.close()
            raise SearchError(problem)
        self.embedder = embedder
        self.hybrid = hybrid
        self.fusion = DEFAULT_FUSION  # the votes of the two rankings (a benchmark may swap them)
        self._lexical: dict[str, _Lexical] = {}
        for c in list(self.corpora):
            self._load(c)  # load now, not on the first query
        self._reranking = self._open_reranking(library, rerank)

    def _open_reranking(self, library: Library, spec: str | None) -> Reranking | None:
        """The reranking stage asked for (None: the setting); None when there is none. A reranker that
        cannot be used is kept with its problem: the search answers fused and says so."""
        from vrag_desktop.core.search.settings import RERANK_TOP, load_search_settings

        top = RERANK_TOP
        if spec is None:
            settings = load_search_settings(library.data_dir)
            if settings.problem:
                self._left_out.append(settings.problem)
            spec, top = settings.reranker, settings.rerank_top
        if not (spec or "").strip():
            return None
        from vrag_desktop.core.search.rerank import Reranking

        return Reranking(str(spec).strip(), library.data_dir, top)

    @property
    def reranker(self) -> str | None:
        """The reranker that orders the hits (its id or folder as asked for); None: fused order."""
        r = self._reranking
        return r.spec if r is not None and r.active else None

    def _open(self, library: Library, name: str, *, named: bool) -> Corpus | None:
        """The corpus, read-only; None (with the reason in :attr:`problems`) when it cannot be read
        and was not asked for by name."""
        try:
            c = library.open(name, shared=True, read_only=True)
            c.embedder_id  # noqa: B018 - the first query a damaged manifest fails on
        except (CorpusError, sqlite3.DatabaseError) as exc:
            message = (
                str(exc) if isinstance(exc, CorpusError) else damaged_message(library.corpus_dir(name), exc)
            )
            if named:
                raise SearchError(message) from exc
            self._left_out.append(message)
            return None
        return c

    def _load(self, c: Corpus) -> None:
        try:
            c.store()
            c.refresh()
        except (StoreError, sqlite3.DatabaseError) as exc:
            self._drop(c, exc)
            return

    def _drop(self, c: Corpus, exc: BaseException) -> None:
        """Leave out a corpus that failed while being read (its manifest or index is damaged)."""
        message = (
            damaged_message(c.manifest.path, exc)
            if isinstance(exc, sqlite3.DatabaseError)
            else f"{c.name}: {exc}"
        )
        self._left_out.append(message)
        if c in self.corpora:
            self.corpora.remove(c)
        c.close()

    @property
    def problems(self) -> list[str]:
        """Corpora left out (unreadable) and corpora searched without a damaged index file, one
        sentence each, as of the last search (printed by the CLI, shown by ``/health``); and a
        reranker that could not be used."""
        rerank = [self._reranking.problem] if self._reranking is not None and self._reranking.problem else []
        return self._left_out + [damage_message(c.name, c.damage) for c in self.corpora if c.damage] + rerank

    def close(self) -> None:
        for c in self.corpora:
            c.close()

    # ---------------------------------------------------------------- search
    def search(self, query: str, k: int = 10) -> list[Hit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 10) -> list[list[Hit]]:
        """Top-``k`` hits per query; all queries share one embedder forward pass. With a reranker,
        the fused top candidates are reordered by it before the cut to ``k``."""
        if k < 1:
            raise SearchError("k must be at least 1")
        queries = [check_query(str(q)) for q in queries]
        if not queries:
            return []
        qv = self.embedder.embed_queries(queries)
        with self._lock:
            self._refresh_all()
            if not self.corpora:
                raise SearchError("no corpus can be searched: " + "; ".join(self._left_out[-3:]))
            r = self._reranking
            if r is None or not r.active:
                return [self._search_one(q, qv[i : i + 1], k) for i, q in enumerate(queries)]
            depth = r.depth(k)
            return [r.apply(q, self._search_one(q, qv[i : i + 1], depth))[:k] for i, q in enumerate(queries)]

    def refresh(self) -> None:
        """Take in what indexing jobs committed since (every search does this first)."""
        with self._lock:
            self._refresh_all()

    def _refresh_all(self) -> None:
        for c in list(self.corpora):
            self._refresh(c)

    def _refresh(self, c: Corpus) -> None:
        """Take in what an indexing job committed to ``c`` since the last search."""
        try:
            changed = c.refresh()
        except (StoreError, sqlite3.DatabaseError) as exc:
            self._drop(c, exc)
            return
        if changed and c.name in self._lexical:
            self._lexical[c.name].stale = True

    def _search_one(self, query: str, qvec: np.ndarray, k: int) -> list[Hit]:
        dense: list[tuple[float, Corpus, ItemRow]] = []
        for c in list(self.corpora):
            try:
                dense += self._dense(c, qvec, k)
            except sqlite3.DatabaseError as exc:
                self._drop(c, exc)
        dense.sort(key=lambda t: -t[0])
        rows: dict[Key, tuple[Corpus, ItemRow]] = {}
        dense_scores: dict[Key, float] = {}
        for s, c, row in dense:
            rows[(c.name, row.id)] = (c, row)
            dense_scores[(c.name, row.id)] = s
        lexical_scores: dict[Key, float] = {}
        if self.hybrid:
            lexical_scores = self._lexical_ranking(query, k, rows)
        live = {c.name for c in self.corpora}  # a corpus that failed while read was left out
        if len(live) < len({key[0] for key in rows}):
            rows = {key: v for key, v in rows.items() if key[0] in live}
            dense_scores = {key: v for key, v in dense_scores.items() if key[0] in live}
        # Copies of one content (the same file in two corpora) are merged before the cut to k, so
        # a copy takes no slot (see :mod:`.copies`).
        ident = Identities(self.corpora)
        group_of = {key: ident.group(*rows[key]) for key in rows}
        dense_groups = group_ranking(dense_scores, group_of)
        if not self.hybrid:
            ranked = [(g, 0.0) for g in list(dense_groups)[:k]]
        else:
            named = self._named_groups(query, rows, group_of)
            fused = self.fusion.fuse(dense_groups, group_ranking(lexical_scores, group_of), named)
            ranked = sorted(fused.items(), key=lambda t: -t[1])[:k]
        return [self._group_hit(g, s, group_of, rows, dense_scores, lexical_scores, ident) for g, s in ranked]

    def _group_hit(
        self,
        group: str,
        fused: float,
        group_of: dict[Key, str],
        rows: dict[Key, tuple[Corpus, ItemRow]],
        dense: dict[Key, float],
        lexical: dict[Key, float],
        ident: Identities,
    ) -> Hit:
        """One content's hit: its best copy, with every other copy named in ``also_in``. Its scores
        are the content's: each ranking placed it at its best copy's rank."""
        order = {c.name: i for i, c in enumerate(self.corpora)}
        members = best_first([key for key, g in group_of.items() if g == group], dense, lexical, order)
        c, row = rows[members[0]]
        d = max((dense[m] for m in members if m in dense), default=None)
        lex = max((lexical[m] for m in members if m in lexical), default=None)
        score = fused if self.hybrid else (d if d is not None else 0.0)
        also = [Location(rows[m][0].name, _source_path(ident, *rows[m]), m[1]) for m in members[1:]]
        also += ident.copies(c, row, skip={m[0] for m in members})
        return _hit(
            c,
            row,
            score,
            source=ident.source(c, row),
            dense_score=d,
            lexical_score=lex,
            content_id=ident.content_id(c, row),
            also_in=tuple(also),
        )

    def _dense(self, c: Corpus, qvec: np.ndarray, k: int) -> list[tuple[float, Corpus, ItemRow]]:
        store = c.store()
        if store.ntotal == 0:
            return []
        # Several vectors can belong to one item (chunks): over-fetch, then keep each item's best.
        # A vector the manifest does not list (yet) is skipped: it is the indexer's, not ours to drop.
        # Copies of a content in other corpora need no more: each corpus's own top k holds every
        # content of the overall top k that it has the best copy of.
        scores, ids = store.search(qvec, min(store.ntotal, k * 4))
        rows = c.manifest.items_for_vectors(int(i) for i in ids[0] if i >= 0)
        best: dict[int, tuple[float, ItemRow]] = {}
        for s, vid in zip(scores[0].tolist(), ids[0].tolist(), strict=True):
            row = rows.get(vid)
            if row is not None and (row.id not in best or s > best[row.id][0]):
                best[row.id] = (s, row)
        return [(s, c, row) for s, row in best.values()]

    def _lexical_ranking(
        self, query: str, k: int, rows: dict[Key, tuple[Corpus, ItemRow]]
    ) -> dict[Key, float]:
        """BM25's candidates over every corpus, best first (their rows added to ``rows``). The
        hybrid ranking fuses it with the dense one by reciprocal rank (see :mod:`.fusion`)."""
        lexical: list[tuple[float, Corpus, int]] = []
        for c in list(self.corpora):
            try:
                index = self._lexical_index(c)
            except sqlite3.DatabaseError as exc:
                self._drop(c, exc)
                continue
            lexical += [(s, c, item_id) for s, item_id in index.search(query, k * 4)]
        lexical.sort(key=lambda t: -t[0])
        scores: dict[Key, float] = {}
        for s, c, item_id in lexical:
            key = (c.name, item_id)
            if key not in rows:
                lexical_row = c.manifest.item(item_id)
                if lexical_row is None:
                    continue
                rows[key] = (c, lexical_row)
            scores[key] = s
        return scores

    def _named_groups(
        self, query: str, rows: dict[Key, tuple[Corpus, ItemRow]], group_of: dict[Key, str]
    ) -> list[str]:
        """The candidates whose document the query names (only corpora indexed with document context)."""
        named: dict[str, dict[int, float]] = {}
        for c in self.corpora:
            held = self._lexical.get(c.name)
            if held is not None and held.index.names is not None:
                named[c.name] = held.index.names.named(query)
        return list(
            dict.fromkeys(g for key, g in group_of.items() if rows[key][1].source_id in named.get(key[0], {}))
        )

    def _lexical_index(self, c: Corpus) -> LexicalIndex:
        """``c``'s BM25 index, rebuilt once the corpus changed — while a corpus keeps changing (an
        indexing job commits every few seconds), at most once per five times its build takes."""
        from vrag_desktop.core.search.lexical import LexicalIndex

        held = self._lexical.get(c.name)
        now = time.monotonic()
        if held is None or (held.stale and now - held.built_at >= 5 * held.seconds):
            index = LexicalIndex.build(c.manifest)
            held = self._lexical[c.name] = _Lexical(index, now, time.monotonic() - now)
        return held.index

    def total_vectors(self) -> int:
        """Vectors searchable now (after taking in what was indexed since the last search)."""
        with self._lock:
            self._refresh_all()
            return sum(c.store().ntotal for c in self.corpora)


@dataclass
class _Lexical:
    index: LexicalIndex
    built_at: float
    seconds: float
    stale: bool = False


def damage_message(name: str, damage: list[Damage]) -> str:
    """The one sentence for a corpus searched without its damaged index files."""
    lost = sum(d.vectors or 0 for d in damage)
    what = f"{lost} vectors" if lost else "some vectors"
    return (
        f"corpus '{name}' is damaged ({'; '.join(str(d) for d in damage)}): {what} cannot be found until "
        f"it is repaired: vrag-desktop corpus check '{name}' --repair (or Check… on the corpus in the app)"
    )


def _source_path(ident: Identities, c: Corpus, row: ItemRow) -> str:
    src = ident.source(c, row)
    return src.path if src else ""


def _hit(
    c: Corpus,
    row: ItemRow,
    score: float,
    *,
    source: SourceRow | None,
    dense_score: float | None = None,
    lexical_score: float | None = None,
    content_id: str | None = None,
    also_in: tuple[Location, ...] = (),
) -> Hit:
    src = source
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
        content_id=content_id,
        also_in=also_in,
    )
