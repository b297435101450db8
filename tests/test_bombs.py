"""Resource bombs: a video whose header lies about its length, a document with more pages than the
corpus indexes. Every file is built here (nothing binary committed); indexing is real (MiniLM,
the derive child process, SQLite), and each test bounds rows per file, the message and the time."""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import cli

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.derive import MAX_CLIPS_PER_VIDEO, DeriveOptions, derive
from vrag_desktop.core.corpus.job import EmbedderReady, IndexRequest, JobResult, index_job
from vrag_desktop.core.corpus.manifest import S_INDEXED
from vrag_desktop.core.corpus.status import read_files
from vrag_desktop.core.progress import CancelToken

CLAIMED = 2_000_000_000


def bomb_avi(path: Path, frames: int = 12, claimed: int = CLAIMED) -> Path:
    """A tiny real MJPG AVI whose header then claims ``claimed`` frames (avih dwTotalFrames, strh
    dwLength, the OpenDML dmlh count): what the 18 KB file of the report did."""
    import cv2
    import numpy as np

    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 25.0, (64, 48))
    rng = np.random.default_rng(0)
    for _ in range(frames):
        writer.write(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))
    writer.release()
    data = bytearray(path.read_bytes())
    patched = 0
    for tag, offset in ((b"avih", 16), (b"strh", 32), (b"dmlh", 0)):  # field offset inside the chunk
        at = data.find(tag)
        while at >= 0:
            struct.pack_into("<I", data, at + 8 + offset, claimed)
            patched += 1
            at = data.find(tag, at + 4)
    assert patched >= 2
    path.write_bytes(bytes(data))
    cap = cv2.VideoCapture(str(path))
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == claimed  # the lie is what OpenCV reports
    cap.release()
    return path


def many_pages_pdf(path: Path, pages: int) -> Path:
    import pymupdf

    doc = pymupdf.open()
    for i in range(pages):
        doc.new_page(width=300, height=400).insert_text((30, 60), f"Page {i + 1} of the long report: budget")
    doc.save(str(path))
    doc.close()
    return path


def run_job(library: Any, request: IndexRequest, embedder: Any) -> tuple[JobResult, list[Any]]:
    seen: list[Any] = []
    gen = index_job(library, request, lambda _: embedder, CancelToken())
    while True:
        try:
            seen.append(next(gen))
        except StopIteration as stop:
            return stop.value, seen


def items_of(library: Any, corpus: str, path: Path) -> list[Any]:
    c = library.open(corpus)
    try:
        src = c.manifest.source_by_path(str(path))
        assert src is not None
        return [i for i in c.manifest.items() if i.source_id == src.id]
    finally:
        c.close()


def test_a_video_whose_header_lies_indexes_what_decodes_with_one_note(library, minilm, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "media"
    folder.mkdir()
    video = bomb_avi(folder / "bomb.avi")
    assert video.stat().st_size < 64_000
    started = time.monotonic()
    result, seen = run_job(library, IndexRequest("v", paths=[str(folder)], create=True), minilm)
    assert time.monotonic() - started < 120
    ready = [x for x in seen if isinstance(x, EmbedderReady)]
    assert ready and ready[0].pending <= MAX_CLIPS_PER_VIDEO  # progress totals bounded too
    items = items_of(library, "v", video)
    assert len(items) == 1 and items[0].status == "embedded" and items[0].error is None
    assert items[0].t_end == pytest.approx(12 / 25, abs=0.01)
    note = "the file's header claims 2,000,000,000 frames; 12 decoded — indexed what decodes"
    assert result.failures == [(str(video), "file", note)]  # one line, not a row per missing clip
    (row,) = read_files(library.corpora_dir / "v")
    assert row.status == S_INDEXED and row.reason == note and row.items == 1
    assert result.stats["partial_files"] == 1 and result.stats["failures"] == 0
    sheet = Path(items[0].image_path)
    assert sheet.is_file() and len(list(sheet.parent.glob("bomb_1_f*.jpg"))) == 4


def test_a_long_video_stops_at_the_clip_limit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    video = bomb_avi(tmp_path / "long.avi", frames=40, claimed=40)  # an honest header: 1.6 s
    opts = DeriveOptions(ocr=False, clip_seconds=0.2, max_clips=3, write_clips=False)  # 8 clips in it
    gen = derive(video, kinds.VIDEO, tmp_path / "out", opts, set(), None)
    got = []
    while True:
        try:
            got.append(next(gen))
        except StopIteration as stop:
            note = stop.value
            break
    assert [d.ordinal for d in got] == [1, 2, 3] and all(d.error is None for d in got)
    assert note is not None and "only the first 3 clips indexed" in note


def test_a_document_past_the_page_limit_indexes_its_first_pages_and_says_so(
    library, minilm, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf = many_pages_pdf(folder / "huge.pdf", 40)
    started = time.monotonic()
    result, seen = run_job(library, IndexRequest("p", paths=[str(folder)], create=True, max_pages=6), minilm)
    assert time.monotonic() - started < 120
    assert [x.pending for x in seen if isinstance(x, EmbedderReady)] == [6]
    items = items_of(library, "p", pdf)
    assert sorted(i.ordinal for i in items) == list(range(1, 7)) and all(
        i.status == "embedded" for i in items
    )
    note = (
        "only the first 6 of 40 pages indexed (page limit; raise it with vrag-desktop index --max-pages 40 "
        "and the remaining pages are indexed)"
    )
    assert (str(pdf), "file", note) in result.failures
    (row,) = read_files(library.corpora_dir / "p")
    assert row.status == S_INDEXED and row.reason == note and row.expected == 6
    first_ids = {i.ordinal: i.id for i in items}

    # Raising the limit indexes the remaining pages; the first six are kept, not redone.
    result, seen = run_job(library, IndexRequest("p", max_pages=100), minilm)
    assert [x.pending for x in seen if isinstance(x, EmbedderReady)] == [34]
    items = items_of(library, "p", pdf)
    assert sorted(i.ordinal for i in items) == list(range(1, 41))
    assert {i.ordinal: i.id for i in items if i.ordinal <= 6} == first_ids
    (row,) = read_files(library.corpora_dir / "p")
    assert row.status == S_INDEXED and row.reason == "" and result.failures == []

    # A rescan keeps the corpus's limit; a lower one applies to documents indexed from then on.
    result, _ = run_job(library, IndexRequest("p", max_pages=3), minilm)
    assert len(items_of(library, "p", pdf)) == 40 and result.build is None


def test_the_cli_option_and_listing(tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    folder.mkdir()
    many_pages_pdf(folder / "report.pdf", 9)
    data = tmp_path / "data"
    proc = cli(
        "index", str(folder), "--corpus", "c", "--max-pages", "4", "--quiet", data_dir=data, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert "report.pdf: only the first 4 of 9 pages indexed (page limit" in proc.stderr
    assert "4 item(s)" in proc.stderr
    listed = cli("corpus", "list", data_dir=data, check=True)
    assert "c: 1 file(s) indexed in part:" in listed.stdout and "only the first 4 of 9 pages" in listed.stdout
    bad = cli("index", str(folder), "--corpus", "c", "--max-pages", "0", data_dir=data)
    assert (
        bad.returncode != 0
        and "--max-pages must be at least 1" in bad.stderr
        and "Traceback" not in bad.stderr
    )
