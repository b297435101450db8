"""The base of the app's controllers: QObjects without a widget that do the work behind a panel
(indexing, an agent run, an evaluation, reading the corpora) with the window's shared context."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from vrag_desktop.qt.infra.tasks import TaskSlot

if TYPE_CHECKING:
    from vrag_desktop.qt.context import AppContext


class Controller(QObject):
    """A controller working with the app's shared :class:`AppContext` (``ctx``)."""

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ctx = ctx


class SlotController(Controller):
    """A controller that runs one task at a time in :attr:`slot` (an agent run, an evaluation):
    :attr:`running` while it goes."""

    def __init__(self, ctx: AppContext, parent: QObject | None = None) -> None:
        super().__init__(ctx, parent)
        self.slot = TaskSlot()

    @property
    def running(self) -> bool:
        return self.slot.running
