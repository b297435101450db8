"""The run table behind History: a model over saved run summaries, the filter that searches them and
the delegate that paints a run's status as a coloured chip. Model/view, so hundreds of runs stay fast."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QModelIndex,
    QPersistentModelIndex,
    QRect,
    QRegularExpression,
    QSize,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem, QTableView

from vrag_desktop.core.agents.names import agent_name
from vrag_desktop.qt.infra import theme
from vrag_desktop.qt.infra.tables import RecordModel

if TYPE_CHECKING:
    from vrag_desktop.core.run.store import RunSummary
_Index = QModelIndex | QPersistentModelIndex

# What a run was and how it ended come first: a narrow History shows the leading columns (the
# panel hides the rest by PRIORITY), and an answered, a failed and a cancelled run must differ there.
COLUMNS = ("Question", "Outcome", "Time", "Answer", "Model", "Agent", "Steps")
QUESTION, STATUS, TIME, ANSWER, MODEL, AGENT, STEPS = range(len(COLUMNS))
#: The columns a narrow History keeps, most needed first (the question always shows).
PRIORITY = (QUESTION, STATUS, TIME, ANSWER, MODEL, AGENT, STEPS)
#: The least a stretched text column gets before a column of lower priority is hidden for it.
TEXT_MIN = 120
RUN_ID_ROLE = int(Qt.ItemDataRole.UserRole)
SORT_ROLE = RUN_ID_ROLE + 1
SEARCH_ROLE = RUN_ID_ROLE + 2
STATUS_ROLE = RUN_ID_ROLE + 3
_DISPLAY, _TIP = int(Qt.ItemDataRole.DisplayRole), int(Qt.ItemDataRole.ToolTipRole)

# core status -> (what the person reads, theme colour)
STATUS_LOOK = {
    "answered": ("answered", "ok"),
    "max_steps": ("step limit", "warn"),
    "failed": ("failed", "error"),
    "cancelled": ("cancelled", "muted"),
    "interrupted": ("interrupted", "warn"),
    "running": ("running", "accent"),
}
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
    """Run summaries as rows; ``RUN_ID_ROLE`` gives a row's run id (every column), ``STATUS_ROLE``
    the status (its column), ``SEARCH_ROLE`` what the filter searches (the first column). Its
    colours follow the theme: call :meth:`~RecordModel.refresh` when the theme changes."""

    columns = COLUMNS

    def key(self, record: RunSummary) -> str:
        return record.id

    def row_cells(self, r: RunSummary) -> list[dict[int, Any]]:
        texts = [""] * len(COLUMNS)
        texts[QUESTION] = first_line(r.question)
        texts[STATUS] = STATUS_LOOK.get(r.status, (r.status, "muted"))[0]
        texts[TIME] = local_time(r.started_at)
        texts[ANSWER] = first_line(r.answer)
        texts[MODEL] = r.model or "—"
        texts[AGENT] = agent_name(r.agent)
        texts[STEPS] = str(r.steps)
        cells: list[dict[int, Any]] = [
            {_DISPLAY: text, SORT_ROLE: text.lower(), RUN_ID_ROLE: r.id} for text in texts
        ]
        cells[TIME][SORT_ROLE] = r.started_at
        cells[STEPS][SORT_ROLE] = r.steps
        cells[0][SEARCH_ROLE] = f"{r.question}\n{r.answer}\n{r.model}".lower()  # the filter's column
        cells[STATUS][STATUS_ROLE] = r.status
        done = f", finished {local_time(r.finished_at)}" if r.finished_at else ""
        cells[TIME][_TIP] = f"Run {r.id}: started {texts[TIME]}{done}"
        cells[QUESTION][_TIP] = f"{r.question}\n\n{texts[TIME]} · {texts[AGENT]} · {texts[MODEL]}"
        if r.answer:
            cells[ANSWER][_TIP] = r.answer
        cells[STATUS][_TIP] = _status_tip(r)
        cells[STEPS][int(Qt.ItemDataRole.TextAlignmentRole)] = int(Qt.AlignmentFlag.AlignCenter)
        muted = theme.color("muted")
        for col in (TIME, AGENT, MODEL, STEPS):
            cells[col][int(Qt.ItemDataRole.ForegroundRole)] = muted
        return cells


def fit_columns(table: QTableView, widths: dict[int, int], room: int) -> None:
    """Show the columns that fit in ``room`` px, by :data:`PRIORITY`; ``widths``: the fixed
    columns' widths (the question and answer stretch, from :data:`TEXT_MIN`). Why: with every
    column shown, a History dock as narrow as a side column showed time, agent and model only."""
    used, full = 0, False
    for col in PRIORITY:  # in order: a narrow column of less use never stands in for the time
        need = widths.get(col, TEXT_MIN)
        full = full or (col != QUESTION and used + need > room)
        show = not full
        if show:
            used += need
        if table.isColumnHidden(col) == show:
            table.setColumnHidden(col, not show)


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
    """Rows whose question, answer or model contain every word typed (case-insensitive). A regular
    expression over ``SEARCH_ROLE``, one look-ahead a word, so Qt filters without calling Python."""

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setFilterRole(SEARCH_ROLE)

    def set_text(self, text: str) -> None:
        words = text.lower().split()
        pattern = "".join(f"(?=.*{QRegularExpression.escape(w)})" for w in words)
        options = (
            QRegularExpression.PatternOption.CaseInsensitiveOption
            | QRegularExpression.PatternOption.DotMatchesEverythingOption
        )
        self.setFilterRegularExpression(QRegularExpression(f"^{pattern}" if words else "", options))


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
