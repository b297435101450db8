"""One current model: the Runtime panel's *Make active*, the Ask box and the status bar always name
the same model, and a run goes to the model the Ask box shows. Real widgets, a real index, a scripted
model over real HTTP."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.profiles import DASHSCOPE, KEYRING_SERVICE, LOCAL_VLLM, EndpointProfile
from vrag_desktop.core.runtime.settings import runtime_dir
from vrag_desktop.core.runtime.state import identity
from vrag_desktop.qt.ask.ask_panel import NO_MODEL
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow

QUESTION = "How heavy a load can the Atlas robot carry?"
SCRIPT = [
    {"content": "<think>Found it.</think>\n<search>Atlas robot payload</search>"},
    {"content": "<answer>450 kg</answer>"},
]


def _window(qtbot: Any, ctx: AppContext) -> MainWindow:
    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.show()
    w.activateWindow()
    qtbot.waitUntil(w.isActiveWindow, timeout=2000)
    return w


def _agree(w: MainWindow, name: str | None) -> None:
    """The store (what the CLI reads), the Ask box, the status bar and the Runtime list: one model."""
    assert w.ctx.profiles.active == name == w.ctx.current_model.name
    assert w.ask.profile_combo.currentData() == name
    assert w.ask.profile_combo.currentText() == (name or NO_MODEL)
    assert w.runtime_label.text().removeprefix("Model: ").split(" · ")[0] == (name or "none chosen")
    ed = w.runtime.editor
    tagged = [ed.list.item(i).text() for i in range(ed.list.count()) if "active" in ed.list.item(i).text()]
    assert tagged == ([f"{name}  ·  active"] if name else [])
    assert not ed.active_button.isEnabled() or ed.current_name != name


def _pick(w: MainWindow, name: str) -> None:
    """The person picks ``name`` in the Ask box."""
    combo = w.ask.profile_combo
    combo.setCurrentIndex(combo.findData(name))


def test_make_active_the_ask_box_and_the_status_bar_agree_and_a_run_goes_to_the_shown_model(
    qtbot: Any, indexed: AppContext, qt_isolation: Any
) -> None:
    w = _window(qtbot, indexed)
    _agree(w, None)  # a fresh data directory: no model chosen, and Ask says so
    assert not w.ask.send_button.isEnabled()
    assert w.ask.readiness_bar.reason() == "⚠ No model is chosen yet."

    with ScriptedOpenAI(SCRIPT, api_key="k-1") as srv:
        indexed.profiles.save(EndpointProfile("Scripted", "custom", srv.base_url, "scripted"))
        indexed.profiles.set_api_key("Scripted", "k-1")
        w.runtime.refresh()
        ed = w.runtime.editor
        ed.select("Scripted")
        ed.active_button.click()  # Runtime → Make active
        _agree(w, "Scripted")
        assert w.ask.send_button.isEnabled() and not w.ask.readiness_bar.reason()

        _pick(w, DASHSCOPE)  # the Ask box changes it: for the status bar, the Runtime panel, the CLI
        _agree(w, DASHSCOPE)
        qtbot.waitUntil(lambda: w.ask.readiness_bar.reason() == "⚠ DashScope needs an API key.", timeout=5000)
        assert not w.ask.send_button.isEnabled()
        assert w.ask.readiness_bar.button.text() == "Add the key…"
        w.ask.readiness_bar.button.click()  # leads to the key box of that profile
        assert (
            w.runtime_dock.isVisible()
            and w.runtime.tabs.tabText(w.runtime.tabs.currentIndex()) == "Endpoints"
        )
        assert ed.current_name == DASHSCOPE and QApplication.focusWidget() is ed.key_edit
        ed.key_edit.setText("sk-ds-1")
        ed.save_key_button.click()
        qtbot.waitUntil(w.ask.send_button.isEnabled, timeout=5000)
        assert qt_isolation.store[(KEYRING_SERVICE, DASHSCOPE)] == "sk-ds-1"
        _agree(w, DASHSCOPE)

        _pick(w, "Scripted")
        _agree(w, "Scripted")
        sent: list[Any] = []
        ends: list[tuple[str, str]] = []
        w.ask.sendRequested.connect(sent.append)
        w.controller.finished.connect(lambda s, r: ends.append((s, r)))
        w.ask.question_edit.setPlainText(QUESTION)
        w.ask.send()
        qtbot.waitUntil(lambda: bool(ends), timeout=30_000)
    assert [r.profile for r in sent] == ["Scripted"]  # the RunRequest names the model the box shows
    assert srv.chat_bodies and {b["model"] for b in srv.chat_bodies} == {"scripted"}  # and it answered
    status, run_id = ends[0]
    assert status == "answered" and indexed.runs.summary(run_id).model == "scripted"
    _agree(w, "Scripted")


def test_deleting_the_current_model_leaves_none_chosen_everywhere(qtbot: Any, ctx: AppContext) -> None:
    ctx.profiles.save(EndpointProfile("Lab", "custom", "http://127.0.0.1:9/v1", "m"))
    w = _window(qtbot, ctx)
    _pick(w, "Lab")
    _agree(w, "Lab")
    ed = w.runtime.editor
    ed.select("Lab")
    ed.delete_button.click()
    ed.delete_button.click()  # the second click confirms
    qtbot.waitUntil(
        lambda: "Lab" not in ctx.profiles.names() and w.ctx.current_model.name is None, timeout=5000
    )
    _agree(w, None)
    assert w.ask.readiness_bar.reason() == "⚠ No model is chosen yet."
    assert w.ask.readiness_bar.button.text() == "Choose a model…"


def test_the_ask_panels_earlier_choice_becomes_the_current_model_once(qtbot: Any, tmp_path: Path) -> None:
    """Earlier versions kept the Ask box's model in the app's settings: it is carried over to the one
    place (if that profile still exists) and then forgotten."""
    cfg, data = tmp_path / "cfg", tmp_path / "data"
    cfg.mkdir()
    (cfg / "settings.json").write_text(json.dumps({"profile": "Lab", "first_run_done": True}))
    AppContext.for_dirs(data, cfg).profiles.save(
        EndpointProfile("Lab", "custom", "http://127.0.0.1:9/v1", "m")
    )
    w = _window(qtbot, AppContext.for_dirs(data, cfg))
    _agree(w, "Lab")
    assert json.loads((cfg / "settings.json").read_text())["profile"] is None
    w.close()
    # a choice naming a profile that is gone is dropped: still no model chosen
    cfg2 = tmp_path / "cfg2"
    cfg2.mkdir()
    (cfg2 / "settings.json").write_text(json.dumps({"profile": "Gone", "first_run_done": True}))
    ctx2 = AppContext.for_dirs(tmp_path / "data2", cfg2)
    assert ctx2.current_model.name is None and ctx2.settings.profile is None


def test_the_local_profile_waits_for_a_server_and_its_button_leads_to_it(qtbot: Any, ctx: AppContext) -> None:
    ctx.profiles.set_local_server("http://127.0.0.1:8123/v1", "vrag")  # a server that has since stopped
    w = _window(qtbot, ctx)
    _pick(w, LOCAL_VLLM)
    _agree(w, LOCAL_VLLM)
    assert w.runtime_label.text() == "Model: Local vLLM · stopped"  # and its server's state
    qtbot.waitUntil(
        lambda: w.ask.readiness_bar.reason() == "⚠ The local vLLM server is not running.", timeout=5000
    )
    assert not w.ask.send_button.isEnabled()
    w.ask.readiness_bar.button.click()  # "Start the server…"
    assert w.runtime.tabs.tabText(w.runtime.tabs.currentIndex()) == "Local vLLM"
    # a server the command line started (its state file says where it serves, and that it is ready)
    folder = runtime_dir(ctx.data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    state = {**identity(os.getpid()), "name": "vLLM", "base_url": "http://127.0.0.1:8123/v1", "ready_at": 1.0}
    (folder / "state.json").write_text(json.dumps(state))
    w.ctx.current_model.refresh()
    qtbot.waitUntil(w.ask.send_button.isEnabled, timeout=5000)
    assert not w.ask.readiness_bar.reason()


def test_evaluations_and_training_judges_start_from_the_current_model(qtbot: Any, ctx: AppContext) -> None:
    from vrag_desktop.qt.evaluation.new_dialog import NewEvaluationDialog
    from vrag_desktop.qt.training.new_run_dialog import NewRunDialog

    def evaluation() -> NewEvaluationDialog:
        dlg = NewEvaluationDialog(ctx)
        qtbot.addWidget(dlg)
        return dlg

    dlg = evaluation()  # none chosen: none is picked for the person
    assert [dlg.profile.currentData(), dlg.judge_profile.currentData()] == [None, None]
    assert dlg.profile.currentText() == "No model chosen"
    dataset = Path(ctx.data_dir) / "q.jsonl"
    dataset.parent.mkdir(parents=True, exist_ok=True)
    dataset.write_text(json.dumps({"query": "q", "reference_answer": "a"}) + "\n")
    dlg.dataset.set_file(str(dataset))
    dlg.kind.setCurrentIndex(dlg.kind.findData("answers"))
    assert dlg.request() is None and "Choose the model first" in dlg.note.text()

    ctx.profiles.save(EndpointProfile("Lab", "custom", "http://127.0.0.1:9/v1", "m"))
    assert ctx.current_model.choose("Lab")
    dlg = evaluation()
    assert [dlg.profile.currentData(), dlg.judge_profile.currentData()] == ["Lab", "Lab"]
    assert dlg.profile.findData(None) < 0  # no "none" entry once a model is chosen
    dlg.dataset.set_file(str(dataset))
    dlg.kind.setCurrentIndex(dlg.kind.findData("answers"))
    req = dlg.request()
    assert req is not None and req.profile == "Lab"

    run = NewRunDialog(ctx)
    qtbot.addWidget(run)
    assert run.form.judge_profile.currentData() == "Lab"
    ctx.current_model.choose(None)
    run2 = NewRunDialog(ctx)
    qtbot.addWidget(run2)
    assert run2.form.judge_profile.currentData() is None
    assert "no model is chosen yet" in run2.form.error_text("judge.profile")


def test_a_local_server_started_before_any_choice_becomes_the_model_and_ask_follows_it(
    qtbot: Any, ctx: AppContext, monkeypatch: Any
) -> None:
    """Starting the app's own server is choosing a local model: once it is ready (never before), it is
    the current model and Ask is on; when it stops, Ask is off again with the reason."""
    import sys

    from vrag_desktop.core.runtime.settings import ENTRYPOINT_ENV

    fake = Path(__file__).resolve().parents[1] / "fake_vllm_server.py"
    monkeypatch.setenv(ENTRYPOINT_ENV, f"{fake} --fake-delay 0.3")
    w = _window(qtbot, ctx)
    v = w.runtime.vllm
    v.model_edit.setText("fake-model")
    v.served_edit.setText("fake")
    v.python_edit.setText(sys.executable)
    try:
        assert v.start()
        qtbot.waitUntil(lambda: w.ask.readiness_bar.reason() == "⚠ No model is chosen yet.", timeout=3000)
        assert ctx.profiles.active is None  # starting is not ready
        qtbot.waitUntil(lambda: ctx.profiles.active == LOCAL_VLLM, timeout=20_000)
        _agree(w, LOCAL_VLLM)
        qtbot.waitUntil(w.ask.send_button.isEnabled, timeout=5000)
        assert w.runtime_label.text() == "Model: Local vLLM · ready"
        assert v.stop()
        qtbot.waitUntil(
            lambda: w.ask.readiness_bar.reason() == "⚠ The local vLLM server is not running.", timeout=15_000
        )
        assert not w.ask.send_button.isEnabled()
        _agree(w, LOCAL_VLLM)
    finally:
        assert w.runtime.shutdown(10.0)
