"""The three ways to get a model, as cards of the first-run dialog.

Why three cards and no preselected answer: which one fits depends on this machine (a GPU or not)
and on the person (a cloud key, a server elsewhere). Each card has its own button that does the
whole thing — store the key, save the server, make it the current model — so no choice is ever made
for the person, least of all a cloud service. The key and connection-test parts are the Runtime
panel's own (:class:`ApiKeyBox`, :class:`ConnectionTest`).
"""

from __future__ import annotations

import dataclasses
import html
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, Qt, Signal
from PySide6.QtWidgets import QFormLayout, QGroupBox, QLabel, QLineEdit, QPushButton, QVBoxLayout, QWidget

from vrag_desktop.core.endpoints.profiles import CUSTOM, DASHSCOPE, EndpointProfile, ProfileError
from vrag_desktop.core.models import Fit, Machine, ModelStore, Verdict, find_entry, fits, probe_machine
from vrag_desktop.qt.infra.alive import if_alive
from vrag_desktop.qt.infra.errors import describe, error_sink
from vrag_desktop.qt.infra.tasks import TaskSlot, run_call
from vrag_desktop.qt.infra.widgets import row
from vrag_desktop.qt.runtime.connection_test import ConnectionTest
from vrag_desktop.qt.runtime.key_box import ApiKeyBox
from vrag_desktop.qt.runtime.style import BAD, MUTED, OK, WARN, line_edit, tone

if TYPE_CHECKING:
    from vrag_desktop.core.paths import DataLayout
    from vrag_desktop.core.runtime.gpu import GPUReport
    from vrag_desktop.qt.current_model import CurrentModel

#: The model a local server starts with: the released VRAG checkpoint (Qwen2.5-VL-7B fine-tuned); its
#: size and architecture come from the core's catalogue.
LOCAL_MODEL = "autumncc/Qwen2.5-VL-7B-VRAG"
translate = QCoreApplication.translate  # translate("Context", text): what Qt's lupdate extracts


def _text(parent: QWidget, text: str = "", name: str = "") -> QLabel:
    label = QLabel(text, parent)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText)
    if name:
        label.setObjectName(name)
    return label


def local_fit(report: GPUReport, machine: Machine, *, downloaded: bool = False) -> tuple[Fit, str]:
    """Whether the VRAG model fits this machine (the catalogue's verdict on ``report``'s GPUs and
    ``machine``'s RAM and disk), in one or two sentences (HTML)."""
    entry = find_entry(LOCAL_MODEL)
    assert entry is not None  # the catalogue's first entry
    fit = fits(entry, dataclasses.replace(machine, gpus=report), downloaded=downloaded)
    if not report.gpus:
        return fit, translate(
            "LocalChoice",
            "<b>No NVIDIA GPU found on this machine</b> ({why}). "
            "A 7-billion-parameter vision model is far too slow without one, so this is not recommended "
            "here: use a server elsewhere instead.",
        ).format(why=html.escape(report.error or translate("LocalChoice", "none found")))
    g = max(report.gpus, key=lambda x: x.total_bytes)
    gpu = translate("LocalChoice", "{name}, {total:.0f} GiB ({free:.0f} GiB free)").format(
        name=html.escape(g.name), total=g.total_gib, free=g.free_gib
    )
    verdict = {
        Verdict.FITS: translate("LocalChoice", "<b>fits</b>"),
        Verdict.TIGHT: translate("LocalChoice", "is a <b>tight fit</b>"),
    }.get(fit.verdict, translate("LocalChoice", "<b>does not fit</b>"))
    have = (
        translate("LocalChoice", "downloaded already")
        if downloaded
        else translate("LocalChoice", "{size} to download").format(size=entry.size_text)
    )
    why = "; ".join(html.escape(r) for r in fit.reasons)
    return fit, translate(
        "LocalChoice", "<b>GPU: {gpu}.</b> The VRAG model ({model}, {have}) {verdict} here: {why}."
    ).format(gpu=gpu, model=LOCAL_MODEL, have=have, verdict=verdict, why=why)


def _probe(layout: DataLayout, report: GPUReport) -> tuple[Machine, bool]:
    """On a worker: RAM and free disk for the verdict, and whether the model is downloaded."""
    return probe_machine(layout.models, gpus=report), ModelStore(layout).downloaded_path(
        LOCAL_MODEL
    ) is not None


class LocalChoice(QGroupBox):
    """Download and serve a model on this machine; shows whether it fits (GPU, RAM, disk)."""

    requested = Signal()  # the person wants a local model: the window opens the Models view

    def __init__(self, layout: DataLayout, parent: QWidget | None = None) -> None:
        super().__init__(self.tr("Run a model on this machine"), parent)
        self.setObjectName("localChoice")
        self.layout_ = layout
        lay = QVBoxLayout(self)
        self.fit = _text(self, self.tr("Looking for a GPU…"), "localFit")
        self.about = _text(
            self,
            self.tr(
                "Private, and offline once downloaded: the Models view downloads it (size, progress, pause "
                "and resume), then the app's own vLLM server serves it."
            ),
        )
        tone(self.about, MUTED)
        self.button = QPushButton(self.tr("Download it…"), self)
        self.button.setObjectName("chooseLocal")
        self.button.clicked.connect(self.requested)
        lay.addWidget(self.fit)
        lay.addWidget(self.about)
        lay.addLayout(row(self.button))
        self.report: GPUReport | None = None
        self.verdict: Fit | None = None
        self._sizing = TaskSlot()

    def show_report(self, report: GPUReport) -> None:
        """The GPU probe's result; RAM, disk and the models folder are read off the GUI thread."""
        self.report = report
        self.button.setFlat(not report.gpus)
        self._sizing.start(
            run_call, _probe, self.layout_, report, name="size the local model",
            on_done=if_alive(self, lambda found: self._show(report, *found)),
            error_title=self.tr("Cannot size the model"),
        )  # fmt: skip

    def _show(self, report: GPUReport, machine: Machine, downloaded: bool) -> None:
        self.verdict, text = local_fit(report, machine, downloaded=downloaded)
        self.fit.setText(text)
        if downloaded:
            self.button.setText(self.tr("Serve it…"))
        else:
            self.button.setText(self.tr("Download it…") if report.gpus else self.tr("See the models anyway…"))


class DashScopeChoice(QGroupBox):
    """DashScope with a key typed right here (kept in the keyring, as the Runtime panel keeps it)."""

    chosen = Signal(str)

    def __init__(self, model: CurrentModel, parent: QWidget | None = None) -> None:
        super().__init__(self.tr("Use DashScope (Alibaba Cloud)"), parent)
        self.setObjectName("dashscopeChoice")
        self.model = model
        store = model.ctx.profiles
        self._pending = False
        lay = QVBoxLayout(self)
        lay.addWidget(
            _text(
                self,
                self.tr(
                    "Qwen3.5 in Alibaba Cloud: no GPU needed, suits the VimRAG agent. <b>Your questions and "
                    "the page images the agent looks at are sent to Alibaba Cloud.</b>"
                ),
            )
        )
        self.key_box = ApiKeyBox(store, self, title=self.tr("DashScope API key"))
        self.key_box.set_profile(DASHSCOPE)
        self.key_box.keyChanged.connect(self._key_changed)
        # one button does it all here: store the key and choose DashScope (Enter too)
        self.key_box.save_key_button.hide()
        self.key_box.forget_key_button.hide()
        self.key_box.key_edit.returnPressed.disconnect()
        self.key_box.key_edit.returnPressed.connect(self.choose)
        self.button = QPushButton(self.tr("Use DashScope"), self)
        self.button.setObjectName("chooseDashScope")
        self.button.clicked.connect(self.choose)
        self.message = _text(self, "", "dashscopeMessage")
        lay.addWidget(self.key_box)
        lay.addLayout(row(self.button, self.message, grow=self.message))

    def choose(self) -> None:
        """Store the typed key (if any), then make DashScope the current model once a key is set."""
        if self.key_box.key_edit.text():
            self._pending = True
            self.key_box.save_key()  # keyChanged follows, or the box says why it could not
            return
        self._use_if_keyed()

    def _key_changed(self, _name: str) -> None:
        if self._pending:
            self._pending = False
            self._use_if_keyed()

    def _use_if_keyed(self) -> None:
        store = self.model.ctx.profiles

        def decide(source: str | None) -> None:
            if source is None:
                self._say(self.tr("Paste your DashScope API key first."), WARN)
            elif self.model.choose(DASHSCOPE):
                self._say(self.tr("✓ DashScope is now the model."), OK)
                self.chosen.emit(DASHSCOPE)

        run_call(
            store.api_key_source,
            DASHSCOPE,
            on_done=if_alive(self, decide),
            error_title=self.tr("Cannot read the key"),
        )

    def _say(self, text: str, color: str) -> None:
        self.message.setText(html.escape(text))
        tone(self.message, color)


class ServerChoice(QGroupBox):
    """Any OpenAI-compatible server: its base URL and model name, a key if it needs one, Test
    connection; *Use this server* saves it as the Custom profile and makes it the current model."""

    chosen = Signal(str)

    def __init__(self, model: CurrentModel, parent: QWidget | None = None) -> None:
        super().__init__(self.tr("Use an OpenAI-compatible server"), parent)
        self.setObjectName("serverChoice")
        self.model = model
        store = model.ctx.profiles
        lay = QVBoxLayout(self)
        lay.addWidget(
            _text(
                self,
                self.tr(
                    "vLLM or SGLang on another machine, LM Studio, Ollama, a gateway: any server with "
                    "the OpenAI chat API and a vision model."
                ),
            )
        )
        current = store.get(CUSTOM)
        self.url_edit = line_edit(self, "http://host:8000/v1")
        self.url_edit.setObjectName("serverUrl")
        self.url_edit.setText(current.base_url)
        self.model_edit = line_edit(self, self.tr("served model name, e.g. Qwen/Qwen2.5-VL-7B-Instruct"))
        self.model_edit.setObjectName("serverModel")
        self.model_edit.setText(current.model)
        self.key_edit = QLineEdit(self)
        self.key_edit.setObjectName("serverKey")
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText(self.tr("only if the server needs one (kept in the system keyring)"))
        form = QFormLayout()
        form.addRow(self.tr("Base URL"), self.url_edit)
        form.addRow(self.tr("Model"), self.model_edit)
        form.addRow(self.tr("API key"), self.key_edit)
        lay.addLayout(form)
        self.tester = ConnectionTest(store, self)
        self.tester.button.clicked.connect(self.test)
        self.button = QPushButton(self.tr("Use this server"), self)
        self.button.setObjectName("chooseServer")
        self.button.clicked.connect(self.choose)
        self.message = _text(self, "", "serverMessage")
        lay.addWidget(self.tester)
        lay.addLayout(row(self.button, self.message, grow=self.message))

    def profile(self) -> EndpointProfile | None:
        """The fields as the Custom profile, or None after saying what is missing."""
        url, name = self.url_edit.text().strip(), self.model_edit.text().strip()
        if not url or not name:
            self._say(self.tr("Enter the server's base URL and the served model name."), WARN)
            return None
        base = self.model.ctx.profiles.get(CUSTOM)
        profile = EndpointProfile(
            CUSTOM,
            "custom",
            url,
            name,
            extra_body=base.extra_body,
            params=base.params,
            api_key_env=base.api_key_env,
        )
        try:
            profile.validate()
        except ProfileError as exc:
            self._say(str(exc), BAD)
            return None
        return profile

    def test(self) -> None:
        if self.tester.testing:
            self.tester.cancel()
            return
        profile = self.profile()
        if profile is not None:
            self._say("", MUTED)
            self.tester.run(profile, self.key_edit.text(), known=True)

    def choose(self) -> None:
        """Save the Custom profile (and its key), then make it the current model."""
        profile = self.profile()
        if profile is None:
            return
        store = self.model.ctx.profiles
        key = self.key_edit.text()
        try:
            store.save(profile)
        except (ProfileError, OSError) as exc:
            self._say(self.tr("Not saved: {why}").format(why=describe(exc)), BAD)
            return

        def use(_where: object = None) -> None:
            self.key_edit.clear()
            if self.model.choose(CUSTOM):
                self._say(
                    self.tr("✓ {model} at {url} is now the model.").format(
                        model=profile.model, url=profile.base_url
                    ),
                    OK,
                )
                self.chosen.emit(CUSTOM)

        def failed(exc: BaseException) -> None:
            self._say(self.tr("The key was not stored: {why}").format(why=describe(exc)), BAD)
            error_sink().report(self.tr("Could not store the server's key"), exc, "warning")

        if key:  # the keyring may block: off the GUI thread, then choose
            run_call(
                store.set_api_key, CUSTOM, key, on_done=if_alive(self, use), on_error=if_alive(self, failed)
            )
        else:
            use()

    def _say(self, text: str, color: str) -> None:
        self.message.setText(html.escape(text))
        tone(self.message, color)


__all__ = ["LOCAL_MODEL", "DashScopeChoice", "LocalChoice", "ServerChoice", "local_fit"]
