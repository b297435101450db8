"""The Evaluations dock's report (issue 31, items 4 and 9): uids sort naturally and numbers by value,
"NDCG" is the textbook NDCG@k (never above 1) and the reward's variant is named as such."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from vrag_desktop.core.eval.compare import EvalInfo
from vrag_desktop.core.eval.metrics import REWARD_NDCG
from vrag_desktop.core.eval.order import by_uid, natural_key
from vrag_desktop.qt.evaluation.report_view import COLUMNS, ReportView

UIDS = ["q1", "q2", "q3", "q10", "q11", "q20"]


def _retrieval_rows() -> list[dict[str, Any]]:
    rows = [
        {
            "uid": uid,
            "query": f"question {uid}",
            "rank": int(uid[1:]),
            "ndcg@5": 1.0 / (1 + int(uid[1:]) % 3),
            "ndcg_original": 1.0,
            "hit@5": 1.0,
            "seconds": 0.01 * int(uid[1:]),
        }
        for uid in UIDS
    ]
    random.Random(3).shuffle(rows)  # the file's order is the order items finished in
    return rows


def _view(qtbot: Any) -> ReportView:
    view = ReportView()
    qtbot.addWidget(view)
    return view


def _column(view: ReportView, name: str) -> list[str]:
    c = COLUMNS.index(name)
    return [view.table.item(r, c).text() for r in range(view.table.rowCount())]


def test_uids_sort_naturally_and_ranks_by_value(qtbot: Any) -> None:
    view = _view(qtbot)
    summary = {"ks": [1, 5], "items": 6, "overall": {"mrr": 0.5, "ndcg@5": 0.6, "ndcg_original": 0.7}}
    info = EvalInfo(Path("/e/retrieval-x"), {"fingerprint": {"kind": "retrieval", "ks": [1, 5]}}, summary)
    view.show_report(info, _retrieval_rows())
    assert _column(view, "UID") == UIDS  # not q1, q10, q11, q2 …
    view.table.sortItems(COLUMNS.index("UID"), Qt.SortOrder.DescendingOrder)
    assert _column(view, "UID") == UIDS[::-1]
    view.table.sortItems(COLUMNS.index("Rank"), Qt.SortOrder.AscendingOrder)
    assert _column(view, "Rank") == ["1", "2", "3", "10", "11", "20"]
    # "NDCG" here is NDCG@5 (within [0, 1]); the reward's variant only under its own name
    c = COLUMNS.index("NDCG")
    assert view.table.horizontalHeaderItem(c).text() == "NDCG@5"
    assert all(0 <= float(x) <= 1 for x in _column(view, "NDCG"))
    text = view.summary.text()
    assert "NDCG@5 0.600" in text and f"{REWARD_NDCG} 0.700" in text
    assert "NDCG 0.700" not in text.replace(REWARD_NDCG, "")


def test_an_answers_report_names_the_rewards_ndcg(qtbot: Any) -> None:
    view = _view(qtbot)
    rows = [
        {"uid": u, "query": "q", "judge": 1.0, "ndcg": 0.5, "steps": 2, "seconds": 1.0} for u in ("a10", "a9")
    ]
    info = EvalInfo(
        Path("/e/answers-x"),
        {"fingerprint": {"kind": "answers", "agent": "vimrag"}},
        {"accuracy": 1.0, "format": 1.0, "ndcg": 0.5, "reward": 0.9},
    )
    view.show_report(info, rows)
    assert view.table.horizontalHeaderItem(COLUMNS.index("NDCG")).text() == REWARD_NDCG
    assert _column(view, "UID") == ["a9", "a10"]
    assert f"{REWARD_NDCG} 0.500" in view.summary.text()
    assert "VimRAG" in view.summary.text() and "vimrag" not in view.summary.text()


def test_natural_order_by_hand() -> None:
    assert sorted(["q10", "Q2", "q1", "r1", "q", "q2a", "q02"], key=natural_key) == [
        "q",
        "q1",
        "q02",
        "Q2",
        "q2a",
        "q10",
        "r1",
    ]
    assert sorted(["10", "9", "a", "1a"], key=natural_key) == ["1a", "9", "10", "a"]
    assert [r.get("uid") for r in by_uid([{"uid": "x11"}, {"uid": "x2"}, {}])] == [None, "x2", "x11"]
