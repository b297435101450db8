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
