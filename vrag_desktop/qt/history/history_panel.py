"""History: every saved run in a table, to reopen, replay, export or delete.

A model/view table (not a widget table) so hundreds of runs stay fast; the run list is read off the
GUI thread. The panel only emits ``openRequested`` / ``replayRequested`` with a run id: the main
window feeds the run's events to the same views a live run uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QMargins, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence, QResizeEvent
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QSizePolicy,
    QStackedWidget,
    QStyle,
    QToolButton,
    QWidget,
)

from vrag_desktop.qt.history.run_table import (
    AGENT,
    ANSWER,
    DATASET_FILTER,
    DATASET_PROMPT,
    EXPORT_FORMATS,
    MODEL,
    QUESTION,
    RUN_ID_ROLE,
    STATUS,
    STEPS,
    TEXT_MIN,
    TIME,
    RunFilterModel,
    RunTableModel,
    StatusDelegate,
    fit_columns,
)
from vrag_desktop.qt.infra import theme
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.tables import record_table
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.widgets import action, button, clear_button, column, icon_only, with_menu

if TYPE_CHECKING:
    from vrag_desktop.core.run.export import ExportReport
    from vrag_desktop.core.run.store import RunStore, RunSummary
    from vrag_desktop.qt.context import AppContext

#: What the bar's buttons and the "Add to dataset…" action do.
TIPS = {
    "open": "Show the run's graph, reasoning and evidence as they were (Enter)",
    "replay": "Play the run back step by step",
    "export": "Export the selected runs as training data",
    "delete": "Delete the selected runs from disk (Del)",
    "label": "Make this run a labelled dataset item (you check the answer)",
}


class HistoryPanel(QWidget):
    """Saved runs, newest first. Signals: ``openRequested(run_id)``, ``replayRequested(run_id)``,
    ``addToDatasetRequested(run_id)``, ``refreshed(count)`` after each listing, ``runsDeleted(list[str])``."""

    openRequested = Signal(str)
    addToDatasetRequested = Signal(str)
    replayRequested = Signal(str)
    refreshed = Signal(int)
    runsDeleted = Signal(list)

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        # Injectable so tests (and embedders) answer without a modal dialog.
        self.choose_save_path: Callable[[str, str, str], str | None] = self._ask_save_path
        self.choose_dataset: Callable[[str, str], str | None] = self._ask_dataset_path
        self.dataset_path: Path | None = None  # the dataset chosen last, offered again
        self.confirm: Callable[[str, str], bool] = self._ask_confirm
        self.skipped = 0
        self._listing = TaskSlot()  # a newer refresh wins over an older one
        self._busy = 0

        self.model = RunTableModel(self)
        self.proxy = RunFilterModel(self)
        self.proxy.setSourceModel(self.model)
        self._build()
        self._update_actions()
        theme.theme_notifier().changed.connect(self._theme_changed)  # a method: disconnected when deleted
        self.refresh()

    # ---------------------------------------------------------------- layout
    def _build(self) -> None:
        self.filter_edit = QLineEdit()
        self.filter_edit.setPlaceholderText("Filter by question, answer or model")
        clear_button(self.filter_edit)
        self.filter_edit.textChanged.connect(self._filter_changed)

        self.open_button = button(self, "Open", self.open_selected, tip=TIPS["open"])
        self.replay_button = button(self, "Replay", self.replay_selected, tip=TIPS["replay"])
        self.export_button = button(self, "Export", tip=TIPS["export"])
        self.delete_button = button(self, "Delete", self.delete_selected, tip=TIPS["delete"])
        self.refresh_button = QToolButton()
        self.refresh_button.setIcon(self.style().standardIcon(QStyle.StandardPixmap.SP_BrowserReload))
        icon_only(self.refresh_button, "Reload runs", "Reload the list of runs")
        self.refresh_button.setAutoRaise(True)

        self.open_action = action(self, "Open", self.open_selected)
        self.replay_action = action(self, "Replay", self.replay_selected)
        self.label_action = action(self, "Add to dataset…", self.add_selected_to_dataset, tip=TIPS["label"])
        self.export_actions = {
            fmt: action(self, f"Export as {spec[0]}", lambda _checked=False, f=fmt: self.export_selected(f))
            for fmt, spec in EXPORT_FORMATS.items()
        }
        with_menu(self.export_button, self.export_actions.values())
        self.delete_action = action(self, "Delete…", self.delete_selected)
        self.delete_action.setShortcut(QKeySequence(QKeySequence.StandardKey.Delete))
        self.delete_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.addAction(self.delete_action)
        self.refresh_button.clicked.connect(self.refresh)

        self.table = record_table(
            self.proxy,
            activated=self.open_selected,
            context_menu=self._context_menu,
            selection_changed=self._update_actions,
        )
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(TIME, Qt.SortOrder.DescendingOrder)
        self.table.setItemDelegateForColumn(STATUS, StatusDelegate(self.table))
        header = self.table.horizontalHeader()
        header.setHighlightSections(False)
        fm = self.fontMetrics()
        self._widths = widths = {
            TIME: fm.horizontalAdvance("2026-11-21 14:05") + 24,
            AGENT: fm.horizontalAdvance("VimRAG") + 24,
            MODEL: fm.horizontalAdvance("Qwen2.5-VL-7B-Instruct"),
            STATUS: fm.horizontalAdvance("interrupted") + 40,
            STEPS: fm.horizontalAdvance("Steps") + 32,
        }
        for col, w in widths.items():
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(col, w)
        header.setSectionResizeMode(QUESTION, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(ANSWER, QHeaderView.ResizeMode.Stretch)
        header.setMinimumSectionSize(min(TEXT_MIN, fm.horizontalAdvance("Question") + 24))

        self.empty_label = QLabel(
            "No saved runs yet.\nAsk a question: every run is kept here to reopen, replay and export."
        )
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_label.setWordWrap(True)
        self.empty_label.setProperty("role", "muted")
        self.stack = QStackedWidget()
        self.stack.addWidget(self.table)
        self.stack.addWidget(self.empty_label)

        self.status_label = QLabel()
        self.status_label.setProperty("role", "muted")
        self.status_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)

        top = QHBoxLayout()
        top.addWidget(self.filter_edit, 1)
        top.addWidget(self.refresh_button)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status_label, 1)
        for b in (self.open_button, self.replay_button, self.export_button, self.delete_button):
            # as wide as their words, not the style's 80 px: four of those set a side column's width
            b.setMinimumWidth(b.fontMetrics().horizontalAdvance(b.text()) + (40 if b.menu() else 22))
            b.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
            bottom.addWidget(b)
        column(self, top, self.stack, bottom, grow=self.stack)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_columns()

    def _fit_columns(self) -> None:
        """The columns that fit the panel's width (the table's own may not be laid out yet)."""
        lay = self.layout()
        m = lay.contentsMargins() if lay is not None else QMargins()
        bar = self.style().pixelMetric(QStyle.PixelMetric.PM_ScrollBarExtent, None, self.table)
        room = self.width() - m.left() - m.right() - 2 * self.table.frameWidth() - bar
        fit_columns(self.table, self._widths, room)

    # ---------------------------------------------------------------- listing
    def refresh(self) -> None:
        """Re-read the saved runs off the GUI thread; a newer refresh wins over an older one."""
        self.refresh_button.setEnabled(False)
        try:
            store = self.ctx.runs
        except OSError as exc:
            self._listing.drop()
            self._listing_failed(exc)
            return
        self._listing.start(run_call, _list_runs, store, on_done=self._listed, on_error=self._listing_failed)

    def _theme_changed(self, _effective: str) -> None:
        self.model.refresh()  # the muted columns' colour is the theme's
        self.table.viewport().update()

    def _listed(self, result: tuple[list[RunSummary], int]) -> None:
        runs, skipped = result
        selected = set(self.selected_run_ids())
        self.skipped = skipped
        self.model.set_records(runs)
        self.stack.setCurrentWidget(self.table if runs else self.empty_label)
        self._restore_selection(selected)
        self.refresh_button.setEnabled(True)
        self._update_status()
        self._update_actions()
        self.refreshed.emit(len(runs))

    def _listing_failed(self, exc: BaseException) -> None:
        self.refresh_button.setEnabled(True)
        self.status_label.setText("Could not read the saved runs")
        error_sink().report("Could not list saved runs", exc)
        self.refreshed.emit(self.model.rowCount())

    def _filter_changed(self, text: str) -> None:
        self.proxy.set_text(text)
        self._update_status()
        self._update_actions()

    def _update_status(self) -> None:
        total = self.model.rowCount()
        shown = self.proxy.rowCount()
        text = f"{total} run{'s' if total != 1 else ''}"
        if shown != total:
            text = f"{shown} of {text} match"
        if self.skipped:
            text += f" · {self.skipped} unreadable run folder{'s' if self.skipped != 1 else ''} skipped"
        self.status_label.setText(text)

    # ---------------------------------------------------------------- selection
    def selected_run_ids(self) -> list[str]:
        """Selected runs in the order shown."""
        rows = sorted({ix.row() for ix in self.table.selectionModel().selectedRows()})
        return [self.proxy.index(r, 0).data(RUN_ID_ROLE) for r in rows]

    def select_run(self, run_id: str) -> bool:
        """Select (and scroll to) a run; False when it is not listed or is filtered out."""
        for r in range(self.proxy.rowCount()):
            ix = self.proxy.index(r, 0)
            if ix.data(RUN_ID_ROLE) == run_id:
                self.table.selectRow(r)
                self.table.scrollTo(ix)
                return True
        return False

    def _restore_selection(self, ids: set[str]) -> None:
        if not ids or ids <= set(self.selected_run_ids()):  # an update (not a reset) keeps the selection
            return
        sel = self.table.selectionModel()
        from PySide6.QtCore import QItemSelectionModel

        flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        for r in range(self.proxy.rowCount()):
            ix = self.proxy.index(r, 0)
            if ix.data(RUN_ID_ROLE) in ids:
                sel.select(ix, flags)

    def _update_actions(self) -> None:
        n = len(self.table.selectionModel().selectedRows()) if hasattr(self, "table") else 0
        one = n == 1
        for w in (
            self.open_button,
            self.open_action,
            self.replay_button,
            self.replay_action,
            self.label_action,
        ):
            w.setEnabled(one)
        many: list[QWidget | QAction] = [self.export_button, *self.export_actions.values()]
        for m in (*many, self.delete_button, self.delete_action):
            m.setEnabled(n > 0 and not self._busy)

    def _context_menu(self, pos: Any) -> None:
        ix = self.table.indexAt(pos)
        if ix.isValid() and not self.table.selectionModel().isRowSelected(ix.row(), ix.parent()):
            self.table.selectRow(ix.row())
        if not self.selected_run_ids():
            return
        menu = QMenu(self)
        menu.addAction(self.open_action)
        menu.addAction(self.replay_action)
        menu.addSeparator()
        menu.addAction(self.label_action)
        for a in self.export_actions.values():
            menu.addAction(a)
        menu.addSeparator()
        menu.addAction(self.delete_action)
        menu.popup(self.table.viewport().mapToGlobal(pos))

    # ---------------------------------------------------------------- actions
    def open_selected(self) -> None:
        ids = self.selected_run_ids()
        if len(ids) == 1:
            self.openRequested.emit(ids[0])

    def replay_selected(self) -> None:
        ids = self.selected_run_ids()
        if len(ids) == 1:
            self.replayRequested.emit(ids[0])

    def add_selected_to_dataset(self) -> None:
        ids = self.selected_run_ids()
        if len(ids) == 1:
            self.addToDatasetRequested.emit(ids[0])

    def export_selected(self, fmt: str) -> None:
        """Ask for the dataset holding the ground truth and where to write, then export the
        selected runs (off the GUI thread); the outcome, refusals included, is reported."""
        ids = self.selected_run_ids()
        if not ids:
            return
        dataset = self.choose_dataset(DATASET_PROMPT, str(self.dataset_path or self.ctx.data_dir))
        if not dataset:
            return
        self.dataset_path = Path(dataset)
        label, file_filter, suffix, _item = EXPORT_FORMATS[fmt]
        default = self.ctx.data_dir / "exports" / f"vrag-{fmt}-{time.strftime('%Y%m%d-%H%M')}{suffix}"
        chosen = self.choose_save_path(
            f"Export {len(ids)} run(s) as {label.rstrip('…')}", str(default), file_filter
        )
        if not chosen:
            return
        self.export(fmt, ids, Path(chosen), Path(dataset))

    def export(
        self, fmt: str, run_ids: list[str], out: Path, dataset: Path, skip_unlabelled: bool = False
    ) -> None:
        """Export ``run_ids`` to ``out`` as ``fmt`` with ground truth from ``dataset``, in a thread.
        Runs the dataset does not label are refused; the person may then export the labelled ones."""
        from vrag_desktop.core.run.export import export_runs

        if fmt not in EXPORT_FORMATS:
            raise ValueError(f"unknown export format {fmt!r}")
        store = self.ctx.runs
        self._set_busy(+1)

        def work() -> ExportReport:
            return export_runs(store, fmt, run_ids, dataset, out, skip_unlabelled=skip_unlabelled)

        def done(report: ExportReport) -> None:
            self._set_busy(-1)
            partial = report.unlabelled or report.skipped
            error_sink().report(
                "Export finished", "\n".join(report.lines()), level="warning" if partial else "info"
            )

        def failed(exc: BaseException) -> None:
            from vrag_desktop.core.datasets import DatasetError
            from vrag_desktop.core.run.export import ExportError, ExportRefused

            self._set_busy(-1)
            if isinstance(exc, ExportRefused):
                if alive(self) and self.confirm(
                    "Runs without labels", f"{exc}\n\nExport only the labelled runs?"
                ):
                    self.export(fmt, run_ids, out, dataset, skip_unlabelled=True)
                    return
                error_sink().report("Export refused", f"{exc}\n{out} was not written.", level="warning")
            elif isinstance(exc, ExportError):
                error_sink().report("Nothing exported", str(exc), level="warning")
            elif isinstance(exc, DatasetError):
                error_sink().report(f"Cannot use the dataset {dataset.name}", str(exc))
            else:
                error_sink().report(f"Could not export to {out}", exc)

        run_call(work, on_done=done, on_error=failed)

    def delete_selected(self) -> None:
        """Delete the selected runs after confirmation (running runs are left alone)."""
        ids = self.selected_run_ids()
        if not ids:
            return
        running = {r.id for r in self.model.records() if r.status == "running"}
        todo = [i for i in ids if i not in running]
        if not todo:
            error_sink().report(
                "Cannot delete", "A run that is still running cannot be deleted.", level="warning"
            )
            return
        what = "this run" if len(todo) == 1 else f"these {len(todo)} runs"
        extra = f" ({len(ids) - len(todo)} still running will be kept)" if len(todo) < len(ids) else ""
        if not self.confirm(
            "Delete runs",
            f"Delete {what}{extra}? Their events and images are removed from disk. This cannot be undone.",
        ):
            return
        self.delete(todo)

    def delete(self, run_ids: list[str]) -> None:
        """Delete without asking (in a thread), then refresh."""
        store = self.ctx.runs
        self._set_busy(+1)

        def work() -> tuple[list[str], list[str]]:
            gone, problems = [], []
            for rid in run_ids:
                try:
                    store.delete(rid)
                    gone.append(rid)
                except (OSError, RuntimeError) as exc:
                    problems.append(f"{rid}: {exc}")
            return gone, problems

        def done(result: tuple[list[str], list[str]]) -> None:
            gone, problems = result
            self._set_busy(-1)
            if problems:
                error_sink().report("Some runs could not be deleted", "\n".join(problems))
            if gone and alive(self):
                self.runsDeleted.emit(gone)
                self.refresh()

        def failed(exc: BaseException) -> None:
            self._set_busy(-1)
            error_sink().report("Could not delete runs", exc)
            if alive(self):
                self.refresh()

        run_call(work, on_done=done, on_error=failed)

    def _set_busy(self, delta: int) -> None:
        if not alive(self):  # the panel was closed while the work ran
            return
        self._busy = max(0, self._busy + delta)
        self._update_actions()

    # ---------------------------------------------------------------- default dialogs
    def _ask_save_path(self, title: str, default: str, file_filter: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self, title, default, file_filter)
        return path or None

    def _ask_dataset_path(self, title: str, start: str) -> str | None:
        path, _ = QFileDialog.getOpenFileName(self, title, start, DATASET_FILTER)
        return path or None

    def _ask_confirm(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(
            self, title, text, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel
        )
        return answer == QMessageBox.StandardButton.Yes


def _list_runs(store: RunStore) -> tuple[list[RunSummary], int]:
    """(runs newest first, how many run folders could not be read) — runs in a worker thread."""
    runs = store.list()
    listed = {r.id for r in runs}
    try:
        skipped = sum(1 for d in store.root.iterdir() if d.name not in listed and (d / "run.json").is_file())
    except OSError:
        skipped = 0
    return runs, skipped
