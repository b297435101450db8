"""The evidence view's right-hand pane: the scrolling column of crop cards and the note above them.

Why a widget of its own: which card stands for which region, and the pool of hidden cards a page
change hands to the next page's regions, is bookkeeping of its own; the view
(:class:`~vrag_desktop.qt.evidence.evidence_view.EvidenceView`) only says which regions the page
has, which one is selected and what each card shows.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QScrollArea, QWidget

from vrag_desktop.core.run.evidence import Region
from vrag_desktop.qt.evidence.crop_cards import CropCard, CropColumn


class CropPane(QScrollArea):
    """The crops of the page shown, one :class:`CropCard` per region, under a note (why there are
    none, what is picked). ``cards`` maps region numbers to the cards shown."""

    cardClicked = Signal(int)  # a card's region number
    SPARE_CARDS = 12  # hidden crop cards kept for the next pages' regions

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.cards: dict[int, CropCard] = {}
        self._spare_cards: list[CropCard] = []
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setMinimumWidth(140)
        self.panel = CropColumn()
        self.cards_layout = self.panel.cards_layout
        self.note = QLabel("", self.panel)
        self.note.setWordWrap(True)
        self.note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.note.hide()
        self.cards_layout.addWidget(self.note)
        self.cards_layout.addStretch(1)
        self.setWidget(self.panel)

    def set_note(self, text: str) -> None:
        """The line above the cards ("" hides it)."""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def set_cards(self, regions: list[Region], selected: int | None) -> None:
        """Make the crop cards match ``regions`` (kept cards keep their pixels). Cards no longer
        wanted are kept hidden and reused (see :class:`CropCard`), up to ``SPARE_CARDS``."""
        wanted = {r.number for r in regions}
        for number in [n for n in self.cards if n not in wanted]:
            card = self.cards.pop(number)
            self.cards_layout.removeWidget(card)
            card.hide()
            if len(self._spare_cards) < self.SPARE_CARDS:
                card.image.set_pixmap(None)  # its pixels go now
                self._spare_cards.append(card)
            else:
                card.deleteLater()
        for r in regions:
            kept = self.cards.get(r.number)
            card = kept if kept is not None else self._new_card(r)
            if kept is None:
                self.cards[r.number] = card
                self.cards_layout.insertWidget(self.cards_layout.count() - 1, card)
                card.show()
            card.update_region(r, r.number == selected)

    def _new_card(self, region: Region) -> CropCard:
        if self._spare_cards:
            card = self._spare_cards.pop()
            card.reset(region)
        else:
            card = CropCard(region, self.panel)
            card.clicked.connect(self.cardClicked)
        card.fit(self.panel.card_width())
        return card

    def highlight(self, regions: list[Region], number: int | None) -> None:
        """Mark region ``number``'s card selected (None: none) among ``regions``' cards."""
        for r in regions:
            card = self.cards.get(r.number)
            if card is not None:
                card.update_region(r, r.number == number)

    def reveal(self, number: int) -> None:
        """Scroll region ``number``'s card into view, if it has one."""
        card = self.cards.get(number)
        if card is not None:
            self.ensureWidgetVisible(card, 0, 8)
