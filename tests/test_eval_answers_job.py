"""The answers evaluation job itself (core, no CLI): an item without a reference answer is named
and not asked, the rest are asked and scored; a question whose run fails is recorded and the rest
go on. The agent here is a scripted stand-in for the model's words (one saved run per question is
tested through the real CLI in test_eval_answers_cli.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vrag_desktop.core.agents.events import AgentError, Answer, ContentDelta
from vrag_desktop.core.datasets import DatasetItem, load_dataset, write_unified
from vrag_desktop.core.eval.answers_eval import evaluate_answers, metric_scorer
from vrag_desktop.core.eval.matching import CorpusFile, match_dataset
from vrag_desktop.core.eval.store import EvalStore


class Scripted:
    """Answers from a table; a question mapped to None fails the way a dead endpoint does."""

    def __init__(self, answers: dict[str, str | None]) -> None:
        self.answers = answers
        self.asked: list[str] = []
        self.run_id: str | None = None

    def run(self, question: str) -> Iterator[Any]:
        self.asked.append(question)
        self.run_id = f"run-{len(self.asked)}"
        answer = self.answers[question]
        if answer is None:
            yield AgentError(
                step=1, time=0.1, content="endpoint unreachable", kind="endpoint", recoverable=False
            )
            return
        yield ContentDelta(step=1, time=0.1, content=f"<think>t</think>\n<answer>{answer}</answer>")
        yield Answer(step=1, time=0.2, content=answer)


def _drive(gen: Any) -> dict[str, Any]:
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return dict(stop.value)


def test_items_without_answers_are_named_and_failed_runs_recorded(tmp_path: Path) -> None:
    ds = tmp_path / "d.json"
    write_unified(
        ds,
        [
            DatasetItem("a", "Who signed it?", "Maren Alvarez", "report.pdf", (1,)),
            DatasetItem("b", "Which region?", "North America", "report.pdf", (2,)),
        ],
    )
    text = ds.read_text().replace('"North America"', '""')  # a label someone has not written yet
    ds.write_text(text + "")
    items = list(load_dataset(ds, need_answers=False))
    items.append(DatasetItem("c", "How fast?", "21 percent", "report.pdf", (2,)))
    match = match_dataset(items, [CorpusFile("/docs/report.pdf", "c", 3)])
    agent = Scripted({"Who signed it?": "Maren Alvarez", "How fast?": None})
    store = EvalStore.open(tmp_path / "ev", {"fingerprint": {"kind": "answers"}})
    summary = _drive(evaluate_answers(items, match, agent, metric_scorer("exact"), store))
    assert agent.asked == ["Who signed it?", "How fast?"]  # "b" is not asked
    assert summary["not_asked"] == [{"uid": "b", "why": "no reference answer: not asked or judged"}]
    assert summary["items"] == 2 and summary["complete"] and summary["errors"] == 1
    assert store.results["a"]["judge"] == 1.0 and store.results["c"]["error"].startswith("endpoint")
    assert store.results["c"]["judge"] == 0.0  # no answer: judged wrong, never crashing the evaluation
    assert "no reference answer" in store.report_path.read_text()


def test_reading_for_evaluation_names_repeated_uids_instead_of_refusing(tmp_path: Path) -> None:
    import pytest

    from vrag_desktop.core.datasets import DatasetError

    ds = tmp_path / "dup.jsonl"
    ds.write_text(
        '{"uid": "a", "query": "q1", "reference_answer": "r1"}\n'
        '{"uid": "a", "query": "q2", "reference_answer": "r2"}\n'
        '{"uid": "b", "query": "q3", "reference_answer": "r3"}\n'
    )
    with pytest.raises(DatasetError, match="share the uid 'a'"):
        load_dataset(ds)  # exports and labelling: ground truth must be unambiguous
    lenient = load_dataset(ds, need_answers=False)
    assert [i.query for i in lenient] == ["q1", "q3"]
    assert lenient.problems == [
        ("a", "examples 1 and 2 share the uid 'a': example 2 left out (give it its own uid)")
    ]
