"""The first-run dialog: choose where the model runs, or look at a recorded example first.

Why a dialog of its own (and not the old help text): a newcomer's first question must lead
somewhere. The dialog offers what this machine can do — a local server when there is a GPU (with
whether the model fits), DashScope with its key, any OpenAI-compatible server — and each card's own
button makes that choice; closing it chooses nothing. It is not modal (tests drive it like any
widget), and it is also what the Ask panel's *Choose a model…* opens. The local card's button goes
where the window says (:attr:`FirstRunDialog.localRequested`): the Models view, on the VRAG model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QFrame,
    QGroupBox,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from vrag_desktop.qt.infra.widgets import row
from vrag_desktop.qt.welcome.choices import DashScopeChoice, LocalChoice, ServerChoice

if TYPE_CHECKING:
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.qt.current_model import CurrentModel

WIDTH, HEIGHT = 680, 760


class FirstRunDialog(QDialog):
    """See the module docstring. ``modelChosen(name)`` once a card made its choice."""

    modelChosen = Signal(str)
    localRequested = Signal()  # set up a local model (the window decides where that is)
    exampleRequested = Signal(str)  # an example run's key

    def __init__(self, model: CurrentModel, parent: QWidget | None = None, *, indexing: bool = False) -> None:
        super().__init__(parent)
        self.setObjectName("firstRunDialog")
        self.setWindowTitle(self.tr("Welcome to VRAG Desktop"))
        self.model = model
        intro = QLabel(self)
        intro.setObjectName("firstRunIntro")
        intro.setWordWrap(True)
        sample = (
            self.tr(
                " A small sample corpus is added to Corpora in the background, so you can try a question as"
                " soon as a model is chosen."
            )
            if indexing
            else ""
        )
        intro.setText(
            self.tr(
                "<h3>Welcome to VRAG Desktop</h3>"
                "<p>It searches your documents, images and videos on this machine; a vision-language model "
                "reads what it finds and answers. <b>Choose where that model runs.</b> Nothing is chosen for "
                "you, and no question leaves this machine until you choose a service that runs elsewhere."
                "{sample}</p>"
            ).format(sample=sample)
        )
        self.local = LocalChoice(model.ctx.layout, self)
        self.dashscope = DashScopeChoice(model, self)
        self.server = ServerChoice(model, self)
        self.local.requested.connect(self._local)
        for card in (self.dashscope, self.server):
            card.chosen.connect(self._chosen)
        self.cards = QWidget(self)
        self._cards = QVBoxLayout(self.cards)
        self._cards.setContentsMargins(0, 0, 0, 0)
        self._order(gpu=True)
        scroll = QScrollArea(self)
        scroll.setWidget(self.cards)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.example_button = QPushButton(self.tr("See a recorded example run"), self)
        self.example_button.setObjectName("openExample")
        self.example_button.setToolTip(
            self.tr(
                "A VRAG and a VimRAG run recorded on the sample corpus: search, crops, memory graph, answer"
            )
        )
        self.example_button.clicked.connect(lambda: self.exampleRequested.emit("vrag"))
        self.later_button = QPushButton(self.tr("Decide later"), self)
        self.later_button.setObjectName("decideLater")
        self.later_button.setToolTip(
            self.tr("Ask stays off until a model is chosen (Help → Choose a model…)")
        )
        self.later_button.clicked.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addWidget(scroll, 1)
        gap = QWidget(self)
        lay.addLayout(row(self.example_button, gap, self.later_button, grow=gap))
        for b in self.findChildren(QPushButton):  # Enter (in a key field) never makes a choice
            b.setAutoDefault(False)
            b.setDefault(False)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        screen = (parent.screen() if parent is not None else None) or QGuiApplication.primaryScreen()
        room = screen.availableGeometry().height() if screen is not None else 800
        self.resize(WIDTH, min(HEIGHT, int(room * 0.9)))  # the cards scroll on a small screen

    def _order(self, *, gpu: bool) -> None:
        """The local card first when this machine has a GPU, last (and plainly discouraged) when not;
        a server of the person's own before the cloud service."""
        cards: list[QGroupBox] = [self.local, self.server, self.dashscope]
        # removeWidget, not takeAt: it deletes the card's layout item. A taken item left alive stays
        # the card's own, so a later change of its text (the GPU verdict) did not resize the card and
        # its lines were drawn over each other.
        for card in cards:
            self._cards.removeWidget(card)
        while self._cards.count():  # the stretch
            self._cards.takeAt(0)
        for card in cards if gpu else cards[1:] + cards[:1]:
            self._cards.addWidget(card)
        self._cards.addStretch(1)

    def show_gpu(self, report: GPUReport) -> None:
        """What the GPU probe found (the Runtime panel runs it once; the dialog only shows it)."""
        self.local.show_report(report)
        self._order(gpu=report.available)

    def _local(self) -> None:
        self.localRequested.emit()
        self.accept()

    def _chosen(self, name: str) -> None:
        self.modelChosen.emit(name)
        self.accept()


__all__ = ["FirstRunDialog"]
