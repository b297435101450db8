"""The evidence of a labelled item, chosen among a run's pages and regions.

A run's :class:`~vrag_desktop.core.run.evidence.EvidenceBoard` gives the candidates; the person ticks
them here or clicks them in the evidence view's pick mode. What is ticked becomes the item's
``file_name``, ``reference_page`` and ``meta_info.evidence_regions`` (one file per item, as in the
original's unified form).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QWidget

from vrag_desktop.core.run.evidence import EvidenceBoard

Pick = tuple[str, int | None]  # (page key, region number or None for the whole page)


@dataclass(frozen=True)
class Candidate:
    key: str
    number: int | None
    file: str
    page: int | None
    bbox: tuple[int, int, int, int] | None
    label: str

    @property
    def pick(self) -> Pick:
        return (self.key, self.number)


def candidates(board: EvidenceBoard) -> list[Candidate]:
    """Each page of the run, followed by its regions."""
    out: list[Candidate] = []
    for key, p in board.pages.items():
        file = Path(p.source or p.key).name
        out.append(Candidate(key, None, file, p.page, None, f"{p.label} (whole page)"))
        for r in p.regions:
            label = f"    region {r.number} of {p.label}: {r.text}"
            out.append(Candidate(key, r.number, file, p.page, r.region, label))
    return out


def evidence_fields(chosen: Iterable[Candidate]) -> tuple[str, tuple[int, ...], list[dict[str, Any]]]:
    """(file_name, reference_page, evidence_regions) of the ticked candidates; ValueError when they
    span several files (a dataset item names one evidence file)."""
    chosen = list(chosen)
    files = list(dict.fromkeys(c.file for c in chosen))
    if len(files) > 1:
        raise ValueError(
            f"The evidence comes from {len(files)} files ({', '.join(files)}); a dataset item names "
            "one evidence file: untick the others."
        )
    pages = tuple(sorted({c.page for c in chosen if c.page is not None}))
    regions = [{"file": c.file, "page": c.page, "bbox": list(c.bbox)} for c in chosen if c.bbox]
    return (files[0] if files else ""), pages, regions


class EvidenceChoice(QListWidget):
    """Checkable candidates; ``changed`` after every tick, whoever made it."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._candidates: list[Candidate] = []
        self.itemChanged.connect(lambda _item: self.changed.emit())

    def set_candidates(self, found: list[Candidate], picked: Iterable[Pick]) -> None:
        want = set(picked)
        self.blockSignals(True)
        self.clear()
        self._candidates = list(found)
        for c in found:
            item = QListWidgetItem(c.label, self)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if c.pick in want else Qt.CheckState.Unchecked)
            item.setToolTip(c.label.strip())
        self.blockSignals(False)
        self.changed.emit()

    def chosen(self) -> list[Candidate]:
        return [
            c
            for row, c in enumerate(self._candidates)
            if self.item(row).checkState() == Qt.CheckState.Checked
        ]

    def picks(self) -> list[Pick]:
        return [c.pick for c in self.chosen()]

    def toggle(self, pick: Pick) -> bool:
        """Flip one candidate (a click in the evidence view); False when the run has no such one."""
        for row, c in enumerate(self._candidates):
            if c.pick == pick:
                item = self.item(row)
                checked = item.checkState() == Qt.CheckState.Checked
                item.setCheckState(Qt.CheckState.Unchecked if checked else Qt.CheckState.Checked)
                self.scrollToItem(item)
                return True
        return False
