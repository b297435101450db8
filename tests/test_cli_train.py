"""``vrag-desktop train``: the config is refused in the app process (exit 2, the field named, nothing
launched), a missing trainer env names the command that makes it, and the trainer (a real stand-in
process) runs in the foreground: finished 0, stopped 3, refused 2, failed 1; Ctrl-C stops cleanly,
a second Ctrl-C kills."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_training_launch import make_fake_trainer

from vrag_desktop.cli.main import main
from vrag_desktop.core.runtime import trainer_env
from vrag_desktop.core.runtime.trainer_env import MARKER
from vrag_desktop.core.training.rundir import TrainRun


@pytest.fixture
def fake(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    python = make_fake_trainer(tmp_path / "fake")
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(python))
    return python


def write_config(path: Path, **fields: object) -> Path:
    path.write_text(json.dumps({"model": "tiny", "dataset": "d.json", **fields}))
    return path


def train(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    rc = main(["train", *args])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ({"modle": "x", "dataset": "d"}, "modle: unknown field (did you mean 'model'?)"),
        ({"model": "m", "dataset": "d", "group_size": "5"}, "group_size: must be a number"),
        ({"model": "m", "dataset": "d", "clip_ratio": 2}, "clip_ratio: must be <= 1.0"),
        ({"dataset": "d"}, "model: is required"),
        ({"model": "m"}, "dataset: is required"),
        ({"model": "m", "dataset": "d", "judge": {"kind": "oracle"}}, "judge.kind: must be one of"),
        (
            {"model": "m", "dataset": "d", "generator": "vllm", "device": "cpu"},
            "generator: vllm generates on a GPU",
        ),
        (  # the field would do nothing under TRL: refused with the command that runs verl
            {"model": "m", "dataset": "d", "engine": "verl"},
            "engine: verl runs on a Ray cluster, not from 'train grpo'; prepare its bundle with: "
            "python -m vrag_trainer verl",
        ),
        ({"model": "m", "dataset": "d", "gpus": 64}, "gpus: 64 "),  # more than this machine has
    ],
)
def test_bad_config_exits_2_naming_the_field_and_launches_nothing(
    tmp_path: Path, fake: Path, capsys: pytest.CaptureFixture[str], content: dict[str, object], needle: str
) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(content))
    rc, _out, err = train(capsys, "grpo", "--config", str(cfg), "--run", str(tmp_path / "run"))
    assert rc == 2 and needle in err, err
    assert not (tmp_path / "run").exists()


def test_unreadable_config_files(tmp_path: Path, fake: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = train(capsys, "grpo", "--config", str(tmp_path / "none.json"))
    assert rc == 2 and "config: no such file" in err
    bad = tmp_path / "bad.json"
    bad.write_text("{model: ")
    rc, _, err = train(capsys, "ggpo", "--config", str(bad))
    assert rc == 2 and "config: bad.json is not valid JSON" in err
    rc, _, err = train(capsys, "grpo", "--config", str(write_config(tmp_path / "c.json")), "--set", "oops")
    assert rc == 2 and "--set: expected KEY=VALUE" in err
    rc, _, err = train(capsys, "grpo", "--config", str(tmp_path / "c.json"), "--set", "judge.retries=-1")
    assert rc == 2 and "judge.retries: must be >= 0" in err
    rc, _, err = train(capsys, "grpo", "--config", str(write_config(tmp_path / "g.json", algorithm="ggpo")))
    assert rc == 2 and "algorithm" in err and "train ggpo" in err


def test_missing_trainer_env_tells_the_command(
    tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("VRAG_TRAINER_PYTHON", raising=False)
    monkeypatch.setattr(trainer_env, "repo_root", lambda: None)
    rc, _, err = train(
        capsys, "grpo", "--config", str(write_config(tmp_path / "c.json")), "--run", str(tmp_path / "r")
    )
    assert rc == 1 and "Create it with: vrag-desktop train env" in err
    assert not (tmp_path / "r").exists()


def test_grpo_runs_in_the_foreground_then_status_and_export(
    tmp_path: Path, fake: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(tmp_path / "c.json", name="first")
    rc, out, err = train(
        capsys, "grpo", "--config", str(cfg), "--set", "judge.kind=exact", "--set", "max_steps=3"
    )
    run_dir = data_dir / "training" / "first"
    assert rc == 0, err
    assert f"Training finished at step 3: {run_dir}" in out and "step 2" in err
    run = TrainRun.open(run_dir)
    assert (
        run.config().judge.kind == "exact"
        and run.config().max_steps == 3
        and run.config().algorithm == "grpo"
    )
    assert len(run.metrics()) == 3 and not (run_dir / "process.json").exists()

    rc, out, _ = train(capsys, "status", "first", "--json")  # by name, under <data>/training
    status = json.loads(out)
    assert rc == 0 and status["state"]["status"] == "finished" and status["running"] is False
    assert [r["step"] for r in status["metrics"]] == [1, 2, 3]
    rc, out, _ = train(capsys, "status", str(run_dir), "-n", "1")
    assert rc == 0 and "finished at step 3" in out and "not running" in out and "step=3" in out

    rc, out, _ = train(capsys, "export", "first", "--out", str(tmp_path / "hf"))
    assert rc == 0 and (tmp_path / "hf" / "config.json").exists() and "vrag-desktop runtime start" in out

    rc, _, err = train(capsys, "grpo", "--config", str(cfg))  # the run directory is taken
    assert rc == 2 and "already holds a training run" in err
    rc, _, err = train(capsys, "stop", "first")
    assert rc == 3 and "No trainer is working" in err
    rc, _, err = train(capsys, "status", str(tmp_path / "nowhere"))
    assert rc == 2 and "not a training run" in err


def test_export_best_needs_a_validated_run_and_says_which_step(
    tmp_path: Path, fake: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(tmp_path / "c.json", name="val")
    rc, _, err = train(capsys, "grpo", "--config", str(cfg), "--set", "validation.eval_steps=2")
    assert rc == 0, err
    assert (
        "Validation: every 2 step(s) and at the end on 10% of the training items, held out by seed 0" in err
    )
    run = TrainRun.open(data_dir / "training" / "val")
    rc, out, err = train(capsys, "export", "val", "--best")  # refused before anything is launched
    assert rc == 2 and "val has no best checkpoint: no validation has run" in err
    assert "in the foreground" not in err and not run.export_dir.exists()
    for step in (1, 2):
        run.checkpoint_dir(step).mkdir(parents=True)
        run.mark_complete(run.checkpoint_dir(step), step)
    run.append_val_metrics({"step": 1, "val/reward": 0.75, "val/accuracy": 0.5, "best": True})
    run.write_best(1, "val/reward", 0.75)
    rc, out, _ = train(capsys, "status", "val")
    assert "Validation: step 1: reward=0.75  accuracy=0.5" in out
    assert (
        f"Best:       step 1 (val/reward 0.7500); export it with: vrag-desktop train export {run.root} --best"
        in out
    )
    rc, out, _ = train(capsys, "status", "val", "--json")
    assert json.loads(out)["best"] == {"step": 1, "val/reward": 0.75, "kept": True}
    rc, out, err = train(capsys, "export", "val", "--best", "--out", str(tmp_path / "best"))
    assert rc == 0 and "Export (best checkpoint) in the foreground" in err
    assert "Exported the best checkpoint (step 1, val/reward 0.7500) to" in out
    # a step 0 that validated higher: no checkpoint beat it, and without its weights nothing to export
    run.append_val_metrics({"step": 0, "val/reward": 0.8, "best": False})
    rc, out, _ = train(capsys, "status", "val")
    assert (
        "Best:       none: val has no best checkpoint: no validation beat the warm start (val/reward 0.8000 "
        "at step 0), and the run has no warm start's weights to fall back on" in out
    )
    assert json.loads(train(capsys, "status", "val", "--json")[1])["best"] is None


def test_export_best_of_a_run_no_validation_improved_writes_the_warm_start(
    tmp_path: Path, fake: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from vrag_desktop.core.training.config import TrainConfig
    from vrag_desktop.core.training.validation import ValidationConfig

    warm = tmp_path / "sft-export"
    warm.mkdir()
    (warm / "config.json").write_text("{}")
    cfg = TrainConfig(
        model="tiny", dataset="d.json", init_from=str(warm), validation=ValidationConfig(eval_steps=1)
    )
    run = TrainRun.create(data_dir / "training" / "warm", cfg)
    run.write_state(status="finished", step=2, init_weights=str(warm))
    run.append_val_metrics({"step": 0, "val/reward": 0.375, "best": False})  # the warm start's value
    for step in (1, 2):
        run.checkpoint_dir(step).mkdir(parents=True)
        run.mark_complete(run.checkpoint_dir(step), step)
        run.append_val_metrics({"step": step, "val/reward": 0.0, "best": step == 1})  # before the rule
    run.write_best(1, "val/reward", 0.0)
    why = "no validation beat the warm start (val/reward 0.3750 at step 0), so the best weights are still its own"
    rc, out, _ = train(capsys, "status", "warm")
    assert rc == 0 and (
        f"Best:       the warm start's weights ({warm}): {why}; export them with: "
        f"vrag-desktop train export {run.root} --best" in out
    )
    status = json.loads(train(capsys, "status", "warm", "--json")[1])
    assert status["best"] is None and status["export_best"]["source"] == "warm_start"
    assert status["export_best"]["path"] == str(warm)
    rc, out, err = train(capsys, "export", "warm", "--best", "--out", str(tmp_path / "best"))
    assert rc == 0 and "Export (warm start's weights) in the foreground" in err
    assert (
        f"Exported the warm start's weights from {warm} to {tmp_path / 'best'} ({why}). Serve it with:" in out
    )


def test_resume_refuses_changed_fields_and_allows_resume_safe_ones(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    monkeypatch.setenv("FAKE_STEPS", "2")
    rc, _, _ = train(
        capsys, "ggpo", "--config", str(write_config(tmp_path / "c.json")), "--run", str(run_dir)
    )
    assert rc == 0
    changed = write_config(tmp_path / "changed.json", algorithm="ggpo", learning_rate=0.1, group_size=8)
    rc, _, err = train(capsys, "resume", str(run_dir), "--config", str(changed))
    assert rc == 2 and "group_size, learning_rate" in err
    monkeypatch.setenv("FAKE_STEPS", "4")
    safe = write_config(tmp_path / "safe.json", algorithm="ggpo", max_steps=4, save_steps=1)
    rc, out, err = train(capsys, "resume", str(run_dir), "--config", str(safe))
    assert rc == 0 and "from step 2" in err and "finished at step 4" in out
    assert [r["step"] for r in TrainRun.open(run_dir).metrics()] == [1, 2, 3, 4]


def test_trainer_refusal_and_crash_exit_codes(
    tmp_path: Path, fake: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(tmp_path / "r.json", name="refuse")
    rc, _, err = train(capsys, "grpo", "--config", str(cfg), "--run", str(tmp_path / "r1"))
    assert rc == 2 and "dataset: no such file" in err and "refused its input" in err
    cfg = write_config(tmp_path / "c.json", name="crash")
    rc, _, err = train(capsys, "grpo", "--config", str(cfg), "--run", str(tmp_path / "r2"))
    assert rc == 1 and "boom in step 1" in err and "the trainer failed (exit code 1)" in err


def test_env_reuses_a_ready_environment(
    tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = tmp_path / "tenv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").touch()
    (env / MARKER).write_text("{}")
    rc, out, err = train(capsys, "env", "--path", str(env), "--layered")
    assert rc == 0 and "already present" in err and str(env / "bin" / "python") in out


def _start_cli(tmp_path: Path, fake: Path, data_dir: Path, **env: str) -> subprocess.Popen[str]:
    cfg = write_config(tmp_path / "c.json")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vrag_desktop",
            "train",
            "grpo",
            "--config",
            str(cfg),
            "--run",
            str(tmp_path / "run"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "VRAG_DESKTOP_DATA_DIR": str(data_dir),
            "VRAG_TRAINER_PYTHON": str(fake),
            "FAKE_STEPS": "1000",
            "FAKE_SLEEP": "0.2",
            **env,
        },
    )


def _wait_for_step(run_dir: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while TrainRun(run_dir).state().get("step", 0) < 1:
        assert proc.poll() is None and time.monotonic() < deadline, "the trainer did not start"
        time.sleep(0.1)


def test_ctrl_c_stops_cleanly_at_a_step_boundary(tmp_path: Path, fake: Path, data_dir: Path) -> None:
    proc = _start_cli(tmp_path, fake, data_dir)
    _wait_for_step(tmp_path / "run", proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert "Stopping at the next step boundary" in err and "Training stopped at step" in out
    assert "vrag-desktop train resume" in out
    state = TrainRun(tmp_path / "run").state()
    assert state["status"] == "stopped" and state["sigterm"] is True


def test_second_ctrl_c_kills(tmp_path: Path, fake: Path, data_dir: Path) -> None:
    proc = _start_cli(tmp_path, fake, data_dir, FAKE_IGNORE_STOP="1")
    _wait_for_step(tmp_path / "run", proc)
    proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 30
    while not TrainRun(tmp_path / "run").state().get("sigterm"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Killing the trainer" in err and "was killed at step" in err
    assert not (tmp_path / "run" / "process.json").exists()


def test_train_stop_from_another_terminal(tmp_path: Path, fake: Path, data_dir: Path) -> None:
    proc = _start_cli(tmp_path, fake, data_dir)
    _wait_for_step(tmp_path / "run", proc)
    stopper = subprocess.run(
        [sys.executable, "-m", "vrag_desktop", "train", "stop", str(tmp_path / "run"), "--grace", "30"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data_dir)},
    )
    out, err = proc.communicate(timeout=60)
    assert stopper.returncode == 0 and "stopped cleanly" in stopper.stdout, stopper.stderr
    assert proc.returncode == 3 and "Training stopped at step" in out, err
