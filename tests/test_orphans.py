"""No orphans: a ``kill -9`` of a foreground command takes its child's whole tree with it.

Real processes throughout: ``vrag-desktop runtime start --foreground`` with the fake vLLM server
(which starts an "engine core" grandchild, as vLLM does), and ``vrag-desktop train grpo`` with the
stand-in trainer of ``test_training_launch`` behind a wrapper that leaves a grandchild too. The
command is killed with SIGKILL (nothing of it runs again), and every process of the tree must be
gone within a few seconds. The app's own servers are not guarded: they are meant to survive a
killed app, which finds them again at its next start (``qt/runtime/leftovers.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from test_cli_runtime import FAKE, Reader, engine_pid
from test_training_launch import make_fake_trainer

from vrag_desktop.core.runtime.guard import TREE_ENV
from vrag_desktop.core.runtime.spec import ProcessSpec
from vrag_desktop.core.runtime.supervisor import ProcessSupervisor
from vrag_desktop.core.runtime.vllm import pick_free_port
from vrag_desktop.core.training.rundir import TrainRun

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the watchdog finds a tree through /proc")

ROOT = Path(__file__).resolve().parents[1]
CLI = (sys.executable, "-m", "vrag_desktop")


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_all_gone(pids: list[int], timeout: float = 8.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def tree_of(pid: int) -> list[int]:
    with contextlib.suppress(psutil.Error):
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    return []


@pytest.fixture
def killer() -> Iterator[list[int]]:
    """Pids a failing test must not leave behind (SIGKILLed at the end, if still alive)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


def env_for(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VRAG_DESKTOP_VLLM_ENTRYPOINT"}
    env.update(
        {
            "VRAG_DESKTOP_DATA_DIR": str(data_dir),
            "PYTHONUNBUFFERED": "1",
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",
            **extra,
        }
    )
    return env


def test_kill_9_of_runtime_start_foreground_takes_the_server_and_its_engine(
    tmp_path: Path, killer: list[int]
) -> None:
    data = tmp_path / "data"
    port = pick_free_port()
    proc = subprocess.Popen(
        [
            *CLI,
            "runtime",
            "start",
            "fake-model",
            "--python",
            sys.executable,
            "--port",
            str(port),
            "--foreground",
        ],
        cwd=ROOT,
        env=env_for(data, VRAG_DESKTOP_VLLM_ENTRYPOINT=f"{FAKE} --fake-delay 0.2 --fake-grandchild"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    killer.append(proc.pid)
    cmd = Reader(proc)
    cmd.until("Press Ctrl-C", timeout=60)
    state = json.loads((data / "runtime" / "state.json").read_text())
    server, engine = int(state["pid"]), engine_pid("\n".join(cmd.lines))
    everything = sorted({server, engine, *tree_of(proc.pid)})
    killer.extend(everything)
    assert alive(server) and alive(engine)

    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    left = wait_all_gone(everything)
    assert left == [], f"left running after kill -9 of the command: {left}"


def test_sigterm_of_runtime_start_foreground_stops_the_server_and_its_engine(
    tmp_path: Path, killer: list[int]
) -> None:
    """SIGTERM (``kill``, a service manager) is a clean stop, as Ctrl-C: the server and the engine it
    started go, and the command says so (tests/test_signal_env.py: the same for environment builds)."""
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [
            *CLI,
            "runtime",
            "start",
            "fake-model",
            "--python",
            sys.executable,
            "--port",
            str(pick_free_port()),
            "--foreground",
        ],
        cwd=ROOT,
        env=env_for(data, VRAG_DESKTOP_VLLM_ENTRYPOINT=f"{FAKE} --fake-delay 0.2 --fake-grandchild"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    killer.append(proc.pid)
    cmd = Reader(proc)
    cmd.until("Press Ctrl-C", timeout=60)
    state = json.loads((data / "runtime" / "state.json").read_text())
    server, engine = int(state["pid"]), engine_pid("\n".join(cmd.lines))
    everything = sorted({server, engine, *tree_of(proc.pid)})
    killer.extend(everything)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) != -signal.SIGTERM  # handled, not killed by it
    left = wait_all_gone(everything)
    assert left == [], f"left running after SIGTERM to the command: {left}"


def trainer_with_grandchild(folder: Path) -> Path:
    """The stand-in trainer behind a wrapper that first starts a sleeping grandchild (a data worker)."""
    inner = make_fake_trainer(folder)
    wrapper = folder / "python-with-worker"
    wrapper.write_text(f'#!/bin/sh\nsleep 600 >/dev/null 2>&1 &\necho "worker pid=$!"\nexec "{inner}" "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


def test_kill_9_of_train_grpo_takes_the_trainer_and_its_worker(tmp_path: Path, killer: list[int]) -> None:
    data = tmp_path / "data"
    python = trainer_with_grandchild(tmp_path / "fake")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"model": "tiny", "dataset": "d.json"}))
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [*CLI, "train", "grpo", "--config", str(cfg), "--run", str(run_dir)],
        cwd=ROOT,
        env=env_for(data, VRAG_TRAINER_PYTHON=str(python), FAKE_STEPS="1000", FAKE_SLEEP="0.2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    killer.append(proc.pid)
    cmd = Reader(proc)
    cmd.until("step 1", timeout=60)
    trainer = int(TrainRun(run_dir).state()["pid"])
    worker = int(next(ln for ln in cmd.lines if ln.startswith("worker pid=")).split("=")[1])
    everything = sorted({trainer, worker, *tree_of(proc.pid)})
    killer.extend(everything)
    assert alive(trainer) and alive(worker)

    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    left = wait_all_gone(everything)
    assert left == [], f"left running after kill -9 of the command: {left}"


def test_a_normal_end_releases_the_watchdog_and_app_servers_have_none(tmp_path: Path) -> None:
    """The watchdog leaves quietly when its command ends its child itself; ``mode="app"`` (the
    app's servers, meant to outlive a crash) starts none and marks nothing."""

    async def main() -> tuple[int | None, bool, dict[str, str], int | None]:
        argv = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
        fg = ProcessSupervisor(ProcessSpec(argv, name="fg"), mode="foreground")
        await fg.start()
        assert fg._guard is not None
        guard_pid = fg._guard.pid
        guard_alive = guard_pid is not None and alive(guard_pid)
        await fg.stop(grace=2)
        app = ProcessSupervisor(ProcessSpec(argv, name="app"), mode="app")
        await app.start()
        app_guard = app._guard
        env = dict(app.env)
        await app.stop(grace=2)
        return guard_pid, guard_alive, env, (app_guard.pid if app_guard else None)

    guard_pid, guard_alive, app_env, app_guard = asyncio.run(main())
    assert guard_pid is not None and guard_alive
    assert wait_all_gone([guard_pid], 5) == []
    assert app_guard is None and TREE_ENV not in app_env
