"""A training run after a ``kill -9`` (issue 30, item 7), on the run directory such a kill leaves —
the state still saying running at step 3, checkpoint 2 complete, samples of steps 1-3 and the
orphans of step 4 cut short: ``train status`` says crashed and where it resumes from, the samples
list shows no orphan, and the resume's clean-up removes what the redone steps will write again.
The same kill of the real trainer process is ``trainer/tests/test_crash_resume.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.cli.main import main
from vrag_desktop.core.agents.events import Answer
from vrag_desktop.core.run.store import RunRecorder
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun, sample_step
from vrag_desktop.core.training.runs import effective_status, list_samples, run_row, status_line


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _sample(run: TrainRun, step: int, *, scored: bool = True) -> str:
    """A sample as the trainer saves it: recorded during the step's rollouts (``training_step``),
    then given its ``training`` record and closed once the step's rollouts are scored."""
    rec = RunRecorder(run.samples, "vrag", f"question of step {step}", {"training_step": step})
    if scored:
        rec.record(Answer(step=1, content="Oslo"))
        rec.summary.settings["training"] = {"step": step, "reward": 0.5, "correct": True, "segments": []}
        rec.finish()
    return rec.id  # not scored: left open, as a kill leaves it


def crashed_run(root: Path, *, checkpoint: int | None = 2) -> TrainRun:
    """The directory a trainer leaves when killed during step 4's rollouts (save_steps 2)."""
    run = TrainRun.create(root, TrainConfig(model="tiny", dataset="d.json", save_steps=2))
    run.write_state(status="running", step=3, pid=_dead_pid(), last_checkpoint=checkpoint)
    for step in (1, 2, 3):
        run.append_metrics({"step": step, "reward": step / 10})
        _sample(run, step)
        _sample(run, step)
    _sample(run, 4, scored=False)
    _sample(run, 4, scored=False)
    if checkpoint is not None:
        ckpt = run.checkpoint_dir(checkpoint)
        ckpt.mkdir(parents=True)
        run.mark_complete(ckpt, checkpoint)
    run.checkpoint_dir(4).mkdir(parents=True)  # a save cut short: no COMPLETE
    return run


def _status(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    rc = main(["train", "status", *args])
    return rc, capsys.readouterr().out


def test_status_of_a_killed_run_says_crashed_and_where_it_resumes(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = crashed_run(tmp_path / "run")
    rc, out = _status(capsys, str(run.root))
    assert rc == 0
    assert "Status:     crashed at step 3 (resumable from step 2)" in out, out
    assert "Process:    not running" in out and "running at step" not in out
    rc, out = _status(capsys, str(run.root), "--json")
    data = json.loads(out)
    assert data["status"] == "crashed" and data["running"] is False
    assert data["state"]["status"] == "running"  # the file as the trainer left it
    assert run_row(run.root).status == "crashed"  # the run list says it in the same word


def test_a_run_killed_before_its_first_checkpoint_resumes_from_the_start(tmp_path: Path) -> None:
    run = crashed_run(tmp_path / "run", checkpoint=None)
    assert status_line(run, run.state(), alive=False) == (
        "crashed at step 3 (resumable from the start: no complete checkpoint)"
    )


def test_status_words() -> None:
    assert effective_status({"status": "running"}, alive=False) == "crashed"
    assert effective_status({"status": "stopping"}, alive=False) == "crashed"
    assert effective_status({"status": "running"}, alive=True) == "running"
    assert effective_status({"status": "created"}, alive=True) == "running"  # still loading
    for done in ("finished", "stopped", "failed", "created"):
        assert effective_status({"status": done}, alive=False) == done


def test_a_trainer_started_by_hand_is_running_not_crashed(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m vrag_trainer`` by hand has no process record; its state names its pid."""
    run = crashed_run(tmp_path / "run")
    code = "import time; time.sleep(60)"
    trainer = subprocess.Popen([sys.executable, "-c", code, "-m", "vrag_trainer", "resume", str(run.root)])
    other = subprocess.Popen([sys.executable, "-c", code])  # alive, but no trainer: a reused pid
    try:
        run.write_state(pid=trainer.pid)
        rc, out = _status(capsys, str(run.root))
        assert rc == 0 and "Status:     running at step 3" in out, out
        assert f"Process:    trainer, pid {trainer.pid}, started by hand" in out
        run.write_state(pid=other.pid)
        rc, out = _status(capsys, str(run.root))
        assert rc == 0 and "crashed at step 3" in out and "Process:    not running" in out
    finally:
        for p in (trainer, other):
            p.kill()
            p.wait()


def test_the_samples_list_shows_no_orphan(tmp_path: Path) -> None:
    run = crashed_run(tmp_path / "run")
    assert len([p for p in run.samples.iterdir() if p.is_dir()]) == 8
    rows = list_samples(run.samples)
    assert [r.step for r in rows] == [3, 3, 2, 2, 1, 1]  # the two of step 4 were never scored
    assert all(r.reward == 0.5 and r.correct is True for r in rows)


def test_resume_removes_the_samples_of_the_steps_it_redoes(tmp_path: Path) -> None:
    run = crashed_run(tmp_path / "run")
    (run.samples / "notes.txt").write_text("not a sample")  # never touched
    broken = run.samples / "20240101-000000-abcdef"  # a sample whose run.json a kill cut off
    broken.mkdir()
    assert run.remove_samples_after(2) == 5  # step 3's two, step 4's two orphans, the broken one
    assert [r.step for r in list_samples(run.samples)] == [2, 2, 1, 1]
    assert sorted(p.name for p in run.samples.iterdir() if not p.is_dir()) == ["notes.txt"]
    assert run.remove_samples_after(2) == 0
    assert run.remove_samples_after(0) == 4  # a resume from the start redoes every step
    assert TrainRun(tmp_path / "none").remove_samples_after(0) == 0


@pytest.mark.parametrize(
    ("settings", "step"),
    [
        ({"training": {"step": 3}}, 3),
        ({"training_step": 4}, None),  # recorded, never scored
        ({"training": {"step": 0}}, None),
        ({"training": {"step": True}}, None),
        ({"training": {"step": "3"}}, None),
        ({"training": "x"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_sample_step(settings: Any, step: int | None) -> None:
    assert sample_step(settings) == step
