"""Weighted reciprocal-rank fusion of the dense and the BM25 ranking (hybrid search).

Why fuse at all: on scanned bank reports (bench/real_docs.py, docs/benchmarks.md §7) BM25 finds the
evidence page far more often than MiniLM does (questions quote figures, dates and names that a
sentence vector blurs), while MiniLM catches paraphrases. Rank fusion, not score mixing, keeps the
two score scales apart; the weights say how much each ranking's vote counts.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
#: A best-first ranking: keys alone, or keys with their retriever's scores (a dict keeps the order).
Ranking = Sequence[K] | Mapping[K, float]

#: How flat the rank discount is. 60 is the literature's usual constant; 5 was chosen on the three
#: retrieval benchmarks at once (docs/benchmarks.md §3, bench/fusion_rules.py): it is at least as
#: good as k = 60 and as dense search on every benchmark and metric, on indexes with and without
#: document context (filings recall@1 with context 0.604 -> 0.679, bank reports recall@5 0.892 ->
#: 0.914), where k = 2 or 3 lost on the filings' plain index and k = 10 or 20 lost to dense on the
#: filings. A top-heavy vote: the two rankings' first places decide more than their long tails.
RRF_K = 5
#: Vote of each ranking. Measured (docs/benchmarks.md §7): BM25 counting twice raised recall@1 on
#: scanned bank reports from 0.61 to 0.69 but cost the sample corpus a question at rank 1 (recall@1
#: 1.0 -> 0.958, also at 1.5), and earlier measurements saw BM25 collapse on filings; so equal votes.
DENSE_WEIGHT = 1.0
LEXICAL_WEIGHT = 1.0
#: Vote of the documents a query names (see :class:`Fusion`). Off by default: on the filings
#: benchmark (docs/benchmarks.md §3) it put the right company first for every question (recall@1
#: 0.604 -> 0.623), but on the sample corpus title words such as "team" or "robots" named the wrong
#: document for 2 of 24 questions (recall@1 1.0 -> 0.917); a default must not lose on any benchmark.
NAMES_WEIGHT = 0.0
#: How much a ranking's confidence in this one query adds to its vote: each vote is multiplied by
#: ``1 + CONFIDENCE * margin``, the margin being how far the ranking's first score stands above its
#: second, relative to the first. A ranking of look-alike pages has no margin and keeps its plain
#: vote; one that singles a page out counts more. Why (docs/benchmarks.md §3, bench/context_votes.py):
#: on scanned bank reports BM25 alone finds the page first more often (0.676) than any equal vote,
#: on filings dense does (0.679 against BM25's 0.358), and no fixed weight wins both. With 5 (a
#: plateau from 5 to 10), on the document-context index: bank reports recall@1 0.562 -> 0.670, MRR
#: 0.711 -> 0.779; filings recall@1/5/10 kept, MRR 0.828 -> 0.821; the sample corpus kept at 1.0.
#: Zero: plain weighted RRF.
CONFIDENCE = 5.0


def rrf(
    dense: Sequence[K],
    lexical: Sequence[K],
    *,
    dense_weight: float = DENSE_WEIGHT,
    lexical_weight: float = LEXICAL_WEIGHT,
    k: int = RRF_K,
) -> dict[K, float]:
    """Fused score per key from two rankings (best first); a key in one ranking only gets one vote."""
    out: dict[K, float] = {}
    for weight, ranking in ((dense_weight, dense), (lexical_weight, lexical)):
        for rank, key in enumerate(ranking):
            out[key] = out.get(key, 0.0) + weight / (k + rank + 1)
    return out


def margin(ranking: Mapping[K, float]) -> float:
    """How far a best-first ranking's first score stands above its second, relative to the first
    (0 when they tie or the first is 0; 1 when there is no second). Scale-free, so a cosine and a
    BM25 score are comparable."""
    top = iter(ranking.values())
    s1 = next(top, None)
    s2 = next(top, None)
    if s1 is None or s2 is None:
        return 1.0
    return max(0.0, (s1 - s2) / abs(s1)) if s1 else 0.0


@dataclass(frozen=True)
class Fusion:
    """The votes of the dense and the BM25 ranking in a hybrid search, and of a third one: the
    candidates of the documents the query names (their headers' rare words, core/search/lexical.py
    DocumentNames), best named first, in fused order — so "Amazon's latest 10-Q" votes for
    Amazon's pages where BM25 found another company's look-alike statement. Zero: no such vote.
    Rankings given with their scores have their votes scaled by their confidence (:data:`CONFIDENCE`)."""

    dense_weight: float = DENSE_WEIGHT
    lexical_weight: float = LEXICAL_WEIGHT
    names_weight: float = NAMES_WEIGHT
    k: int = RRF_K
    confidence: float = CONFIDENCE

    def weights(self, dense: Ranking[K], lexical: Ranking[K]) -> tuple[float, float]:
        """The two rankings' votes for this query: their weights, each scaled by the ranking's
        confidence where its scores are known."""

        def scaled(weight: float, ranking: Ranking[K]) -> float:
            if not self.confidence or not isinstance(ranking, Mapping):
                return weight
            return weight * (1 + self.confidence * margin(ranking))

        return scaled(self.dense_weight, dense), scaled(self.lexical_weight, lexical)

    def fuse(self, dense: Ranking[K], lexical: Ranking[K], named: Sequence[K] = ()) -> dict[K, float]:
        """Fused score per key from the dense and BM25 rankings (best first; with their scores for
        confidence) and the named documents' candidates."""
        dense_w, lexical_w = self.weights(dense, lexical)
        out = rrf(list(dense), list(lexical), dense_weight=dense_w, lexical_weight=lexical_w, k=self.k)
        # Confidence moves weight between the two votes, not the scale: a score reads as it did with
        # plain votes (at most 2 / (k + 1) with equal ones), whatever this query's confidence.
        total = dense_w + lexical_w
        if total > 0 and total != self.dense_weight + self.lexical_weight:
            scale = (self.dense_weight + self.lexical_weight) / total
            out = {key: score * scale for key, score in out.items()}
        if named and self.names_weight:
            base = sorted(out, key=lambda key: -out[key])
            order = {key: i for i, key in enumerate(base)}
            for rank, key in enumerate(sorted(named, key=lambda key: order.get(key, len(order)))):
                out[key] = out.get(key, 0.0) + self.names_weight / (self.k + rank + 1)
        return out


#: The one default search mode of the CLI (search, serve-search, eval retrieval), the app, the
#: agents and evaluations: hybrid (docs/benchmarks.md, retrieval suite).
DEFAULT_HYBRID = True
#: The one default fusion.
DEFAULT_FUSION = Fusion()
