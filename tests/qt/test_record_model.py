"""RecordModel's update on a new list: rows removed, changed and added in place (no reset) for records
with an identity, so a sorting proxy places only those rows and the view keeps its selection."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from PySide6.QtCore import QSortFilterProxyModel, Qt

from vrag_desktop.core.run.store import RunSummary
from vrag_desktop.qt.history.run_table import ANSWER, RUN_ID_ROLE, TIME, RunFilterModel, RunTableModel


def run(i: int, answer: str = "") -> RunSummary:
    return RunSummary(
        id=f"r{i}",
        agent="vrag",
        question=f"Q{i}",
        status="answered",
        started_at=1.7e9 + i,
        answer=answer or f"A{i}",
    )


class Signals:
    """Counts what a model told its views."""

    def __init__(self, model: Any) -> None:
        self.resets = self.removed = self.inserted = 0
        self.changed: list[int] = []
        model.modelReset.connect(lambda: self._bump("resets"))
        model.rowsRemoved.connect(lambda _p, first, last: self._bump("removed", last - first + 1))
        model.rowsInserted.connect(lambda _p, first, last: self._bump("inserted", last - first + 1))
        model.dataChanged.connect(lambda tl, _br, _roles=(): self.changed.append(tl.row()))

    def _bump(self, name: str, n: int = 1) -> None:
        setattr(self, name, getattr(self, name) + n)


def ids(model: RunTableModel) -> list[str]:
    return [model.index(r, 0).data(RUN_ID_ROLE) for r in range(model.rowCount())]


def test_first_list_is_a_reset_then_rows_change_in_place(qapp: Any) -> None:
    model = RunTableModel()
    sig = Signals(model)
    model.set_records([run(1), run(2), run(3)])
    assert sig.resets == 1 and ids(model) == ["r1", "r2", "r3"]

    model.set_records([run(4), run(3), run(2, answer="changed")])  # r1 gone, r2 changed, r4 new
    assert sig.resets == 1, "an update, not a reset"
    assert (sig.removed, sig.inserted) == (1, 1)
    assert ids(model) == ["r2", "r3", "r4"]
    assert sig.changed == [0]  # only r2's row, now row 0
    assert model.index(0, ANSWER).data() == "changed"


def test_the_same_list_again_tells_the_view_nothing(qapp: Any) -> None:
    model = RunTableModel()
    model.set_records([run(1), run(2)])
    sig = Signals(model)
    model.set_records([run(2), run(1)])
    assert (sig.resets, sig.removed, sig.inserted, sig.changed) == (0, 0, 0, [])


def test_many_changes_at_once_are_one_reset(qapp: Any) -> None:
    model = RunTableModel()
    model.set_records([run(1)])
    sig = Signals(model)
    model.set_records([run(i) for i in range(2, 2 + RunTableModel.RESET_ABOVE + 1)])
    assert (sig.resets, sig.removed, sig.inserted) == (1, 0, 0)
    assert model.rowCount() == RunTableModel.RESET_ABOVE + 1


@pytest.mark.parametrize(
    "records",
    [[run(1), run(1)], [run(1), dataclasses.replace(run(2), id="r1")]],
    ids=["same record twice", "two records one id"],
)
def test_a_list_with_a_repeated_identity_is_taken_whole(qapp: Any, records: list[RunSummary]) -> None:
    model = RunTableModel()
    model.set_records([run(5)])
    sig = Signals(model)
    model.set_records(records)
    assert sig.resets == 1 and model.rowCount() == 2


def test_a_sorted_proxy_places_a_new_run_and_keeps_the_selection(qapp: Any) -> None:
    from PySide6.QtCore import QItemSelectionModel
    from PySide6.QtWidgets import QTableView

    model, proxy = RunTableModel(), RunFilterModel()
    proxy.setSourceModel(model)
    view = QTableView()
    view.setModel(proxy)
    view.setSortingEnabled(True)
    view.sortByColumn(TIME, Qt.SortOrder.DescendingOrder)
    model.set_records([run(1), run(3), run(2)])
    assert [proxy.index(r, 0).data(RUN_ID_ROLE) for r in range(3)] == ["r3", "r2", "r1"]
    flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
    view.selectionModel().select(proxy.index(1, 0), flags)  # r2

    model.set_records([run(1), run(3), run(2), run(9)])
    assert [proxy.index(r, 0).data(RUN_ID_ROLE) for r in range(4)] == ["r9", "r3", "r2", "r1"]
    assert [ix.data(RUN_ID_ROLE) for ix in view.selectionModel().selectedRows()] == ["r2"]
    assert isinstance(proxy, QSortFilterProxyModel)


def test_records_without_an_identity_always_reset(qapp: Any) -> None:
    from vrag_desktop.core.datasets.unified import DatasetItem
    from vrag_desktop.qt.datasets.item_table import ItemTableModel

    items = [DatasetItem(uid=f"u{i}", query=f"Q{i}", reference_answer="A") for i in range(3)]
    model = ItemTableModel()
    sig = Signals(model)
    model.set_records(items)
    model.set_records(items[:2])
    assert (sig.resets, sig.removed) == (2, 0)  # a dataset's rows keep the file's order: taken whole
    assert model.rowCount() == 2
