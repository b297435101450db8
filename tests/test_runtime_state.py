"""State files and servers left behind: a recorded pid now used by another program is never
signalled, a lock left by a crashed command does not block, and a server whose app was killed is
found at the next launch and stopped with its whole tree. Real processes throughout
(tests/fake_vllm_server.py stands in for vLLM)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import filelock
import psutil
import pytest
from killed_app import start_app_then_kill_it

from vrag_desktop.core.runtime.detached import DetachedProcess
from vrag_desktop.core.runtime.proctree import group_members
from vrag_desktop.core.runtime.settings import app_state_path, cli_log_path, cli_state_path, runtime_dir
from vrag_desktop.core.runtime.state import (
    RecordedProcess,
    StateFile,
    check_state,
    identity,
    live_processes,
    recorded_process,
)
from vrag_desktop.core.runtime.vllm import VLLMConfig, VLLMServer, pick_free_port

pytestmark = pytest.mark.skipif(os.name != "posix", reason="sessions and signals are POSIX here")

FAKE = Path(__file__).with_name("fake_vllm_server.py")
ROOT = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_dead(*pids: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated program (``sleep 60``) in a session of its own."""
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


# ---------------------------------------------------------------- a pid that is someone else's


def test_a_stale_state_file_never_kills_the_program_that_now_has_its_pid(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    pid = sleeper.pid
    server_argv = [sys.executable, str(FAKE), "--model", "m", "--port", "8000"]
    stale_states = [
        # what the CLI recorded: the same pid and group, but another start time
        {"pid": pid, "pgid": pid, "create_time": 1.0, "command": server_argv, "name": "vLLM"},
        # an older file without a start time: the command line tells it apart
        {"pid": pid, "pgid": pid, "command": server_argv, "name": "vLLM"},
        # nothing to tell it apart: never taken for ours
        {"pid": pid, "pgid": pid},
    ]
    for state in stale_states:
        path = runtime_dir(tmp_path) / "state.json"
        StateFile(path).write(state)
        assert recorded_process(state) is None
        assert live_processes(runtime_dir(tmp_path)) == []  # the finder does not list it...
        assert not path.exists()  # ...and removes the stale file
        StateFile(path).write(state)
        rec, notes = check_state(StateFile(path), name="vLLM")
        assert rec is None and any("stale state file" in n for n in notes)
        assert not any("left behind" in n for n in notes)  # and does not touch its group
        # even asked directly, a record that no longer matches signals nothing
        StateFile(path).write(state)
        assert RecordedProcess(StateFile(path), state).stop(grace=0.5) == []
        assert sleeper.poll() is None and alive(pid), f"the unrelated program was killed ({state})"

    # the same pid with its true identity is recognised (the checks above can fail)
    state = {**identity(pid), "command": ["sleep", "60"], "name": "sleeper"}
    path = app_state_path(tmp_path)
    StateFile(path).write(state)
    found = live_processes(runtime_dir(tmp_path))
    assert [r.pid for r in found] == [pid] and found[0].alive
    assert found[0].stop(grace=2.0) == [] and wait_dead(pid) and not path.exists()


def test_bad_state_files_are_removed_with_a_note(tmp_path: Path) -> None:
    path = cli_state_path(tmp_path)
    for content in ("{not json", "[1, 2]", json.dumps({"pid": "12"}), ""):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        rec, notes = check_state(StateFile(path))
        assert rec is None and len(notes) == 1 and "state file" in notes[0] and not path.exists()


# ---------------------------------------------------------------- a lock left by a crashed command


def test_a_lock_left_by_a_crashed_command_does_not_block_the_next(tmp_path: Path) -> None:
    state = StateFile(cli_state_path(tmp_path))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from vrag_desktop.core.runtime.state import StateFile
            lock = StateFile({str(state.path)!r}).lock()
            lock.acquire()
            print("locked", flush=True)
            time.sleep(60)
        """),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(filelock.Timeout):  # held: a second start waits
            state.lock(timeout=0.3).acquire()
        holder.send_signal(signal.SIGKILL)  # the command crashes while holding it
        holder.wait(10)
        lock_files = list(state.path.parent.glob(".*.lock"))
        assert lock_files, "the crashed command left its lock file"
        lock = state.lock(timeout=5.0)
        lock.acquire()  # ...which does not block the next one
        assert lock.is_locked
        lock.release()
    finally:
        holder.kill()
        holder.wait()


# ---------------------------------------------------------------- servers left behind


def test_a_server_left_by_a_killed_app_is_found_at_the_next_launch_and_stopped(tmp_path: Path) -> None:
    pid, engine = start_app_then_kill_it(tmp_path)
    assert alive(pid) and alive(engine)  # it outlived its app

    found = live_processes(runtime_dir(tmp_path))  # the next launch
    assert [r.pid for r in found] == [pid]
    rec = found[0]
    assert rec.state["kind"] == "vllm" and rec.state["mode"] == "app" and rec.state["ready_at"]
    assert rec.state["served_model_name"] == "fake" and rec.state["base_url"].endswith("/v1")
    assert "vLLM (fake) at http://127.0.0.1:" in rec.describe() and "by the app" in rec.describe()

    assert rec.stop(grace=5.0, reason="stopped at the next launch") == []
    assert wait_dead(pid, engine) and group_members(pid) == []
    assert not app_state_path(tmp_path).exists() and live_processes(runtime_dir(tmp_path)) == []
    assert "stopped: stopped at the next launch" in (runtime_dir(tmp_path) / "vllm-desktop.log").read_text()


def test_a_detached_server_whose_starter_is_gone_is_found_and_stopped(tmp_path: Path) -> None:
    cfg = VLLMConfig(
        model="fake-model",
        served_model_name="fake",
        python=sys.executable,
        port=pick_free_port(),
        entrypoint=(str(FAKE), "--fake-delay", "0.3", "--fake-grandchild", "--fake-ignore-sigterm"),
    )
    server = VLLMServer(cfg)
    proc = DetachedProcess.spawn(server.detached_spec(cli_log_path(tmp_path), cli_state_path(tmp_path)))
    pid = proc.pid
    assert proc.state["mode"] == "background" and StateFile(cli_state_path(tmp_path)).peek()["pid"] == pid
    deadline = time.monotonic() + 10
    while not (m := re.search(r"EngineCore pid=(\d+)", cli_log_path(tmp_path).read_text())):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    engine = int(m.group(1))
    del proc, server  # the command that started it is gone; nothing stopped it

    found = live_processes(runtime_dir(tmp_path))
    assert [r.pid for r in found] == [pid] and "by the command line" in found[0].describe()
    t0 = time.monotonic()
    assert found[0].stop(grace=1.0) == []  # it ignores SIGTERM: SIGKILL after the grace
    assert time.monotonic() - t0 < 8
    assert wait_dead(pid, engine) and group_members(pid) == [] and not cli_state_path(tmp_path).exists()
