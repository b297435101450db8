"""The first run: the model chooser offers what this machine can do, each card's button makes its
choice (a key in the keyring, a server saved and tested), closing it chooses nothing, and Ask stays
off with its reason until a model is chosen. Real widgets; a scripted OpenAI-compatible server."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.profiles import CUSTOM, DASHSCOPE, KEYRING_SERVICE
from vrag_desktop.core.models import Machine, Verdict
from vrag_desktop.core.runtime.gpu import GiB, GPUInfo, GPUReport
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow
from vrag_desktop.qt.welcome.choices import LOCAL_MODEL, local_fit
from vrag_desktop.qt.welcome.first_run_dialog import FirstRunDialog

BIG = GPUReport((GPUInfo(0, "NVIDIA H200", 141 * GiB, 139 * GiB),), "560", "12.8")
SMALL = GPUReport((GPUInfo(0, "NVIDIA GeForce RTX 3060", 12 * GiB, 11 * GiB),), "560", "12.8")
NONE = GPUReport(error="no NVIDIA driver: NVML Shared Library Not Found")


@pytest.fixture
def window(qtbot: Any, ctx: AppContext, monkeypatch: pytest.MonkeyPatch) -> MainWindow:
    """A first launch (the sample corpus left out: indexing it is tested elsewhere)."""
    monkeypatch.setattr("vrag_desktop.qt.guide.sample_corpus_dir", lambda: None)
    w = MainWindow(ctx, first_run=True)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    qtbot.waitUntil(lambda: w.guide.dialog is not None and w.guide.dialog.isVisible(), timeout=5000)
    return w


def _cards(dlg: FirstRunDialog) -> list[str]:
    lay = dlg._cards
    return [lay.itemAt(i).widget().objectName() for i in range(lay.count()) if lay.itemAt(i).widget()]


def test_the_fit_is_the_catalogues_verdict_for_this_machine(tmp_path: Any) -> None:
    """The chooser's local card says what the Models view says: the core's verdict for the VRAG model
    on this GPU, RAM and disk (no architecture copied into the dialog)."""
    roomy = Machine(NONE, 64 * GiB, 60 * GiB, int(500e9), tmp_path)
    fit, text = local_fit(BIG, roomy)
    assert fit.verdict is Verdict.FITS and "<b>fits</b>" in text and "H200" in text and LOCAL_MODEL in text
    assert "~16.6 GB to download" in text and "vLLM needs" in text
    fit, text = local_fit(SMALL, roomy)
    assert fit.verdict is Verdict.NO and "<b>does not fit</b>" in text and "weights alone" in text
    fit, text = local_fit(NONE, roomy)
    assert fit.verdict is Verdict.NO
    assert "No NVIDIA GPU found on this machine" in text and "not recommended" in text
    full = Machine(NONE, 64 * GiB, 60 * GiB, int(5e9), tmp_path)
    fit, text = local_fit(BIG, full)
    assert fit.verdict is Verdict.NO and "only 5.0 GB free" in text
    fit, text = local_fit(BIG, full, downloaded=True)
    assert fit.verdict is Verdict.FITS and "downloaded already" in text


def test_closing_the_chooser_chooses_nothing_and_ask_says_why_it_is_off(
    qtbot: Any, window: MainWindow, ctx: AppContext
) -> None:
    dlg = window.guide.dialog
    assert isinstance(dlg, FirstRunDialog) and not dlg.isModal()
    dlg.later_button.click()
    qtbot.waitUntil(lambda: window.guide.dialog is None, timeout=3000)
    assert ctx.profiles.active is None and ctx.settings.first_run_done
    assert not window.ask.send_button.isEnabled()
    assert window.ask.readiness_bar.reason() == "⚠ No model is chosen yet."
    window.ask.readiness_bar.button.click()  # "Choose a model…": the chooser again
    assert window.guide.dialog is not None and window.guide.dialog.isVisible()


def test_the_local_choice_follows_the_gpu_and_leads_to_the_models_view(
    qtbot: Any, window: MainWindow, ctx: AppContext
) -> None:
    dlg = window.guide.dialog
    assert dlg is not None
    dlg.show_gpu(NONE)  # no GPU: said plainly, offered last, not as the default
    assert _cards(dlg) == ["serverChoice", "dashscopeChoice", "localChoice"]
    qtbot.waitUntil(lambda: "No NVIDIA GPU found" in dlg.local.fit.text(), timeout=5000)
    assert dlg.local.button.isFlat() and dlg.local.button.text() == "See the models anyway…"
    dlg.show_gpu(BIG)
    assert _cards(dlg) == ["localChoice", "serverChoice", "dashscopeChoice"]
    qtbot.waitUntil(lambda: "H200" in dlg.local.fit.text(), timeout=5000)
    assert dlg.local.verdict is not None and dlg.local.button.text() == "Download it…"
    assert not dlg.local.button.isFlat()
    assert not any(b.isDefault() for b in (dlg.local.button, dlg.dashscope.button, dlg.server.button))
    dlg.local.button.click()
    qtbot.waitUntil(lambda: window.guide.dialog is None, timeout=3000)
    view = window.models.view  # the Models view, on the VRAG model's row: its size, fit, Download
    assert view is not None and view.isVisible() and view.tabs.currentIndex() == 0
    qtbot.waitUntil(lambda: view.card(LOCAL_MODEL) is not None, timeout=5000)
    card = view.card(LOCAL_MODEL)
    assert card is not None and card.download_button.isVisible()
    assert ctx.profiles.active is None  # nothing runs yet, so nothing is chosen
    window.models.shutdown()


def test_the_local_card_grows_to_fit_its_verdict(qtbot: Any, ctx: AppContext) -> None:
    """The verdict comes after the cards are reordered and is three lines long: the card grows to
    show them (its lines were drawn over each other, seen in the README's screenshot)."""
    dlg = FirstRunDialog(ctx.current_model)
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    qtbot.wait(200)  # laid out with "Looking for a GPU…" first, as on a first launch
    dlg.show_gpu(NONE)
    qtbot.waitUntil(lambda: dlg.local.verdict is not None, timeout=5000)
    fit, about = dlg.local.fit, dlg.local.about

    def laid_out() -> bool:
        return fit.height() >= fit.heightForWidth(fit.width()) and about.y() >= fit.geometry().bottom()

    qtbot.waitUntil(laid_out, timeout=3000)


def test_dashscope_with_the_key_typed_in_the_chooser(
    qtbot: Any, window: MainWindow, ctx: AppContext, qt_isolation: Any
) -> None:
    dlg = window.guide.dialog
    assert dlg is not None
    card = dlg.dashscope
    card.button.click()  # no key yet: nothing is chosen
    qtbot.waitUntil(lambda: "Paste your DashScope API key first" in card.message.text(), timeout=3000)
    assert ctx.profiles.active is None
    card.key_box.key_edit.setText("sk-dash-7")
    qtbot.keyClick(card.key_box.key_edit, Qt.Key.Key_Return)  # Enter, or the card's one button
    qtbot.waitUntil(lambda: ctx.profiles.active == DASHSCOPE, timeout=5000)
    assert qt_isolation.store[(KEYRING_SERVICE, DASHSCOPE)] == "sk-dash-7"  # the keyring, never a file
    assert "sk-dash-7" not in (ctx.layout.config / "endpoints.json").read_text()
    qtbot.waitUntil(lambda: window.guide.dialog is None, timeout=3000)
    qtbot.waitUntil(window.ask.send_button.isEnabled, timeout=5000)
    assert window.ask.profile_combo.currentData() == DASHSCOPE
    assert window.runtime_label.text() == "Model: DashScope"


def test_any_openai_compatible_server_tested_then_used(
    qtbot: Any, window: MainWindow, ctx: AppContext, qt_isolation: Any
) -> None:
    dlg = window.guide.dialog
    assert dlg is not None
    card = dlg.server
    card.button.click()
    assert "base URL and the served model name" in card.message.text() and ctx.profiles.active is None
    with ScriptedOpenAI([], api_key="k-srv", models=["qwen2.5-vl-7b"]) as srv:
        card.url_edit.setText(srv.base_url)
        card.model_edit.setText("qwen2.5-vl-7b")
        card.key_edit.setText("k-srv")
        with qtbot.waitSignal(card.tester.verdictChanged, timeout=15_000) as verdict:
            card.tester.button.click()
        assert verdict.args[0] is True and "Connected" in card.tester.verdict()
        card.button.click()
        qtbot.waitUntil(lambda: ctx.profiles.active == CUSTOM, timeout=5000)
    custom = ctx.profiles.get(CUSTOM)
    assert (custom.base_url, custom.model) == (srv.base_url, "qwen2.5-vl-7b")
    assert qt_isolation.store[(KEYRING_SERVICE, CUSTOM)] == "k-srv"
    qtbot.waitUntil(lambda: window.guide.dialog is None, timeout=3000)
    assert window.ask.profile_combo.currentData() == CUSTOM and window.ask.send_button.isEnabled()
    assert window.runtime_label.text() == "Model: Custom"


def test_the_chooser_fits_a_small_screen(qtbot: Any, window: MainWindow) -> None:
    """At 1280×800 every card is readable: nothing cut sideways, the buttons inside the dialog."""
    dlg = window.guide.dialog
    assert dlg is not None
    qtbot.waitExposed(dlg)
    assert dlg.height() <= 800 and dlg.width() <= 1280
    for card in (dlg.local, dlg.dashscope, dlg.server):
        assert card.width() >= card.minimumSizeHint().width()
    assert dlg.later_button.geometry().bottom() <= dlg.height()
