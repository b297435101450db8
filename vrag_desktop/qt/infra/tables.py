"""Tables of records (History's runs, a dataset's items): the model over a list of records and the
read-only view that shows them, one way for every dock.

A :class:`RecordModel` subclass names its ``columns`` and gives a record's cells
(:meth:`RecordModel.row_cells`, or :meth:`RecordModel.cell` per role); the list, the header and the
update on a new list are here. A model whose records have an
identity (:meth:`RecordModel.key`) takes a new list as the rows it removes, changes and adds, not as a
reset: a sorting proxy then places only those rows, and the view keeps its selection and scroll.

Why the cells are kept by Qt (a ``QStandardItemModel``), not answered by a Python ``data()``: each
cell Qt reads to sort, filter or paint would be a call into Python, and while another thread holds
the GIL each such call can wait for it. A sorted table of a thousand runs cost ~30 ms of the GUI
thread at each finished run that way, and painting the shown table ~0.5 s with a Python thread
spinning beside it (docs/benchmarks.md §5.17).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from PySide6.QtCore import QAbstractItemModel, QPoint, Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QTableView

R = TypeVar("R")


class RecordModel(QStandardItemModel, Generic[R]):
    """Read-only rows, one record each; ``columns`` are the header's texts. A record's cells are
    computed once (:meth:`row_cells`) and kept by Qt: views read, sort and filter them without
    calling Python."""

    columns: ClassVar[tuple[str, ...]] = ()
    #: The roles :meth:`cell` answers (for the default :meth:`row_cells`).
    roles: ClassVar[tuple[int, ...]] = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole)
    #: Above this many removed or added rows a new list is a reset (one signal instead of many).
    RESET_ABOVE = 64

    def __init__(self, parent: Any = None) -> None:
        super().__init__(0, len(self.columns), parent)
        self.setHorizontalHeaderLabels(list(self.columns))
        self._records: list[R] = []

    def key(self, record: R) -> Any:
        """A record's identity across lists (``None``: records have none; every new list resets)."""
        return None

    def row_cells(self, record: R) -> list[dict[int, Any]]:
        """Each column's values by role for ``record``; by default :meth:`cell` for each of ``roles``."""
        return [
            {int(role): v for role in self.roles if (v := self.cell(record, col, role)) is not None}
            for col in range(len(self.columns))
        ]

    def cell(self, record: R, column: int, role: int) -> Any:
        """What ``role`` of ``column`` shows for ``record`` (``None``: nothing)."""
        raise NotImplementedError

    def set_records(self, records: list[R]) -> None:
        new = list(records)
        old_keys = [self.key(r) for r in self._records]
        new_keys = [self.key(r) for r in new]
        index = dict(zip(new_keys, new, strict=True))
        if (
            None in old_keys
            or None in new_keys
            or len(index) != len(new)
            or len(kept := set(old_keys)) != len(old_keys)
            or not self._records
        ):
            self._reset(new)
            return
        gone = [row for row, k in enumerate(old_keys) if k not in index]
        added = [r for k, r in zip(new_keys, new, strict=True) if k not in kept]
        if len(gone) + len(added) > self.RESET_ABOVE:
            self._reset(new)
            return
        for row in reversed(gone):
            del self._records[row]
            self.removeRows(row, 1)
        changed = []
        for row, record in enumerate(self._records):
            fresh = index[self.key(record)]
            if fresh != record:
                self._records[row] = fresh
                changed.append(row)
        self._changed(changed)
        for record in added:
            self._records.append(record)
            self.appendRow(self._items(record))

    def refresh(self) -> None:
        """Compute every cell again (what it shows depends on something else too, e.g. the theme)."""
        self._changed(range(len(self._records)))

    def records(self) -> list[R]:
        return list(self._records)

    def record(self, row: int) -> R:
        return self._records[row]

    def _items(self, record: R) -> list[QStandardItem]:
        items = []
        for cells in self.row_cells(record):
            item = QStandardItem()
            for role, value in cells.items():
                item.setData(value, role)
            items.append(item)
        return items

    def _write(self, rows: Sequence[int], *, clear: bool) -> None:
        """Put the cells of ``rows``' records in place, the views not told (the caller tells them)."""
        blocked = self.blockSignals(True)
        try:
            for row in rows:
                for col, cells in enumerate(self.row_cells(self._records[row])):
                    ix = self.index(row, col)
                    if clear:
                        self.clearItemData(ix)
                    self.setItemData(ix, cells)
        finally:
            self.blockSignals(blocked)

    def _changed(self, rows: Sequence[int]) -> None:
        """The cells of ``rows`` again; the views hear one change covering them."""
        if rows:
            self._write(rows, clear=True)
            self.dataChanged.emit(self.index(min(rows), 0), self.index(max(rows), len(self.columns) - 1))

    def _reset(self, records: list[R]) -> None:
        """The whole list at once: the views hear one reset, not a signal a cell."""
        self.beginResetModel()
        try:
            blocked = self.blockSignals(True)
            try:
                self.removeRows(0, self.rowCount())
                self._records = records
                self.insertRows(0, len(records))
            finally:
                self.blockSignals(blocked)
            self._write(range(len(records)), clear=False)
        finally:
            self.endResetModel()


_View = TypeVar("_View", bound=QTableView)


def read_only_table(view: _View, *, wrap: bool = False, row_padding: int | None = None) -> _View:
    """``view`` set up as rows nobody edits in place: a click selects a whole row, rows alternate in
    colour, no grid, no row numbers; one line a row unless ``wrap``; ``row_padding``: rows that much
    taller than a line of text (else Qt's default height)."""
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setAlternatingRowColors(True)
    view.setShowGrid(False)
    view.setWordWrap(wrap)
    view.verticalHeader().hide()
    if row_padding is not None:
        view.verticalHeader().setDefaultSectionSize(view.fontMetrics().height() + row_padding)
    return view


def record_table(
    model: QAbstractItemModel,
    *,
    activated: Callable[[], object],
    context_menu: Callable[[QPoint], object],
    selection_changed: Callable[[], object],
) -> QTableView:
    """A :func:`read_only_table` of ``model``'s records, several selectable (Shift, Ctrl), headers
    left-aligned. Enter and double-click both call ``activated()`` (one signal: connecting
    ``doubleClicked`` too would act twice); right-click calls ``context_menu(pos)``."""
    table = read_only_table(QTableView(), row_padding=12)
    table.setModel(model)
    table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
    table.horizontalHeader().setDefaultAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
    table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
    table.customContextMenuRequested.connect(context_menu)
    table.activated.connect(lambda _ix: activated())
    table.selectionModel().selectionChanged.connect(lambda *_: selection_changed())
    return table


__all__ = ["RecordModel", "read_only_table", "record_table"]
