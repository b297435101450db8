"""The Evaluations dock: the evaluations under ``<data>/evaluations`` (kind, dataset, corpora, date,
main metric, complete or not; a damaged folder listed with its reason), a new one started off the
GUI thread with progress and Cancel, an incomplete one resumed, a report as a table per question,
and two compared. Every folder is read off the GUI thread (:mod:`..infra.tasks`)."""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QItemSelectionModel, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QWidget,
)

from vrag_desktop.core.eval.compare import EvalInfo, list_evaluations, read_evaluation, read_rows
from vrag_desktop.core.progress import Progress
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.corpora.indexing_progress import IndexingProgress
from vrag_desktop.qt.evaluation.report_view import ReportView, fmt, settings_text
from vrag_desktop.qt.evaluation.runner import EvalRequest, EvalRunner
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.open_file import open_path
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.theme import color
from vrag_desktop.qt.infra.widgets import button, column, row

LIST_COLUMNS = ("Kind", "Dataset", "Corpora", "Settings", "Date", "Metric", "State")
STATE = LIST_COLUMNS.index("State")
FOLDER_ROLE = Qt.ItemDataRole.UserRole + 1
#: What the bar's buttons do; their labels are short: the dock shares the narrow left column with
#: History and Datasets.
TIPS = {
    "new": "New evaluation: retrieval or answers, on a dataset and corpora",
    "resume": "Go on with an incomplete evaluation (finished items are not redone)",
    "compare": "Two evaluations side by side (select two, or pick them)",
    "html": "Open the evaluation's self-contained HTML report in the browser",
}


def _eta(seconds: float | None) -> str:
    if seconds is None:
        return ""
    m, s = divmod(int(seconds), 60)
    return f"about {m} min {s:02d} s left" if m else f"about {s} s left"


class EvalProgress(IndexingProgress):
    """The indexing banner's look (label, bar, Cancel) for an evaluation."""

    def started(self, name: str) -> None:
        super().started(name)
        self.label.setText(f"<b>Evaluating {html.escape(name)}…</b><br>loading the corpora and the embedder")
        self.cancel_button.setToolTip("Stop; every finished item is kept and Resume goes on from there")

    def show_eval(self, name: str, p: Progress) -> None:
        parts = [
            p.message,
            f"{p.rate:.2f} item/s" if p.rate else "",
            _eta(p.eta),
            f"{p.failed} failed" if p.failed else "",
        ]
        muted = color("muted").name()
        self.label.setText(
            f"<b>Evaluating {html.escape(name)}: {p.done} of {p.total}</b>"
            f"<br><span style='color:{muted}'>{html.escape(' · '.join(x for x in parts if x))}</span>"
        )
        self.bar.setRange(0, max(1, p.total))
        self.bar.setValue(min(p.done, p.total))


class EvaluationsPanel(QWidget):
    """Signals: ``openRunRequested(run_id)`` (as History's ``openRequested``), ``listed(count)`` after
    each refresh, ``reportShown(folder)``, ``evaluationEnded(outcome, folder)``."""

    openRunRequested = Signal(str)
    listed = Signal(int)
    reportShown = Signal(str)
    evaluationEnded = Signal(str, str)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        self.infos: list[EvalInfo] = []
        self.runner = EvalRunner(ctx, self)
        self.compare_dialog: Any = None
        self.new_dialog: Any = None
        self._report_task = TaskSlot()  # the newest reading wins, even over one already delivered
        self._list_task = TaskSlot()
        self.new_button = button(self, "New…", self.new_evaluation, tip=TIPS["new"])
        self.resume_button = button(self, "Resume", self.resume_selected, tip=TIPS["resume"])
        self.compare_button = button(self, "Compare…", self.compare_selected, tip=TIPS["compare"])
        self.html_button = button(self, "HTML report", self.open_html, tip=TIPS["html"])
        bar = row(self.new_button, self.resume_button, self.compare_button, self.html_button)
        self.list = QTreeWidget()
        self.list.setHeaderLabels(LIST_COLUMNS)
        self.list.setRootIsDecorated(False)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setAlternatingRowColors(True)
        self.progress = EvalProgress()
        self.report = ReportView()
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.list)
        split.addWidget(self.report)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 3)
        self.split = split
        column(self, bar, self.progress, split, grow=split, margins=4)
        self.progress.cancel_button.clicked.connect(self.cancel)
        self.list.itemSelectionChanged.connect(self._selection_changed)
        self.report.runClicked.connect(self.openRunRequested)
        self.runner.started.connect(lambda folder: self.progress.started(Path(folder).name))
        self.runner.progress.connect(self._on_progress)
        self.runner.ended.connect(self._on_ended)
        self._selection_changed()

    # ---------------------------------------------------------------- list
    def refresh(self, select: str | None = None) -> None:
        """Read every evaluation folder off the GUI thread, then list them (``select``: a folder)."""
        keep = select or (str(self.selected()[0].folder) if self.selected() else None)

        def done(infos: list[EvalInfo]) -> None:
            self._fill(infos, keep)

        self._list_task.start(
            run_call,
            list_evaluations,
            self.ctx.data_dir,
            name="list evaluations",
            on_done=done,
            error_title="Cannot list the evaluations",
        )

    def _fill(self, infos: list[EvalInfo], select: str | None) -> None:
        self.infos = infos
        self.list.clear()
        warn, err = color("warn"), color("error")
        current: QTreeWidgetItem | None = None
        for info in infos:
            metric, value = info.main_metric
            if info.problem and not info.header:
                cells = ["?", info.name, "", "", "", "", f"damaged: {info.problem}"]
            else:
                date = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.created)) if info.created else ""
                state = "complete" if info.complete else f"incomplete ({info.done} done)"
                if info.problem:
                    state = f"damaged: {info.problem}"
                cells = [info.kind, info.dataset, ", ".join(info.corpora), settings_text(info), date]
                cells += [f"{metric} {fmt(value)}", state]
            item = QTreeWidgetItem(cells)
            item.setData(0, FOLDER_ROLE, str(info.folder))
            item.setToolTip(0, str(info.folder))
            item.setToolTip(STATE, cells[STATE])
            if info.problem:
                item.setForeground(STATE, err)
            elif not info.complete:
                item.setForeground(STATE, warn)
            self.list.addTopLevelItem(item)
            if select and str(info.folder) == select:
                current = item
        for i in range(len(LIST_COLUMNS) - 1):
            self.list.resizeColumnToContents(i)
        if current is not None:
            flags = QItemSelectionModel.SelectionFlag
            self.list.setCurrentItem(current, 0, flags.ClearAndSelect | flags.Rows)
        if not infos:
            self.report.clear("No evaluation yet. New… measures retrieval or answers on a dataset.")
        self.listed.emit(len(infos))

    def selected(self) -> list[EvalInfo]:
        folders = {it.data(0, FOLDER_ROLE) for it in self.list.selectedItems()}
        return [i for i in self.infos if str(i.folder) in folders]

    def _selection_changed(self) -> None:
        chosen = self.selected()
        one = chosen[0] if len(chosen) == 1 else None
        running = self.runner.running
        self.resume_button.setEnabled(bool(one and one.header and not one.complete and not running))
        self.html_button.setEnabled(bool(one and one.report.is_file()))
        self.compare_button.setEnabled(len([i for i in self.infos if i.header]) >= 2)
        self.new_button.setEnabled(not running)
        if one is not None:
            self.show_report(one.folder)

    # ---------------------------------------------------------------- report
    def show_report(self, folder: Path) -> None:
        """Read the folder's header, summary and rows off the GUI thread, then show them."""

        def read() -> tuple[EvalInfo, list[dict[str, Any]]]:
            return read_evaluation(folder), read_rows(folder)

        def done(got: tuple[EvalInfo, list[dict[str, Any]]]) -> None:
            info, rows = got
            if info.problem and not info.header:
                self.report.clear(f"{info.name}: {html.escape(info.problem)}")
            else:
                self.report.show_report(info, rows)
            self.reportShown.emit(str(folder))

        self._report_task.start(
            run_call, read, name="read evaluation", on_done=done, error_title="Cannot read the evaluation"
        )

    def open_html(self) -> bool:
        """Open the selected evaluation's HTML report in the browser; with none set up, say where
        the file is (:func:`open_path`)."""
        chosen = self.selected()
        if chosen and chosen[0].report.is_file():
            return open_path(self, chosen[0].report, "the HTML report")
        return False

    # ---------------------------------------------------------------- running
    def new_evaluation(self) -> Any:
        from vrag_desktop.qt.evaluation.new_dialog import NewEvaluationDialog

        dlg = NewEvaluationDialog(self.ctx, self)
        dlg.accepted.connect(lambda: self.start(dlg.request()))
        dlg.setModal(True)
        dlg.show()
        self.new_dialog = dlg
        return dlg

    def resume_selected(self) -> None:
        chosen = self.selected()
        if len(chosen) == 1:
            self.start(EvalRequest.resume(chosen[0]))

    def start(self, request: EvalRequest | None) -> None:
        if request is None:
            return
        if self.runner.running:
            error_sink().report("An evaluation is running", "Cancel it before starting another.", "warning")
            return
        self.progress.started(Path(request.out or request.dataset).name)
        self.runner.start(request)
        self._selection_changed()

    def cancel(self) -> None:
        if self.runner.running:
            self.progress.stopping()
            self.runner.cancel()

    def _on_progress(self, p: Progress) -> None:
        self.progress.show_eval(Path(self.runner.folder).name or "…", p)

    def _on_ended(self, outcome: str, folder: str) -> None:
        self.progress.set_busy(False)
        self.refresh(select=folder or None)
        self._selection_changed()
        self.evaluationEnded.emit(outcome, folder)

    # ---------------------------------------------------------------- compare
    def compare_selected(self) -> Any:
        """The comparison dialog, with the two selected evaluations (oldest as A) when two are."""
        from vrag_desktop.qt.evaluation.compare_view import CompareDialog

        chosen = sorted(self.selected(), key=lambda i: i.created or 0.0)
        a = chosen[0].folder if len(chosen) == 2 else None
        b = chosen[1].folder if len(chosen) == 2 else None
        dlg = CompareDialog(self.infos, a, b, self)
        dlg.show()
        self.compare_dialog = dlg
        return dlg

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Cancel a running evaluation (every finished item is kept) and wait a while for it."""
        self.runner.cancel()
        self.runner.wait(timeout_s)
