"""One evaluation's report in the dock: its summary line above a table of questions (uid, question,
outcome, rank / NDCG or the judge's verdict, steps, seconds, error). A row of an answers evaluation
names the run that answered it, so clicking it can open that run. Uids sort naturally (q2 before
q10) and numbers by value; "NDCG" is the textbook NDCG@k, the reward's variant is named so."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from vrag_desktop.core.agents.names import agent_name
from vrag_desktop.core.eval.compare import CORRECT, EvalInfo, item_outcome, main_k
from vrag_desktop.core.eval.metrics import REWARD_NDCG
from vrag_desktop.core.eval.order import natural_key
from vrag_desktop.qt.infra.theme import color
from vrag_desktop.qt.infra.widgets import column

COLUMNS = ("UID", "Question", "Outcome", "Rank", "NDCG", "Judge", "Steps", "Seconds", "Error")
RETRIEVAL_HIDDEN = {"Judge", "Steps"}
ANSWERS_HIDDEN = {"Rank"}
RUN_ROLE = Qt.ItemDataRole.UserRole + 1
NUMERIC = {"Rank", "NDCG", "Judge", "Steps", "Seconds"}


class _Cell(QTableWidgetItem):
    """A cell that sorts as a person expects: uids naturally, numbers by value (blanks last)."""

    def __lt__(self, other: QTableWidgetItem) -> bool:
        return bool(self._key() < _Cell._key(other))  # type: ignore[arg-type]

    def _key(self) -> tuple[Any, ...]:
        name = COLUMNS[self.column()] if 0 <= self.column() < len(COLUMNS) else ""
        text = self.text()
        if name == "UID":
            return natural_key(text)
        if name in NUMERIC:
            try:
                return (0, float(text.split(" ", 1)[0]))
            except ValueError:
                return (1, 0.0)
        return (text.casefold(),)


def fmt(v: Any, digits: int = 3) -> str:
    return "–" if not isinstance(v, int | float) or isinstance(v, bool) else f"{v:.{digits}f}"


def settings_text(info: EvalInfo) -> str:
    """What tells two evaluations of the same dataset apart: the embedder and fusion, or the agent,
    its model and the judge."""
    fp = info.fingerprint
    if info.kind == "answers":
        judge = str(fp.get("judge") or "")
        judge = judge.rsplit(":", 1)[-1] if judge.startswith("model:") else judge
        agent = agent_name(fp["agent"]) if fp.get("agent") else ""
        return " · ".join(str(x) for x in (agent, fp.get("model"), f"judge {judge}") if x)
    embedder = ", ".join(str(e) for e in fp.get("embedder") or [])
    return embedder + (" · hybrid" if fp.get("hybrid") else "")


def summary_html(info: EvalInfo) -> str:
    """The summary line: the main means, how many items, what is missing or damaged."""
    s = info.summary or {}
    muted = color("muted").name()
    where = [info.dataset, ", ".join(info.corpora) or "all corpora", settings_text(info)]
    head = f"<b>{html.escape(info.kind.capitalize())}</b> · " + html.escape(" · ".join(x for x in where if x))
    if info.kind == "answers":
        parts = [f"accuracy <b>{fmt(s.get('accuracy'))}</b>"] + [
            f"{REWARD_NDCG if m == 'ndcg' else m} {fmt(s.get(m))}" for m in ("format", "ndcg", "reward")
        ]
        if s.get("judge_failures") or s.get("errors"):
            parts.append(f"{s.get('judge_failures', 0)} judge failure(s), {s.get('errors', 0)} error(s)")
    else:
        ov = s.get("overall") or {}
        ks = [k for k in s.get("ks") or [] if isinstance(k, int)]
        mk = main_k(ks)
        parts = [f"<b>hit@{mk} {fmt(ov.get(f'hit@{mk}'))}</b>"] if mk else []
        parts += [f"hit@{k} {fmt(ov.get(f'hit@{k}'))}" for k in ks if k != mk]
        parts += [f"MRR {fmt(ov.get('mrr'))}"]
        parts += [f"NDCG@{mk} {fmt(ov.get(f'ndcg@{mk}'))}"] if mk else []
        parts += [f"{REWARD_NDCG} {fmt(ov.get('ndcg_original'))}"]
    state = (
        f"{s.get('items', info.done)} item(s), complete"
        if info.complete
        else f"<span style='color:{color('warn').name()}'>incomplete: {info.done} item(s) done — Resume goes on</span>"
    )
    if s.get("not_scored"):
        state += f" · {len(s['not_scored'])} not scored (not in the corpora)"
    if info.problem:
        state = f"<span style='color:{color('error').name()}'>{html.escape(info.problem)}</span>"
    body = " · ".join(parts) if s else "no summary yet"
    return f"{head}<br>{body}<br><span style='color:{muted}'>{state}</span>"


class ReportView(QWidget):
    """Summary and per-question table; ``runClicked(run_id)`` when a row with a run is clicked."""

    runClicked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("Choose an evaluation above to see its questions.")
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 10)
        self.table.setWordWrap(False)
        h = self.table.horizontalHeader()
        h.setSortIndicator(0, Qt.SortOrder.AscendingOrder)  # by uid until a header is clicked
        self.table.setSortingEnabled(True)
        h.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        h.setSectionResizeMode(COLUMNS.index("Question"), QHeaderView.ResizeMode.Stretch)
        self.table.cellClicked.connect(self._clicked)
        column(self, self.summary, self.table, grow=self.table, margins=0)
        self.info: EvalInfo | None = None

    def clear(self, text: str = "") -> None:
        self.info = None
        self.table.setRowCount(0)
        self.summary.setText(text)

    def show_report(self, info: EvalInfo, rows: list[dict[str, Any]]) -> None:
        self.info = info
        self.summary.setText(summary_html(info))
        answers = info.kind == "answers"
        hidden = ANSWERS_HIDDEN if answers else RETRIEVAL_HIDDEN
        for i, name in enumerate(COLUMNS):
            self.table.setColumnHidden(i, name in hidden)
        k = main_k((info.summary or {}).get("ks") or info.fingerprint.get("ks") or [])
        standard = not answers and k is not None  # the textbook NDCG@k where it is known
        ndcg_header = f"NDCG@{k}" if standard else REWARD_NDCG
        self.table.setHorizontalHeaderLabels([ndcg_header if c == "NDCG" else c for c in COLUMNS])
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(rows))
        ok, bad, muted = color("ok"), color("error"), color("muted")
        for r, row in enumerate(rows):
            outcome, _ = item_outcome(info.kind, row, k)
            if answers:
                judge = fmt(row.get("judge"), 2)
                if row.get("judge_error"):
                    judge += f" ({row['judge_error']})"
                ndcg = row.get("ndcg")
            else:
                judge, ndcg = "", row.get(f"ndcg@{k}" if standard else "ndcg_original")
            values = (
                str(row.get("uid", "")),
                str(row.get("query", "")),
                outcome,
                str(row["rank"]) if isinstance(row.get("rank"), int) else "–",
                fmt(ndcg),
                judge,
                str(row.get("steps", "")),
                fmt(row.get("seconds"), 2),
                str(row.get("error") or row.get("note") or ""),
            )
            for c, text in enumerate(values):
                cell = _Cell(text)
                if COLUMNS[c] in ("Question", "Error"):
                    cell.setToolTip(text)
                if COLUMNS[c] == "Outcome":
                    good = outcome == CORRECT or outcome.startswith("hit@")
                    cell.setForeground(ok if good else muted if outcome == "no verdict" else bad)
                if c == 0 and answers and row.get("run_id"):
                    cell.setData(RUN_ROLE, str(row["run_id"]))
                    cell.setToolTip(
                        f"Click to open run {row['run_id']} in the reasoning graph and evidence views"
                    )
                self.table.setItem(r, c, cell)
        self.table.setSortingEnabled(True)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setSectionResizeMode(
            COLUMNS.index("Question"), QHeaderView.ResizeMode.Stretch
        )

    def _clicked(self, row: int, _column: int) -> None:
        cell = self.table.item(row, 0)
        run_id = cell.data(RUN_ROLE) if cell is not None else None
        if run_id:
            self.runClicked.emit(str(run_id))
