"""Recorded example runs in the window: read off the GUI thread, shown through the same views as a
saved run, under a bar that labels them "Example (recorded)" and switches between them.

Why a bar: an example must never pass for the person's own run. It is not in History (it is not
under the data directory), cannot be exported or added to a dataset from there, and while one is
shown the bar says what it is, how it was made (the model's replies were scripted), and closes it.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from vrag_desktop.core.agents.events import AgentEvent
from vrag_desktop.core.agents.names import AGENT_NAMES, agent_name
from vrag_desktop.core.example_runs import KEYS, LABEL, ExampleRun, example_events, load_example
from vrag_desktop.qt.infra.tasks import run_call
from vrag_desktop.qt.infra.theme import set_role

NAMES = {kind: f"{agent_name(kind)} example" for kind in AGENT_NAMES}


def load_example_async(
    key: str,
    on_done: Callable[[ExampleRun, list[AgentEvent]], None],
    on_error: Callable[[BaseException], None],
) -> None:
    """Read example ``key`` and its events (paths resolved) off the GUI thread."""

    def read() -> tuple[ExampleRun, list[AgentEvent]]:
        example = load_example(key)
        return example, example_events(example)

    run_call(read, on_done=lambda r: on_done(*r), on_error=on_error)


class ExampleBar(QFrame):
    """ "Example (recorded) · <title>", the other example, Close."""

    openRequested = Signal(str)  # key of the example to show
    closeRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("exampleBar")
        set_role(self, "role", "banner-info")
        self.key = ""
        self.label = QLabel(self)
        self.label.setObjectName("exampleLabel")
        self.label.setWordWrap(True)
        self.label.setMinimumWidth(160)  # wraps further rather than widening a narrow Ask column
        self.buttons = {k: QPushButton(NAMES[k], self) for k in KEYS}
        for k, b in self.buttons.items():
            b.setObjectName(f"example_{k}")
            b.clicked.connect(lambda _=False, k=k: self.openRequested.emit(k))
        self.close_button = QPushButton("Close", self)
        self.close_button.setToolTip("Close the example (the views empty)")
        self.close_button.setObjectName("closeExample")
        self.close_button.clicked.connect(self.closeRequested)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(10, 4, 4, 4)
        lay.addWidget(self.label, 1)
        side = QVBoxLayout()  # stacked: the label keeps the width for its two lines
        side.setSpacing(2)
        for b in (*self.buttons.values(), self.close_button):
            side.addWidget(b)
        lay.addLayout(side)
        self.hide()

    def show_example(self, example: ExampleRun) -> None:
        self.key = example.key
        agent = agent_name(example.summary.agent)
        self.label.setText(
            f"<b>{LABEL}</b> · {agent} on the sample corpus<br>Scripted model replies · not one of your runs"
        )
        self.label.setToolTip(f"{html.escape(example.title)}<br>{html.escape(example.note)}")
        for k, b in self.buttons.items():
            b.setVisible(k != example.key)
        self.show()

    def text(self) -> str:
        return self.label.text()


__all__ = ["ExampleBar", "load_example_async"]
