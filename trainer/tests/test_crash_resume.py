"""``kill -9`` of the real trainer process in the middle of a step, then a resume (issue 30, item 7):
the status says crashed and where the run resumes from, the samples list has no orphan, and after
the resume no step appears twice — not in the metrics, not in the samples, not in TensorBoard."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_run_lifecycle import _trainer, _wait_step, _write
from test_training import _config
from vrag_trainer import runner

from vrag_desktop.core.training.rundir import TrainRun, sample_step
from vrag_desktop.core.training.runs import list_samples


def _settings(sample: Path) -> dict[str, Any]:
    try:
        data = json.loads((sample / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data.get("settings") or {}


def _orphans(run: TrainRun) -> list[Path]:
    """Samples recorded during a step whose rollouts are not scored yet (no ``training`` record)."""
    if not run.samples.is_dir():
        return []
    return [p for p in run.samples.iterdir() if p.is_dir() and sample_step(_settings(p)) is None]


def _steps_on_disk(run: TrainRun) -> Counter[int | None]:
    return Counter(sample_step(_settings(p)) for p in run.samples.iterdir() if p.is_dir())


def _tensorboard_steps(run: TrainRun, tag: str = "train/reward") -> list[int]:
    """The steps TensorBoard shows for ``tag``, reading the event files as TensorBoard does."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run.tensorboard))
    acc.Reload()
    assert tag in acc.Tags()["scalars"], acc.Tags()["scalars"]
    return [e.step for e in acc.Scalars(tag)]


def _status(capsys: pytest.CaptureFixture[str], run: TrainRun) -> str:
    from vrag_desktop.cli.main import main

    assert main(["train", "status", str(run.root)]) == 0
    return capsys.readouterr().out


def test_kill_9_mid_step_then_resume_shows_no_step_twice(  # type: ignore[no-untyped-def]
    tiny_model_dir, dataset_file, toy_data, search_url, tmp_path, capsys
) -> None:
    def config(**over: Any) -> Path:
        base = dict(max_steps=6, max_turns=2, max_response_length=24, max_model_len=2048, save_steps=2)
        cfg = _config(tiny_model_dir, dataset_file, toy_data, search_url, **{**base, **over})
        assert cfg.tensorboard and cfg.samples_per_step == 2
        return _write(cfg, tmp_path / f"cfg-{len(over)}.json")

    run = TrainRun(tmp_path / "run")
    proc = _trainer("grpo", "--config", str(config()), "--run", str(run.root))
    _wait_step(run, 3, proc)
    # kill -9 while step 4's rollouts are being recorded: step 3 is done, its checkpoint is not
    deadline = time.monotonic() + 180
    while not _orphans(run):
        assert proc.poll() is None, "the trainer ended before step 4's rollouts"
        assert max(r["step"] for r in run.metrics()) == 3, "step 4 ended before the kill"
        assert time.monotonic() < deadline, "step 4's rollouts were never recorded"
        time.sleep(0.02)
    proc.kill()
    proc.wait(30)
    assert run.state()["status"] == "running" and run.state()["step"] == 3  # as the kill left it
    assert run.last_checkpoint() is not None and run.last_checkpoint().step == 2  # type: ignore[union-attr]

    out = _status(capsys, run)
    assert "Status:     crashed at step 3 (resumable from step 2)" in out, out
    assert "Process:    not running" in out
    orphans = len(_orphans(run))  # step 4's samples recorded before the kill: 1 or 2
    assert orphans >= 1 and _steps_on_disk(run)[None] == orphans
    listed = [r.step for r in list_samples(run.samples)]
    assert sorted(Counter(listed).items()) == [(1, 2), (2, 2), (3, 2)], listed  # no orphan, no step 0
    assert _tensorboard_steps(run) == [1, 2, 3]

    # resume (to step 4): step 3 is redone from checkpoint 2, and shows once
    proc = _trainer("resume", str(run.root), "--config", str(config(max_steps=4)))
    out_text, _ = proc.communicate(timeout=300)
    assert proc.returncode == runner.EXIT_OK, out_text[-3000:]
    removed = 2 + orphans  # step 3's two and step 4's orphans
    assert f"removed {removed} sample(s) of the steps after step 2" in out_text, out_text[-3000:]
    assert [r["step"] for r in run.metrics()] == [1, 2, 3, 4]
    assert _steps_on_disk(run) == Counter({1: 2, 2: 2, 3: 2, 4: 2}), _steps_on_disk(run)
    assert [r.step for r in list_samples(run.samples)] == [4, 4, 3, 3, 2, 2, 1, 1]
    assert _tensorboard_steps(run) == [1, 2, 3, 4]
    out = _status(capsys, run)
    assert "Status:     finished at step 4" in out and "crashed" not in out
