"""SIGTERM or SIGHUP to ``vrag-desktop train env`` while it runs a child (the venv step's ensurepip,
or pip waiting on a package index) stops the whole tree: nothing is left running with parent 1.

The command is the real one, in a subprocess; pip's index is a loopback server that accepts and
never answers, so a pip step blocks for as long as the test wants (no network)."""

from __future__ import annotations

import os
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

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGTERM/SIGHUP and sessions are POSIX")


@pytest.fixture()
def silent_index() -> Iterator[str]:
    """A package index URL whose server accepts connections and never replies."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}/simple/"
    stop.set()
    t.join(2)
    for c in held:
        c.close()
    srv.close()


def _tree(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _strays(marker: str) -> list[str]:
    """Processes anywhere whose command line names the test's environment folder."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if marker in cmd and _alive(p):
            out.append(f"{p.pid} (parent {p.ppid()}): {cmd[:200]}")
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signal_to_train_env_stops_its_children(tmp_path: Path, silent_index: str, sig: int) -> None:
    target = tmp_path / f"trainer-env-{sig}"
    env = {
        **os.environ,
        "VRAG_BASE_PYTHON": sys.executable,
        "PIP_INDEX_URL": silent_index,
        "UV_INDEX_URL": silent_index,
        "UV_DEFAULT_INDEX": silent_index,
        "PIP_DEFAULT_TIMEOUT": "60",
        "PIP_RETRIES": "0",
        "UV_HTTP_TIMEOUT": "60",
    }
    argv = [sys.executable, "-m", "vrag_desktop", "--data-dir", str(tmp_path / "data")]
    cli = subprocess.Popen(
        [*argv, "train", "env", "--layered", "--path", str(target)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Wait for a child step (the venv's ensurepip, or pip on the silent index) that keeps running.
        seen: dict[int, psutil.Process] = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and cli.poll() is None:
            kids = [p for p in _tree(cli.pid) if str(target) in " ".join(_cmd(p))]
            if kids:
                time.sleep(0.3)
                still = [p for p in kids if _alive(p)]
                if still:
                    seen.update({p.pid: p for p in [*still, *_tree(cli.pid)]})
                    break
            time.sleep(0.05)
        assert seen, f"no child step ever ran: {cli.stderr.read() if cli.poll() is not None else ''}"
        os.kill(cli.pid, sig)
        rc = cli.wait(timeout=20)
        err = cli.stderr.read()  # type: ignore[union-attr]
        assert rc != 0 and "Interrupted: the environment is incomplete" in err, err
        left = [p for p in seen.values() if _alive(p)]
        assert not left, f"orphans after {signal.Signals(sig).name}: {[p.cmdline() for p in left]}"
        assert not _strays(str(target))
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
        for p in psutil.process_iter(["cmdline"]):  # a failed run leaves none behind either
            if str(target) in " ".join(p.info["cmdline"] or []):
                p.kill()


def _cmd(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
