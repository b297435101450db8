"""Deriving in a child process: the same items as in-process, a decoder crash contained to its file,
cancel at once. Real PyMuPDF, real child processes."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.derive import DeriveOptions, SourceError, derive
from vrag_desktop.core.corpus.derive_process import DeriveCrashed, DeriveProcess


def _pdf(path: Path, pages: int) -> Path:
    import pymupdf

    doc = pymupdf.open()
    for i in range(pages):
        page = doc.new_page(width=595, height=842)
        for j in range(40):
            page.insert_text(
                (40, 60 + 18 * j), f"Page {i + 1}, line {j}: text for the derive worker test.", fontsize=10
            )
    doc.save(str(path))
    doc.close()
    return path


@pytest.fixture
def worker():  # type: ignore[no-untyped-def]
    w = DeriveProcess()
    yield w
    w.close()


def test_the_child_derives_what_derive_gives_in_process(tmp_path: Path, worker: DeriveProcess) -> None:
    pdf = _pdf(tmp_path / "doc.pdf", 3)
    opts = DeriveOptions(render_pixels=200_000, ocr=False)
    here = list(derive(pdf, kinds.PDF, tmp_path / "a", opts, {2}, None))
    there = list(worker.derive(pdf, kinds.PDF, tmp_path / "b", opts, {2}, False, threading.Event()))
    assert [d.ordinal for d in there] == [d.ordinal for d in here] == [1, 3]
    for a, b in zip(here, there, strict=True):
        assert (a.name, a.kind, a.width, a.height, a.text, a.text_source) == (
            b.name,
            b.kind,
            b.width,
            b.height,
            b.text,
            b.text_source,
        )
        assert b.image_path is not None and b.image_path.parent == tmp_path / "b" and b.image_path.is_file()
    assert worker.pid is not None and worker.pid != os.getpid()


def test_a_bad_file_is_a_source_error_and_the_child_goes_on(tmp_path: Path, worker: DeriveProcess) -> None:
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4 this is not really a pdf")
    with pytest.raises(SourceError):
        list(
            worker.derive(
                bad, kinds.PDF, tmp_path / "x", DeriveOptions(ocr=False), set(), False, threading.Event()
            )
        )
    pid = worker.pid
    good = _pdf(tmp_path / "good.pdf", 1)
    assert (
        len(
            list(
                worker.derive(
                    good, kinds.PDF, tmp_path / "y", DeriveOptions(ocr=False), set(), False, threading.Event()
                )
            )
        )
        == 1
    )
    assert worker.pid == pid  # the same child


def test_a_crashed_decoder_fails_its_file_only(tmp_path: Path, worker: DeriveProcess) -> None:
    big = _pdf(tmp_path / "big.pdf", 60)
    stop = threading.Event()
    items = worker.derive(
        big, kinds.PDF, tmp_path / "z", DeriveOptions(render_pixels=4_000_000, ocr=False), set(), False, stop
    )
    first = next(items)
    assert first.ordinal == 1
    os.kill(worker.pid or 0, signal.SIGKILL)  # what a segfault in MuPDF looks like from here
    with pytest.raises(DeriveCrashed) as err:
        list(items)
    assert "killed by SIGKILL" in str(err.value) and "other files are not affected" in str(err.value)
    good = _pdf(tmp_path / "good.pdf", 2)
    assert (
        len(
            list(worker.derive(good, kinds.PDF, tmp_path / "w", DeriveOptions(ocr=False), set(), False, stop))
        )
        == 2
    )


def test_stop_ends_the_child_at_once(tmp_path: Path, worker: DeriveProcess) -> None:
    big = _pdf(tmp_path / "big.pdf", 80)
    stop = threading.Event()
    items = worker.derive(
        big, kinds.PDF, tmp_path / "z", DeriveOptions(render_pixels=4_000_000, ocr=False), set(), False, stop
    )
    next(items)
    pid = worker.pid
    stop.set()
    t = time.monotonic()
    rest = list(items)
    assert len(rest) <= 1 and time.monotonic() - t < 5
    assert worker.pid is None
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(pid or 0, 0)
            time.sleep(0.1)


def test_a_script_without_a_main_guard_can_index(tmp_path: Path) -> None:
    """The child is not multiprocessing's spawn: a user's script is not re-run in it."""
    import subprocess
    import sys

    pdf = _pdf(tmp_path / "doc.pdf", 2)
    script = tmp_path / "user_script.py"
    script.write_text(
        "import threading\n"
        "from pathlib import Path\n"
        "from vrag_desktop.core.corpus.derive import DeriveOptions\n"
        "from vrag_desktop.core.corpus.derive_process import DeriveProcess\n"
        "print('script body ran', flush=True)\n"
        "w = DeriveProcess()\n"
        f"items = list(w.derive(Path({str(pdf)!r}), 'pdf', Path({str(tmp_path / 'out')!r}),\n"
        "    DeriveOptions(render_pixels=100_000, ocr=False), set(), False, threading.Event()))\n"
        "w.close()\n"
        "print('items', len(items))\n"
    )
    got = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines() == ["script body ran", "items 2"]


def test_the_cli_entry_runs_the_child_when_asked(tmp_path: Path) -> None:
    """What a frozen bundle runs as its derive child: ``vrag-desktop --vrag-derive-child FD NICE``."""
    import socket
    import subprocess
    import sys
    from multiprocessing.connection import Connection

    from vrag_desktop.core.corpus.derive_process import CHILD_FLAG, _Job

    pdf = _pdf(tmp_path / "doc.pdf", 1)
    parent, child = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrag_desktop", CHILD_FLAG, str(child.fileno()), "0"],
        pass_fds=(child.fileno(),),
    )
    child.close()
    conn = Connection(parent.detach())
    conn.send(
        _Job(
            str(pdf), kinds.PDF, str(tmp_path / "o"), DeriveOptions(render_pixels=100_000), frozenset(), False
        )
    )
    kind, item = conn.recv()
    assert kind == "item" and item.ordinal == 1 and conn.recv() == ("done", None, None)  # no error, no note
    conn.send(None)
    assert proc.wait(timeout=30) == 0


def test_the_child_ends_quietly_when_the_app_is_gone_mid_file(tmp_path: Path) -> None:
    """The app closed or was killed while its child derived a file: the child's next message finds
    no reader; it ends with exit 0 and writes no traceback into the app's terminal or log."""
    import socket
    import subprocess
    import sys
    from multiprocessing.connection import Connection

    from vrag_desktop.core.corpus.derive_process import CHILD_FLAG, _Job

    pdf = _pdf(tmp_path / "doc.pdf", 8)
    parent, child = socket.socketpair()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrag_desktop", CHILD_FLAG, str(child.fileno()), "0"],
        pass_fds=(child.fileno(),),
        stderr=subprocess.PIPE,
    )
    child.close()
    conn = Connection(parent.detach())
    conn.send(
        _Job(
            str(pdf), kinds.PDF, str(tmp_path / "o"), DeriveOptions(render_pixels=100_000), frozenset(), False
        )
    )
    assert conn.recv()[0] == "item"  # it is working on the file
    conn.close()  # the app is gone
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err.decode()


def test_an_idle_child_serves_the_next_build_and_ends_when_idle_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.core.corpus import derive_process

    pdf = _pdf(tmp_path / "doc.pdf", 1)
    opts = DeriveOptions(render_pixels=100_000, ocr=False)
    first = derive_process.acquire()
    assert len(list(first.derive(pdf, kinds.PDF, tmp_path / "a", opts, set(), False, threading.Event()))) == 1
    pid = first.pid
    derive_process.release(first)
    second = derive_process.acquire()  # the same child, already started
    other = derive_process.acquire()  # a concurrent build gets its own
    assert second is first and second.pid == pid and other is not first
    monkeypatch.setattr(derive_process, "IDLE_SECONDS", 0.2)
    derive_process.release(second)
    derive_process.release(other)  # one idle child at most: this one ends now
    deadline = time.monotonic() + 10
    while second.pid is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert second.pid is None and other.pid is None
    assert pid is not None and _gone(pid, within=10)


def _gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="Linux scheduling classes")
def test_the_child_runs_on_idle_cpu_time_only(tmp_path: Path, worker: DeriveProcess) -> None:
    """A waking GUI thread takes a core that runs only deriving at once (SCHED_IDLE), where at nice 19
    it could wait behind other work; the child's threads (OCR's pool) inherit the class."""
    list(worker.derive(_pdf(tmp_path / "d.pdf", 1), kinds.PDF, tmp_path / "o", DeriveOptions(ocr=False), set(),
                       False, threading.Event()))  # fmt: skip
    assert worker.pid is not None
    for tid in os.listdir(f"/proc/{worker.pid}/task"):
        assert os.sched_getscheduler(int(tid)) == os.SCHED_IDLE
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the app itself is untouched


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="Linux scheduling classes")
def test_the_child_starts_up_on_idle_cpu_time_too(worker: DeriveProcess) -> None:
    """Its interpreter start and imports (~70 ms of CPU) are idle-class from the first instruction:
    the parent sets the class as soon as the child exists, not the child once it has started."""
    worker._start()
    assert worker.pid is not None
    assert os.sched_getscheduler(worker.pid) == os.SCHED_IDLE
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


@pytest.mark.skipif(not hasattr(os, "sched_getscheduler"), reason="Linux scheduling classes")
def test_only_the_app_s_workers_run_on_idle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's indexing is the job its person waits for: its worker runs at the normal
    priority (an idle-class one starved beside other busy processes); the app's yields every core."""
    from vrag_desktop.core import priority
    from vrag_desktop.core.corpus import derive_process

    monkeypatch.setattr(derive_process, "_idle", [])
    cases = (("19", False, os.SCHED_OTHER), ("19", True, os.SCHED_IDLE), ("0", True, os.SCHED_OTHER))
    for ceiling, background, scheduler in cases:  # a ceiling of 0: every worker at the GUI's priority
        monkeypatch.setenv(priority.THREAD_NICE_MAX_ENV, ceiling)
        monkeypatch.setattr(priority, "_DERIVE_IN_BACKGROUND", background)
        w = derive_process.acquire()
        try:
            w._start()
            assert w.pid is not None and os.sched_getscheduler(w.pid) == scheduler, (ceiling, background)
        finally:
            w.close()
