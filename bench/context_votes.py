#!/usr/bin/env python
"""Where document context helps and where it hurts: the votes of the plain and the context index of
one benchmark, combined in-process, scored by core/eval (issue 33: the bank reports lose recall@1
with document context, 0.627 -> 0.562, while the filings gain 0.566 -> 0.679).

Why: a chunk embedded with its document's header moves towards every other chunk of that document.
That helps pick the right document among look-alikes (the filings: any page of the right filing is
evidence) and can cost the order of pages inside one document (the bank reports: one page is the
evidence). The rules below separate the two: the *document* order from one ranking, the *page* order
inside each document from another.

Per query, each index gives the rankings its engine fuses in the evaluation's search (top 10): the
dense and the BM25 candidates, and the candidates of the documents the query names
(core/search/lexical.py DocumentNames; context indexes only), captured from the engine's own fusion
call. Content ids (file SHA-256, kind, place) are the same in both indexes. Rules:

- ``plain`` / ``context``: the product's hybrid (core/search/fusion.py's default: RRF, k = 5, votes
  scaled by each ranking's confidence) on that index alone; ``… equal votes``: RRF k = 5 with equal
  votes (the default before confidence).
- ``4 votes``: RRF over both indexes' dense and BM25 rankings.
- ``ctx docs, plain pages``: the context ranking's slots kept, each document's pages in it re-ordered
  by the plain ranking (the document order is the context's, the page order inside it the plain's).
- ``ctx docs, ctx-dense+plain-BM25 pages``: the same with the pages ordered by context dense + plain
  BM25 (what a single context index with plain keyword text could do).
- ``plain + names w``: the plain hybrid plus the named-documents vote at weight w.

Needs the indexes ``bench/retrieval_suite.py`` builds (bench/data/suite/<name>/{plain,context}).

    nice -n 10 .venv/bin/python bench/context_votes.py [--only bank --only filings --only sample]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval_suite import BENCHMARKS, CORPUS, DATA, KS  # noqa: E402
from vrag_desktop.core.search.fusion import DEFAULT_FUSION, RRF_K, Fusion, margin, rrf  # noqa: E402

Lists = dict[str, list[str]]


class _Capturing:
    """The engine's own fusion, also keeping the rankings it was handed (content ids: the file's
    SHA-256, kind and place, the same in both indexes of a benchmark)."""

    def __init__(self, fusion: Any, into: list[Lists]) -> None:
        self.fusion, self.into = fusion, into

    def fuse(
        self, dense: dict[str, float], lexical: dict[str, float], named: Sequence[str] = ()
    ) -> dict[str, float]:
        self.into.append({"dense": list(dense), "lexical": list(lexical), "named": list(named)})
        _scored.append((dict(dense), dict(lexical)))
        return dict(self.fusion.fuse(dense, lexical, named))


_scored: list[tuple[dict[str, float], dict[str, float]]] = []


def rankings(data_dir: Path, queries: Sequence[str], k: int) -> tuple[list[Lists], dict[str, Any]]:
    """Per query, what this index's engine fuses in a search for the top ``k`` (its dense, BM25 and
    named-document candidates, best first), and a scoreable stand-in hit per content id."""
    from vrag_desktop.core.corpus.kinds import ITEM_PAGE
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.search import SearchEngine

    engine = SearchEngine(Library(data_dir), [CORPUS], hybrid=True)
    out: list[Lists] = []
    _scored.clear()
    engine.fusion = _Capturing(engine.fusion, out)  # type: ignore[assignment]
    engine.search_batch(list(queries), k)
    (corpus,) = engine.corpora
    manifest = corpus.manifest
    paths = {src.sha256: src.path for src in manifest.sources()}
    hits: dict[str, Any] = {}
    for lists in out:
        for group in (g for which in ("dense", "lexical", "named") for g in lists[which]):
            sha, kind, place = group.split(":", 2)
            page = int(place) if kind == ITEM_PAGE else None
            hits.setdefault(group, SimpleNamespace(sources=(paths[sha],), page=page))
    engine.close()
    for lists, (ds, ls) in zip(out, _scored, strict=True):
        lists["dense_scores"] = ds  # type: ignore[assignment]
        lists["lexical_scores"] = ls  # type: ignore[assignment]
    return out, hits


def _doc(group: str) -> str:
    return group.split(":", 1)[0]


def _order(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda key: -scores[key])


def docs_from(doc_ranking: list[str], page_ranking: list[str]) -> list[str]:
    """``doc_ranking``'s slots kept; the pages of each document in it re-ordered by ``page_ranking``
    (pages that ranking lacks keep their relative order, after the ones it has)."""
    pos = {key: i for i, key in enumerate(page_ranking)}
    by_doc: dict[str, list[str]] = {}
    for key in doc_ranking:
        by_doc.setdefault(_doc(key), []).append(key)
    queues = {
        doc: sorted(keys, key=lambda k: (pos.get(k, len(pos)), doc_ranking.index(k)))
        for doc, keys in by_doc.items()
    }
    return [queues[_doc(key)].pop(0) for key in doc_ranking]


Rule = Callable[[Lists, Lists], list[str]]


def _scored_lists(lists: Lists) -> tuple[dict[str, float], dict[str, float]]:
    return lists["dense_scores"], lists["lexical_scores"]  # type: ignore[return-value]


def rules() -> dict[str, Rule]:
    def hybrid(lists: Lists) -> list[str]:
        return _order(rrf(lists["dense"], lists["lexical"], k=RRF_K))

    def default(lists: Lists) -> list[str]:
        return _order(DEFAULT_FUSION.fuse(*_scored_lists(lists)))

    def four(p: Lists, c: Lists) -> list[str]:
        a = rrf(p["dense"], p["lexical"], k=RRF_K)
        b = rrf(c["dense"], c["lexical"], k=RRF_K)
        return _order({key: a.get(key, 0.0) + b.get(key, 0.0) for key in set(a) | set(b)})

    def with_names(w: float) -> Rule:
        def rule(p: Lists, c: Lists) -> list[str]:
            base = rrf(p["dense"], p["lexical"], k=RRF_K)
            order = {key: i for i, key in enumerate(_order(base))}
            named = sorted(c["named"], key=lambda key: order.get(key, len(order)))
            for rank, key in enumerate(named):
                base[key] = base.get(key, 0.0) + w / (RRF_K + rank + 1)
            return _order(base)

        return rule

    out: dict[str, Rule] = {
        "plain": lambda p, c: default(p),
        "context": lambda p, c: default(c),
        "plain, equal votes": lambda p, c: hybrid(p),
        "context, equal votes": lambda p, c: hybrid(c),
        "plain dense": lambda p, c: p["dense"],
        "context dense": lambda p, c: c["dense"],
        "plain BM25": lambda p, c: p["lexical"],
        "context BM25": lambda p, c: c["lexical"],
        "4 votes": four,
        "ctx docs, plain pages": lambda p, c: docs_from(hybrid(c), hybrid(p)),
        "ctx docs, ctx-dense+plain-BM25 pages": lambda p, c: docs_from(
            hybrid(c), _order(rrf(c["dense"], p["lexical"], k=RRF_K))
        ),
        "ctx-dense+plain-BM25": lambda p, c: _order(rrf(c["dense"], p["lexical"], k=RRF_K)),
    }
    for w in (0.5, 1.0):
        out[f"plain + names {w:g}"] = with_names(w)

    def confident(alpha: float, which: str, dense_too: bool = True) -> Rule:
        """RRF whose votes follow each ranking's confidence in this query: how far its first score
        stands above its second, relative to the first (a ranking of look-alikes has none)."""

        def rule(p: Lists, c: Lists) -> list[str]:
            dense, lexical = _scored_lists(c if which == "context" else p)
            if dense_too:
                return _order(Fusion(confidence=alpha).fuse(dense, lexical))
            weight = 1 + alpha * margin(lexical)
            return _order(rrf(list(dense), list(lexical), lexical_weight=weight, k=RRF_K))

        return rule

    for which in ("plain", "context"):
        for alpha in (2.0, 3.0, 5.0, 7.0, 10.0, 20.0):
            out[f"{which} confident {alpha:g}"] = confident(alpha, which)
            out[f"{which} confident BM25 {alpha:g}"] = confident(alpha, which, dense_too=False)
    return out


def score(name: str) -> dict[str, dict[str, float]]:
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.datasets import load_dataset
    from vrag_desktop.core.eval.matching import corpus_files, match_dataset
    from vrag_desktop.core.eval.retrieval import score_hits, summarize_retrieval
    from vrag_desktop.core.search import SearchEngine

    _docs, questions = BENCHMARKS[name]
    plain_dir, ctx_dir = DATA / "suite" / name / "plain", DATA / "suite" / name / "context"
    engine = SearchEngine(Library(ctx_dir), [CORPUS], hybrid=False)
    match = match_dataset(load_dataset(questions), corpus_files(engine.corpora))
    engine.close()
    queries = [m.item.query for m in match.matched]
    plain, plain_hits = rankings(plain_dir, queries, KS[-1])
    ctx, ctx_hits = rankings(ctx_dir, queries, KS[-1])
    hits = {**ctx_hits, **plain_hits}
    metrics = [f"recall@{k}" for k in KS] + ["mrr"]
    out: dict[str, dict[str, float]] = {}
    for label, rule in rules().items():
        rows = [
            score_hits(m, [hits[key] for key in rule(p, c)[: KS[-1]]], KS)
            for m, p, c in zip(match.matched, plain, ctx, strict=True)
        ]
        summary = summarize_retrieval(rows, KS)
        out[label] = {m: summary["overall"][m] for m in metrics}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=list(BENCHMARKS))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "context_votes.json")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for name in args.only or list(BENCHMARKS):
        results[name] = score(name)
        print(f"\n{name}\n| rule | recall@1 | recall@5 | recall@10 | MRR |\n|---|---|---|---|---|")
        for label, m in results[name].items():
            print(
                f"| {label} | {m['recall@1']:.3f} | {m['recall@5']:.3f} | {m['recall@10']:.3f} | {m['mrr']:.3f} |"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print("wrote", args.out)


if __name__ == "__main__":
    main()
