"""Launching the trainer as a supervised child: real processes (a stand-in trainer script run through
``$VRAG_TRAINER_PYTHON``), the one supervisor vLLM uses, a clean stop by STOP file + SIGTERM, a kill
when the step boundary never comes, re-attach through ``process.json``; plus the trainer env's
commands (a pure function) and the shared venv builder."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

from vrag_desktop.core.progress import Cancelled, CancelToken
from vrag_desktop.core.runtime import trainer_env
from vrag_desktop.core.runtime.trainer_env import (
    MARKER,
    create_trainer_env,
    find_trainer_python,
    trainer_env_info,
    trainer_env_ready,
)
from vrag_desktop.core.runtime.trainer_env_plan import FULL_PACKAGES, LAYERED_PACKAGES, trainer_env_steps
from vrag_desktop.core.runtime.venv import EnvCreateError, Step, build_venv
from vrag_desktop.core.training import launch
from vrag_desktop.core.training.config import TrainConfig
from vrag_desktop.core.training.rundir import TrainRun

FAKE_TRAINER = r'''
"""Stand-in for `python -m vrag_trainer`: same CLI, exit codes and run-directory writes."""
import json, os, signal, sys, time
from pathlib import Path
from vrag_desktop.core.training.rundir import TrainRun

cmd, rest = sys.argv[1], sys.argv[2:]
opts = {rest[i]: rest[i + 1] for i in range(len(rest) - 1) if rest[i].startswith("--")}
steps, pause = int(os.environ.get("FAKE_STEPS", "3")), float(os.environ.get("FAKE_SLEEP", "0.05"))
stubborn = os.environ.get("FAKE_IGNORE_STOP") == "1"
if cmd == "export":
    run = TrainRun.open(rest[0])
    out = Path(opts.get("--out", run.export_dir))
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text("{}")
    print("exported to", out)
    sys.exit(0)
if cmd in ("grpo", "ggpo", "sft"):  # as the real trainer: it creates the run (the launcher's files may be there)
    from vrag_desktop.core.training.config import load_config
    run = TrainRun.create(opts["--run"], load_config(opts["--config"], algorithm=cmd))
else:
    run = TrainRun(rest[0])
cfg = json.loads(run.config_path.read_text())
if cfg.get("name") == "refuse":
    print("dataset: no such file: nowhere.json", file=sys.stderr)
    sys.exit(2)
if cfg.get("name") == "crash":
    raise RuntimeError("boom in step 1")
got = {"sigterm": False}
def on_term(signum, frame):
    got["sigterm"] = True
    run.write_state(sigterm=True)
    if stubborn:
        print("ignoring SIGTERM", flush=True)
signal.signal(signal.SIGTERM, on_term)
start = int(run.state().get("step", 0))
run.write_state(status="running", pid=os.getpid(), command=cmd)
print("training", cmd, "from step", start, flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(pause)
    run.append_metrics({"step": step, "reward": step / 10})
    run.write_state(step=step)
    print("step", step, flush=True)
    if not stubborn and (got["sigterm"] or run.stop_requested()):
        run.write_state(status="stopped")
        print("stopped at step", step, flush=True)
        sys.exit(3)
run.write_state(status="finished")
print("finished", flush=True)
'''


def make_fake_trainer(folder: Path) -> Path:
    """A wrapper that stands for the trainer env's python: drops ``-m vrag_trainer``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "fake_trainer.py"
    script.write_text(FAKE_TRAINER)
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nshift 2\nexec "{sys.executable}" "{script}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


def cfg(**kw: object) -> TrainConfig:
    return TrainConfig(model="tiny", dataset="data.json", **kw)  # type: ignore[arg-type]


def fresh(tmp_path: Path) -> tuple[TrainRun, Path]:
    """A run directory the (stand-in) trainer creates, and its config file."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg().to_dict()))
    return TrainRun(tmp_path / "run"), path


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    python = make_fake_trainer(tmp_path / "fake")
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(python))
    return python


def wait_for(cond, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


# ---------------------------------------------------------------- argv, spec, exit codes


def test_trainer_argv_matches_the_trainer_cli() -> None:
    assert launch.trainer_argv("py", "grpo", config="c.json", run="r") == [
        "py", "-m", "vrag_trainer", "grpo", "--config", "c.json", "--run", "r"
    ]  # fmt: skip
    assert launch.trainer_argv("py", "resume", run="r") == ["py", "-m", "vrag_trainer", "resume", "r"]
    assert launch.trainer_argv("py", "resume", run="r", config="c")[-2:] == ["--config", "c"]
    assert launch.trainer_argv("py", "export", run="r", out="o")[-3:] == ["r", "--out", "o"]
    assert launch.trainer_argv("py", "export", run="r", best=True)[-2:] == ["r", "--best"]
    with pytest.raises(ValueError):
        launch.trainer_argv("py", "ggpo")
    with pytest.raises(ValueError):
        launch.trainer_argv("py", "train", run="r")


def test_spec_is_a_job_logged_in_the_run_and_recorded_beside_its_state(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    spec = launch.train_spec(run, launch.trainer_argv("py", "resume", run=run.root))
    assert spec.long_running is False and spec.kind == "training"
    assert Path(str(spec.log_path)) == run.log_path
    assert Path(str(spec.state_path)) == run.root / "process.json" != run.state_path
    assert spec.state_extra["subcommand"] == "resume"
    assert spec.child_env()["PYTHONUNBUFFERED"] == "1"
    assert spec.child_env()[launch.TRAINER_NICE_ENV] == "10"  # below the desktop's priority


def test_the_trainer_niceness_can_be_turned_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    monkeypatch.setenv(launch.TRAINER_NICE_ENV, "0")
    spec = launch.train_spec(run, launch.trainer_argv("py", "resume", run=run.root))
    assert spec.child_env()[launch.TRAINER_NICE_ENV] == "0"


def test_exit_codes_are_classified() -> None:
    assert launch.outcome(0) == "finished" and launch.outcome(3) == "stopped"
    assert (
        launch.outcome(2) == "bad_input"
        and launch.outcome(1) == "failed"
        and launch.outcome(None) == "failed"
    )
    assert launch.classify_trainer_exit(["x"], 3)[0] == "stopped"
    kind, text = launch.classify_trainer_exit(["dataset: no such file"], 2)
    assert kind == "bad_input" and "dataset: no such file" in text
    assert launch.classify_trainer_exit(["torch.OutOfMemoryError: CUDA out of memory"], 1)[0] == "oom"
    kind, text = launch.classify_trainer_exit(["No module named vrag_trainer"], 1)
    assert kind == "broken_env" and "vrag-desktop train env" in text
    assert launch.classify_trainer_exit([], -9)[0] == "killed"


def test_missing_trainer_env_names_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VRAG_TRAINER_PYTHON", raising=False)
    monkeypatch.setattr(trainer_env, "repo_root", lambda: None)
    with pytest.raises(launch.TrainerEnvMissing, match="vrag-desktop train env"):
        launch.resolve_trainer_python(tmp_path / "nope")
    monkeypatch.setenv("VRAG_TRAINER_PYTHON", str(tmp_path / "missing-python"))
    with pytest.raises(launch.TrainerEnvMissing, match="missing-python"):
        launch.resolve_trainer_python(tmp_path / "nope")
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").touch()
    (env / MARKER).write_text(json.dumps({"mode": "layered", "versions": {"trl": "1.16.0"}}))
    monkeypatch.delenv("VRAG_TRAINER_PYTHON")
    assert find_trainer_python(env) == env / "bin" / "python"
    assert trainer_env_ready(env) and trainer_env_info(env)["versions"]["trl"] == "1.16.0"  # type: ignore[index]


# ---------------------------------------------------------------- real child processes


def test_trainer_runs_to_the_end_under_the_supervisor(tmp_path: Path, fake: Path) -> None:
    run, config = fresh(tmp_path)
    argv = launch.trainer_argv(launch.resolve_trainer_python(), "grpo", config=config, run=run.root)

    async def go() -> tuple[int | None, list[str]]:
        sup = await launch.start(run, argv)
        assert json.loads((run.root / "process.json").read_text())["pid"] == sup.pid
        await sup.wait(30)
        return sup.returncode, sup.lines()

    rc, lines = asyncio.run(go())
    assert rc == 0 and "finished" in lines
    assert [r["step"] for r in run.metrics()] == [1, 2, 3]
    assert run.state()["status"] == "finished"
    assert "step 2" in run.log_path.read_text()
    assert not (run.root / "process.json").exists() and launch.find_running(run) is None


def test_stop_writes_stop_sends_sigterm_and_the_trainer_ends_at_a_step(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_STEPS", "1000")
    monkeypatch.setenv("FAKE_SLEEP", "0.2")
    run, config = fresh(tmp_path)
    argv = launch.trainer_argv(str(fake), "grpo", config=config, run=run.root)
    result: dict[str, object] = {}

    async def go() -> int | None:
        sup = await launch.start(run, argv)
        while run.state().get("step", 0) < 1:
            await asyncio.sleep(0.05)
        rec = launch.find_running(run)
        assert rec is not None and rec.pid == sup.pid  # re-attach: what another command sees
        with pytest.raises(launch.TrainLaunchError, match="already working"):
            await launch.start(run, argv)
        stopper = threading.Thread(target=lambda: result.update(how=launch.stop(run, grace=20)))
        stopper.start()
        await sup.wait(30)
        await asyncio.to_thread(stopper.join, 30)
        return sup.returncode

    rc = asyncio.run(go())
    assert rc == launch.EXIT_STOPPED and result["how"] == "stopped"
    state = run.state()
    assert state["status"] == "stopped" and state["sigterm"] is True and run.stop_requested()
    assert launch.stop(run) == "not_running"


def test_a_trainer_that_never_reaches_a_step_boundary_is_killed(
    tmp_path: Path, fake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_STEPS", "1000")
    monkeypatch.setenv("FAKE_IGNORE_STOP", "1")
    run, config = fresh(tmp_path)
    argv = launch.trainer_argv(str(fake), "grpo", config=config, run=run.root)
    result: dict[str, object] = {}

    async def go() -> int | None:
        sup = await launch.start(run, argv)
        while run.state().get("step", 0) < 1:
            await asyncio.sleep(0.05)
        t0 = time.monotonic()
        stopper = threading.Thread(target=lambda: result.update(how=launch.stop(run, grace=1.0)))
        stopper.start()
        await sup.wait(30)
        await asyncio.to_thread(stopper.join, 30)
        assert time.monotonic() - t0 < 15
        return sup.returncode

    rc = asyncio.run(go())
    assert result["how"] == "killed" and rc == -signal.SIGKILL
    assert run.state()["sigterm"] is True  # the SIGTERM arrived first
    assert launch.find_running(run) is None


def test_a_stale_process_record_is_not_a_running_trainer(tmp_path: Path) -> None:
    run = TrainRun.create(tmp_path / "run", cfg())
    (run.root / "process.json").write_text(
        json.dumps({"pid": 2**22 + 7, "create_time": 1.0, "name": "trainer"})
    )
    assert launch.find_running(run) is None and not (run.root / "process.json").exists()


def test_an_unspawnable_trainer_is_reported(tmp_path: Path) -> None:
    from vrag_desktop.core.runtime.exits import ProcessCrashed

    run = TrainRun.create(tmp_path / "run", cfg())

    async def go() -> None:
        await launch.start(run, [str(tmp_path / "no-python"), "-m", "vrag_trainer", "resume", str(run.root)])

    with pytest.raises(ProcessCrashed, match="Could not start trainer"):
        asyncio.run(go())


# ---------------------------------------------------------------- the trainer environment


def test_layered_env_commands(tmp_path: Path) -> None:
    env = tmp_path / "tenv"
    steps = trainer_env_steps(
        env, mode="layered", base="/usr/bin/python3", trainer_source="/repo/trainer", site_dirs=["/app/site"]
    )
    py = str(env / "bin" / "python")
    assert steps[0].argv == ("/usr/bin/python3", "-m", "venv", str(env))
    assert steps[1].argv[:2] == (py, "-c") and steps[1].argv[-2:] == ("_vrag_app.pth", "/app/site")
    assert (
        steps[2].argv[:3] == (py, "-m", "pip") and steps[2].argv[-len(LAYERED_PACKAGES) :] == LAYERED_PACKAGES
    )
    assert "trl==1.16.0" in steps[2].argv and "torch" not in " ".join(steps[2].argv)
    assert steps[3].argv[-3:] == ("--no-deps", "-e", "/repo/trainer")
    assert steps[4].argv[0] == py and "import trl, accelerate, vrag_trainer" in steps[4].argv[2]
    assert len(steps) == 5
    with pytest.raises(EnvCreateError):
        trainer_env_steps(env, mode="layered", base="p", trainer_source="/t", site_dirs=[])


def test_full_env_commands_pin_what_trl_accepts(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    steps = trainer_env_steps(
        tmp_path / "e",
        mode="full",
        base="py",
        trainer_source=repo / "trainer",
        app_source=repo,
        editable=False,
        deepspeed=True,
        pip_args=("--index-url", "http://mirror"),
    )
    install = steps[1].argv
    for pin in (*FULL_PACKAGES, "deepspeed>=0.18.6"):
        assert pin in install
    assert "vllm==0.31.0" in install and "trl==1.16.0" in install and "torch==2.13.0" in install
    assert str(repo) not in install and "-e" not in install
    assert install[6:8] == ("--index-url", "http://mirror")
    # the app from its checkout, without its dependencies (its headless ones come with the packages)
    assert steps[2].argv[-2:] == ("--no-deps", str(repo))
    assert steps[3].argv[-2:] == ("--no-deps", str(repo / "trainer"))
    assert "import torch, vllm" in steps[4].argv[2] and not any("pth" in a for s in steps for a in s.argv)
    with pytest.raises(EnvCreateError):
        trainer_env_steps(tmp_path / "e", mode="full", base="py", trainer_source="t")
    # our own package is never resolved from an index by name
    with pytest.raises(EnvCreateError, match="never from an index"):
        trainer_env_steps(
            tmp_path / "e", mode="full", base="py", trainer_source="t", app_source="vrag-desktop==0.1.0"
        )


def test_build_venv_runs_steps_writes_the_marker_last_and_reuses_it(tmp_path: Path) -> None:
    env = tmp_path / "env"
    mk = (
        sys.executable,
        "-c",
        f"import os; os.makedirs({str(env / 'bin')!r}); open({str(env / 'bin' / 'python')!r}, 'w'); print('made')",
    )
    fail = (sys.executable, "-c", "import sys; print('ERROR: no wheel'); sys.exit(1)")
    gen = build_venv(
        env,
        [Step("make", mk, "x"), Step("fail", fail, "pip install failed")],
        marker="M",
        record={},
        label="E",
    )
    with pytest.raises(EnvCreateError, match=r"pip install failed[\s\S]*no wheel"):
        list(gen)
    assert not (env / "M").exists()
    lines = list(
        build_venv(
            env,
            [Step("ok", (sys.executable, "-c", "print(1)"), "x")],
            marker="M",
            record=lambda: {"a": 1},
            label="E",
        )
    )
    assert lines[0] == "[1/1] ok" and lines[-1].startswith("E ready at")
    assert json.loads((env / "M").read_text())["a"] == 1
    assert list(build_venv(env, [], marker="M", record={}, label="E")) == [f"E already present at {env}"]


def test_env_build_is_cancellable(tmp_path: Path) -> None:
    token = CancelToken()
    slow = Step("slow", (sys.executable, "-u", "-c", "import time; print('go'); time.sleep(60)"), "x")
    gen = build_venv(tmp_path / "e", [slow], marker="M", record={}, label="E", cancel=token)
    assert next(gen) == "[1/1] slow" and next(gen) == "go"
    token.cancel()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        next(gen)
    assert time.monotonic() - t0 < 10


def test_a_ready_trainer_env_is_reused(tmp_path: Path) -> None:
    env = tmp_path / "tenv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").touch()
    (env / MARKER).write_text("{}")
    gen = create_trainer_env(env, mode="layered")
    assert "already present" in next(gen)
    with pytest.raises(StopIteration) as stop:
        next(gen)
    assert stop.value.value == env / "bin" / "python"


@pytest.mark.skipif(not os.environ.get("VRAG_TEST_TRAINER_ENV"), reason="creates a real venv (~40 s, pip)")
def test_real_layered_env(tmp_path: Path) -> None:  # pragma: no cover - opt-in
    lines = list(create_trainer_env(tmp_path / "tenv", mode="layered"))
    assert "imports OK" in "\n".join(lines)
    info = trainer_env_info(tmp_path / "tenv")
    assert info is not None and info["versions"]["trl"] == "1.16.0" and info["mode"] == "layered"
