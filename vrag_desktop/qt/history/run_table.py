"""The run table behind History: a model over saved run summaries, the filter that searches them and
the delegate that paints a run's status as a coloured chip. Model/view, so hundreds of runs stay fast."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QSize,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from vrag_desktop.qt.infra import theme
from vrag_desktop.qt.infra.tables import RecordModel

if TYPE_CHECKING:
    from vrag_desktop.core.run.store import RunSummary
_Index = QModelIndex | QPersistentModelIndex

COLUMNS = ("Time", "Agent", "Model", "Question", "Status", "Steps", "Answer")
TIME, AGENT, MODEL, QUESTION, STATUS, STEPS, ANSWER = range(len(COLUMNS))
RUN_ID_ROLE = Qt.ItemDataRole.UserRole
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
SEARCH_ROLE = Qt.ItemDataRole.UserRole + 2
STATUS_ROLE = Qt.ItemDataRole.UserRole + 3

# core status -> (what the person reads, theme colour)
STATUS_LOOK = {
    "answered": ("answered", "ok"),
    "max_steps": ("step limit", "warn"),
    "failed": ("failed", "error"),
    "cancelled": ("cancelled", "muted"),
    "interrupted": ("interrupted", "warn"),
    "running": ("running", "accent"),
}
AGENT_NAMES = {"vrag": "VRAG", "vimrag": "VimRAG"}
EXPORT_FORMATS = {
    # key (vrag_desktop.core.run.export's format): (menu text, file filter, suffix, what one item is called)
    "rl": ("RL data (verl parquet)…", "Parquet (*.parquet)", ".parquet", "record"),
    "rl-jsonl": ("RL data (JSON lines)…", "JSON lines (*.jsonl)", ".jsonl", "record"),
    "sft": ("SFT samples (LLaMA-Factory JSON)…", "JSON (*.json)", ".json", "sample"),
}
#: Where the export asks for the labels: exports take their ground truth from a dataset file.
DATASET_FILTER = "Datasets (*.json *.jsonl);;All files (*)"
DATASET_PROMPT = "Dataset with the reference answers for these runs (unified JSON or JSON lines)"


def local_time(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def first_line(text: str) -> str:
    return next((line.strip() for line in text.strip().splitlines() if line.strip()), "")


class RunTableModel(RecordModel["RunSummary"]):
    """Run summaries as rows; ``RUN_ID_ROLE`` gives a row's run id."""

    columns = COLUMNS

    def key(self, record: RunSummary) -> str:
        return record.id

    def cell(self, r: RunSummary, col: int, role: int) -> Any:
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(r, col)
        if role == RUN_ID_ROLE:
            return r.id
        if role == STATUS_ROLE:
            return r.status
        if role == SORT_ROLE:
            if col == TIME:
                return r.started_at
            if col == STEPS:
                return r.steps
            return (self._display(r, col) or "").lower()
        if role == SEARCH_ROLE:
            return f"{r.question}\n{r.answer}\n{r.model}".lower()
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == QUESTION:
                return r.question
            if col == ANSWER:
                return r.answer or None
            if col == TIME:
                done = f", finished {local_time(r.finished_at)}" if r.finished_at else ""
                return f"Run {r.id}: started {local_time(r.started_at)}{done}"
            if col == STATUS:
                return _status_tip(r)
            return None
        if role == Qt.ItemDataRole.TextAlignmentRole and col == STEPS:
            return int(Qt.AlignmentFlag.AlignCenter)
        if role == Qt.ItemDataRole.ForegroundRole and col in (TIME, AGENT, MODEL, STEPS):
            return theme.color("muted")
        return None

    @staticmethod
    def _display(r: RunSummary, col: int) -> str:
        if col == TIME:
            return local_time(r.started_at)
        if col == AGENT:
            return AGENT_NAMES.get(r.agent, r.agent)
        if col == MODEL:
            return r.model or "—"
        if col == QUESTION:
            return first_line(r.question)
        if col == STATUS:
            return STATUS_LOOK.get(r.status, (r.status, "muted"))[0]
        if col == STEPS:
            return str(r.steps)
        if col == ANSWER:
            return first_line(r.answer)
        return ""


def _status_tip(r: RunSummary) -> str:
    parts = [f"{r.steps} step(s)"]
    if r.model_seconds or r.tool_seconds:
        parts.append(f"model {r.model_seconds:.1f} s, tools {r.tool_seconds:.1f} s")
    if r.prompt_tokens or r.completion_tokens:
        parts.append(f"{r.prompt_tokens + r.completion_tokens} tokens")
    if r.errors:
        parts.append(f"{r.errors} error(s)")
    note = {
        "interrupted": "The app stopped before this run finished; what it did so far is kept.",
        "max_steps": "The agent reached its step limit; the answer is its best so far.",
    }.get(r.status, "")
    return " · ".join(parts) + (f"\n{note}" if note else "")


class RunFilterModel(QSortFilterProxyModel):
    """Rows whose question, answer or model contain every word typed (case-insensitive)."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._terms: list[str] = []
        self.setSortRole(SORT_ROLE)

    def set_text(self, text: str) -> None:
        self.beginFilterChange()
        self._terms = text.lower().split()
        self.endFilterChange(QSortFilterProxyModel.Direction.Rows)

    def filterAcceptsRow(self, source_row: int, source_parent: _Index) -> bool:
        if not self._terms:
            return True
        haystack = self.sourceModel().index(source_row, 0, source_parent).data(SEARCH_ROLE) or ""
        return all(t in haystack for t in self._terms)


class StatusDelegate(QStyledItemDelegate):
    """The status cell as a small tinted chip, coloured by the theme."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        text = opt.text
        opt.text = ""
        style = opt.widget.style() if opt.widget else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        status = index.data(STATUS_ROLE) or ""
        fg = theme.color(STATUS_LOOK.get(status, ("", "muted"))[1])
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        if selected:  # on the selection colour a tinted chip is unreadable: use the selection's text
            fg = opt.palette.color(QPalette.ColorRole.HighlightedText)
        fm = opt.fontMetrics
        w = fm.horizontalAdvance(text) + 16
        h = fm.height() + 4
        rect = QRect(opt.rect.left() + 6, opt.rect.center().y() - h // 2 + 1, w, h)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        bg = QColor(fg)
        bg.setAlphaF(0.22 if selected else 0.16 if theme.effective_theme() == "dark" else 0.12)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(bg)
        painter.drawRoundedRect(rect, h / 2, h / 2)
        painter.setPen(fg)
        painter.drawText(rect, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: _Index) -> QSize:
        size = super().sizeHint(option, index)
        return QSize(size.width() + 20, size.height())
