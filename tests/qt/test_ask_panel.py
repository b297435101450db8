"""Asking from the GUI: a real index, a scripted model over real HTTP, the ask panel and run controller.

Checks that reasoning streams into the transcript, the answer's evidence is clickable, the run is saved,
Stop ends a run within a second, and a down endpoint or a rejected key gives a clear message.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from conftest import free_port
from PySide6.QtCore import Qt
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.profiles import EndpointProfile
from vrag_desktop.qt.ask.ask_panel import AskPanel
from vrag_desktop.qt.ask.run_controller import ANSWERED, CANCELLED, FAILED, RunController

SCRIPT = [
    {"content": "<think>I need the spec page.</think>\n<search>Atlas robot payload</search>", "chunk": 4},
    {"content": "<think>Zoom into the table.</think>\n<bbox>[20, 30, 300, 200]</bbox>"},
    {"content": "<think>It says 450 kg.</think>\n<answer>450 kg</answer>"},
]
QUESTION = "How heavy a load can the Atlas robot carry?"


def _profile(ctx: Any, url: str, key: str = "k-123") -> None:
    ctx.profiles.save(EndpointProfile(name="Scripted", kind="custom", base_url=url, model="scripted"))
    ctx.profiles.set_api_key("Scripted", key)


def use_scripted(ask: AskPanel, ctx: Any, url: str, key: str = "k-123") -> None:
    """The scripted server's profile saved and chosen in ``ask``, as a person would."""
    _profile(ctx, url, key)
    ask.refresh_profiles()
    ask.profile_combo.setCurrentIndex(ask.profile_combo.findData("Scripted"))


def _wire(qtbot: Any, ctx: Any) -> tuple[AskPanel, RunController, list[Any], list[tuple[str, str]]]:
    panel = AskPanel(ctx)
    qtbot.addWidget(panel)
    ctl = RunController(ctx)
    events: list[Any] = []
    ends: list[tuple[str, str]] = []
    ctl.agentEvent.connect(events.append)
    ctl.agentEvent.connect(panel.apply)
    ctl.finished.connect(lambda status, rid: ends.append((status, rid)))
    ctl.finished.connect(lambda *_: panel.set_running(False))

    def go(req: Any) -> None:
        panel.begin(req.question)
        ctl.start(req)

    panel.sendRequested.connect(go)
    panel.stopRequested.connect(ctl.stop)
    return panel, ctl, events, ends


def test_run_streams_answers_and_saves(qtbot: Any, indexed: Any) -> None:
    with ScriptedOpenAI(SCRIPT, api_key="k-123") as srv:
        _profile(indexed, srv.base_url)
        panel, _ctl, _events, ends = _wire(qtbot, indexed)
        panel.refresh_profiles()
        panel.profile_combo.setCurrentIndex(panel.profile_combo.findData("Scripted"))
        panel.question_edit.setPlainText(QUESTION)
        qtbot.mouseClick(panel.send_button, Qt.MouseButton.LeftButton)
        assert panel.stop_button.isEnabled() and not panel.send_button.isEnabled()
        qtbot.waitUntil(lambda: bool(ends), timeout=30_000)
    status, run_id = ends[0]
    assert status == ANSWERED and run_id
    panel.render_transcript()
    text = panel.view.toPlainText()
    for expected in ("Search · Atlas robot payload", "robots.pdf p. 2", "Zoom into", "crop", "450 kg"):
        assert expected in text, (expected, text)
    assert "Thinking" in text
    # thinking is folded after the run and unfolds on click
    assert "▸ Thinking" in text and "▾ Thinking" not in text
    think = next(b for b in panel.transcript.blocks if b.kind == "think")
    from PySide6.QtCore import QUrl

    panel._on_link(QUrl(f"toggle:{think.id}"))
    assert "▾ Thinking" in panel.view.toPlainText()
    # evidence is clickable
    clicked: list[Any] = []
    panel.evidenceClicked.connect(clicked.append)
    evidence = panel.evidence_links()
    assert evidence and Path(evidence[0].source).name == "robots.pdf"
    from PySide6.QtCore import QUrl

    panel._on_link(QUrl("evidence:0"))
    assert clicked == [evidence[0]]
    # saved, and replaying the saved events gives the same transcript
    (summary,) = indexed.runs.list()
    assert summary.id == run_id and summary.answer == "450 kg"
    again = AskPanel(indexed)
    qtbot.addWidget(again)
    again.load(QUESTION, indexed.runs.events(run_id))
    assert [(b.kind, b.text) for b in again.transcript.blocks] == [
        (b.kind, b.text) for b in panel.transcript.blocks
    ]


def test_stop_ends_the_run_within_a_second(qtbot: Any, indexed: Any) -> None:
    script = [SCRIPT[0], {"hang": 30, "content": "never"}]
    with ScriptedOpenAI(script, api_key="k-123") as srv:
        _profile(indexed, srv.base_url)
        panel, _ctl, _events, ends = _wire(qtbot, indexed)
        panel.refresh_profiles()
        panel.profile_combo.setCurrentIndex(panel.profile_combo.findData("Scripted"))
        panel.question_edit.setPlainText(QUESTION)
        panel.send()
        assert srv.wait_requests(2, timeout=20)
        qtbot.wait(200)
        t0 = time.monotonic()
        qtbot.mouseClick(panel.stop_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: bool(ends), timeout=5000)
        elapsed = time.monotonic() - t0
    assert ends[0][0] == CANCELLED
    assert elapsed < 1.0, elapsed
    assert panel.send_button.isEnabled()
    (summary,) = indexed.runs.list()
    assert summary.status == "cancelled"


def test_endpoint_down_and_key_rejected_are_clear(qtbot: Any, indexed: Any) -> None:
    _profile(indexed, f"http://127.0.0.1:{free_port()}/v1")
    panel, _ctl, _events, ends = _wire(qtbot, indexed)
    panel.refresh_profiles()
    panel.profile_combo.setCurrentIndex(panel.profile_combo.findData("Scripted"))
    panel.question_edit.setPlainText(QUESTION)
    panel.send()
    qtbot.waitUntil(lambda: bool(ends), timeout=60_000)
    assert ends[0][0] == FAILED
    panel.render_transcript()
    text = panel.view.toPlainText()
    assert "127.0.0.1" in text and ("connect" in text.lower() or "refused" in text.lower()), text

    with ScriptedOpenAI(SCRIPT, api_key="the-right-key") as srv:
        _profile(indexed, srv.base_url, key="a-wrong-key-456")
        panel.question_edit.setPlainText(QUESTION)
        panel.send()
        qtbot.waitUntil(lambda: len(ends) == 2, timeout=30_000)
    assert ends[1][0] == FAILED
    panel.render_transcript()
    text = panel.view.toPlainText()
    assert "401" in text or "rejected" in text.lower() or "key" in text.lower(), text
    assert "a-wrong-key-456" not in text


def test_empty_question_is_refused_inline(qtbot: Any, ctx: Any) -> None:
    panel = AskPanel(ctx)
    qtbot.addWidget(panel)
    sent: list[Any] = []
    panel.sendRequested.connect(sent.append)
    panel.question_edit.setPlainText("   ")
    panel.send()
    assert sent == [] and "question" in panel.status_label.text().lower()
