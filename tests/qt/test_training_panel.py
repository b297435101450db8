"""The Training panel with a real trainer: a tiny Qwen2-VL trained on CPU for a few steps, launched
from the panel through the supervisor in the trainer's env (``.venv-trainer``), watched (plotted
points), stopped at a step boundary, re-attached from a fresh panel, resumed; plus the bad inputs
(a torn metrics line, a crash at start, the env missing, delete asks first) and 10,000 steps."""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from toy_training import DOCS, EXAMPLES, TAGS, toy_run

from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun


@functools.cache
def _trainer_python() -> tuple[str | None, str]:
    from vrag_desktop.core.runtime.trainer_env import find_trainer_python

    python = find_trainer_python(None)
    if python is None or not python.exists():
        return None, "no trainer environment (.venv-trainer; scripts/setup.sh or 'vrag-desktop train env')"
    probe = subprocess.run(
        [str(python), "-c", "import vrag_trainer, trl"], capture_output=True, text=True, timeout=120
    )
    if probe.returncode != 0:
        return None, f"the trainer environment {python} is broken: {probe.stderr.strip()[-200:]}"
    return str(python), ""


@pytest.fixture
def trainer_python(monkeypatch: pytest.MonkeyPatch) -> str:
    python, why = _trainer_python()
    if python is None:
        pytest.skip(why)
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", python)
    for k, v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("OMP_NUM_THREADS", "1")):
        monkeypatch.setenv(k, v)
    return python


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import tiny_vl_models

    out = tmp_path_factory.mktemp("models") / "tiny-qwen2-vl"
    return tiny_vl_models.build_tiny_qwen2_vl(out, with_lm_head=True, extra_tokens=TAGS)  # type: ignore[no-any-return]


@pytest.fixture
def train_config(ctx: Any, minilm: Any, make_pdf: Any, tiny_model: Path, tmp_path: Path) -> TrainConfig:
    """A 6-step GRPO config on a two-PDF corpus indexed in the panel's data dir."""
    from conftest import index_paths

    alpha, beta = (make_pdf(name, pages) for name, pages in DOCS.items())
    index_paths(ctx.library, "toy", [alpha, beta], minilm)
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps({"examples": EXAMPLES}), encoding="utf-8")
    return TrainConfig.from_mapping(
        toy_run(
            model=str(tiny_model),
            dataset=str(dataset),
            data_dir=str(ctx.data_dir),
            max_turns=2,
            max_response_length=24,
            max_model_len=2048,
            max_steps=6,
        )
    )


def _panel(qtbot: Any, ctx: Any) -> Any:
    from vrag_desktop.qt.training.training_panel import TrainingPanel

    panel = TrainingPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(1000, 800)
    panel.show()  # as a person sees it: hidden, neither the list nor the run view polls
    return panel


def _status(panel: Any, root: Path) -> str:
    row = panel.row(root)
    return row.status if row is not None else ""


@pytest.mark.slow
def test_real_run_plots_stops_reattaches_and_resumes(
    qtbot: Any, ctx: Any, trainer_python: str, train_config: TrainConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.qt.training import training_panel

    panel = _panel(qtbot, ctx)
    root = panel.launch_new(train_config, ctx.layout.training / "tiny")
    assert root is not None
    qtbot.waitUntil(lambda: panel.view.root == root, timeout=10_000)
    # watch: the first step's points reach the reward curve (read off the GUI thread)
    qtbot.waitUntil(lambda: panel.view.plots.point_count("reward") > 0, timeout=300_000)
    assert panel.view.status_text == "running"
    asked: list[str] = []
    monkeypatch.setattr(training_panel, "confirm", lambda *a: asked.append(a[1]) or True)
    assert panel.delete_run(root) is None and not asked and root.exists()  # refused while running

    # close the panel, leaving the run going; a fresh panel finds it again and keeps streaming
    panel.shutdown("leave")
    panel.close()
    second = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: _status(second, root) == "running" and second.view.root == root, timeout=20_000)
    assert second.row(root).pid is not None  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: second.view.plots.point_count("reward") > 0, timeout=20_000)
    assert second.view.stop_button.isEnabled() and not second.view.delete_button.isEnabled()

    # stop: a clean stop at the step boundary
    second.stop_run(root)
    qtbot.waitUntil(lambda: TrainRun(root).state().get("status") in ("stopped", "finished"), timeout=300_000)
    qtbot.waitUntil(lambda: _status(second, root) == "stopped", timeout=30_000)
    run = TrainRun(root)
    assert run.state()["status"] == "stopped"
    stopped_at = int(run.state()["step"])
    assert run.last_checkpoint() is not None
    # resume: the run goes on to max_steps, and the plot gets its further steps
    qtbot.waitUntil(lambda: second.view.resume_button.isEnabled(), timeout=10_000)
    second.resume_run(root)
    qtbot.waitUntil(lambda: run.state().get("status") == "finished", timeout=300_000)
    qtbot.waitUntil(lambda: second.view.rows_seen >= 6 > stopped_at, timeout=20_000)
    # the samples: listed per run, and one opens through the app's replay path
    second.view.tabs.setCurrentWidget(second.view.samples)
    qtbot.waitUntil(lambda: second.view.sample_count() > 0, timeout=20_000)
    with qtbot.waitSignal(second.openSampleRequested, timeout=5_000) as sig:
        second.view.open_sample(0)
    samples_root, run_id = sig.args
    from vrag_desktop.core.run.store import RunStore

    assert RunStore(samples_root).summary(run_id).settings["training"]["step"] >= 1
    qtbot.waitUntil(lambda: _status(second, root) == "finished", timeout=20_000)
    # the state file says finished a moment before the supervisor's task has seen the process end
    qtbot.waitUntil(lambda: not second.processes.is_ours(root), timeout=20_000)
    # delete asks first
    assert second.delete_run(root) is not None and asked
    qtbot.waitUntil(lambda: not root.exists(), timeout=20_000)
    second.shutdown("leave")


def _fake_run(root: Path, rows: int, torn: str = "") -> TrainRun:
    run = TrainRun.create(root, TrainConfig.from_mapping({"model": "m", "dataset": "d.json"}))
    run.write_state(status="stopped", step=rows)
    for i in range(1, rows + 1):
        run.append_metrics({"step": i, "reward": i / 10, "loss": 1.0 / i, "kl": 0.01 * i})
    if torn:
        with open(run.metrics_path, "a", encoding="utf-8") as fh:
            fh.write(torn)
    return run


def test_torn_metrics_line_waits_for_its_end(qtbot: Any, ctx: Any) -> None:
    run = _fake_run(ctx.layout.training / "torn", 3, torn='{"step": 4, "rew')
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.view.root == run.root, timeout=10_000)
    qtbot.waitUntil(lambda: panel.view.rows_seen == 3, timeout=10_000)
    qtbot.waitUntil(lambda: panel.view.plots.built, timeout=10_000)  # made once there are rows
    panel.view.plots.redraw()
    assert panel.view.plots.point_count("reward") == 3
    with open(run.metrics_path, "a", encoding="utf-8") as fh:
        fh.write('ard": 0.9}\n')
    qtbot.waitUntil(lambda: panel.view.rows_seen == 4, timeout=10_000)
    panel.view.plots.redraw()
    assert panel.view.plots.point_count("reward") == 4
    assert _status(panel, run.root) == "stopped"
    panel.shutdown()


def test_a_killed_run_reads_crashed_with_where_it_resumes(qtbot: Any, ctx: Any) -> None:
    from test_training_crash import crashed_run

    run = crashed_run(ctx.layout.training / "killed")
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.view.root == run.root, timeout=10_000)
    qtbot.waitUntil(lambda: _status(panel, run.root) == "crashed", timeout=10_000)  # the CLI's word
    qtbot.waitUntil(lambda: panel.view.status_text == "crashed", timeout=10_000)
    assert panel.view.status.text().startswith("crashed at step 3 (resumable from step 2)")
    assert panel.view.resume_button.isEnabled() and not panel.view.stop_button.isEnabled()
    panel.shutdown()


def test_delete_asks_first(qtbot: Any, ctx: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from vrag_desktop.qt.training import training_panel

    run = _fake_run(ctx.layout.training / "old", 2)
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.row(run.root) is not None, timeout=10_000)
    asked: list[str] = []
    monkeypatch.setattr(training_panel, "confirm", lambda *a: asked.append(a[2]) or False)
    assert panel.delete_run(run.root) is None and asked and run.root.exists()
    monkeypatch.setattr(training_panel, "confirm", lambda *a: True)
    task = panel.delete_run(run.root)
    assert task is not None and task.wait(10)
    qtbot.waitUntil(lambda: panel.row(run.root) is None, timeout=10_000)
    assert not run.root.exists()
    panel.shutdown()


def test_crash_at_start_shows_its_classified_reason(
    qtbot: Any, ctx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "loading the model"\necho "RuntimeError: boom at start" >&2\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(fake))
    panel = _panel(qtbot, ctx)
    cfg = TrainConfig.from_mapping({"model": "m", "dataset": "d.json"})
    root = panel.launch_new(cfg, ctx.layout.training / "crash")
    assert root is not None
    qtbot.waitUntil(lambda: "boom at start" in panel.view.detail.text(), timeout=20_000)
    assert "exit code 1" in panel.view.detail.text()
    assert panel.view.tabs.currentWidget() is panel.view.log_view
    qtbot.waitUntil(lambda: "boom at start" in panel.view.log_view.text(), timeout=10_000)
    panel.shutdown()


def test_a_stopped_run_is_logged_as_stopped(
    qtbot: Any, ctx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop on a trainer that answers as the real one does (SIGTERM: end the step, exit 3): the log's
    last line, the message and the status all say stopped, in words a person reads."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        "trap 'echo \"stopped at step 1\"; exit 3' TERM\n"
        'echo "step 1"\n'
        "while :; do sleep 0.1; done\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(fake))
    panel = _panel(qtbot, ctx)
    cfg = TrainConfig.from_mapping({"model": "m", "dataset": "d.json"})
    root = panel.launch_new(cfg, ctx.layout.training / "stop-me")
    assert root is not None
    qtbot.waitUntil(lambda: "step 1" in panel.view.log_view.text(), timeout=20_000)
    panel.stop_run(root)
    shown = panel.view.detail.text()
    assert "Stopping after the current step" in shown and "5 minutes" in shown
    assert "tree" not in shown and " s)" not in shown
    qtbot.waitUntil(lambda: not panel.processes.is_ours(root), timeout=20_000)
    qtbot.waitUntil(lambda: "=== " in panel.view.log_view.text().splitlines()[-1], timeout=10_000)
    last = panel.view.log_view.text().splitlines()[-1]
    assert "stopped: trainer stopped on request" in last, last
    assert "crashed" not in last and "failed" not in last and "exited" not in last
    assert panel.view.detail.text().startswith("Stopped after a complete step")
    assert panel.messages[root][1] == "info"
    panel.shutdown()


def test_missing_trainer_env_offers_to_create_it(
    qtbot: Any, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.core.runtime import trainer_env
    from vrag_desktop.qt.training import env_box

    monkeypatch.delenv("VRAG_TRAINER_PYTHON", raising=False)
    monkeypatch.setattr(trainer_env, "repo_root", lambda: None)
    panel = _panel(qtbot, ctx)
    panel.show()
    assert panel.env_box.isVisible() and "vrag-desktop train env" in panel.env_box.message.text()
    cfg = TrainConfig.from_mapping({"model": "m", "dataset": "d.json"})
    assert panel.launch_new(cfg, ctx.layout.training / "x") is None  # nothing launched

    made = ctx.layout.trainer_env / "bin" / "python"

    def fake_make(target: Path, cancel: Any, force: bool = False) -> Any:
        yield "Creating the virtual environment"
        made.parent.mkdir(parents=True)
        made.write_text("#!/bin/sh\nexit 0\n")  # its probe for TRL and the trainer passes
        made.chmod(0o755)
        return made

    monkeypatch.setattr(env_box, "make_env", fake_make)
    monkeypatch.setattr(trainer_env, "find_trainer_python", lambda d=None: made if made.exists() else None)
    task = panel.env_box.create_env()
    qtbot.waitUntil(lambda: task.done(), timeout=10_000)
    qtbot.waitUntil(lambda: not panel.env_box.isVisible(), timeout=5_000)
    assert "ready" in panel.env_box.progress.text()
    panel.shutdown()


def test_a_broken_trainer_env_is_named_and_offered_again(
    qtbot: Any, ctx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The env's Python exists but cannot find TRL and the trainer: the banner says broken, names what
    is missing and offers to re-create it (forced: its marker says ready)."""
    from vrag_desktop.qt.training import env_box

    fake = tmp_path / "venv-trainer" / "bin" / "python"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\necho "vrag_trainer trl"\nexit 1\n')
    fake.chmod(0o755)
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(fake))
    panel = _panel(qtbot, ctx)
    panel.show()
    qtbot.waitUntil(lambda: panel.env_state == "broken", timeout=20_000)
    text = panel.env_box.message.text()
    assert panel.env_box.isVisible() and "is broken" in text and "lacks vrag_trainer trl" in text
    assert "vrag-desktop train env --force" in text
    assert panel.env_box.create_button.text() == "Re-create the trainer environment"
    forced: list[bool] = []

    def fake_make(target: Path, cancel: Any, force: bool = False) -> Any:
        forced.append(force)
        yield "Re-creating"
        fake.write_text("#!/bin/sh\nexit 0\n")
        return fake

    monkeypatch.setattr(env_box, "make_env", fake_make)
    task = panel.env_box.create_button.click() or panel.env_box.creating.task
    assert task is not None
    qtbot.waitUntil(lambda: task.done(), timeout=10_000)
    qtbot.waitUntil(lambda: panel.env_state == "ready", timeout=20_000)
    assert forced == [True] and not panel.env_box.isVisible()
    panel.shutdown()


def test_an_unwritable_output_folder_is_refused_with_nothing_left(
    qtbot: Any, ctx: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reports: list[Any]
) -> None:
    import os

    from vrag_desktop.core.training.launch import TrainLaunchError

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(fake))
    panel = _panel(qtbot, ctx)
    cfg = TrainConfig.from_mapping({"model": "m", "dataset": "d.json"})
    blocker = tmp_path / "notes.txt"  # a file where the folder must go: refused for root too
    blocker.write_text("keep me")
    assert panel.launch_new(cfg, blocker / "run") is None
    assert reports[-1][1] == "Cannot start the training"
    assert f"{blocker} is a file, so {blocker / 'run'} cannot be created" in reports[-1][2]
    assert blocker.read_text() == "keep me" and not panel.processes.running()
    if os.geteuid() != 0:  # root writes into read-only folders
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(TrainLaunchError, match="is not writable"):
            panel.start_new(cfg, locked / "run")

    # the folder cannot be made at all (what the check cannot foresee: a race, a quota): the message
    # is the OS's reason with the path, and the folders made for it are gone
    def refuse(self: Path, *a: Any, **k: Any) -> None:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(TrainLaunchError, match="run2 is not writable \\(Permission denied\\)"):
        panel.start_new(cfg, tmp_path / "deep" / "run2")
    monkeypatch.undo()
    assert not (tmp_path / "deep").exists()
    panel.shutdown()


def test_ten_thousand_steps_are_drawn_downsampled_and_one_new_row_pushes_only_its_series(
    qtbot: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why 10,000 steps plot quickly, checked by what is drawn rather than by a clock (the time is
    bench/gui_stall.py's): each curve draws a peak-downsampled, view-clipped copy far smaller than
    its series, and a new row re-sends only the series it touched."""
    from vrag_desktop.qt.training.plots import MetricPlots

    plots = MetricPlots()
    qtbot.addWidget(plots)
    plots.resize(900, 700)
    plots.show()
    rows = [
        {"step": i, "reward": (i % 50) / 50, "loss": 1 / i, "tokens_per_second": 100.0}
        for i in range(1, 10_001)
    ]
    assert not plots.built and plots.point_count("reward") == 0  # nothing made before rows come
    for k in range(0, len(rows), 100):  # as polls bring them: 100 at a time
        plots.add_rows(rows[k : k + 100])
    plots.redraw()  # starts making the plots, one per event-loop turn
    qtbot.waitUntil(lambda: plots.built, timeout=60_000)
    plots.redraw()
    plots.view.repaint()
    assert plots.point_count("reward") == 10_000
    series = plots.series["reward"]
    assert len(series.x) < 2 * series.n  # grown by doubling, not once per row
    for curve in plots.curves["reward"]:
        shown_x, shown_y = curve.getData()
        assert shown_x is not None and 0 < len(shown_x) < 4_000, len(shown_x or ())
        assert max(shown_y) == pytest.approx(49 / 50) and min(shown_y) == 0.0  # peaks kept
    pushed: list[str] = []
    push = plots._push
    monkeypatch.setattr(plots, "_push", lambda key: (pushed.append(key), push(key))[1])
    plots.add_rows([{"step": 10_001, "reward": 0.5}])
    plots.redraw()
    assert pushed == ["reward"] and plots.point_count("reward") == 10_001
    plots.redraw()  # nothing new: nothing sent
    assert pushed == ["reward"]


def test_an_empty_plot_says_why(qtbot: Any) -> None:
    from vrag_desktop.qt.training.plots import MetricPlots

    plots = MetricPlots()
    qtbot.addWidget(plots)
    plots.resize(900, 700)
    plots.show()
    plots.add_rows([{"step": i, "reward": i / 10, "loss": 0.1} for i in range(1, 4)])  # β = 0: no "kl"
    plots.redraw()
    qtbot.waitUntil(lambda: plots.built, timeout=60_000)
    assert plots.titles["KL"].text.startswith("KL — not logged (β = 0")
    assert plots.titles["Loss"].text == "Loss"


def _plots_in_tabs(qtbot: Any) -> tuple[Any, Any]:
    """Plots on the first tab of a shown tab widget, a log on the second (as in the run view)."""
    from PySide6.QtWidgets import QLabel, QTabWidget

    from vrag_desktop.qt.training.plots import MetricPlots

    tabs = QTabWidget()
    qtbot.addWidget(tabs)
    plots = MetricPlots()
    tabs.addTab(plots, "Plots")
    tabs.addTab(QLabel("log"), "Log")
    tabs.resize(900, 700)
    tabs.show()
    return tabs, plots


def test_rows_that_came_while_hidden_are_in_the_first_paint_of_the_shown_tab(qtbot: Any) -> None:
    """Switching back to Plots draws the steps that came meanwhile at once (in the show, before the
    first paint), not a redraw timer later: the switch paints the grid once, with every point."""
    tabs, plots = _plots_in_tabs(qtbot)
    plots.add_rows([{"step": 1, "reward": 0.1}, {"step": 2, "reward": 0.2}])
    plots.redraw()
    qtbot.waitUntil(lambda: plots.built, timeout=60_000)
    plots.redraw()
    assert plots.point_count("reward") == 2
    tabs.setCurrentIndex(1)  # the Log shown: new rows are kept, not drawn
    plots.add_rows([{"step": 3, "reward": 0.3}, {"step": 4, "reward": 0.2}])
    plots.redraw()
    assert plots.point_count("reward") == 2
    tabs.setCurrentIndex(0)  # shown: drawn before any event-loop turn
    assert plots.point_count("reward") == 4
    assert not plots._timer.isActive()  # nothing left for a second draw


def test_plots_are_made_only_when_shown_with_rows_and_in_steps(qtbot: Any) -> None:
    """Making the plot grid and painting it whole at once stalled the GUI 160-330 ms (docs/benchmarks.md
    §5.7): nothing is made while another tab is shown or before rows come, then one step per turn."""

    from vrag_desktop.qt.training.plots import OPTIONAL, PLOTS

    tabs, plots = _plots_in_tabs(qtbot)
    plots.redraw()
    qtbot.wait(50)
    assert not plots.plots  # shown, but no rows yet
    tabs.setCurrentIndex(1)
    plots.add_rows([{"step": i, "reward": i / 10, "kl": 0.1} for i in range(1, 4)])
    plots.redraw()
    qtbot.wait(50)
    assert not plots.plots  # rows, but another tab is shown
    tabs.setCurrentIndex(0)
    plots.redraw()
    assert not plots.plots  # not made in the caller's turn: one per event-loop turn from here
    qtbot.waitUntil(lambda: plots.built, timeout=60_000)
    assert len(plots.plots) == len(PLOTS) and plots.point_count("reward") == 3
    shown = [t for t, p in plots.plots.items() if p.isVisible()]
    assert not set(OPTIONAL) & set(shown) and len(shown) == len(PLOTS) - len(OPTIONAL)  # no GPU, no DAPO rows
    plots.add_rows([{"step": 4, "reward": 0.4, "gpu_memory_gb": 1.5}])
    plots.redraw()
    assert plots.point_count("reward") == 4 and plots.plots["GPU memory (GB)"].isVisible()
    assert plots.titles["KL"].text == "KL" and plots.titles["Entropy"].text == "Entropy — not logged"
    box = plots.boxes[PLOTS[0][0]]
    plots.add_rows([{"step": 40, "reward": 0.5, "entropy": 0.7}])
    plots.redraw()
    assert box.viewRange()[0][1] == 60  # a live run: room to grow (fewer axis repaints)
    assert plots.titles["Entropy"].text == "Entropy"
    plots.set_live(False)
    assert box.viewRange()[0][1] == pytest.approx(41.7)  # it ended: its steps end to end, room for the last
    plots.set_live(True)
    assert box.viewRange()[0][1] == 60


def test_plots_redraw_only_when_rows_come(qtbot: Any) -> None:
    """No timer runs while nothing new is there to draw (each wake-up is a GIL round-trip a training
    thread can delay); rows arm one redraw, and rows that came while the tab was hidden are drawn
    once it is shown."""

    from vrag_desktop.qt.training.plots import REDRAW_MS

    tabs, plots = _plots_in_tabs(qtbot)
    qtbot.wait(REDRAW_MS + 50)
    assert not plots._timer.isActive()  # shown, no rows: nothing to wake for
    plots.add_rows([{"step": 1, "reward": 0.1}])
    assert plots._timer.isActive()
    qtbot.waitUntil(lambda: plots.built and plots.point_count("reward") == 1, timeout=5_000)  # no redraw()
    qtbot.waitUntil(lambda: not plots._timer.isActive(), timeout=2_000)
    plots.add_rows([{"step": 2, "reward": 0.2}])
    qtbot.waitUntil(lambda: plots.point_count("reward") == 2, timeout=2_000)
    qtbot.waitUntil(lambda: not plots._timer.isActive(), timeout=2_000)
    tabs.setCurrentIndex(1)
    plots.add_rows([{"step": 3, "reward": 0.3}])
    qtbot.waitUntil(lambda: not plots._timer.isActive(), timeout=2_000)
    assert plots.point_count("reward") == 2  # hidden: not drawn, and no timer waits for the tab
    tabs.setCurrentIndex(0)
    qtbot.waitUntil(lambda: plots.point_count("reward") == 3, timeout=2_000)


def test_the_run_list_and_the_run_are_polled_only_while_shown(qtbot: Any, ctx: Any) -> None:
    """The Training dock behind another dock tab wakes nobody: no list timer, no run poll timer (Qt
    moves such a tab out of the window without hiding it). The first reading, and the selection of a
    run, still happen; raising the tab reads both at once and then on their timers."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow

    from vrag_desktop.qt.training.training_panel import TrainingPanel

    run = _fake_run(ctx.layout.training / "old", 2)
    win = QMainWindow()
    qtbot.addWidget(win)
    win.setCentralWidget(QLabel("the Ask panel"))
    panel = TrainingPanel(ctx)
    docks = []
    for title, widget in (("History", QLabel("history")), ("Training", panel)):
        dock = QDockWidget(title, win)
        dock.setWidget(widget)
        win.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        docks.append(dock)
    history, training = docks
    win.tabifyDockWidget(history, training)
    history.raise_()
    win.resize(1400, 900)
    win.show()
    qtbot.waitUntil(lambda: panel.view.root == run.root and panel.view.rows_seen == 2, timeout=10_000)
    qtbot.wait(50)
    assert panel.isVisible()  # to Qt: it is only moved out of the window
    assert not panel.poll_timer.isActive() and not panel.view.poll_timer.isActive()
    new = _fake_run(ctx.layout.training / "new", 1)
    training.raise_()
    qtbot.waitUntil(lambda: panel.poll_timer.isActive() and panel.view.poll_timer.isActive(), timeout=2_000)
    qtbot.waitUntil(lambda: panel.row(new.root) is not None, timeout=2_000)  # read again on showing
    run.append_metrics({"step": 3, "reward": 0.3})
    qtbot.waitUntil(lambda: panel.view.rows_seen == 3, timeout=5_000)  # the view polls while shown
    history.raise_()
    qtbot.waitUntil(lambda: not panel.poll_timer.isActive(), timeout=2_000)
    assert not panel.view.poll_timer.isActive()
    training.raise_()
    qtbot.waitUntil(panel.poll_timer.isActive, timeout=2_000)
    training.hide()  # its dock closed
    assert not panel.poll_timer.isActive() and not panel.view.poll_timer.isActive()
    panel.shutdown()


def test_a_hidden_panel_still_reads_when_asked_and_before_closing(
    qtbot: Any, ctx: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No timer catches up for a hidden panel: a refresh asked while a reading is under way reads
    again after it (a launched run gets selected), and closing reads the list first (a run that
    ended meanwhile is not asked about)."""
    import threading

    from vrag_desktop.core.training.runs import RunRow
    from vrag_desktop.qt.training import training_panel

    first_read, scan = threading.Event(), training_panel.scan_runs

    def slow_first(*a: Any) -> Any:
        rows = scan(*a)
        first_read.wait(10)  # the first reading ends after the run below is made
        return rows

    monkeypatch.setattr(training_panel, "scan_runs", slow_first)
    panel = training_panel.TrainingPanel(ctx)  # never shown
    qtbot.addWidget(panel)
    run = _fake_run(ctx.layout.training / "late", 1)  # after the first reading began
    panel.select(run.root)
    first_read.set()
    qtbot.waitUntil(lambda: panel.view.root == run.root, timeout=2_000)  # sooner than a 3 s timer
    monkeypatch.setattr(training_panel, "scan_runs", scan)
    panel.rows = [RunRow(run.root, run.root.name, "running", 1, None, None, pid=2**22 + 1)]  # stale
    asked: list[list[str]] = []
    monkeypatch.setattr(training_panel, "ask_on_close", lambda _p, names: asked.append(names) or "stop")
    assert panel.ask_close() == "none" and not asked
    assert panel.row(run.root) is not None and panel.row(run.root).pid is None  # type: ignore[union-attr]
    panel.shutdown()


def test_main_window_has_the_training_dock_and_opens_a_sample(qtbot: Any, ctx: Any) -> None:
    from vrag_desktop.core.agents.events import Answer
    from vrag_desktop.core.run.store import RunRecorder
    from vrag_desktop.qt.main_window import MainWindow

    samples = ctx.layout.training / "r" / "samples"
    rec = RunRecorder(samples, "vrag", "Where are the Beta headquarters?", {"training": {"step": 1}})
    rec.record(Answer(step=1, content="Oslo"))
    rec.finish()
    win = MainWindow(ctx, first_run=False)
    qtbot.addWidget(win)
    assert win.training_dock in win.docks()
    win.open_sample(samples, rec.id)
    qtbot.waitUntil(lambda: "Where are the Beta" in win.ask.question, timeout=10_000)
    win.training.shutdown()


def test_the_run_list_is_rebuilt_only_when_a_line_changes(qtbot: Any, ctx: Any) -> None:
    """Each reading of the run list (every few seconds while shown, and at once when the dock is
    raised) leaves the list alone when nothing in it changed, and shows what did change."""
    from vrag_desktop.qt.training.training_panel import ROOT_ROLE

    run = _fake_run(ctx.layout.training / "a", 2)
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(
        lambda: panel.view.root == run.root and panel.list.topLevelItemCount() == 1, timeout=10_000
    )
    first = panel.list.topLevelItem(0)
    panel.refresh()
    qtbot.waitUntil(lambda: not panel._listing.running, timeout=10_000)
    assert panel.list.topLevelItem(0) is first  # the same item: nothing rebuilt
    assert panel.list.currentItem() is first
    run.write_state(status="stopped", step=5)  # a line changed: shown
    panel.refresh()
    qtbot.waitUntil(lambda: panel.list.topLevelItem(0).text(2) == "5", timeout=10_000)
    other = _fake_run(ctx.layout.training / "b", 1)  # a new run: listed, the selection kept
    panel.refresh()
    qtbot.waitUntil(lambda: panel.list.topLevelItemCount() == 2, timeout=10_000)
    assert panel.view.root == run.root
    assert panel.list.currentItem().data(0, ROOT_ROLE) == str(run.root)
    panel.select(other.root)  # asked for a run the list already shows: selected without a rebuild
    qtbot.waitUntil(lambda: panel.view.root == other.root, timeout=10_000)
    panel.shutdown()
