"""The app's exit with a background thread still in torch: an ordinary exit aborts the process
("terminate called without an active exception", SIGABRT: CPython unwinds the daemon thread's C++
frames); ``core/runtime/leaving.leave`` ends it with the app's exit code, after the atexit hooks
(which stop child processes) and with every printed line flushed. Real torch, real processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHILD = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    import torch

    from vrag_desktop.core.runtime.leaving import leave

    marker = Path(sys.argv[1])
    atexit.register(lambda: marker.write_text("atexit ran"))
    pool = ThreadPoolExecutor(1)  # a non-daemon worker, idle: an ordinary exit stops it
    pool.submit(lambda: None).result()
    a = torch.randn(800, 800)
    started = threading.Event()

    def embed_forever():  # as an embedding batch that is still running when the window closes
        started.set()
        while True:
            (a @ a).sum()

    threading.Thread(target=embed_forever, name="busy-embedder", daemon=True).start()
    started.wait()
    time.sleep(0.2)
    print("last line before the exit")  # not flushed by hand
    sys.exit(leave(7, wait_s=0.3) if sys.argv[2] == "leave" else 7)
    """
)


def _run(tmp_path: Path, how: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / f"marker-{how}"), how],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_an_ordinary_exit_with_a_thread_in_torch_aborts(tmp_path: Path) -> None:
    """The failure this guards against (seen once in the suite: `vrag-desktop gui` exiting at -6
    while its first indexing embedded)."""
    proc = _run(tmp_path, "plain")
    if proc.returncode == 7:  # a CPython that no longer unwinds daemon threads (3.14 hangs them)
        pytest.skip("this Python ends daemon threads without unwinding them")
    assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stderr[-500:])
    assert "terminate called" in proc.stderr


def test_leave_ends_with_the_apps_code_after_the_exit_hooks(tmp_path: Path) -> None:
    proc = _run(tmp_path, "leave")
    assert proc.returncode == 7, (proc.returncode, proc.stderr[-800:])
    assert "terminate called" not in proc.stderr
    assert proc.stdout.strip() == "last line before the exit"
    assert (tmp_path / "marker-leave").read_text() == "atexit ran"


def test_leave_returns_the_code_when_no_thread_is_busy(tmp_path: Path) -> None:
    """Nothing busy: the ordinary exit goes on (leave returns; the code after it runs)."""
    script = tmp_path / "quiet.py"
    script.write_text(
        "import sys\n"
        "from vrag_desktop.core.runtime.leaving import leave\n"
        "code = leave(5, wait_s=0.1)\n"
        "print('returned', code)\n"
        "sys.exit(code)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert (proc.returncode, proc.stdout.strip()) == (5, "returned 5"), proc.stderr[-500:]
