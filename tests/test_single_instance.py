"""The single-instance guard (vrag_desktop/qt/single_instance.py) and the command line's "open with"
(``vrag-desktop FILE…`` = ``gui FILE…``): a second launch hands its paths to the first and ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QLockFile

from vrag_desktop.cli.main import _open_with
from vrag_desktop.qt.single_instance import absolute_paths, claim_or_forward, instance_key, lock_path

ROOT = Path(__file__).resolve().parents[1]
SECOND = """
import sys
from PySide6.QtCore import QCoreApplication
from vrag_desktop.qt.single_instance import send_to_primary
app = QCoreApplication([])
print("forwarded" if send_to_primary(sys.argv[1], sys.argv[2:], 10000) else "refused", flush=True)
"""


@pytest.fixture
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    return d


def test_key_is_per_data_directory(tmp_path: Path) -> None:
    assert instance_key(tmp_path / "a") == instance_key(tmp_path / "a" / ".." / "a")
    assert instance_key(tmp_path / "a") != instance_key(tmp_path / "b")


def test_second_launch_hands_its_paths_to_the_first(qtbot, runtime_dir: Path, tmp_path: Path) -> None:
    key = instance_key(tmp_path / "dätä")
    first = claim_or_forward(key, [])
    assert first is not None
    assert lock_path(key).parent == runtime_dir and lock_path(key).exists()
    got: list[list[str]] = []
    first.received.connect(got.append)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "XDG_RUNTIME_DIR": str(runtime_dir)}
    second = subprocess.Popen(
        [sys.executable, "-c", SECOND, key, "/tmp/a b/ünï.pdf", "/tmp/folder"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        qtbot.waitUntil(lambda: bool(got) and second.poll() is not None, timeout=30000)
        out, err = second.communicate(timeout=30)
    finally:
        if second.poll() is None:
            second.kill()
    assert got == [["/tmp/a b/ünï.pdf", "/tmp/folder"]]
    assert out.strip() == "forwarded", err
    first.release()
    again = claim_or_forward(key, [])  # released: the next launch is the primary
    assert again is not None
    again.release()


def test_locked_but_silent_instance_does_not_block_the_start(runtime_dir: Path, tmp_path: Path) -> None:
    key = instance_key(tmp_path / "d")
    lock = QLockFile(str(lock_path(key)))
    assert lock.tryLock(0)  # held, but nobody listens (an instance hung while starting)
    try:
        guard = claim_or_forward(key, ["/x"], wait_s=0.5)
        assert guard is not None  # runs anyway, without a server
        guard.release()
    finally:
        lock.unlock()


def test_open_with_means_gui(tmp_path: Path) -> None:
    f = tmp_path / "report.pdf"
    f.write_bytes(b"%PDF-1.4")
    assert _open_with([str(f)]) == ["gui", str(f)]
    assert _open_with(["--data-dir", "D", str(f)]) == ["--data-dir", "D", "gui", str(f)]
    assert _open_with(["search", "x"]) == ["search", "x"]
    assert _open_with(["gui", str(f)]) == ["gui", str(f)]
    assert _open_with([str(tmp_path / "missing.pdf")]) == [str(tmp_path / "missing.pdf")]
    assert absolute_paths(["a b.pdf"], cwd="/tmp/x") == ["/tmp/x/a b.pdf"]
