"""History panel and replay on real saved runs (RunRecorder on disk, real events, real exports)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtGui import QColor, QImage

from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    BBox,
    ContentDelta,
    Crop,
    Evidence,
    GraphChanged,
    GraphNode,
    HitRef,
    ImageShown,
    SearchResults,
    SearchStarted,
    ThinkDelta,
    Timing,
    Usage,
)
from vrag_desktop.core.run.store import RunStore
from vrag_desktop.qt.history.history_panel import HistoryPanel
from vrag_desktop.qt.history.replay import ReplayBar, ReplayController
from vrag_desktop.qt.history.run_table import ANSWER, MODEL, QUESTION, STATUS, TIME

HOUR = 3600.0


def _png(path: Path, w: int = 120, h: int = 160) -> str:
    img = QImage(w, h, QImage.Format.Format_RGB32)
    img.fill(QColor("#dde3ea"))
    assert img.save(str(path))
    return str(path)


def vrag_events(image_dir: Path, source: str = "/docs/robots.pdf") -> list[AgentEvent]:
    """A VRAG run as the agent records it: think, search, look at a page, crop, answer."""
    page = _png(image_dir / "page-2.png")
    crop = _png(image_dir / "crop-1.png", 60, 40)
    hit = HitRef(
        score=0.82, name="robots.pdf", source=source, modality="image", image=page, page=2, label="Picture 1"
    )
    graph = (
        GraphNode("q", "root", label="question"),
        GraphNode("s1", "search", ("q",), query="Atlas robot payload"),
    )
    look = {"source": source, "page": 2}
    region = (20, 30, 100, 120)
    return [
        ThinkDelta(step=1, time=0.1, content="I need the spec page."),
        ContentDelta(step=1, time=0.2, content="<think>I need the spec page.</think>\n"),
        ContentDelta(step=1, time=0.3, content="<search>Atlas robot payload</search>"),
        SearchStarted(step=1, time=0.4, content="Atlas robot payload"),
        SearchResults(step=1, time=0.6, content="Atlas robot payload", hits=(hit,), shown=(0,)),
        ImageShown(step=1, time=0.7, image=page, raw=page, width=120, height=160, **look),
        GraphChanged(step=1, time=0.7, nodes=graph),
        Timing(step=1, time=0.8, model_seconds=0.5, tool_seconds=0.3),
        ContentDelta(
            step=2, time=3.8, content="<think>Zoom into the table.</think>\n<bbox>[20, 30, 100, 120]</bbox>"
        ),
        BBox(step=2, time=3.9, content="[20, 30, 100, 120]", box=(20.0, 30.0, 100.0, 120.0)),
        Crop(step=2, time=4.0, region=region, raw=page, image=crop, width=60, height=40, **look),
        Timing(step=2, time=4.1, model_seconds=3.0, tool_seconds=0.1),
        ContentDelta(step=3, time=9.0, content="<think>It says 450 kg.</think>\n<answer>450 kg</answer>"),
        Answer(step=3, time=9.1, content="450 kg", evidence=(Evidence(image=crop, region=region, **look),)),
        Usage(step=3, time=9.2, prompt_tokens=900, completion_tokens=60),
    ]


def record(
    store: RunStore,
    question: str,
    events_for: Any,
    *,
    agent: str = "vrag",
    model: str = "qwen2.5-vl-7b",
    status: str | None = None,
    hours_ago: float = 0.0,
    crash: bool = False,
) -> str:
    """One saved run. ``crash``: the process dies before ``finish`` (an interrupted run)."""
    rec = store.recorder(agent, question, {"model": model, "top_k": 3})
    rec.summary.started_at = time.time() - hours_ago * HOUR
    for ev in events_for(rec.image_dir):
        rec.record(ev)
    if crash:
        rec._write_meta()  # run.json as written at the (back-dated) start: status "running"
        rec._events.close()  # then the process died: no finish()
        old = time.time() - 600
        os.utime(rec.dir / "events.jsonl", (old, old))
    else:
        rec.finish(status)
    return rec.id


def cancelled_events(image_dir: Path) -> list[AgentEvent]:
    stop = AgentError(step=2, time=2.0, content="Stopped by you", kind="cancelled", recoverable=False)
    return [*vrag_events(image_dir)[:6], stop]


def interrupted_events(image_dir: Path) -> list[AgentEvent]:
    return vrag_events(image_dir)[:8]


def make_runs(store: RunStore) -> dict[str, str]:
    """A realistic history: answered, cancelled and interrupted VRAG runs plus a failed one."""
    return {
        "answered": record(store, "How heavy a load can the Atlas robot carry?", vrag_events, hours_ago=1),
        "cancelled": record(
            store, "What is the battery life of the Atlas robot?", cancelled_events, hours_ago=3
        ),
        "interrupted": record(
            store, "Summarise the safety section", interrupted_events, hours_ago=26, crash=True
        ),
        "failed": record(
            store,
            "Which supplier makes the grippers?",
            lambda d: [
                AgentError(
                    step=1, time=0.5, content="endpoint unreachable", kind="endpoint", recoverable=False
                )
            ],
            model="gpt-4o",
            hours_ago=50,
        ),
    }


@pytest.fixture
def runs(ctx: Any) -> dict[str, str]:
    return make_runs(ctx.runs)


@pytest.fixture
def panel(ctx: Any, runs: dict[str, str], qtbot: Any) -> HistoryPanel:
    p = HistoryPanel(ctx)
    qtbot.addWidget(p)
    p.resize(1100, 400)
    qtbot.waitUntil(lambda: p.model.rowCount() == len(runs), timeout=5000)
    return p


def _column(panel: HistoryPanel, col: int) -> list[str]:
    return [panel.proxy.index(r, col).data() for r in range(panel.proxy.rowCount())]


def _row_of(panel: HistoryPanel, run_id: str) -> int:
    ids = [panel.proxy.index(r, 0).data(Qt.ItemDataRole.UserRole) for r in range(panel.proxy.rowCount())]
    return ids.index(run_id)


# ------------------------------------------------------------------ listing
def test_lists_every_run_newest_first_with_its_status(
    panel: HistoryPanel, runs: dict[str, str], ctx: Any
) -> None:
    ids = [panel.proxy.index(r, 0).data(Qt.ItemDataRole.UserRole) for r in range(panel.proxy.rowCount())]
    assert ids == [runs["answered"], runs["cancelled"], runs["interrupted"], runs["failed"]]
    assert ids == [r.id for r in ctx.runs.list()]
    assert _column(panel, STATUS) == ["answered", "cancelled", "interrupted", "failed"]
    assert _column(panel, ANSWER)[0] == "450 kg"
    assert _column(panel, MODEL)[3] == "gpt-4o"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", t) for t in _column(panel, TIME))
    assert _column(panel, TIME)[0] == time.strftime(
        "%Y-%m-%d %H:%M", time.localtime(ctx.runs.summary(ids[0]).started_at)
    )
    assert panel.status_label.text() == "4 runs"
    assert panel.stack.currentWidget() is panel.table


def test_refresh_picks_up_a_new_run_and_reports_unreadable_folders(
    panel: HistoryPanel, ctx: Any, qtbot: Any
) -> None:
    newest = record(ctx.runs, "A brand new question", vrag_events)
    broken = record(ctx.runs, "to be damaged", vrag_events, hours_ago=100)
    (ctx.runs.root / broken / "run.json").write_text("{ torn", encoding="utf-8")
    with qtbot.waitSignal(panel.refreshed, timeout=5000) as sig:
        panel.refresh_button.click()
    assert sig.args == [5]
    assert panel.proxy.index(0, 0).data(Qt.ItemDataRole.UserRole) == newest
    assert panel.skipped == 1
    assert "1 unreadable run folder skipped" in panel.status_label.text()


def test_a_finished_run_is_added_in_place_keeping_the_selection(
    panel: HistoryPanel, runs: dict[str, str], ctx: Any, qtbot: Any
) -> None:
    """After each run the list is read again: the new run is inserted (no reset of the table, which
    re-sorted every row through Python), and the run a person had selected stays selected."""
    flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
    panel.table.selectionModel().select(panel.proxy.index(_row_of(panel, runs["cancelled"]), 0), flags)
    resets: list[bool] = []
    panel.model.modelReset.connect(lambda: resets.append(True))
    newest = record(ctx.runs, "A brand new question", vrag_events)
    with qtbot.waitSignal(panel.refreshed, timeout=5000):
        panel.refresh()
    assert resets == []
    assert panel.proxy.index(0, 0).data(Qt.ItemDataRole.UserRole) == newest
    assert panel.selected_run_ids() == [runs["cancelled"]]
    assert panel.status_label.text() == "5 runs"


def test_the_muted_columns_follow_a_theme_switch(panel: HistoryPanel, qapp: Any) -> None:
    """The table's cells are computed once and kept by Qt; a theme switch computes them again."""
    from vrag_desktop.qt.infra import theme

    try:
        for name in ("light", "dark"):
            theme.apply_theme(qapp, name)
            fg = panel.proxy.index(0, TIME).data(Qt.ItemDataRole.ForegroundRole)
            assert QColor(fg) == theme.color("muted"), name
    finally:
        theme.apply_theme(qapp, "system")


def test_empty_history_says_how_to_get_runs(ctx: Any, qtbot: Any) -> None:
    p = HistoryPanel(ctx)
    qtbot.addWidget(p)
    with qtbot.waitSignal(p.refreshed, timeout=5000):
        pass
    assert p.stack.currentWidget() is p.empty_label
    assert "No saved runs yet" in p.empty_label.text()


def test_filter_matches_question_answer_and_model(panel: HistoryPanel, runs: dict[str, str]) -> None:
    panel.filter_edit.setText("battery")
    assert _column(panel, QUESTION) == ["What is the battery life of the Atlas robot?"]
    panel.filter_edit.setText("450")  # the answer
    assert [
        panel.proxy.index(r, 0).data(Qt.ItemDataRole.UserRole) for r in range(panel.proxy.rowCount())
    ] == [runs["answered"]]
    panel.filter_edit.setText("GPT-4O")  # the model, any case
    assert _column(panel, QUESTION) == ["Which supplier makes the grippers?"]
    panel.filter_edit.setText("atlas robot")  # every word must match
    assert panel.proxy.rowCount() == 2 and panel.status_label.text() == "2 of 4 runs match"
    panel.filter_edit.setText("nothing like this")
    assert panel.proxy.rowCount() == 0
    panel.filter_edit.setText("robot atlas")  # in any order
    assert panel.proxy.rowCount() == 2
    panel.filter_edit.setText("robot?")  # a question mark is text: only the question ending so
    assert _column(panel, QUESTION) == ["What is the battery life of the Atlas robot?"]
    for typed in ("(atlas", "[", "*", "\\", ".*"):  # taken as text, never as a pattern
        panel.filter_edit.setText(typed)
        assert panel.proxy.rowCount() == 0, typed
    panel.filter_edit.setText("  ")
    assert panel.proxy.rowCount() == 4
    panel.filter_edit.clear()
    assert panel.proxy.rowCount() == 4


# ------------------------------------------------------------------ open / replay signals
def test_double_click_opens_that_run(panel: HistoryPanel, runs: dict[str, str], qtbot: Any) -> None:
    panel.show()
    row = _row_of(panel, runs["cancelled"])
    rect = panel.table.visualRect(panel.proxy.index(row, QUESTION))
    qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    opened: list[str] = []
    panel.openRequested.connect(opened.append)
    qtbot.mouseDClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert opened == [runs["cancelled"]]  # once, with that run's id
    with qtbot.waitSignal(panel.replayRequested, timeout=2000) as sig:
        panel.replay_button.click()
    assert sig.args == [runs["cancelled"]]


def test_open_and_replay_need_exactly_one_selected_run(panel: HistoryPanel, runs: dict[str, str]) -> None:
    assert not panel.open_button.isEnabled() and not panel.export_button.isEnabled()
    panel.table.selectAll()
    assert not panel.open_button.isEnabled() and not panel.replay_button.isEnabled()
    assert panel.export_button.isEnabled() and panel.delete_button.isEnabled()
    assert panel.select_run(runs["failed"])
    assert panel.open_button.isEnabled() and panel.selected_run_ids() == [runs["failed"]]


# ------------------------------------------------------------------ replay
def test_replay_steps_stop_at_step_boundaries(ctx: Any, runs: dict[str, str], qtbot: Any) -> None:
    events = list(ctx.runs.events(runs["answered"]))
    c = ReplayController(events=events)
    got: list[AgentEvent] = []
    positions: list[tuple[int, int]] = []
    c.agentEvent.connect(got.append)
    c.position.connect(lambda a, b: positions.append((a, b)))
    c.step()
    assert got and {e.step for e in got} == {1} and got == events[: len(got)]
    assert events[len(got)].step == 2  # stopped exactly at the boundary
    assert positions[-1] == (len(got), len(events))
    c.step()
    assert {e.step for e in got[-4:]} == {2} and events[len(got)].step == 3
    with qtbot.waitSignal(c.finished, timeout=1000):
        c.step()
    assert got == events and c.at_end()
    c.step()  # nothing left: no error, nothing emitted
    assert got == events


def test_seek_end_emits_everything_as_recorded(ctx: Any, runs: dict[str, str], qtbot: Any) -> None:
    events = list(ctx.runs.events(runs["answered"]))
    c = ReplayController(events=events)
    got: list[AgentEvent] = []
    c.agentEvent.connect(got.append)
    c.step()
    with qtbot.waitSignal(c.finished, timeout=1000):
        c.seek_end()
    assert got == list(ctx.runs.events(runs["answered"]))
    restarted: list[bool] = []
    c.restarted.connect(lambda: restarted.append(True))
    c.reset()
    assert restarted == [True] and c.pos == 0
    got.clear()
    c.seek_end()
    assert got == events


def test_play_paces_events_by_recorded_gaps_capped(ctx: Any, runs: dict[str, str], qtbot: Any) -> None:
    events = list(ctx.runs.events(runs["answered"]))
    c = ReplayController(events=events, speed=4.0, max_gap_s=1.0)
    expected = sum(c.gap_before(i) for i in range(len(events))) / 4.0
    # 1.2 s of short gaps, and the 3 s and 4.9 s pauses capped to 1 s each, at 4×
    assert expected == pytest.approx((1.2 + 1.0 + 1.0) / 4.0)
    got: list[AgentEvent] = []
    c.agentEvent.connect(got.append)
    t0 = time.monotonic()
    with qtbot.waitSignal(c.finished, timeout=5000):
        c.play()
    elapsed = time.monotonic() - t0
    assert got == events
    assert expected * 0.8 < elapsed < expected + 1.0


def test_pause_holds_and_play_resumes(ctx: Any, runs: dict[str, str], qtbot: Any) -> None:
    events = list(ctx.runs.events(runs["answered"]))
    c = ReplayController(events=events, speed=2.0)
    got: list[AgentEvent] = []
    c.agentEvent.connect(got.append)
    c.play()
    qtbot.waitUntil(lambda: any(e.step == 2 for e in got), timeout=3000)
    c.pause()
    held = len(got)
    assert not c.is_playing and held < len(events)
    qtbot.wait(700)
    assert len(got) == held
    c.set_speed(10.0)
    with qtbot.waitSignal(c.finished, timeout=3000):
        c.play()
    assert got == events


def test_replay_bar_drives_the_controller(ctx: Any, runs: dict[str, str], qtbot: Any) -> None:
    events = list(ctx.runs.events(runs["answered"]))
    c = ReplayController(events=events)
    bar = ReplayBar(c)
    qtbot.addWidget(bar)
    got: list[AgentEvent] = []
    c.agentEvent.connect(got.append)
    assert not bar.restart_button.isEnabled() and bar.play_button.text() == "Play"
    bar.step_button.click()
    assert {e.step for e in got} == {1}
    assert bar.position_label.text() == f"Step 1 of 3 · event {len(got)} of {len(events)}"
    bar.speed_combo.setCurrentIndex(bar.speed_combo.findText("10×"))
    assert c.speed == 10.0
    bar.play_button.click()
    assert c.is_playing and bar.play_button.text() == "Pause"
    bar.play_button.click()
    assert not c.is_playing and bar.play_button.text() == "Play"
    bar.end_button.click()
    assert got == events and not bar.end_button.isEnabled() and bar.position_label.text().endswith("· end")
    bar.restart_button.click()
    assert c.pos == 0 and bar.step_button.isEnabled()


# ------------------------------------------------------------------ export / delete
TOP_SPEED = "What is the Atlas top speed?"


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    """A unified dataset labelling the two answered questions (ground truth comes from here)."""
    from vrag_desktop.core.datasets import DatasetItem, write_unified

    path = tmp_path / "labels" / "robots.json"
    write_unified(
        path,
        [
            DatasetItem("q1", "How heavy a load can the Atlas robot carry?", "450 kg", "robots.pdf", (2,)),
            DatasetItem("q2", TOP_SPEED, "2.5 m/s", "robots.pdf", (2,)),
        ],
    )
    return path


def _answered_pair(panel: HistoryPanel, runs: dict[str, str], ctx: Any, qtbot: Any) -> list[str]:
    second = record(ctx.runs, TOP_SPEED, vrag_events, hours_ago=0.5)
    with qtbot.waitSignal(panel.refreshed, timeout=5000):
        panel.refresh()
    ids = [runs["answered"], second]
    panel.table.clearSelection()
    sel = panel.table.selectionModel()
    for rid in ids:
        flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
        sel.select(panel.proxy.index(_row_of(panel, rid), 0), flags)
    assert sorted(panel.selected_run_ids()) == sorted(ids)
    return ids


def test_export_takes_ground_truth_from_the_chosen_dataset(
    panel: HistoryPanel,
    runs: dict[str, str],
    ctx: Any,
    qtbot: Any,
    reports: list,
    tmp_path: Path,
    labels: Path,
) -> None:
    import pyarrow.parquet as pq

    ids = _answered_pair(panel, runs, ctx, qtbot)
    asked: list[tuple[str, str]] = []
    panel.choose_dataset = lambda title, start: asked.append((title, start)) or str(labels)
    saved: list[str] = []

    def choose(title: str, default: str, file_filter: str) -> str:
        saved.append(default)
        return str(tmp_path / "out" / ("export" + Path(default).suffix))

    panel.choose_save_path = choose
    panel.export_actions["rl"].trigger()
    qtbot.waitUntil(lambda: bool(reports), timeout=10000)
    assert reports[-1][:2] == ("info", "Export finished")
    assert reports[-1][2] == f"Exported 2 record(s) to {tmp_path / 'out' / 'export.parquet'}"
    assert "Dataset" in asked[0][0] and saved[0].endswith(".parquet")
    rows = pq.read_table(tmp_path / "out" / "export.parquet").to_pylist()
    truth = {r["extra_info"]["question"]: r["reward_model"]["ground_truth"] for r in rows}
    assert truth == {"How heavy a load can the Atlas robot carry?": "450 kg", TOP_SPEED: "2.5 m/s"}
    assert all(r["file_name"] == "robots.pdf" and r["reference_page"] == [2] for r in rows)
    # the next export starts from the dataset chosen last
    panel.export_actions["sft"].trigger()
    qtbot.waitUntil(lambda: len(reports) == 2, timeout=10000)
    assert asked[1][1] == str(labels)
    samples = json.loads((tmp_path / "out" / "export.json").read_text())
    assert sorted(s["id"] for s in samples) == sorted(ids)
    assert reports[-1][0] == "info" and reports[-1][2].startswith("Exported 2 sample(s)")


def test_unlabelled_runs_are_refused_by_name_or_left_out_when_asked(
    panel: HistoryPanel,
    runs: dict[str, str],
    ctx: Any,
    qtbot: Any,
    reports: list,
    tmp_path: Path,
    labels: Path,
) -> None:
    panel.table.selectAll()  # the answered run is labelled; cancelled, interrupted, failed are not
    panel.choose_dataset = lambda *a: str(labels)
    out = tmp_path / "rl.jsonl"
    panel.choose_save_path = lambda *a: str(out)
    questions: list[str] = []
    panel.confirm = lambda title, text: questions.append(text) or False
    panel.export_actions["rl-jsonl"].trigger()
    qtbot.waitUntil(lambda: bool(reports), timeout=10000)
    level, title, message = reports[-1]
    assert (level, title) == ("warning", "Export refused") and f"{out} was not written" in message
    assert "3 run(s) have no usable label" in questions[0] and runs["failed"] in questions[0]
    assert not out.exists()

    panel.confirm = lambda title, text: True
    panel.export_actions["rl-jsonl"].trigger()
    qtbot.waitUntil(lambda: len(reports) == 2, timeout=10000)
    level, title, message = reports[-1]
    assert (level, title) == ("warning", "Export finished")
    assert "Exported 1 record(s)" in message and "Left out 3 unlabelled run(s)" in message
    (line,) = out.read_text().splitlines()
    assert json.loads(line)["reward_model"]["ground_truth"] == "450 kg"


def test_export_of_nothing_exportable_warns(
    panel: HistoryPanel, runs: dict[str, str], qtbot: Any, reports: list, tmp_path: Path, labels: Path
) -> None:
    panel.select_run(runs["cancelled"])
    panel.choose_dataset = lambda *a: str(labels)
    panel.choose_save_path = lambda *a: str(tmp_path / "none.json")
    panel.export_actions["sft"].trigger()
    qtbot.waitUntil(lambda: bool(reports), timeout=10000)
    level, title, message = reports[-1]
    assert level == "warning" and title == "Nothing exported" and "did not answer" in message
    assert not (tmp_path / "none.json").exists()


def test_export_cancelled_in_either_chooser_writes_nothing(
    panel: HistoryPanel, runs: dict[str, str], ctx: Any, qtbot: Any, reports: list, labels: Path
) -> None:
    panel.select_run(runs["answered"])
    saved: list[str] = []
    panel.choose_save_path = lambda title, default, filt: saved.append(default) and None
    panel.choose_dataset = lambda *a: None
    panel.export_actions["rl"].trigger()
    qtbot.wait(100)
    assert saved == []  # no dataset, no question about where to write
    panel.choose_dataset = lambda *a: str(labels)
    panel.export_actions["rl"].trigger()
    qtbot.wait(200)
    assert saved and Path(saved[0]).parent == ctx.data_dir / "exports"
    assert reports == [] and not (ctx.data_dir / "exports").exists()


def test_export_to_an_unwritable_place_is_a_clear_error(
    panel: HistoryPanel, runs: dict[str, str], qtbot: Any, reports: list, tmp_path: Path, labels: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    panel.select_run(runs["answered"])
    panel.choose_dataset = lambda *a: str(labels)
    panel.choose_save_path = lambda *a: str(blocker / "rl.parquet")
    panel.export_actions["rl"].trigger()
    qtbot.waitUntil(lambda: bool(reports), timeout=10000)
    level, title, _message = reports[-1]
    assert level == "error" and str(blocker / "rl.parquet") in title


def test_a_malformed_dataset_is_a_clear_error(
    panel: HistoryPanel, runs: dict[str, str], qtbot: Any, reports: list, tmp_path: Path
) -> None:
    torn = tmp_path / "torn.json"
    torn.write_text("{ torn", encoding="utf-8")
    panel.select_run(runs["answered"])
    panel.choose_dataset = lambda *a: str(torn)
    panel.choose_save_path = lambda *a: str(tmp_path / "rl.parquet")
    panel.export_actions["rl"].trigger()
    qtbot.waitUntil(lambda: bool(reports), timeout=10000)
    level, title, message = reports[-1]
    assert (level, title) == ("error", "Cannot use the dataset torn.json") and "torn.json" in message
    assert not (tmp_path / "rl.parquet").exists()


def test_delete_only_after_confirmation(
    panel: HistoryPanel, runs: dict[str, str], ctx: Any, qtbot: Any
) -> None:
    questions: list[str] = []
    panel.confirm = lambda title, text: questions.append(text) or False
    panel.select_run(runs["interrupted"])
    panel.delete_button.click()
    qtbot.wait(100)
    assert questions and "cannot be undone" in questions[0]
    assert runs["interrupted"] in [r.id for r in ctx.runs.list()]
    assert panel.model.rowCount() == 4

    panel.confirm = lambda title, text: True
    deleted: list[list[str]] = []
    panel.runsDeleted.connect(deleted.append)
    with qtbot.waitSignal(panel.refreshed, timeout=5000) as sig:
        panel.delete_action.trigger()
    assert sig.args == [3] and deleted == [[runs["interrupted"]]]
    assert runs["interrupted"] not in [r.id for r in ctx.runs.list()]
    assert not (ctx.runs.root / runs["interrupted"]).exists()
