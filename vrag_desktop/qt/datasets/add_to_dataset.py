"""Add to dataset…: a saved run becomes a labelled item, its evidence picked in the evidence view.

The run's events and the dataset names are read off the GUI thread; the dialog opens pre-filled
(question, the run's answer marked as to be checked, the answer's cited pages and regions) and, while
it is open, the evidence view is in pick mode: a click on a region, or "Page is evidence", ticks or
unticks it in the dialog, and the dialog's ticks are drawn back in the view.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from vrag_desktop.core.run.evidence import EvidenceBoard
from vrag_desktop.qt.datasets.item_dialog import ItemDialog
from vrag_desktop.qt.infra.alive import alive
from vrag_desktop.qt.infra.tasks import run_call

if TYPE_CHECKING:
    from collections.abc import Callable

    from vrag_desktop.qt.context import AppContext
    from vrag_desktop.qt.evidence.evidence_view import EvidenceView


def add_run_to_dataset(
    ctx: AppContext,
    run_id: str,
    *,
    view: EvidenceView | None = None,
    parent: QWidget | None = None,
    opened: Callable[[ItemDialog], None] | None = None,
    dataset: str = "",
) -> None:
    """Open the Add-to-dataset dialog for ``run_id`` once its events are read; ``opened(dialog)``
    then (the main window refreshes the Datasets view on its ``saved``)."""
    runs, store = ctx.runs, ctx.datasets

    def read() -> tuple[str, EvidenceBoard, list[str]]:
        summary = runs.summary(run_id)
        return summary.question, EvidenceBoard.from_events(runs.events(run_id)), store.names()

    def show(result: tuple[str, EvidenceBoard, list[str]]) -> None:
        if parent is not None and not alive(parent):
            return
        question, board, names = result
        answer = board.answer.content if board.answer is not None else ""
        dialog = ItemDialog(
            store, question=question, answer=answer, board=board, names=names, dataset=dataset, parent=parent
        )
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        if view is not None:
            link_picking(view, dialog)
        dialog.show()
        if opened is not None:
            opened(dialog)

    run_call(read, on_done=show, error_title="Cannot add the run to a dataset")


def link_picking(view: EvidenceView, dialog: ItemDialog) -> None:
    """Pick mode in ``view`` for as long as ``dialog`` is open."""
    view.set_picking(True, dialog.picks())
    view.pickToggled.connect(dialog.toggle_pick)
    dialog.picksChanged.connect(view.set_picked)

    def done(*_: Any) -> None:
        if alive(view):
            view.set_picking(False)
            with contextlib.suppress(RuntimeError, TypeError):
                view.pickToggled.disconnect(dialog.toggle_pick)

    dialog.finished.connect(done)


__all__ = ["add_run_to_dataset", "link_picking"]
