"""Tables of records (History's runs, a dataset's items): the model over a list of records and the
read-only view that shows them, one way for every dock.

A :class:`RecordModel` subclass names its ``columns`` and answers :meth:`RecordModel.cell`; the
list, the counts, the header and the reset on a new list are here.
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

    def set_records(self, records: list[R]) -> None:
        self.beginResetModel()
        self._records = list(records)
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
