"""Tables of records (History's runs, a dataset's items): the model over a list of records and the
read-only view that shows them, one way for every dock.

A :class:`RecordModel` subclass names its ``columns`` and answers :meth:`RecordModel.cell`; the
list, the counts, the header and the update on a new list are here. A model whose records have an
identity (:meth:`RecordModel.key`) takes a new list as the rows it removes, changes and adds, not as a
reset: a sorting proxy then places only those rows, and the view keeps its selection and scroll.
Every ``cell`` is a call into Python from Qt, so a reset of a sorted table of a thousand runs (after
each finished run) cost ~30 ms of the GUI thread, and far more while another thread holds the GIL.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from PySide6.QtCore import (
    QAbstractItemModel,
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    Qt,
)
from PySide6.QtWidgets import QAbstractItemView, QTableView

_Index = QModelIndex | QPersistentModelIndex
R = TypeVar("R")


class RecordModel(QAbstractTableModel, Generic[R]):
    """Read-only rows, one record each; ``columns`` are the header's texts."""

    columns: ClassVar[tuple[str, ...]] = ()

    def __init__(self, parent: Any = None) -> None:
        super().__init__(parent)
        self._records: list[R] = []

    #: Above this many removed or added rows a new list is a reset (one signal instead of many).
    RESET_ABOVE = 64

    def key(self, record: R) -> Any:
        """A record's identity across lists (``None``: records have none; every new list resets)."""
        return None

    def set_records(self, records: list[R]) -> None:
        new = list(records)
        old_keys = [self.key(r) for r in self._records]
        new_keys = [self.key(r) for r in new]
        index = dict(zip(new_keys, new, strict=True))
        if (
            None in old_keys
            or None in new_keys
            or len(index) != len(new)
            or len(set(old_keys)) != len(old_keys)
            or not self._records
        ):
            self._reset(new)
            return
        gone = [row for row, k in enumerate(old_keys) if k not in index]
        kept = set(old_keys)
        added = [r for k, r in zip(new_keys, new, strict=True) if k not in kept]
        if len(gone) + len(added) > self.RESET_ABOVE:
            self._reset(new)
            return
        for row in reversed(gone):
            self.beginRemoveRows(QModelIndex(), row, row)
            del self._records[row]
            self.endRemoveRows()
        last = len(self.columns) - 1
        for row, record in enumerate(self._records):
            fresh = index[self.key(record)]
            if fresh != record:
                self._records[row] = fresh
                self.dataChanged.emit(self.index(row, 0), self.index(row, last))
        if added:
            first = len(self._records)
            self.beginInsertRows(QModelIndex(), first, first + len(added) - 1)
            self._records.extend(added)
            self.endInsertRows()

    def _reset(self, records: list[R]) -> None:
        self.beginResetModel()
        self._records = records
        self.endResetModel()

    def records(self) -> list[R]:
        return list(self._records)

    def record(self, row: int) -> R:
        return self._records[row]

    def cell(self, record: R, column: int, role: int) -> Any:
        """What ``role`` of ``column`` shows for ``record`` (``None``: nothing)."""
        raise NotImplementedError

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._records)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.columns)

    def headerData(
        self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole
    ) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.columns[section]
        return None

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        return self.cell(self._records[index.row()], index.column(), role)


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
