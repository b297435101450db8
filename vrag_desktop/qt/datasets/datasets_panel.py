"""Datasets dock: the app's labelled datasets, their items, and how many the corpora can answer.

Everything that touches the disk runs off the GUI thread (listing, reading, writing, matching the
items against the corpora's indexed files with :mod:`vrag_desktop.core.eval.matching`). A dataset
file that no longer reads is listed as damaged with the reader's reason and is never written over:
only rename and delete stay open for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMenu,
    QMessageBox,
    QSizePolicy,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.qt.datasets.item_dialog import ItemDialog
from vrag_desktop.qt.datasets.item_table import ANSWER, FILE, PAGES, QUESTION, TYPE, UID, ItemTableModel
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.errors import error_sink
from vrag_desktop.qt.infra.tables import record_table
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.widgets import action, button, with_menu

if TYPE_CHECKING:
    from vrag_desktop.core.datasets import DatasetItem
    from vrag_desktop.core.datasets.store import DatasetInfo
    from vrag_desktop.core.eval.matching import DatasetMatch
    from vrag_desktop.qt.context import AppContext

NAME_ROLE = Qt.ItemDataRole.UserRole
ERROR_ROLE = Qt.ItemDataRole.UserRole + 1
IMPORT_FILTER = "Datasets (*.json *.jsonl *.parquet);;All files (*)"
EXPORTS = {
    "json": ("unified JSON", "JSON (*.json)", ".json"),
    "jsonl": ("JSON lines", "JSON lines (*.jsonl)", ".jsonl"),
    "parquet": ("training data (verl parquet)", "Parquet (*.parquet)", ".parquet"),
}
NO_DATASETS = (
    "No datasets yet.\n\nRight-click a run in History → “Add to dataset…” to label it, "
    "or make a new dataset or import one (unified JSON, JSON lines, verl parquet)."
)
EMPTY_DATASET = (
    "This dataset has no items yet.\n\n"
    "Add runs from History (right-click → “Add to dataset…”) or import a file."
)


class DatasetsPanel(QWidget):
    """Datasets (top), the chosen one's items (below). ``refreshed(count)`` after each listing."""

    refreshed = Signal(int)
    itemsShown = Signal(str)  # the dataset whose items (or damage note) are on screen

    def __init__(self, ctx: AppContext, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx
        # Injectable so tests (and embedders) answer without a modal dialog.
        self.ask_name: Callable[[str, str, str], str | None] = self._ask_name
        self.confirm: Callable[[str, str], bool] = self._ask_confirm
        self.choose_open: Callable[[str], str | None] = self._ask_open
        self.choose_save: Callable[[str, str, str], str | None] = self._ask_save
        self.choose_target: Callable[[str, list[str], str | None], str | None] = self._ask_target
        self._import_folder = str(Path.home())  # where Import… opens: the last folder imported from
        self.corpora_names: Callable[[], list[str]] = lambda: []  # empty: every corpus
        self.dialog: ItemDialog | None = None
        self._listing, self._reading = TaskSlot(), TaskSlot()  # the newest of each wins
        self._error = ""
        self.model = ItemTableModel(self)
        self._build()
        self._update_actions()
        self.refresh()

    # ---------------------------------------------------------------- layout
    def _build(self) -> None:
        self.list = QListWidget()
        self.list.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.list.customContextMenuRequested.connect(self._list_menu)
        self.list.currentItemChanged.connect(lambda *_: self.show_items())
        self.new_button = button(self, "New…", self.new_dataset, tip="Make an empty dataset")
        self.import_button = button(
            self, "Import…", self.import_selected, tip="Add the items of a dataset file"
        )
        self.more_button = button(self, "Dataset", tip="Rename, export or delete the dataset")
        self.rename_action = action(self, "Rename…", self.rename_selected)
        self.export_actions = {
            fmt: action(self, f"Export as {spec[0]}…", lambda _c=False, f=fmt: self.export_selected(f))
            for fmt, spec in EXPORTS.items()
        }
        self.delete_dataset_action = action(self, "Delete dataset…", self.delete_dataset_selected)
        with_menu(
            self.more_button,
            [self.rename_action, *self.export_actions.values(), None, self.delete_dataset_action],
        )

        self.table = record_table(
            self.model,
            activated=self.edit_selected,
            context_menu=self._table_menu,
            selection_changed=self._update_actions,
        )
        header = self.table.horizontalHeader()
        fm = self.fontMetrics()
        for col, sample in (
            (UID, "item-0000"),
            (FILE, "annual-report.pdf"),
            (PAGES, "12 (2 regions)"),
            (TYPE, "Single-Hop"),
        ):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(col, fm.horizontalAdvance(sample) + 24)
        header.setSectionResizeMode(QUESTION, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(ANSWER, QHeaderView.ResizeMode.Stretch)

        self.message = QLabel(NO_DATASETS)
        self.message.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.message.setWordWrap(True)
        self.message.setProperty("role", "muted")
        self.message.setMargin(16)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.table)
        self.stack.addWidget(self.message)
        self.stack.setCurrentWidget(self.message)

        self.match_label = QLabel("")
        self.match_label.setProperty("role", "muted")
        self.match_label.setWordWrap(True)
        self.match_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.edit_button = button(
            self, "Edit…", self.edit_selected, tip="Edit the selected item (double-click)"
        )
        self.delete_button = button(
            self, "Delete", self.delete_items_selected, tip="Delete the selected items"
        )

        top = QHBoxLayout()
        top.addWidget(QLabel("<b>Datasets</b>"), 1)
        for b in (self.new_button, self.import_button, self.more_button):
            top.addWidget(b)
        upper = QWidget()
        ul = QVBoxLayout(upper)
        ul.setContentsMargins(0, 0, 0, 0)
        ul.addLayout(top)
        ul.addWidget(self.list)
        lower = QWidget()
        ll = QVBoxLayout(lower)
        ll.setContentsMargins(0, 0, 0, 0)
        ll.addWidget(self.stack, 1)
        bottom = QHBoxLayout()
        bottom.addWidget(self.match_label, 1)
        bottom.addWidget(self.edit_button)
        bottom.addWidget(self.delete_button)
        ll.addLayout(bottom)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(upper)
        self.splitter.addWidget(lower)
        self.splitter.setStretchFactor(1, 3)
        self.splitter.setSizes([150, 450])
        self.splitter.setChildrenCollapsible(False)
        QVBoxLayout(self).addWidget(self.splitter)

    # ---------------------------------------------------------------- reading
    @property
    def store(self) -> Any:
        return self.ctx.datasets

    def refresh(self, select: str | None = None) -> None:
        """List the datasets off the GUI thread, then show ``select`` (else the current one)."""
        keep = select or self.current_name()
        self._reading.drop()  # the list is read again: so is the current dataset, once it is listed
        self._listing.start(
            run_call,
            self.store.infos,
            on_done=lambda infos: self._listed(infos, keep),
            on_error=self._listing_failed,
        )

    def _listing_failed(self, exc: BaseException) -> None:
        error_sink().report("Could not list the datasets", exc)
        self.list.clear()
        self._show_message(f"⚠ The datasets cannot be listed.\n\n{exc}")

    def _listed(self, infos: list[DatasetInfo], keep: str | None) -> None:
        if not alive(self):
            return
        self.list.blockSignals(True)
        self.list.clear()
        for info in infos:
            n = info.count
            text = f"{info.name}  ·  " + (
                f"{n} item{'s' if n != 1 else ''}" if n is not None else "⚠ damaged"
            )
            item = QListWidgetItem(text, self.list)
            item.setSizeHint(QSize(0, self.fontMetrics().height() + 10))
            item.setData(NAME_ROLE, info.name)
            item.setData(ERROR_ROLE, info.error)
            item.setToolTip(info.error or str(info.path))
        names = [i.name for i in infos]
        row = names.index(keep) if keep in names else (0 if names else -1)
        self.list.setCurrentRow(row)
        self.list.blockSignals(False)
        self.show_items()
        self.refreshed.emit(len(infos))

    def current_name(self) -> str | None:
        item = self.list.currentItem()
        return str(item.data(NAME_ROLE)) if item is not None else None

    def names(self) -> list[str]:
        return [str(self.list.item(r).data(NAME_ROLE)) for r in range(self.list.count())]

    def show_items(self) -> None:
        """Read the current dataset's items off the GUI thread (a damaged one: say so, show none)."""
        name = self.current_name()
        self.model.set_records([])
        self.match_label.setText("")
        self._error = ""
        if name is None:
            self._show_message(NO_DATASETS)
            self.itemsShown.emit("")
            return
        self._reading.start(
            run_call,
            self.store.load,
            name,
            on_done=lambda ds: self._items_read(name, list(ds)),
            on_error=lambda exc: self._damaged(name, exc),
        )

    def _items_read(self, name: str, items: list[DatasetItem]) -> None:
        if not alive(self) or name != self.current_name():
            return
        self.model.set_records(items)
        if items:
            self.stack.setCurrentWidget(self.table)
        else:
            self._show_message(EMPTY_DATASET)
        self._update_actions()
        self._match(name, items)
        self.itemsShown.emit(name)

    def _damaged(self, name: str, exc: BaseException) -> None:
        if not alive(self) or name != self.current_name():
            return
        self._error = str(exc)
        self._show_message(
            f"⚠ The dataset “{name}” cannot be read, so it is not shown and nothing will be written "
            f"to it.\n\n{exc}\n\nRepair the file, or rename or delete the dataset."
        )
        error_sink().report(f"Dataset {name} is damaged", str(exc), "warning")
        self._update_actions()
        self.itemsShown.emit(name)

    def _show_message(self, text: str) -> None:
        self.message.setText(text)
        self.stack.setCurrentWidget(self.message)
        self._update_actions()

    def _match(self, name: str, items: list[DatasetItem]) -> None:
        """How many items the chosen corpora (all when none is chosen) can answer, off the GUI thread."""
        library = self.ctx.library
        wanted = self.corpora_names()

        def work() -> tuple[DatasetMatch, list[str]]:
            from vrag_desktop.core.eval.matching import corpus_files, match_dataset

            names = wanted or library.names()
            corpora = []
            try:
                for n in names:
                    corpora.append(library.open(n, read_only=True))
                return match_dataset(items, corpus_files(corpora)), names
            finally:
                for c in corpora:
                    c.close()

        def done(result: tuple[DatasetMatch, list[str]]) -> None:
            if not alive(self) or name != self.current_name():
                return
            match, names = result
            if not items:
                return
            if not names:
                self.match_label.setText("No indexed corpora to match the items against")
            else:
                text = f"{len(match.matched)} of {len(items)} items match the corpora ({', '.join(names)})"
                if match.problems:
                    uid, why = match.problems[0]
                    more = len(match.problems) - 1
                    text += f" · {uid}: {why}" + (f" (and {more} more: hover)" if more else "")
                self.match_label.setText(text)
            self.match_label.setToolTip("\n".join(match.lines()))

        def failed(exc: BaseException) -> None:
            if alive(self):
                self.match_label.setText("Could not match the items against the corpora")
                self.match_label.setToolTip(str(exc))

        run_call(work, on_done=done, on_error=failed)

    # ---------------------------------------------------------------- actions
    def _update_actions(self) -> None:
        has = self.current_name() is not None
        ok = has and not self._error
        rows = len(self.table.selectionModel().selectedRows()) if ok else 0
        self.more_button.setEnabled(has)
        self.import_button.setEnabled(not has or ok)
        for a in self.export_actions.values():
            a.setEnabled(ok)
        self.edit_button.setEnabled(rows == 1)
        self.delete_button.setEnabled(rows > 0)

    def selected_items(self) -> list[DatasetItem]:
        rows = sorted({ix.row() for ix in self.table.selectionModel().selectedRows()})
        return [self.model.record(r) for r in rows]

    def _write(
        self,
        title: str,
        work: Callable[[], Any],
        then: Callable[[Any], None] | None = None,
        select: Callable[[Any], str] | None = None,
    ) -> None:
        """Run a store write in a worker; then refresh (showing ``select(result)``), or report a
        failure under ``title``."""

        def done(result: Any) -> None:
            if then is not None:
                then(result)
            if alive(self):
                self.refresh(select(result) if select is not None else None)

        def failed(exc: BaseException) -> None:
            error_sink().report(title, exc)
            if alive(self):
                self.refresh()

        run_call(work, on_done=done, on_error=failed)

    def new_dataset(self) -> None:
        name = self.ask_name("New dataset", "Name of the new dataset:", "")
        if name:
            store = self.store
            self._write("Could not make the dataset", lambda: store.create(name), select=lambda p: p.stem)

    def rename_selected(self) -> None:
        old = self.current_name()
        new = self.ask_name("Rename dataset", f"New name for “{old}”:", old or "") if old else None
        if old and new and new.strip() != old:
            store = self.store
            self._write(
                "Could not rename the dataset", lambda: store.rename(old, new), select=lambda p: p.stem
            )

    def delete_dataset_selected(self) -> None:
        name = self.current_name()
        if name and self.confirm(
            "Delete dataset",
            f"Delete the dataset “{name}” and all its items from disk? This cannot be undone.",
        ):
            store = self.store
            self._write("Could not delete the dataset", lambda: store.delete(name))

    def import_selected(self) -> None:
        """A file, then where its items go (a new dataset named after it unless another is picked:
        an import never joins the selected dataset unasked)."""
        source = self.choose_open("Import a dataset (unified JSON, JSON lines, verl parquet)")
        if not source:
            return
        self._import_folder = os.path.dirname(source)
        name = self.choose_target(source, self.names(), self.current_name())
        if name:
            self.import_file(name, source)

    def import_file(self, name: str, source: str) -> None:
        """Append ``source``'s items to ``name``; renamed uids are reported."""
        store = self.store

        def report(result: Any) -> None:
            level = "warning" if result.renamed else "info"
            error_sink().report(f"Imported into {name}", "\n".join(result.lines()), level)

        self._write(f"Could not import {source}", lambda: store.import_file(name, source), report)

    def export_selected(self, fmt: str) -> None:
        name = self.current_name()
        if not name:
            return
        label, file_filter, suffix = EXPORTS[fmt]
        default = str(self.ctx.data_dir / "exports" / f"{name}{suffix}")
        dest = self.choose_save(f"Export “{name}” as {label}", default, file_filter)
        if dest:
            self.export(name, dest, fmt)

    def export(self, name: str, dest: str, fmt: str) -> None:
        store = self.store

        def done(path: Any) -> None:
            error_sink().report(f"Exported {name}", f"written to {path}", "info")

        def failed(exc: BaseException) -> None:
            error_sink().report(f"Could not export {name}", exc)

        run_call(lambda: store.export(name, dest, fmt), on_done=done, on_error=failed)

    def edit_selected(self) -> ItemDialog | None:
        items, name = self.selected_items(), self.current_name()
        if len(items) != 1 or not name:
            return None
        self.dialog = ItemDialog(self.store, item=items[0], dataset=name, names=self.names(), parent=self)
        self.dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.dialog.saved.connect(lambda *_: self.refresh())
        self.dialog.show()
        return self.dialog

    def delete_items_selected(self) -> None:
        items, name = self.selected_items(), self.current_name()
        if not items or not name:
            return
        what = f"the item {items[0].uid}" if len(items) == 1 else f"these {len(items)} items"
        if self.confirm("Delete items", f"Delete {what} from “{name}”? This cannot be undone."):
            uids, store = [i.uid for i in items], self.store
            self._write("Could not delete the items", lambda: store.delete_items(name, uids))

    # ---------------------------------------------------------------- menus and default dialogs
    def _list_menu(self, pos: Any) -> None:
        menu = QMenu(self)
        menu.addAction("New dataset…", self.new_dataset)
        if self.current_name():
            menu.addAction(self.rename_action)
            for a in self.export_actions.values():
                menu.addAction(a)
            menu.addAction(self.delete_dataset_action)
        menu.popup(self.list.viewport().mapToGlobal(pos))

    def _table_menu(self, pos: Any) -> None:
        if not self.selected_items():
            return
        menu = QMenu(self)
        menu.addAction("Edit…", self.edit_selected).setEnabled(len(self.selected_items()) == 1)
        menu.addAction("Delete…", self.delete_items_selected)
        menu.popup(self.table.viewport().mapToGlobal(pos))

    def _ask_name(self, title: str, label: str, text: str) -> str | None:
        value, ok = QInputDialog.getText(self, title, label, text=text)
        return value.strip() if ok and value.strip() else None

    def _ask_confirm(self, title: str, text: str) -> bool:
        answer = QMessageBox.question(
            self, title, text, QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel
        )
        return answer == QMessageBox.StandardButton.Yes

    def _ask_open(self, title: str) -> str | None:
        path, _ = QFileDialog.getOpenFileName(self, title, self._import_folder, IMPORT_FILTER)
        return path or None

    def _ask_target(self, source: str, names: list[str], current: str | None) -> str | None:
        from vrag_desktop.qt.datasets.import_target import ask_import_target

        return ask_import_target(self, source, names, current)

    def _ask_save(self, title: str, default: str, file_filter: str) -> str | None:
        path, _ = QFileDialog.getSaveFileName(self, title, default, file_filter)
        return path or None


__all__ = ["DatasetsPanel"]
