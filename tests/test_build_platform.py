"""scripts/build-platform.sh: what the bundle's build does differently by system (issue 32, item 8).

Why: the build is made and tested on Linux only, so what a Windows or macOS port must change lives
in one sourced file; these tests run its non-Linux branches here through shims on ``PATH``: a
``uname`` that answers another system, and a ``PATH`` without ``flock`` (macOS, Git Bash), whose
lock-folder fallback must still allow one build at a time and survive a build killed with -9.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = ROOT / "scripts" / "build-platform.sh"


def _shims(tmp: Path, tools: list[str], uname: str | None = None) -> str:
    """A folder holding only ``tools`` (links to the real ones), and a fake ``uname`` if asked."""
    shims = tmp / "bin"
    shims.mkdir()
    for tool in tools:
        real = shutil.which(tool)
        assert real, tool
        (shims / tool).symlink_to(real)
    if uname is not None:
        (shims / "uname").write_text(f"#!/bin/sh\necho {uname}\n")
        (shims / "uname").chmod(0o755)
    return str(shims)


def test_installers_are_refused_on_another_system_with_the_reason(tmp_path: Path) -> None:
    path = _shims(tmp_path, [], uname="Darwin") + os.pathsep + os.environ["PATH"]
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-app.sh"), "--check", "--deb", "--appimage"],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 2, proc.stderr
    assert "--deb --appimage make Linux installers; this is Darwin" in proc.stderr


def test_windows_shells_use_the_venvs_scripts_python(tmp_path: Path) -> None:
    path = _shims(tmp_path, [], uname="MINGW64_NT-10.0") + os.pathsep + os.environ["PATH"]
    out = subprocess.run(
        ["bash", "-c", f"source {PLATFORM}; echo $PY"],
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.stdout.strip() == ".venv/Scripts/python.exe"


def _locker(tmp: Path, path: str, tag: str) -> subprocess.Popen[bytes]:
    """A bash that takes the build lock the way build-app.sh does, says so, then holds it; its
    output goes to ``<tag>.out`` and ``<tag>.err``."""
    script = f"WORK={tmp}/work; source {PLATFORM}; build_lock; echo {tag}; sleep 120"
    with open(tmp / f"{tag}.out", "wb") as out, open(tmp / f"{tag}.err", "wb") as err:
        return subprocess.Popen(
            ["/bin/bash", "-c", script],
            env={"PATH": path, "HOME": str(tmp)},
            stdout=out,
            stderr=err,
            start_new_session=True,
        )


def _wait_for(file: Path, want: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if want in file.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"no {want!r} in {file.name} within {timeout} s (got {file.read_text()!r})")


def test_without_flock_one_build_at_a_time_and_a_killed_build_does_not_block(tmp_path: Path) -> None:
    path = _shims(tmp_path, ["uname", "cat", "rm", "mkdir", "sleep"])
    (tmp_path / "work").mkdir()
    first = _locker(tmp_path, path, "first")
    second = None
    try:
        _wait_for(tmp_path / "first.out", "first")
        assert (tmp_path / "work" / ".build-app.lock.d" / "pid").read_text().strip() == str(first.pid)
        second = _locker(tmp_path, path, "second")
        _wait_for(tmp_path / "second.err", "another build is running")  # it waits for the first
        assert "second" not in (tmp_path / "second.out").read_text()
        os.killpg(first.pid, signal.SIGKILL)  # the first build dies without releasing the lock
        first.wait(timeout=30)
        _wait_for(tmp_path / "second.out", "second")  # the stale lock (its pid gone) is taken over
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
