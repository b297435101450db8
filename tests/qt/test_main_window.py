"""The main window: title, docks, shortcuts, layout persistence, first run, a run end to end through
every view, reopen and replay from history, closing mid-run, a damaged settings file, no display."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QLabel
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.endpoints.profiles import EndpointProfile
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.main_window import MainWindow

SCRIPT = [
    {"content": "<think>I need the spec page.</think>\n<search>Atlas robot payload</search>", "chunk": 4},
    {"content": "<think>Zoom into the table.</think>\n<bbox>[20, 30, 300, 200]</bbox>"},
    {"content": "<think>Closer.</think>\n<bbox>[10, 10, 120, 90]</bbox>"},
    {"content": "<think>It says 450 kg.</think>\n<answer>450 kg</answer>"},
]
QUESTION = "How heavy a load can the Atlas robot carry?"


def _window(qtbot: Any, ctx: AppContext, **kw: Any) -> MainWindow:
    w = MainWindow(ctx, first_run=kw.pop("first_run", False))
    qtbot.addWidget(w)
    w.show()
    w.activateWindow()  # shortcuts only reach the active window
    qtbot.waitUntil(w.isActiveWindow, timeout=2000)
    return w


def test_title_docks_and_shortcuts(qtbot: Any, ctx: AppContext) -> None:
    w = _window(qtbot, ctx)
    assert w.windowTitle() == "VRAG Desktop"
    titles = {
        d.windowTitle()
        for d in (w.corpora_dock, w.history_dock, w.runtime_dock, w.graph_dock, w.evidence_dock)
    }
    assert titles == {"Corpora", "History", "Runtime", "Reasoning graph", "Evidence"}
    shortcuts = {a.text(): [s.toString() for s in a.shortcuts()] for a in w.actions()}
    assert "Ctrl+N" in shortcuts["New question"]
    assert "Ctrl+Return" in shortcuts["Ask"]
    assert "Esc" in shortcuts["Stop"]
    assert "Ctrl+," in shortcuts["Settings…"]
    assert "Ctrl+F" in shortcuts["Find in reasoning…"]
    assert {"Ctrl++", "Ctrl+-", "Ctrl+0"} <= {s for k in ("Zoom in", "Zoom out", "Fit") for s in shortcuts[k]}
    # Ctrl+F opens the find bar
    qtbot.keySequence(w, QKeySequence("Ctrl+F"))
    assert w.ask.find_bar.isVisible()


def test_zoom_shortcuts_act_on_the_view_last_touched_and_no_filter_watches_the_views(
    qtbot: Any, ctx: AppContext
) -> None:
    """The views tell the window when the person presses, wheels or focuses them; the window does
    not filter their events (Python at each of their events, every repaint of a live run included)."""
    from PySide6.QtCore import QObject, QRectF, Qt

    w = _window(qtbot, ctx)
    graph, page = w.graph_view, w.evidence.page_view
    assert type(w).eventFilter is QObject.eventFilter
    page.scene().setSceneRect(QRectF(0, 0, 2000, 3000))  # something to zoom
    page.fit()
    g0, p0 = graph.zoom(), page.scale_factor()
    qtbot.mouseClick(page.viewport(), Qt.MouseButton.LeftButton)
    w.zoom("in")
    assert page.scale_factor() > p0 and graph.zoom() == g0
    p1 = page.scale_factor()
    qtbot.mouseClick(graph.viewport(), Qt.MouseButton.LeftButton)
    w.zoom("in")
    assert graph.zoom() > g0 and page.scale_factor() == p1
    page.setFocus()
    w.zoom("out")
    assert page.scale_factor() < p1


def test_layout_is_restored(qtbot: Any, ctx: AppContext) -> None:
    w = _window(qtbot, ctx)
    w.evidence_dock.hide()
    w.runtime_dock.setFloating(True)
    w.close()
    assert (ctx.config_dir / "window.ini").exists()
    w2 = _window(qtbot, ctx)
    assert not w2.evidence_dock.isVisible()
    assert w2.graph_dock.isVisible()
    assert w2.runtime_dock.isFloating()  # (sizes: the offscreen screen is 800x800, so geometry is clamped)
    w2.reset_layout()
    assert w2.evidence_dock.isVisible()


def test_damaged_settings_file_is_reported_and_app_works(qtbot: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "settings.json").write_text("{ not json", encoding="utf-8")
    ctx = AppContext.for_dirs(tmp_path / "data", cfg)
    w = _window(qtbot, ctx)
    qtbot.waitUntil(lambda: w.notifications.isVisible(), timeout=3000)
    assert "damaged" in w.notifications.label.text()
    assert list(cfg.glob("settings.damaged-*.json"))
    assert w.ask.top_k.value() == 3  # defaults in use


def test_first_run_indexes_the_sample_and_explains(
    qtbot: Any, ctx: AppContext, minilm: Any, make_pdf: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = make_pdf("sample.pdf", ["A tiny sample page about lighthouses."]).parent
    monkeypatch.setattr("vrag_desktop.qt.guide.sample_corpus_dir", lambda: sample)
    ctx._cache["embedder"] = (ctx.settings.embedder, minilm)
    w = MainWindow(ctx)  # first_run follows the settings: not done yet
    qtbot.addWidget(w)
    w.show()
    done: list[str] = []
    w.corpora.indexed.connect(done.append)
    qtbot.waitUntil(lambda: "sample" in done, timeout=60_000)
    dialog = w.guide.dialog  # the model chooser, which says the sample is being indexed
    assert (
        dialog is not None
        and dialog.isVisible()
        and "sample corpus is added to Corpora" in dialog.findChild(QLabel, "firstRunIntro").text()
    )
    assert AppContext.for_dirs(ctx.data_dir, ctx.config_dir).settings.first_run_done
    assert ctx.library.open("sample").stats()["indexed_files"] == 1


def _scripted_profile(ctx: AppContext, url: str) -> None:
    ctx.profiles.save(EndpointProfile(name="Scripted", kind="custom", base_url=url, model="scripted"))
    ctx.profiles.set_api_key("Scripted", "k-1")


def _ask(w: MainWindow) -> list[tuple[str, str]]:
    ends: list[tuple[str, str]] = []
    w.controller.finished.connect(lambda s, r: ends.append((s, r)))
    w.ask.refresh_profiles()
    w.ask.profile_combo.setCurrentIndex(w.ask.profile_combo.findData("Scripted"))
    w.ask.question_edit.setPlainText(QUESTION)
    w.ask.send()
    return ends


def test_run_fills_every_view_then_reopen_and_replay(qtbot: Any, indexed: AppContext) -> None:
    w = _window(qtbot, indexed)
    with ScriptedOpenAI(SCRIPT, api_key="k-1") as srv:
        _scripted_profile(indexed, srv.base_url)
        ends = _ask(w)
        qtbot.waitUntil(lambda: bool(ends), timeout=30_000)
    status, run_id = ends[0]
    assert status == "answered"
    kinds = sorted(n.info.kind for n in w.graph_scene.node_items())
    assert kinds.count("crop") == 2 and "search" in kinds and "answer" in kinds
    live_nodes = {n.node_id for n in w.graph_scene.node_items()}
    qtbot.waitUntil(lambda: w.evidence.current_page() is not None, timeout=5000)
    page = w.evidence.current_page()
    assert page is not None and len(page.regions) == 2
    qtbot.waitUntil(
        lambda: w.history.selected_run_ids() is not None and w.history.select_run(run_id), timeout=5000
    )

    # zoom shortcuts act on the graph
    before = w.graph_view.transform().m11()
    qtbot.keySequence(w, QKeySequence("Ctrl+="))
    assert w.graph_view.transform().m11() > before

    # reopen: same graph, same transcript, evidence back
    w._clear_views()
    assert not w.graph_scene.node_items()
    w.open_run(run_id)
    qtbot.waitUntil(lambda: {n.node_id for n in w.graph_scene.node_items()} == live_nodes, timeout=5000)
    assert "450 kg" in w.ask.view.toPlainText()
    assert w.evidence.current_page() is not None

    # replay step by step through the same views
    w.replay_run(run_id)
    qtbot.waitUntil(lambda: w.replay_bar.isVisible() and w.replay.total > 0, timeout=5000)
    assert not w.graph_scene.node_items() or len(w.graph_scene.node_items()) < len(live_nodes)
    w.replay.step()
    w.replay.step()
    partial = len(w.graph_scene.node_items())
    assert 0 < partial < len(live_nodes)
    w.replay.seek_end()
    assert {n.node_id for n in w.graph_scene.node_items()} == live_nodes


def test_closing_mid_run_saves_it_as_cancelled(qtbot: Any, indexed: AppContext) -> None:
    w = _window(qtbot, indexed)
    with ScriptedOpenAI([SCRIPT[0], {"hang": 30, "content": "never"}], api_key="k-1") as srv:
        _scripted_profile(indexed, srv.base_url)
        _ask(w)
        assert srv.wait_requests(2, timeout=20)
        t0 = time.monotonic()
        w.close()
        assert time.monotonic() - t0 < 8
    (run,) = indexed.runs.list()
    assert run.status == "cancelled"


def test_no_display_gives_clear_advice() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    proc = subprocess.run(
        [sys.executable, "-m", "vrag_desktop"], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 2
    assert "no display" in proc.stderr and "xvfb-run" in proc.stderr


def test_the_app_sets_openmps_wait_policy_before_torch_loads(tmp_path: Path) -> None:
    """torch's OpenMP runtime reads ``OMP_WAIT_POLICY`` once, when torch is first imported (by the
    warm-up, or by the first launch's indexing of the sample corpus, whichever comes first): the
    app's main() must have set it (workers that sleep, not spin, beside the window) by then. The
    child records the variable at the moment anything first looks torch up, in any thread."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "VRAG_DESKTOP_STARTUP_PROBE": "1"}
    env.pop("OMP_WAIT_POLICY", None)
    code = f"""
import importlib.abc, os, sys
seen = []
class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" and not seen:
            seen.append(os.environ.get("OMP_WAIT_POLICY"))
        return None
sys.meta_path.insert(0, Watch())
from vrag_desktop.qt.app import main
rc = main(data_dir={str(tmp_path / "d")!r})
import torch
print("omp at torch's import", seen[0], rc)
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "omp at torch's import PASSIVE 0"


def test_gui_command_opens_a_window(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "VRAG_DESKTOP_STARTUP_PROBE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "vrag_desktop", "--data-dir", str(tmp_path / "d"), "gui"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "window-visible" in proc.stdout
