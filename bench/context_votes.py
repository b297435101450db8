#!/usr/bin/env python
"""Where document context helps and where it hurts: the votes of the plain and the context index of
one benchmark, combined in-process, scored by core/eval (issue 33: the bank reports lose recall@1
with document context, 0.627 -> 0.562, while the filings gain 0.566 -> 0.679).

Why: a chunk embedded with its document's header moves towards every other chunk of that document.
That helps pick the right document among look-alikes (the filings: any page of the right filing is
evidence) and can cost the order of pages inside one document (the bank reports: one page is the
evidence). The rules below separate the two: the *document* order from one ranking, the *page* order
inside each document from another.

Per query, each index gives its dense ranking and its BM25 ranking (the engine's own search; the
fusion swapped for one that returns a single list), the context index also the documents the query
names (core/search/lexical.py DocumentNames). Rules:

- ``plain`` / ``context``: the product's hybrid (RRF, k = 5) on that index alone.
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
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval_suite import BENCHMARKS, CORPUS, DATA, KS  # noqa: E402
from vrag_desktop.core.search.fusion import RRF_K, rrf  # noqa: E402

Key = tuple[str, Any, Any]
Lists = dict[str, list[Key]]


def _key(h: Any) -> Key:
    return (h.source, h.page, h.clip)


class _One:
    """A fusion that returns one of the engine's rankings as is (dense, lexical or named)."""

    def __init__(self, which: str) -> None:
        self.which = which

    def fuse(
        self, dense: Sequence[str], lexical: Sequence[str], named: Sequence[str] = ()
    ) -> dict[str, float]:
        chosen = {"dense": dense, "lexical": lexical, "named": named}[self.which]
        return {g: -i for i, g in enumerate(chosen)}


def rankings(data_dir: Path, queries: Sequence[str], depth: int) -> tuple[list[Lists], dict[Key, Any]]:
    """Per query: this index's dense, BM25 and named-document rankings (keys), and every hit by key."""
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.search import SearchEngine

    engine = SearchEngine(Library(data_dir), [CORPUS], hybrid=True)
    hits: dict[Key, Any] = {}
    out: list[Lists] = [{} for _ in queries]
    for which in ("dense", "lexical", "named"):
        engine.fusion = _One(which)  # type: ignore[assignment]
        for i, found in enumerate(engine.search_batch(list(queries), depth)):
            out[i][which] = [_key(h) for h in found]
            for h in found:
                hits.setdefault(_key(h), h)
    engine.close()
    return out, hits


def _order(scores: dict[Key, float]) -> list[Key]:
    return sorted(scores, key=lambda key: -scores[key])


def docs_from(doc_ranking: list[Key], page_ranking: list[Key]) -> list[Key]:
    """``doc_ranking``'s slots kept; the pages of each document in it re-ordered by ``page_ranking``
    (pages that ranking lacks keep their relative order, after the ones it has)."""
    pos = {key: i for i, key in enumerate(page_ranking)}
    by_doc: dict[str, list[Key]] = {}
    for key in doc_ranking:
        by_doc.setdefault(key[0], []).append(key)
    queues = {
        doc: sorted(keys, key=lambda k: (pos.get(k, len(pos)), doc_ranking.index(k)))
        for doc, keys in by_doc.items()
    }
    return [queues[key[0]].pop(0) for key in doc_ranking]


Rule = Callable[[Lists, Lists], list[Key]]


def rules() -> dict[str, Rule]:
    def hybrid(lists: Lists) -> list[Key]:
        return _order(rrf(lists["dense"], lists["lexical"], k=RRF_K))

    def four(p: Lists, c: Lists) -> list[Key]:
        a = rrf(p["dense"], p["lexical"], k=RRF_K)
        b = rrf(c["dense"], c["lexical"], k=RRF_K)
        return _order({key: a.get(key, 0.0) + b.get(key, 0.0) for key in set(a) | set(b)})

    def with_names(w: float) -> Rule:
        def rule(p: Lists, c: Lists) -> list[Key]:
            base = rrf(p["dense"], p["lexical"], k=RRF_K)
            order = {key: i for i, key in enumerate(_order(base))}
            named = sorted(c["named"], key=lambda key: order.get(key, len(order)))
            for rank, key in enumerate(named):
                base[key] = base.get(key, 0.0) + w / (RRF_K + rank + 1)
            return _order(base)

        return rule

    out: dict[str, Rule] = {
        "plain": lambda p, c: hybrid(p),
        "context": lambda p, c: hybrid(c),
        "plain dense": lambda p, c: p["dense"],
        "context dense": lambda p, c: c["dense"],
        "4 votes": four,
        "ctx docs, plain pages": lambda p, c: docs_from(hybrid(c), hybrid(p)),
        "ctx docs, ctx-dense+plain-BM25 pages": lambda p, c: docs_from(
            hybrid(c), _order(rrf(c["dense"], p["lexical"], k=RRF_K))
        ),
        "ctx-dense+plain-BM25": lambda p, c: _order(rrf(c["dense"], p["lexical"], k=RRF_K)),
    }
    for w in (0.5, 1.0):
        out[f"plain + names {w:g}"] = with_names(w)
    return out


def score(name: str, depth: int) -> dict[str, dict[str, float]]:
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
    plain, plain_hits = rankings(plain_dir, queries, depth)
    ctx, ctx_hits = rankings(ctx_dir, queries, depth)
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
    ap.add_argument("--depth", type=int, default=50, help="candidates taken from each ranking")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "context_votes.json")
    args = ap.parse_args()
    results: dict[str, Any] = {}
    for name in args.only or list(BENCHMARKS):
        results[name] = score(name, args.depth)
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
