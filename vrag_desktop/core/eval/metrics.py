"""Retrieval metrics over page keys: one implementation each, shared by evaluation and the trainer.

A *page key* names one retrievable unit the way the original's reward does (§6.4 of the reference):
the file name without its extension, then ``_<page>`` for a page of a document (1-based), e.g.
``annual_report_3``; a file without pages (an image, a video, a note) is its stem alone. The
retrieved list is the keys of the hits in rank order; the golden set is the keys of the dataset
item's ``file_name`` × ``reference_page``.

:func:`ndcg_original` reproduces the original reward's NDCG exactly, quirks included, because the
trainer's rewards must match it: relevance is binary per retrieved position (a page retrieved
twice counts twice), and the ideal DCG is computed over ``[1] * len(golden) + [0] * (len(retrieved)
- len(golden))`` — with more golden pages than retrieved ones the ideal list is *longer* than the
retrieved list, so the score can never reach 1. :func:`ndcg_at_k` is the textbook form (ideal list
cut at ``k``, duplicates counted once) used for evaluation reports.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from pathlib import PurePath

__all__ = [
    "REWARD_NDCG",
    "copies_key",
    "first_seen",
    "golden_keys",
    "hit_at_k",
    "mrr",
    "ndcg_at_k",
    "ndcg_original",
    "page_key",
    "recall_at_k",
    "retrieved_key",
]


#: What every report, table and summary calls :func:`ndcg_original`: "NDCG" alone is the textbook
#: :func:`ndcg_at_k`, so the two are never confused (the reward's variant is not normalised the same).
REWARD_NDCG = "NDCG (VRAG-RL reward)"


def _stem(file_name: str) -> str:
    """``reports/annual.pdf`` → ``annual`` (any folder part and the last extension dropped)."""
    return PurePath(file_name.replace("\\", "/")).stem


def page_key(file_name: str, page: int | None = None) -> str:
    """The key of page ``page`` (1-based) of ``file_name``, or of the whole file when ``page`` is None."""
    stem = _stem(file_name)
    return stem if page is None else f"{stem}_{page}"


def golden_keys(file_name: str, reference_page: Iterable[int] = ()) -> list[str]:
    """The keys a dataset item names as evidence, in its order, without repeats; the whole file when
    it names no page (an image, a video)."""
    if not file_name:
        return []
    pages = list(dict.fromkeys(reference_page))
    return [page_key(file_name, p) for p in pages] if pages else [page_key(file_name)]


def retrieved_key(path: str, page: int | None, golden: Collection[str] = ()) -> str:
    """A hit's key: its page of its file — or the whole file when the golden set names the file
    without pages (a hit on any page or clip of an evidence file then counts)."""
    whole = page_key(path)
    if page is None or whole in golden:
        return whole
    return page_key(path, page)


def copies_key(paths: Sequence[str], page: int | None, golden: Collection[str] = ()) -> str:
    """The key of a hit found at several paths (a file byte-identical in two corpora is one hit,
    whichever copy leads it): the first of its keys the golden set names, else its first path's.
    A renamed copy of an evidence file is the evidence too."""
    keys = [retrieved_key(p, page, golden) for p in paths]
    return next((key for key in keys if key in golden), keys[0] if keys else page_key("", page))


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be at least 1, not {k}")


def recall_at_k(retrieved: Sequence[str], golden: Collection[str], k: int) -> float:
    """Share of the golden keys found in the first ``k`` retrieved (0 when there is no golden key)."""
    _check_k(k)
    gold = set(golden)
    if not gold:
        return 0.0
    return len(gold.intersection(retrieved[:k])) / len(gold)


def hit_at_k(retrieved: Sequence[str], golden: Collection[str], k: int) -> float:
    """1.0 when any golden key is among the first ``k`` retrieved, else 0.0."""
    _check_k(k)
    gold = set(golden)
    return 1.0 if any(key in gold for key in retrieved[:k]) else 0.0


def mrr(retrieved: Sequence[str], golden: Collection[str], k: int | None = None) -> float:
    """Reciprocal rank of the first golden key (within the first ``k`` when given), else 0."""
    gold = set(golden)
    shown = retrieved if k is None else retrieved[:k]
    for i, key in enumerate(shown, start=1):
        if key in gold:
            return 1.0 / i
    return 0.0


def _dcg(relevance: Iterable[float]) -> float:
    return sum((2.0**rel - 1.0) / math.log2(i + 1) for i, rel in enumerate(relevance, start=1))


def ndcg_at_k(retrieved: Sequence[str], golden: Collection[str], k: int) -> float:
    """Binary-relevance NDCG@k: a golden key counts at its first rank only; the ideal ranking puts
    ``min(k, |golden|)`` golden keys first."""
    _check_k(k)
    gold = set(golden)
    if not gold:
        return 0.0
    seen: set[str] = set()
    rel = []
    for key in retrieved[:k]:
        rel.append(1.0 if key in gold and key not in seen else 0.0)
        seen.add(key)
    ideal = _dcg([1.0] * min(k, len(gold)))
    return _dcg(rel) / ideal


def first_seen(keys: Iterable[str]) -> list[str]:
    """Each key once, at its first position. VRAG never shows a page twice (the original's rollout
    skips pages already retrieved), but VimRAG's searches can return one again; fed twice to
    :func:`ndcg_original`, a golden page would push the score above 1."""
    return list(dict.fromkeys(keys))


def ndcg_original(retrieved: Sequence[str], golden: Collection[str]) -> float:
    """NDCG exactly as the original's reward computes it (see the module docstring)."""
    gold = set(golden)
    rel = [1.0 if key in gold else 0.0 for key in retrieved]
    ideal = _dcg([1.0] * len(gold) + [0.0] * (len(retrieved) - len(gold)))
    return _dcg(rel) / ideal if ideal > 0 else 0.0
