"""Where the window leads a person who cannot ask yet: the first-run dialog, the place each reason
Ask is off is fixed, and the recorded example runs.

Why apart from the window: the main window wires panels; these are a few small journeys across them
(a readiness fix opens a Runtime tab with the right field focused, or the Models view on the model
to download; the chooser's local card opens the Models view on the VRAG model, whose *Serve…* fills
the vLLM form; an example opens in the graph and evidence views under its label).
:meth:`Guide.open_local_models` is the one place that points at the Models view.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject

from vrag_desktop.core.agents.names import agent_name
from vrag_desktop.core.endpoints.readiness import Readiness
from vrag_desktop.core.paths import sample_corpus_dir
from vrag_desktop.qt.history.examples import ExampleBar, load_example_async
from vrag_desktop.qt.infra.errors import error_sink

if TYPE_CHECKING:
    from vrag_desktop.core.agents.events import AgentEvent
    from vrag_desktop.core.example_runs import ExampleRun
    from vrag_desktop.qt.main_window import MainWindow
    from vrag_desktop.qt.welcome.first_run_dialog import FirstRunDialog

SAMPLE_CORPUS = "sample"


class Guide(QObject):
    """See the module docstring. ``dialog`` is the model chooser while it is open."""

    def __init__(self, win: MainWindow) -> None:
        super().__init__(win)
        self.win = win
        self.dialog: FirstRunDialog | None = None
        self.example_bar = ExampleBar()
        self.example_bar.openRequested.connect(self.open_example)
        self.example_bar.closeRequested.connect(self.close_example)
        self.example: ExampleRun | None = None

    # ---- first run
    def first_run(self) -> FirstRunDialog:
        """First launch: the model chooser, and the bundled sample corpus indexed meanwhile."""
        win = self.win
        sample = sample_corpus_dir()
        indexing = False
        try:
            if sample is not None and SAMPLE_CORPUS not in win.ctx.library.names():
                win.corpora.add_and_index(SAMPLE_CORPUS, [sample])
                indexing = True
        except Exception as exc:
            error_sink().report("Could not index the sample corpus", exc)
        win.ctx.settings.first_run_done = True
        try:
            win.ctx.save()
        except Exception as exc:
            error_sink().report("Could not save settings", exc, "warning")
        return self.choose_model(indexing=indexing)

    def choose_model(self, *, indexing: bool = False) -> FirstRunDialog:
        """The model chooser (raised if open)."""
        if self.dialog is not None:
            self.dialog.raise_()
            self.dialog.activateWindow()
            return self.dialog
        from vrag_desktop.qt.welcome.first_run_dialog import (
            FirstRunDialog,
        )  # its cards load the model catalogue

        dlg = self.dialog = FirstRunDialog(self.win.ctx.current_model, self.win, indexing=indexing)
        gpu = self.win.runtime.vllm.gpu
        if gpu.report is not None:
            dlg.show_gpu(gpu.report)
        gpu.reportChanged.connect(dlg.show_gpu)
        dlg.localRequested.connect(self.open_local_models)
        dlg.exampleRequested.connect(self.open_example)
        dlg.destroyed.connect(self._dialog_gone)
        dlg.show()
        return dlg

    def _dialog_gone(self, *_: Any) -> None:
        self.dialog = None

    # ---- fixes
    def fix(self, readiness: Readiness) -> None:
        """Go where the reason Ask is off is fixed."""
        runtime = self.win.runtime
        if readiness.fix == "choose":
            self.choose_model()
            return
        if readiness.fix == "models":
            self.open_local_models(readiness.model)
            return
        self.win.open_runtime()
        if readiness.fix == "key" and readiness.profile:
            runtime.show_key(readiness.profile)
        elif readiness.fix == "server":
            runtime.show_server()
        else:
            runtime.show_endpoint(readiness.profile)

    def open_local_models(self, focus: str | None = None) -> None:
        """Where a local model is downloaded and served: the Models view, on ``focus``'s row (its
        size, fit and Download; once downloaded, *Serve…* fills the Local vLLM server); by default
        the VRAG model."""
        from vrag_desktop.qt.welcome.choices import LOCAL_MODEL

        self.win.models.open(focus=focus or LOCAL_MODEL)

    # ---- examples
    def open_example(self, key: str) -> None:
        """Show recorded example ``key`` in the transcript, graph and evidence views, labelled."""
        win = self.win
        if win.controller.running:
            error_sink().report("A run is in progress", "Stop it before opening an example.", "warning")
            return

        def show(example: ExampleRun, events: list[AgentEvent]) -> None:
            self.example = example
            s = example.summary
            win.show_saved(
                s.question, events, f"Example (recorded) · {agent_name(s.agent)} · {s.model} · {s.status}"
            )
            agent = win.ask.agent_combo.findData(s.agent)  # asking its question again uses its agent
            if agent >= 0:
                win.ask.agent_combo.setCurrentIndex(agent)
            self.example_bar.show_example(example)

        load_example_async(key, show, lambda exc: error_sink().report("Could not open the example", exc))

    def close_example(self) -> None:
        if self.example is None:
            return
        self.example = None
        self.example_bar.hide()
        self.win.clear_all()

    def leave_example(self) -> None:
        """Something else takes the views (a run, a saved run, a replay): the label goes."""
        self.example = None
        self.example_bar.hide()


__all__ = ["Guide"]
