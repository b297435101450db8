"""Weighted reciprocal-rank fusion of the dense and the BM25 ranking (hybrid search).

Why fuse at all: on scanned bank reports (bench/real_docs.py, docs/benchmarks.md §7) BM25 finds the
evidence page far more often than MiniLM does (questions quote figures, dates and names that a
sentence vector blurs), while MiniLM catches paraphrases. Rank fusion, not score mixing, keeps the
two score scales apart; the weights say how much each ranking's vote counts.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

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


@dataclass(frozen=True)
class Fusion:
    """The votes of the dense and the BM25 ranking in a hybrid search, and of a third one: the
    candidates of the documents the query names (their headers' rare words, core/search/lexical.py
    DocumentNames), best named first, in fused order — so "Amazon's latest 10-Q" votes for
    Amazon's pages where BM25 found another company's look-alike statement. Zero: no such vote."""

    dense_weight: float = DENSE_WEIGHT
    lexical_weight: float = LEXICAL_WEIGHT
    names_weight: float = NAMES_WEIGHT
    k: int = RRF_K

    def fuse(self, dense: Sequence[K], lexical: Sequence[K], named: Sequence[K] = ()) -> dict[K, float]:
        out = rrf(
            dense, lexical, dense_weight=self.dense_weight, lexical_weight=self.lexical_weight, k=self.k
        )
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
