"""The items of one dataset as a table model (uid, question, answer, file, pages, type)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from vrag_desktop.core.datasets import DatasetItem
from vrag_desktop.core.datasets.store import evidence_regions
from vrag_desktop.qt.infra.tables import RecordModel

COLUMNS = ("Uid", "Question", "Answer", "File", "Pages", "Type")
UID, QUESTION, ANSWER, FILE, PAGES, TYPE = range(len(COLUMNS))
UID_ROLE = Qt.ItemDataRole.UserRole


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class ItemTableModel(RecordModel[DatasetItem]):
    """Read-only rows; editing goes through the item dialog (which checks every field)."""

    columns = COLUMNS
    roles = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole, UID_ROLE)

    def cell(self, item: DatasetItem, col: int, role: int) -> Any:
        if role == UID_ROLE:
            return item.uid
        if role == Qt.ItemDataRole.DisplayRole:
            return self._text(item, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col in (QUESTION, ANSWER):
                return item.query if col == QUESTION else item.reference_answer
            if col == PAGES and evidence_regions(item):
                return f"{len(evidence_regions(item))} evidence region(s) picked"
        return None

    def _text(self, item: DatasetItem, col: int) -> str:
        if col == UID:
            return item.uid
        if col == QUESTION:
            return _one_line(item.query)
        if col == ANSWER:
            return _one_line(item.reference_answer)
        if col == FILE:
            return item.file_name or "–"
        if col == PAGES:
            pages = ", ".join(map(str, item.reference_page)) or "–"
            n = len(evidence_regions(item))
            return pages + (f" ({n} region{'s' if n != 1 else ''})" if n else "")
        return item.query_type or "–"


__all__ = ["COLUMNS", "UID_ROLE", "ItemTableModel"]
