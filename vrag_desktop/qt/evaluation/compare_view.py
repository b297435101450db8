"""Compare…: two evaluations side by side — why they may not be comparable (on top, where it cannot
be missed), how the means moved over the items both did, then the items that flipped (better in
green, worse in red) before the rest. The comparison is computed off the GUI thread."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QFormLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from vrag_desktop.core.eval.compare import BETTER, WORSE, Comparison, EvalInfo
from vrag_desktop.qt.corpora.corpora_states import Banner
from vrag_desktop.qt.evaluation.report_view import fmt
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.theme import color
from vrag_desktop.qt.infra.widgets import column

ITEM_COLUMNS = ("", "UID", "Question", "A", "B")


def label_of(info: EvalInfo) -> str:
    metric, value = info.main_metric
    return f"{info.name}  ({metric} {fmt(value)})"


class CompareDialog(QDialog):
    """A (baseline) and B picked from the listed evaluations; ``compared`` after each comparison."""

    compared = Signal(object)

    def __init__(
        self,
        infos: list[EvalInfo],
        a: Path | None = None,
        b: Path | None = None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Compare evaluations")
        self.infos = [i for i in infos if i.header]
        self.a, self.b = QComboBox(), QComboBox()
        for combo, pick in ((self.a, a), (self.b, b)):
            for info in self.infos:
                combo.addItem(label_of(info), str(info.folder))
            if pick is not None:
                combo.setCurrentIndex(max(0, combo.findData(str(pick))))
        if b is None and self.b.count() > 1 and self.b.currentIndex() == self.a.currentIndex():
            self.b.setCurrentIndex(1 if self.a.currentIndex() == 0 else 0)
        form = QFormLayout()
        form.addRow("A (before)", self.a)
        form.addRow("B (after)", self.b)
        self.warnings = Banner("banner-warn")
        self.warnings.label.setTextFormat(Qt.TextFormat.RichText)
        self.headline = QLabel()
        self.headline.setTextFormat(Qt.TextFormat.RichText)
        self.headline.setWordWrap(True)
        self.deltas = QTableWidget(3, 0)  # one column per metric: A, B and B − A as rows
        self.deltas.setVerticalHeaderLabels(["A", "B", "B − A"])
        self.items = QTableWidget(0, len(ITEM_COLUMNS))
        self.items.setHorizontalHeaderLabels(ITEM_COLUMNS)
        for t in (self.deltas, self.items):
            t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
            t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
            t.verticalHeader().setDefaultSectionSize(t.fontMetrics().height() + 10)
        self.items.verticalHeader().hide()
        self.deltas.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.deltas.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.deltas.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.items.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.only = QLabel()
        self.only.setWordWrap(True)
        self.only.setProperty("role", "muted")
        column(self, form, self.warnings, self.headline, self.deltas, self.items, self.only, grow=self.items)
        self.comparison: Comparison | None = None
        self._task = TaskSlot()  # the newest comparison wins
        self.a.currentIndexChanged.connect(self.refresh)
        self.b.currentIndexChanged.connect(self.refresh)
        self.resize(1000, 700)
        self.refresh()

    def refresh(self) -> None:
        """Compare the two picked folders off the GUI thread."""
        from vrag_desktop.core.eval.compare import compare

        a, b = self.a.currentData(), self.b.currentData()
        if not a or not b:
            self.headline.setText("Two evaluations are needed to compare.")
            return
        self.headline.setText("Comparing…")
        self._task.start(
            run_call,
            compare,
            Path(a),
            Path(b),
            name="compare evaluations",
            on_done=self.show_comparison,
            on_error=self._failed,
        )

    def _failed(self, exc: BaseException) -> None:
        self.headline.setText("")
        error_sink().report("Cannot compare these evaluations", exc)

    def show_comparison(self, c: Comparison) -> None:
        self.comparison = c
        if c.warnings:
            items = "".join(f"<li>{html.escape(w)}</li>" for w in c.warnings)
            self.warnings.label.setText(
                f"<b>These two may not be comparable:</b><ul style='margin:0'>{items}</ul>"
            )
        self.warnings.setVisible(bool(c.warnings))
        ok, bad = color("ok").name(), color("error").name()
        self.headline.setText(
            f"{len(c.items)} item(s) in both: <b style='color:{ok}'>{len(c.better)} better</b>, "
            f"<b style='color:{bad}'>{len(c.worse)} worse</b>, "
            f"{sum(1 for d in c.items if not d.flipped and d.direction != 'same')} moved without flipping"
            + (f" (hit@{c.k})" if c.k else "")
            + (
                f"<br><span style='color:{color('muted').name()}'>Settings that differ: "
                + html.escape("; ".join(c.differs))
                + "</span>"
                if c.differs
                else ""
            )
        )
        self.deltas.setColumnCount(len(c.deltas))
        self.deltas.setHorizontalHeaderLabels([m for m, *_ in c.deltas])
        for col, (metric, va, vb, d) in enumerate(c.deltas):
            for r, text in enumerate((fmt(va), fmt(vb), "–" if d is None else f"{d:+.3f}")):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                if r == 2 and d:
                    lower_better = metric in ("seconds", "steps")
                    item.setForeground(color("ok" if (d > 0) != lower_better else "error"))
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.deltas.setItem(r, col, item)
        self._fit_deltas()
        self.items.setRowCount(len(c.items))
        for r, diff in enumerate(c.items):
            mark = {BETTER: "▲ better", WORSE: "▼ worse"}.get(diff.direction, "")
            for col, text in enumerate((mark, diff.uid, diff.question, diff.a, diff.b)):
                item = QTableWidgetItem(text)
                if diff.direction in (BETTER, WORSE):
                    fg = color("ok" if diff.direction == BETTER else "error")
                    if col in (0, 4):
                        item.setForeground(fg)
                    if diff.flipped:
                        tint = QColor(fg)
                        tint.setAlpha(48)  # a wash of the colour over the table's base, either theme
                        item.setBackground(tint)
                if col == 2:
                    item.setToolTip(text)
                self.items.setItem(r, col, item)
        self.items.resizeColumnToContents(0)
        self.items.resizeColumnToContents(1)
        for col in (3, 4):
            self.items.setColumnWidth(col, max(140, self.items.sizeHintForColumn(col) + 16))
        parts = []
        if c.only_a:
            parts.append(f"only in A: {', '.join(c.only_a[:10])}" + (" …" if len(c.only_a) > 10 else ""))
        if c.only_b:
            parts.append(f"only in B: {', '.join(c.only_b[:10])}" + (" …" if len(c.only_b) > 10 else ""))
        self.only.setText(("Not compared — " + "; ".join(parts)) if parts else "")
        self.compared.emit(c)

    def _fit_deltas(self) -> None:
        """Exactly the three rows tall: no scroll bar, no blank strip."""
        t = self.deltas
        header = max(t.horizontalHeader().height(), t.horizontalHeader().sizeHint().height())
        t.setFixedHeight(header + sum(t.rowHeight(r) for r in range(t.rowCount())) + 2 * t.frameWidth())
