"""Retrieval evaluation: every matched dataset item's question searched, its hits scored against its
evidence pages (recall@k, hit@k, MRR, NDCG@k and the original reward's NDCG), per item and overall.

Written as a generator of :class:`~vrag_desktop.core.progress.Progress` (core never knows it runs in
a thread or a terminal); each item's result is stored as it finishes (:mod:`.store`), so a stopped
evaluation resumes where it stopped.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Generator, Sequence
from typing import Any

from vrag_desktop.core.eval.matching import DatasetMatch, Match
from vrag_desktop.core.eval.metrics import (
    copies_key,
    first_seen,
    hit_at_k,
    mrr,
    ndcg_at_k,
    ndcg_original,
    recall_at_k,
)
from vrag_desktop.core.eval.store import EvalStore
from vrag_desktop.core.progress import CancelToken, Progress, RateMeter
from vrag_desktop.core.search.hit import Hit

__all__ = ["DEFAULT_KS", "evaluate_retrieval", "score_dataset", "score_hits", "summarize_retrieval"]

#: The cut-offs reported; the search asks for the largest.
DEFAULT_KS = (1, 3, 5, 10)

Search = Callable[[list[str], int], list[list[Hit]]]


def score_hits(match: Match, hits: Sequence[Hit], ks: Sequence[int]) -> dict[str, Any]:
    """One item's result row: what came back (as page keys) and every metric at every cut-off."""
    golden = set(match.golden)
    keys = [copies_key(h.sources, h.page, golden) for h in hits]
    row: dict[str, Any] = {
        "uid": match.item.uid,
        "query": match.item.query,
        "query_type": match.item.query_type,
        "source_type": match.item.content_type,
        "golden": list(match.golden),
        "retrieved": keys,
        "rank": next((i for i, key in enumerate(keys, 1) if key in golden), None),
        "mrr": mrr(keys, golden),
        # the reward's NDCG over each page once, as the agents are shown them (never above 1)
        "ndcg_original": ndcg_original(first_seen(keys), golden),
    }
    for k in ks:
        row[f"recall@{k}"] = recall_at_k(keys, golden, k)
        row[f"hit@{k}"] = hit_at_k(keys, golden, k)
        row[f"ndcg@{k}"] = ndcg_at_k(keys, golden, k)
    return row


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize_retrieval(
    rows: Sequence[dict[str, Any]], ks: Sequence[int], problems: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    """Means over the items, overall and per query type; the items that could not be scored."""
    metrics = ["mrr", "ndcg_original"] + [f"{m}@{k}" for k in ks for m in ("recall", "hit", "ndcg")]
    overall = {m: _mean([r[m] for r in rows]) for m in metrics}
    by_type: dict[str, dict[str, Any]] = {}
    for qtype in sorted({r.get("query_type") or "" for r in rows}):
        group = [r for r in rows if (r.get("query_type") or "") == qtype]
        by_type[qtype or "(no type)"] = {
            "items": len(group),
            **{m: _mean([r[m] for r in group]) for m in metrics},
        }
    seconds = [r["seconds"] for r in rows if "seconds" in r]
    return {
        "kind": "retrieval",
        "items": len(rows),
        "not_scored": [{"uid": uid, "why": why} for uid, why in problems],
        "ks": list(ks),
        "overall": overall,
        "by_query_type": by_type,
        "search_ms_p50": 1000 * statistics.median(seconds) if seconds else None,
    }


def score_dataset(
    match: DatasetMatch, search: Search, ks: Sequence[int] = DEFAULT_KS, batch: int = 32
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The summary and per-item rows in memory, nothing stored (benchmarks, tests, quick checks)."""
    ks = sorted(set(ks))
    rows: list[dict[str, Any]] = []
    for start in range(0, len(match.matched), batch):
        chunk = match.matched[start : start + batch]
        t0 = time.perf_counter()
        results = search([m.item.query for m in chunk], ks[-1])
        per_item = (time.perf_counter() - t0) / len(chunk)
        for m, hits in zip(chunk, results, strict=True):
            rows.append({**score_hits(m, hits, ks), "seconds": per_item})
    return summarize_retrieval(rows, ks, match.problems), rows


def evaluate_retrieval(
    match: DatasetMatch,
    search: Search,
    store: EvalStore,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    batch: int = 8,
    cancel: CancelToken | None = None,
) -> Generator[Progress, None, dict[str, Any]]:
    """Search and score every matched item without a stored result; returns the summary (also
    written to the store). Stops at the next yield when closed or when ``cancel`` is set."""
    ks = sorted(set(ks))
    if not ks or ks[0] < 1:
        raise ValueError(f"cut-offs must be at least 1: {list(ks)}")
    todo = [m for m in match.matched if not store.done(m.item.uid)]
    total, done = len(match.matched), len(match.matched) - len(todo)
    meter = RateMeter()
    note = store.warning or ""  # damaged lines in the results: said with every report, not once
    yield Progress(
        "retrieval", done, total, message="; ".join(x for x in (f"{done} of {total} already done", note) if x)
    )
    for start in range(0, len(todo), batch):
        if cancel is not None and cancel.cancelled:
            break
        chunk = todo[start : start + batch]
        t0 = time.perf_counter()
        results = search([m.item.query for m in chunk], ks[-1])
        per_item = (time.perf_counter() - t0) / len(chunk)
        for m, hits in zip(chunk, results, strict=True):
            row = score_hits(m, hits, ks)
            row["seconds"] = per_item
            store.add(row)
        done += len(chunk)
        meter.update(len(chunk))
        yield Progress("retrieval", done, total, rate=meter.rate, eta=meter.eta(total - done), message=note)
    rows = [store.results[m.item.uid] for m in match.matched if store.done(m.item.uid)]
    summary = summarize_retrieval(rows, ks, match.problems)
    summary["complete"] = len(rows) == total
    summary["settings"] = store.header.get("fingerprint", {})
    from vrag_desktop.core.eval.report import retrieval_report

    store.finish(summary, retrieval_report(summary, rows))
    return summary
