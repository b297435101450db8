"""Fusion rules for hybrid search, scored on several benchmarks in one run (issue 33, item 3).

Why: a default fusion must not lose on any benchmark. Equal-vote reciprocal-rank fusion (RRF, k=60)
wins big on the scanned bank reports (BM25 finds quoted figures) but on the filings, whose pages
look alike across companies, it loses to dense search at rank 1. This bench scores other rules on
the indexes ``bench/retrieval_suite.py`` built (the "context" variant, a new corpus's default), with
the engine's own search and the core/eval scoring; only the fusion is swapped, in-process.

Rules (the engine hands the fusion both rankings with their scores):

- ``rrf k=K d:l``: weighted RRF, ``d/(K+rank)`` + ``l/(K+rank)``, equal votes whatever the scores.
- ``confident A``: the product's default (core/search/fusion.py): RRF k = 5 whose votes are scaled
  per query by ``1 + A * margin`` (each ranking's first score over its second, relative).
- ``minmax a``: ``a * dense' + (1-a) * bm25'``, each min-max normalised over its own candidates
  (a candidate missing from one list gets 0 there): a convex score combination.
- ``dense-led m``: dense order, but a candidate BM25 ranks in its top 3 is lifted to just below the
  dense hits scoring at least ``best - m`` (BM25 as a tie-breaker among near-equal dense scores).

    nice -n 10 .venv/bin/python bench/fusion_rules.py [--only filings --only sample --only bank]
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
from vrag_desktop.core.search.fusion import RRF_K, Fusion  # noqa: E402

Scores = dict[str, float]
Rule = Callable[[Sequence[str], Sequence[str], Scores, Scores], dict[str, float]]


def rrf_rule(k: int, dw: float, lw: float, confidence: float = 0.0) -> Rule:
    """The product's own fusion (core/search/fusion.py) with these votes, this k and this
    confidence (0: the votes do not depend on the scores)."""
    fusion = Fusion(dense_weight=dw, lexical_weight=lw, k=k, confidence=confidence)

    def rule(dense: Sequence[str], lexical: Sequence[str], ds: Scores, ls: Scores) -> dict[str, float]:
        return fusion.fuse(ds, ls)

    return rule


def _minmax(scores: Scores) -> Scores:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    span = hi - lo
    return {key: ((v - lo) / span if span > 0 else 1.0) for key, v in scores.items()}


def minmax_rule(a: float) -> Rule:
    def rule(dense: Sequence[str], lexical: Sequence[str], ds: Scores, ls: Scores) -> dict[str, float]:
        nd, nl = (
            _minmax({g: ds[g] for g in dense if g in ds}),
            _minmax({g: ls[g] for g in lexical if g in ls}),
        )
        return {g: a * nd.get(g, 0.0) + (1 - a) * nl.get(g, 0.0) for g in set(nd) | set(nl)}

    return rule


def dense_led_rule(margin: float) -> Rule:
    def rule(dense: Sequence[str], lexical: Sequence[str], ds: Scores, ls: Scores) -> dict[str, float]:
        if not dense:
            return {g: -i for i, g in enumerate(lexical)}
        best = ds[dense[0]]
        top_lex = set(lexical[:3])
        out: dict[str, float] = {}
        for i, g in enumerate(dense):
            near = ds[g] >= best - margin
            out[g] = (2.0 if near and g in top_lex else 1.0 if near else 0.0) - i * 1e-4
        for i, g in enumerate(lexical):
            out.setdefault(g, -1.0 - i * 1e-4)
        return out

    return rule


class _Swapped:
    """Stands in for the engine's Fusion: the rule sees both rankings (best first) and their scores."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule

    def fuse(
        self, dense: dict[str, float], lexical: dict[str, float], named: Sequence[str] = ()
    ) -> dict[str, float]:
        return self.rule(list(dense), list(lexical), dense, lexical)


def rules() -> dict[str, Rule]:
    out: dict[str, Rule] = {}
    for k in (60, 20, 10, 5, 3, 2, 1):
        for lw in (1.0, 0.75, 0.5):
            out[f"rrf k={k} 1:{lw:g}"] = rrf_rule(k, 1.0, lw)
    for a in (2.0, 5.0, 10.0):
        out[f"confident {a:g}"] = rrf_rule(RRF_K, 1.0, 1.0, a)
    for a in (0.5, 0.6, 0.7, 0.8):
        out[f"minmax {a:g}"] = minmax_rule(a)
    for m in (0.02, 0.05):
        out[f"dense-led {m:g}"] = dense_led_rule(m)
    return out


def score(data_dir: Path, questions: Path, table: dict[str, Rule]) -> dict[str, dict[str, float]]:
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.datasets import load_dataset
    from vrag_desktop.core.eval.matching import corpus_files, match_dataset
    from vrag_desktop.core.eval.retrieval import score_dataset
    from vrag_desktop.core.search import SearchEngine

    metrics = [f"recall@{k}" for k in KS] + ["mrr"]
    out: dict[str, dict[str, float]] = {}
    engine = SearchEngine(Library(data_dir), [CORPUS], hybrid=False)
    match = match_dataset(load_dataset(questions), corpus_files(engine.corpora))
    summary, _ = score_dataset(match, engine.search_batch, ks=KS)
    out["dense"] = {m: summary["overall"][m] for m in metrics}
    engine.hybrid = True
    for label, rule in table.items():
        engine.fusion = _Swapped(rule)  # type: ignore[assignment]
        summary, _ = score_dataset(match, engine.search_batch, ks=KS)
        out[label] = {m: summary["overall"][m] for m in metrics}
    engine.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", choices=list(BENCHMARKS))
    ap.add_argument("--variant", default="context", choices=("context", "plain"))
    ap.add_argument(
        "--plain-bm25",
        action="store_true",
        help="BM25 over the pages' own text even on a context index (headers for the embedder only)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "fusion_rules.json")
    args = ap.parse_args()
    if args.plain_bm25:
        import vrag_desktop.core.search.lexical as lexical_module
        from vrag_desktop.core.corpus.context import CONTEXT_NONE

        lexical_module.context_mode = lambda manifest: CONTEXT_NONE  # type: ignore[assignment]
    results: dict[str, Any] = {}
    names = args.only or list(BENCHMARKS)
    for name in names:
        data_dir = DATA / "suite" / name / args.variant
        _, questions = BENCHMARKS[name]
        if not (data_dir / "corpora" / CORPUS).exists():
            print(f"{name}: no {args.variant} index at {data_dir} (bench/retrieval_suite.py builds it)")
            continue
        results[name] = score(data_dir, questions, rules())
        print(f"{name}: scored", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    labels = list(next(iter(results.values()))) if results else []
    print("| rule | " + " | ".join(f"{n} R@1 | {n} R@5 | {n} MRR" for n in results) + " |")
    print("|---|" + "---|" * (3 * len(results)))
    for label in labels:
        cells = []
        for n in results:
            r = results[n][label]
            cells += [f"{r['recall@1']:.3f}", f"{r['recall@5']:.3f}", f"{r['mrr']:.3f}"]
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
