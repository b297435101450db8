"""Answer evaluation: every dataset item asked to an agent, its answer scored (a judge model, exact
match or ANLS), its format and the pages it was shown scored as the trainer's reward does.

Why the agent comes in as an object with ``run(question)`` and ``run_id``: the run must take the
same path as ``ask`` (assembled once, saved in History) — a
:class:`~vrag_desktop.core.run.session.RunSession` — and this module only needs its events. Items
are done one at a time and each row stored as it finishes (:mod:`.store`), so a killed evaluation
resumes with the item it was on.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from vrag_desktop.core.agents.events import (
    AgentError,
    Answer,
    ContentDelta,
    SearchResults,
    Timing,
    Usage,
)
from vrag_desktop.core.eval.answers import anls, exact_match, format_score, last_answer
from vrag_desktop.core.eval.matching import DatasetMatch
from vrag_desktop.core.eval.metrics import copies_key, first_seen, ndcg_original
from vrag_desktop.core.eval.reward import RewardParts, composite_reward
from vrag_desktop.core.eval.store import EvalError, EvalStore
from vrag_desktop.core.progress import CancelToken, Progress, RateMeter

if TYPE_CHECKING:
    from vrag_desktop.core.datasets import DatasetItem
    from vrag_desktop.core.eval.judge import Judge

__all__ = [
    "JUDGE_KINDS",
    "JudgeRefused",
    "JudgeScorer",
    "QuestionAgent",
    "Score",
    "evaluate_answers",
    "metric_scorer",
    "run_item",
    "summarize_answers",
]

JUDGE_KINDS = ("model", "exact", "anls")


class QuestionAgent(Protocol):
    """What :class:`vrag_desktop.api.VRAG` / ``VimRAG`` offer: one saved run per call."""

    run_id: str | None

    def run(self, question: str) -> Iterator[Any]: ...


@dataclass(frozen=True)
class Score:
    """A scorer's result: ``value`` in [0, 1] (None: no verdict, ``error`` says why)."""

    value: float | None
    error: str | None = None
    raw: str = ""


Scorer = Callable[[str, str, str | None], Score]  # (query, reference, answer) -> Score


class JudgeRefused(EvalError):
    """The judge refuses every call (bad key, unknown model): going on would fail every item."""


def metric_scorer(kind: str) -> Scorer:
    """A judge-free scorer: ``exact`` (SQuAD exact match) or ``anls`` (DocVQA ANLS)."""
    if kind == "exact":
        return lambda _q, ref, ans: Score(exact_match(ans, ref))
    if kind == "anls":
        return lambda _q, ref, ans: Score(anls(ans, ref))
    raise ValueError(f"unknown scorer {kind!r}: use one of {', '.join(JUDGE_KINDS)}")


class JudgeScorer:
    """The model judge as a plain call: its client lives in a private event loop for the whole
    evaluation (an async client is bound to its loop). Close it when done."""

    def __init__(self, judge: Judge) -> None:
        self.judge = judge
        self._loop = asyncio.new_event_loop()

    def __call__(self, query: str, reference: str, answer: str | None) -> Score:
        v = self._loop.run_until_complete(self.judge.verdict(query, reference, answer))
        if v.refused:  # every later item would fail the same way
            raise JudgeRefused(f"{v.error}. The evaluation stopped: every item would fail the same way.")
        return Score(None if v.correct is None else float(v.correct), v.error, v.raw)

    def close(self) -> None:
        if not self._loop.is_closed():
            try:
                self._loop.run_until_complete(self.judge.aclose())
            finally:
                self._loop.close()


def run_item(
    agent: QuestionAgent,
    item: DatasetItem,
    golden: Sequence[str] | None,
    cancel: CancelToken | None = None,
) -> dict[str, Any] | None:
    """Ask one item and fold its events into a row (not yet scored by the judge); None when
    ``cancel`` was set during the run (the run is closed, History keeps it as cancelled)."""
    text: dict[int, list[str]] = {}
    shown: list[str] = []
    steps, model_s, tool_s, prompt_t, completion_t = 0, 0.0, 0.0, 0, 0
    answer: Answer | None = None
    error: str | None = None
    gold = set(golden or ())
    t0 = time.perf_counter()
    events = agent.run(item.query)
    try:
        for ev in events:
            if cancel is not None and cancel.cancelled:
                return None
            steps = max(steps, ev.step)
            if isinstance(ev, ContentDelta):
                text.setdefault(ev.step, []).append(ev.content)
            elif isinstance(ev, SearchResults):
                shown += [copies_key(ev.hits[i].sources, ev.hits[i].page, gold) for i in ev.shown]
            elif isinstance(ev, Timing):
                model_s += ev.model_seconds
                tool_s += ev.tool_seconds
            elif isinstance(ev, Usage):
                prompt_t += ev.prompt_tokens
                completion_t += ev.completion_tokens
            elif isinstance(ev, Answer):
                answer = ev
            elif isinstance(ev, AgentError) and not ev.recoverable:
                error = f"{ev.kind}: {ev.content}" if ev.kind else ev.content
    except Exception as exc:  # the run path turns failures into events; this is the last guard
        error = f"internal: {exc}"
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    turns = [{"role": "assistant", "content": "".join(text[s])} for s in sorted(text)]
    final = last_answer(turns)
    if final is None and answer is not None and not answer.forced:
        final = answer.content
    return {
        "uid": item.uid,
        "query": item.query,
        "query_type": item.query_type,
        "reference": item.reference_answer,
        "run_id": agent.run_id,
        "answer": final,
        "forced": bool(answer and answer.forced),
        "format": format_score(turns),
        "shown": shown,
        "golden": list(golden) if golden is not None else None,
        "ndcg": ndcg_original(first_seen(shown), gold) if golden is not None else None,
        "steps": steps,
        "model_seconds": model_s,
        "tool_seconds": tool_s,
        "seconds": time.perf_counter() - t0,
        "prompt_tokens": prompt_t,
        "completion_tokens": completion_t,
        "error": error,
    }


def _score(row: dict[str, Any], item: DatasetItem, scorer: Scorer) -> None:
    t0 = time.perf_counter()
    s = scorer(item.query, item.reference_answer, row["answer"])
    row["judge"], row["judge_error"], row["judge_raw"] = s.value, s.error, s.raw
    row["judge_seconds"] = time.perf_counter() - t0
    # as the trainer: a failed judge counts 0, an item without evidence pages contributes NDCG 0
    row["reward"] = composite_reward(RewardParts(row["format"], s.value, row["ndcg"] or 0.0))


def _mean(values: Iterable[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got else None


def summarize_answers(
    rows: Sequence[dict[str, Any]], problems: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    """Accuracy (mean score over items with a verdict) overall and per query type, mean format,
    NDCG and reward, judge failures, errors and the items without evidence pages."""
    by_type: dict[str, dict[str, Any]] = {}
    for qtype in sorted({r.get("query_type") or "" for r in rows}):
        group = [r for r in rows if (r.get("query_type") or "") == qtype]
        by_type[qtype or "(no type)"] = {
            "items": len(group),
            "accuracy": _mean(r["judge"] for r in group),
        }
    seconds = [r["seconds"] for r in rows]
    return {
        "kind": "answers",
        "items": len(rows),
        "accuracy": _mean(r["judge"] for r in rows),
        "format": _mean(r["format"] for r in rows),
        "ndcg": _mean(r["ndcg"] for r in rows),
        "reward": _mean(r["reward"] for r in rows),
        "judge_failures": sum(r["judge"] is None for r in rows),
        "errors": sum(bool(r["error"]) for r in rows),
        "not_scored": [{"uid": uid, "why": f"{why}: answer judged, no NDCG"} for uid, why in problems],
        "by_query_type": by_type,
        "steps_mean": _mean(float(r["steps"]) for r in rows),
        "seconds_p50": statistics.median(seconds) if seconds else None,
        "tokens": sum(r["prompt_tokens"] + r["completion_tokens"] for r in rows),
    }


def evaluate_answers(
    items: Sequence[DatasetItem],
    match: DatasetMatch,
    agent: QuestionAgent,
    scorer: Scorer,
    store: EvalStore,
    *,
    cancel: CancelToken | None = None,
) -> Generator[Progress, None, dict[str, Any]]:
    """Ask and score every item without a stored row; returns the summary (also stored). Items the
    corpora do not hold (``match.problems``) are asked and judged too, without NDCG; items without a
    reference answer are listed in ``not_asked``. Stops at the
    next yield when closed or when ``cancel`` is set; raises :class:`JudgeRefused` (rows so far
    kept) when the judge refuses its calls."""
    golden = {m.item.uid: m.golden for m in match.matched}
    why = dict(match.problems)
    # an item without a reference answer cannot be judged: named in the report, not asked
    unanswerable = [
        (it.uid, "no reference answer: not asked or judged") for it in items if not it.reference_answer
    ]
    items = [it for it in items if it.reference_answer]
    todo = [it for it in items if not store.done(it.uid)]
    total, done = len(items), len(items) - len(todo)
    meter = RateMeter()
    failed = sum(1 for r in store.results.values() if r.get("error") or r.get("judge") is None)
    note = store.warning or ""  # damaged lines in the results: said with every report, not once
    first = "; ".join(x for x in (f"{done} of {total} already done", note) if x)
    yield Progress("answers", done, total, message=first, failed=failed)
    for item in todo:
        if cancel is not None and cancel.cancelled:
            break
        row = run_item(agent, item, golden.get(item.uid), cancel)
        if row is None:
            break
        if item.uid in why:
            row["note"] = f"not in the corpora ({why[item.uid]}): answer judged, no NDCG"
        _score(row, item, scorer)
        store.add(row)
        done += 1
        failed += bool(row["error"] or row["judge"] is None)
        meter.update(1)
        yield Progress(
            "answers", done, total, rate=meter.rate, eta=meter.eta(total - done), message=note, failed=failed
        )
    rows = [store.results[it.uid] for it in items if store.done(it.uid)]
    summary = summarize_answers(rows, [p for p in match.problems if p[0] not in dict(unanswerable)])
    summary["not_asked"] = [{"uid": uid, "why": reason} for uid, reason in unanswerable]
    summary["complete"] = len(rows) == total
    summary["settings"] = store.header.get("fingerprint", {})
    from vrag_desktop.core.eval.report import answers_report

    store.finish(summary, answers_report(summary, rows))
    return summary
