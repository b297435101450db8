"""Bad input: each broken, hostile or odd file gets a clear per-file error; nothing else is lost.

Each test puts one bad file next to a good PDF, indexes the folder with the real MiniLM embedder
(in-process) and checks three things: the manifest records a failure for exactly that file with a
specific message, the good file is indexed and is the top hit for its own text, and the build
returned a report instead of raising. ``test_cli_reports_every_bad_file`` does the same for many bad
files at once through the real ``vrag-desktop`` command.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import traceback
import zlib
from pathlib import Path

import pytest
from conftest import cli, drain, index_paths

GOOD_TEXT = "The lighthouse keeper recorded every storm warning in a leather logbook beside the brass lamp."
GOOD_QUERY = "lighthouse keeper storm warning logbook"


# ---------------------------------------------------------------- helpers
def _good(make_pdf, folder: Path) -> Path:  # type: ignore[no-untyped-def]
    return make_pdf("good.pdf", [GOOD_TEXT], folder=folder)


def _failures(corpus) -> dict[str, list[tuple[str, str]]]:  # type: ignore[no-untyped-def]
    out: dict[str, list[tuple[str, str]]] = {}
    for path, what, err in corpus.manifest.failures():
        out.setdefault(path, []).append((what, err))
    return out


def _assert_only_failure(corpus, path: Path | str, *words: str) -> str:  # type: ignore[no-untyped-def]
    """Exactly one failure is recorded, a file-level one for ``path``, saying all of ``words``."""
    fails = _failures(corpus)
    assert set(fails) == {str(path)}, f"expected a failure for {path} only, got {fails}"
    [(what, err)] = fails[str(path)]
    assert what == "file"
    for w in words:
        assert w.lower() in err.lower(), f"{w!r} not in the error for {path}: {err!r}"
    return err


def _assert_good_indexed(library, corpus, good: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    """The good file is indexed (one embedded page) and is the top hit for its own text."""
    from vrag_desktop.core.corpus.manifest import I_EMBEDDED, S_INDEXED
    from vrag_desktop.core.search import SearchEngine

    src = corpus.manifest.source_by_path(str(good))
    assert src is not None and src.status == S_INDEXED, src
    items = corpus.manifest.items(src.id)
    assert [(i.ordinal, i.status) for i in items] == [(1, I_EMBEDDED)]
    assert "lighthouse keeper" in (items[0].text or "")
    engine = SearchEngine(library, [corpus.name], embedder=minilm)
    try:
        hits = engine.search(GOOD_QUERY, 3)
    finally:
        engine.close()
    assert hits, "no search results"
    assert hits[0].source == str(good) and hits[0].page == 1, hits[0]
    _assert_store_consistent(corpus)


def _assert_store_consistent(corpus) -> None:  # type: ignore[no-untyped-def]
    """Index and manifest hold the same vector ids (nothing orphaned, nothing lost)."""
    assert sorted(corpus.store().ids().tolist()) == sorted(corpus.manifest.vector_ids())


def _source_items(corpus, path: Path | str):  # type: ignore[no-untyped-def]
    src = corpus.manifest.source_by_path(str(path))
    assert src is not None, f"no source row for {path}"
    return src, corpus.manifest.items(src.id)


def _png_with_size(width: int, height: int) -> bytes:
    """A 1×1 PNG whose IHDR claims ``width``×``height`` (valid CRC): a decompression-bomb header."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (1, 1)).save(buf, "PNG")
    data = bytearray(buf.getvalue())
    assert data[12:16] == b"IHDR"
    data[16:24] = struct.pack(">II", width, height)
    data[29:33] = struct.pack(">I", zlib.crc32(bytes(data[12:29])) & 0xFFFFFFFF)
    return bytes(data)


def _real_mp4(path: Path, frames: int = 30) -> bytes:
    """A small real MPEG-4 part 2 video (noise frames, so mdat has substance) written by OpenCV."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(0)
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (160, 120))
    assert w.isOpened()
    for _ in range(frames):
        w.write(rng.integers(0, 255, (120, 160, 3), dtype=np.uint8))
    w.release()
    data = path.read_bytes()
    path.unlink()
    return data


def _codecless_mp4(data: bytes) -> bytes:
    """The same MP4 with its sample entry turned into an unknown codec ('zzzz', private type)."""
    stsd = data.find(b"stsd")
    entry = data.find(b"mp4v", stsd)
    esds = data.find(b"esds", entry)
    dcd = data.find(
        b"\x04\x80\x80\x80", esds
    )  # DecoderConfigDescriptor: tag, 4-byte length, objectTypeIndication
    assert -1 not in (stsd, entry, esds, dcd)
    b = bytearray(data)
    b[entry : entry + 4] = b"zzzz"
    b[dcd + 5] = 0xC0  # user-private object type: no decoder exists
    return bytes(b)


def _zeroed_mdat_mp4(data: bytes) -> bytes:
    """The same MP4 with every byte of its frames zeroed: opens, but nothing decodes."""
    m = data.find(b"mdat")
    size = struct.unpack(">I", data[m - 4 : m])[0]
    b = bytearray(data)
    b[m + 4 : m - 4 + size] = bytes(size - 8)
    return bytes(b)


def _truncated_jpeg() -> bytes:
    import numpy as np
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(1).integers(0, 255, (300, 400, 3), dtype=np.uint8)).save(
        buf, "JPEG"
    )
    data = buf.getvalue()
    return data[: len(data) // 2]


def _encrypted_pdf(path: Path) -> None:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_textbox(
        pymupdf.Rect(50, 50, 550, 800),
        "Confidential salaries of the dolphin trainers.",
        fontsize=12,
    )
    doc.save(str(path), encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner")
    doc.close()


def _write_bytes_name(folder: Path, name: bytes, data: bytes) -> bytes:
    """Write ``data`` under a raw (possibly non-UTF-8) file name; return the full bytes path."""
    bpath = os.path.join(os.fsencode(folder), name)
    with open(bpath, "wb") as f:
        f.write(data)
    return bpath


# ---------------------------------------------------------------- PDFs
def test_corrupt_pdf(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad = folder / "corrupt.pdf"
    bad.write_bytes(b"%PDF-1.7\n" + random.Random(8192).randbytes(8192))
    corpus, _scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None and build.failed_items == 0
    _assert_only_failure(corpus, bad, "not a readable PDF", "corrupt")
    assert _source_items(corpus, bad)[1] == []
    _assert_good_indexed(library, corpus, good, minilm)


def _truncated_pdf(make_pdf, folder: Path) -> tuple[Path, list[str]]:  # type: ignore[no-untyped-def]
    pages = [
        f"Chapter {n} of the beekeeping almanac: hive number {n} produced clover honey in spring."
        for n in range(1, 11)
    ]
    full = make_pdf("full.pdf", pages, folder=folder.parent / "src")
    bad = folder / "truncated.pdf"
    data = full.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    return bad, pages


def test_truncated_pdf_keeps_readable_pages(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    """pymupdf repairs part of a truncated PDF: no exception; the pages it can read are indexed."""
    from vrag_desktop.core.corpus.manifest import I_EMBEDDED, I_FAILED, S_FAILED

    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad, pages = _truncated_pdf(make_pdf, folder)
    corpus, _scan, build = index_paths(library, "c", [folder], minilm, ocr=False)
    assert build is not None
    src, items = _source_items(corpus, bad)
    if src.status == S_FAILED:
        assert "corrupt" in (src.error or "") or "truncated" in (src.error or ""), src.error
    else:
        assert len({i.ordinal for i in items}) == len(items)
        readable = [i for i in items if i.status == I_EMBEDDED and f"Chapter {i.ordinal} " in (i.text or "")]
        assert readable and readable[0].ordinal == 1, [(i.ordinal, i.status, i.text) for i in items]
        for i in items:
            assert i.status in (I_EMBEDDED, I_FAILED)
            if i.status == I_FAILED:
                assert f"page {i.ordinal}" in (i.error or ""), i.error
            elif i.text:  # whatever text was recovered is that page's own, never another page's
                assert pages[i.ordinal - 1].startswith(" ".join(i.text.split())), (
                    i.ordinal,
                    i.text,
                )
    _assert_good_indexed(library, corpus, good, minilm)


def test_truncated_pdf_reports_lost_pages(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    """Every page is indexed with its own text or is a failed item whose error names the page
    (or the whole file fails with a clear message): no page silently indexed as blank."""
    from vrag_desktop.core.corpus.manifest import I_EMBEDDED, I_FAILED, S_FAILED

    folder = tmp_path / "docs"
    _good(make_pdf, folder)
    bad, pages = _truncated_pdf(make_pdf, folder)
    corpus, _scan, _build = index_paths(library, "c", [folder], minilm, ocr=False)
    src, items = _source_items(corpus, bad)
    if src.status == S_FAILED:
        assert "truncated" in (src.error or "") or "corrupt" in (src.error or "")
        return
    assert sorted(i.ordinal for i in items) == list(range(1, len(pages) + 1))
    lost = []
    for i in items:
        if i.status == I_EMBEDDED:
            assert f"Chapter {i.ordinal} " in (i.text or ""), (
                f"page {i.ordinal} indexed without its content: {i.text!r} (text_source={i.text_source})"
            )
        else:
            assert i.status == I_FAILED and f"page {i.ordinal}" in (i.error or "")
            lost.append(i.ordinal)
    assert lost, "half the file is gone, yet no page was reported"
    assert any(p == str(bad) and what != "file" for p, what, _ in corpus.manifest.failures())


def test_encrypted_pdf(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad = folder / "locked.pdf"
    _encrypted_pdf(bad)
    corpus, _scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None
    _assert_only_failure(corpus, bad, "encrypted", "password")
    _assert_good_indexed(library, corpus, good, minilm)


# ---------------------------------------------------------------- empty files
@pytest.mark.parametrize("name", ["empty.pdf", "empty.png", "empty.mp4"])
def test_zero_byte_file(library, make_pdf, tmp_path, minilm, name) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad = folder / name
    bad.write_bytes(b"")
    corpus, scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None
    assert scan.failed == 1
    _assert_only_failure(corpus, bad, "empty file", "0 bytes")
    _assert_good_indexed(library, corpus, good, minilm)


# ---------------------------------------------------------------- images
def test_truncated_jpeg(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad = folder / "photo.jpg"
    bad.write_bytes(_truncated_jpeg())
    corpus, _scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None and build.failed_sources == 1
    _assert_only_failure(corpus, bad, "cannot decode image", "truncated")
    assert _source_items(corpus, bad)[1] == []
    _assert_good_indexed(library, corpus, good, minilm)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
@pytest.mark.parametrize(
    "width,height", [(30000, 30000), (12000, 12000)], ids=["over-2x-limit", "over-limit"]
)
def test_decompression_bomb(library, make_pdf, tmp_path, minilm, width, height) -> None:  # type: ignore[no-untyped-def]
    """A PNG whose header claims more than derive.MAX_IMAGE_PIXELS is refused before decoding.

    900 MP trips PIL's own DecompressionBombError (2× the limit); 144 MP is only caught by
    derive's own check.
    """
    from vrag_desktop.core.corpus import derive

    assert width * height > derive.MAX_IMAGE_PIXELS
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad = folder / "bomb.png"
    bad.write_bytes(_png_with_size(width, height))
    corpus, _scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None and build.failed_sources == 1
    _assert_only_failure(corpus, bad, "image too large", "decompression bomb")
    assert _source_items(corpus, bad)[1] == []
    assert not any((corpus.derived_dir).rglob("bomb*")), "a derived copy of the bomb was written"
    _assert_good_indexed(library, corpus, good, minilm)


@pytest.mark.filterwarnings("ignore::PIL.Image.DecompressionBombWarning")
def test_real_large_image_over_limit(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    """A genuinely decodable 1-bit 11000×11000 PNG (121 MP, tiny on disk) is refused."""
    from PIL import Image

    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad = folder / "huge.png"
    Image.new("1", (11000, 11000)).save(bad)
    assert bad.stat().st_size < 1_000_000
    corpus, _scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None
    _assert_only_failure(corpus, bad, "too large", "decompression bomb")
    _assert_good_indexed(library, corpus, good, minilm)


# ---------------------------------------------------------------- videos
@pytest.mark.parametrize("variant", ["random-bytes", "truncated", "codec-less", "undecodable-frames"])
def test_bad_video(library, make_pdf, tmp_path, minilm, variant) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad = folder / "clip.mp4"
    if variant == "random-bytes":
        # Fixed bytes: FFmpeg probes some random buffers as H.263 (a weak signature), which then opens
        # and fails at the frames; os.urandom made the message differ from run to run.
        bad.write_bytes(random.Random(20_000).randbytes(20_000))
        words = ["cannot open video"]
    else:
        real = _real_mp4(tmp_path / "real.mp4")
        if variant == "truncated":  # OpenCV writes moov last: the first 2 KB have no index at all
            bad.write_bytes(real[:2048])
            words = ["cannot open video"]
        elif variant == "codec-less":
            bad.write_bytes(_codecless_mp4(real))
            words = ["cannot open video", "codec"]
        else:
            bad.write_bytes(_zeroed_mdat_mp4(real))
            words = ["cannot decode video"]
    corpus, _scan, build = index_paths(library, "c", [folder], minilm, ocr=False)
    assert build is not None
    err = _assert_only_failure(corpus, bad, *words)
    assert "corrupt" in err or "codec" in err
    assert _source_items(corpus, bad)[1] == []
    _assert_good_indexed(library, corpus, good, minilm)


# ---------------------------------------------------------------- files that move under our feet
# Several embedder batches of 4: the file is still being read when the test touches it.
BIG_PAGES = 24


def _big_pdf(make_pdf, folder: Path, n: int = BIG_PAGES) -> Path:  # type: ignore[no-untyped-def]
    return make_pdf(
        "big.pdf",
        [f"Original edition page {p}: the migration of arctic terns, part {p}." for p in range(1, n + 1)],
        folder=folder,
    )


def test_file_deleted_between_scan_and_build(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.manifest import S_FAILED

    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    gone = make_pdf(
        "gone.pdf",
        ["Minutes of the chess club meeting about the spring tournament."],
        folder=folder,
    )
    corpus = library.open("c", create=True)
    corpus.add_paths([folder])
    drain(corpus.scan())
    gone.unlink()
    report = drain(corpus.build(minilm))
    assert report is not None and report.failed_sources == 1
    _assert_only_failure(corpus, gone, "disappeared")
    src, items = _source_items(corpus, gone)
    assert src.status == S_FAILED and items == []
    _assert_good_indexed(library, corpus, good, minilm)


def test_file_deleted_while_indexing(library, make_pdf, tmp_path, minilm, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.manifest import S_FAILED

    # Small batches so the build is mid-file at its first progress (undone after the test).
    monkeypatch.setattr(minilm, "batch_size", 4)
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    big = _big_pdf(make_pdf, folder)
    corpus = library.open("c", create=True)
    corpus.add_paths([folder])
    drain(corpus.scan())
    gen = corpus.build(minilm)
    assert next(gen).done == 0  # the embedder is ready; the first batch comes next
    first = next(gen)
    assert 0 < first.done < BIG_PAGES  # mid-build
    big.unlink()
    report = drain(gen)
    assert report is not None and not report.cancelled
    src = corpus.manifest.source_by_path(str(big))
    if src is not None:
        assert src.status == S_FAILED and "disappeared" in (src.error or ""), src
        assert corpus.manifest.vector_ids_of_source(src.id) == []
        assert all(i.status != "embedded" for i in corpus.manifest.items(src.id))
        assert [p for p, _, _ in corpus.manifest.failures()] == [str(big)]
    _assert_store_consistent(corpus)
    _assert_good_indexed(library, corpus, good, minilm)
    # The next scan forgets it; still nothing of it in the index.
    drain(corpus.scan())
    assert corpus.manifest.source_by_path(str(big)) is None
    assert corpus.manifest.failures() == []
    _assert_store_consistent(corpus)


@pytest.mark.parametrize("how", ["in-place", "atomic-replace"])
def test_file_changed_while_indexing(library, make_pdf, tmp_path, minilm, monkeypatch, how) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.manifest import I_EMBEDDED, S_INDEXED
    from vrag_desktop.core.search import SearchEngine

    monkeypatch.setattr(minilm, "batch_size", 4)
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    big = _big_pdf(make_pdf, folder)
    new_pages = [
        f"Revised edition page {p}: glaciers calving into the fjord, section {p}." for p in range(1, 6)
    ]
    corpus = library.open("c", create=True)
    corpus.add_paths([folder])
    drain(corpus.scan())
    gen = corpus.build(minilm)
    assert next(gen).done == 0  # the embedder is ready; the first batch comes next
    first = next(gen)
    assert 0 < first.done < BIG_PAGES  # mid-build
    new = make_pdf("big.pdf", new_pages, folder=tmp_path / "staging")
    if how == "in-place":  # same inode, overwritten under the reader's feet
        with open(big, "r+b") as f:
            f.truncate(0)
            f.write(new.read_bytes())
    else:  # what most editors do: write a new file, rename it over the old one
        os.replace(new, big)
    report = drain(gen)
    assert report is not None and not report.cancelled
    assert str(big) in report.changed_during
    src, items = _source_items(corpus, big)
    assert src.status == S_INDEXED and src.error is None, src
    assert [i.ordinal for i in items] == [1, 2, 3, 4, 5], [(i.ordinal, i.text) for i in items]
    for i in items:
        assert i.status == I_EMBEDDED
        assert f"Revised edition page {i.ordinal}:" in (i.text or ""), i.text
        assert "Original edition" not in (i.text or "")
    assert src.size == big.stat().st_size and src.mtime_ns == big.stat().st_mtime_ns
    assert corpus.manifest.failures() == []
    _assert_store_consistent(corpus)
    _assert_good_indexed(library, corpus, good, minilm)
    engine = SearchEngine(library, ["c"], embedder=minilm)
    try:
        hits = engine.search("arctic terns migration original edition", 50)
        assert all(h.text.startswith("Revised") or h.source == str(good) for h in hits)
    finally:
        engine.close()


# ---------------------------------------------------------------- permissions
def _scan_and_report(data_dir: str, folder: str, out_fd: int | None = None) -> dict:  # type: ignore[type-arg]
    from vrag_desktop.core.corpus.library import Library

    lib = Library(data_dir)
    corpus = lib.open("c", create=True)
    try:
        corpus.add_paths([folder])
        drain(corpus.scan())
        result = {
            "failures": corpus.manifest.failures(),
            "sources": {s.path: [s.status, s.error] for s in corpus.manifest.sources()},
        }
    finally:
        corpus.close()
    if out_fd is not None:
        os.write(out_fd, json.dumps(result).encode())
    return result


def _scan_as_nobody(data_dir: str, folder: str) -> dict:  # type: ignore[type-arg]
    """Scan in a forked child that dropped root (root reads any file whatever its mode bits)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns into pytest
        code = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            _scan_and_report(data_dir, folder, w)
            code = 0
        except BaseException:
            os.write(w, json.dumps({"error": traceback.format_exc()}).encode())
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while chunk := os.read(r, 65536):
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    result = json.loads(b"".join(chunks) or b"{}")
    assert os.waitstatus_to_exitcode(status) == 0, result.get("error", status)
    return result


def test_unreadable_permissions(make_pdf, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.corpus.manifest import S_FAILED

    # pytest's tmp dirs are 0700, so out of reach for "nobody": use a world-accessible one.
    base = Path(tempfile.mkdtemp(prefix="vrag-perm-"))
    try:
        folder = base / "docs"
        data = base / "data"
        folder.mkdir()
        data.mkdir()
        good = _good(make_pdf, folder)
        secret = make_pdf("secret.pdf", ["Private diary of a reclusive astronomer."], folder=folder)
        private = folder / "private"
        private.mkdir()
        (private / "inside.txt").write_text("Hidden notes about comet orbits.")
        for d in (base, folder, data):
            d.chmod(0o777)
        good.chmod(0o644)
        secret.chmod(0o000)
        private.chmod(0o000)
        if os.geteuid() == 0:
            result = _scan_as_nobody(str(data), str(folder))
        else:
            result = _scan_and_report(str(data), str(folder))
        fails = {p: (what, err) for p, what, err in result["failures"]}
        assert set(fails) == {str(secret), str(private)}, result
        assert "permission denied" in fails[str(secret)][1]
        assert "permission denied" in fails[str(private)][1] and "folder" in fails[str(private)][1]
        assert result["sources"][str(good)][0] == "pending"
        # Build what the scan found readable: the good file is indexed, the secret stays failed.
        library = Library(data)
        corpus = library.open("c")
        try:
            report = drain(corpus.build(minilm))
            assert report is not None and report.failed_sources == 0
            src = corpus.manifest.source_by_path(str(secret))
            assert src is not None and src.status == S_FAILED and "permission denied" in (src.error or "")
            _assert_good_indexed(library, corpus, good, minilm)
        finally:
            corpus.close()
    finally:
        for p in (base / "docs" / "private", base / "docs" / "secret.pdf"):
            if p.exists():
                p.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- symlinks
@pytest.mark.timeout(120)
def test_symlink_loops(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.manifest import S_FAILED

    tree = tmp_path / "tree"
    folder = tree / "docs"
    good = _good(make_pdf, folder)
    (folder / "self").symlink_to(".")  # a folder containing itself
    (folder / "up").symlink_to("..")  # … and its parent
    (folder / "sub").mkdir()
    (folder / "sub" / "back").symlink_to(folder)
    (folder / "a.pdf").symlink_to("b.pdf")  # two links pointing at each other: ELOOP
    (folder / "b.pdf").symlink_to("a.pdf")
    (folder / "dangling.pdf").symlink_to("nowhere.pdf")
    corpus, _scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None
    fails = _failures(corpus)
    assert set(fails) == {
        str(folder / "a.pdf"),
        str(folder / "b.pdf"),
        str(folder / "dangling.pdf"),
        str(folder / "up"),  # leads out of the folder that was added: reported, never walked
    }, fails
    assert "outside the folders added to this corpus" in fails[str(folder / "up")][0][1]
    for name in ("a.pdf", "b.pdf"):
        assert fails[str(folder / name)] == [("file", "symbolic link loop")]
        assert corpus.manifest.source_by_path(str(folder / name)).status == S_FAILED
    assert fails[str(folder / "dangling.pdf")] == [("file", "broken symbolic link")]
    # The good file is found once, under its own path (not as docs/self/good.pdf, docs/up/docs/…).
    indexed = [s.path for s in corpus.manifest.sources() if s.status != S_FAILED]
    assert indexed == [str(good)]
    assert len(corpus.manifest.items()) == 1
    _assert_good_indexed(library, corpus, good, minilm)


# ---------------------------------------------------------------- non-UTF-8 names
def test_non_utf8_text_file_name(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.manifest import S_INDEXED
    from vrag_desktop.core.search import SearchEngine

    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bpath = _write_bytes_name(
        folder, b"caf\xe9_notes.txt", b"Notes on espresso roasting temperatures and crema."
    )
    path = os.fsdecode(bpath)
    corpus, _scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None
    assert corpus.manifest.failures() == []
    src, items = _source_items(corpus, path)
    assert src.status == S_INDEXED and len(items) == 1 and "espresso" in (items[0].text or "")
    assert os.fsencode(src.path) == bpath
    engine = SearchEngine(library, ["c"], embedder=minilm)
    try:
        hit = engine.search("espresso roasting crema", 1)[0]
    finally:
        engine.close()
    assert os.fsencode(hit.source) == bpath
    _assert_good_indexed(library, corpus, good, minilm)


def test_non_utf8_pdf_file_name(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.manifest import S_INDEXED
    from vrag_desktop.core.search import SearchEngine

    folder = tmp_path / "docs"
    _good(make_pdf, folder)
    pdf = make_pdf(
        "resume.pdf",
        ["Curriculum vitae of a marine biologist studying octopus cognition."],
        folder=tmp_path / "staging",
    )
    bpath = os.path.join(os.fsencode(folder), b"r\xe9sum\xe9.pdf")
    os.rename(os.fsencode(pdf), bpath)
    corpus, _scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None
    assert corpus.manifest.failures() == []
    src, items = _source_items(corpus, os.fsdecode(bpath))
    assert src.status == S_INDEXED and len(items) == 1
    engine = SearchEngine(library, ["c"], embedder=minilm)
    try:
        hit = engine.search("marine biologist octopus cognition", 1)[0]
    finally:
        engine.close()
    assert os.fsencode(hit.source) == bpath and hit.page == 1


_VIDEO_CHILD = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from conftest import drain
    from vrag_desktop.core.corpus.derive import DeriveOptions, derive
    from vrag_desktop.core.corpus.library import Library
    corpus = Library(sys.argv[1]).open("v", create=True)
    corpus.add_paths([sys.argv[2]])
    drain(corpus.scan())
    out = {"sources": {}, "items": {}}
    for s in corpus.manifest.sources():
        out["sources"][os.fsencode(s.path).hex()] = [s.status, s.error, s.n_expected]
        if s.kind == "video" and s.status == "pending":
            out_dir = corpus.derived_dir / str(s.id)
            items = derive(Path(s.path), s.kind, out_dir, DeriveOptions(ocr=False), set(), None)
            out["items"][os.fsencode(s.path).hex()] = [[d.ordinal, d.error] for d in items]
    print(json.dumps(out))
""")


def test_non_utf8_video_file_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """In a subprocess: today this kills the interpreter (SIGSEGV); pytest must survive it."""
    folder = tmp_path / "docs"
    folder.mkdir()
    bpath = _write_bytes_name(folder, b"vid\xe9o.mp4", _real_mp4(tmp_path / "real.mp4"))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _VIDEO_CHILD,
            str(tmp_path / "data"),
            str(folder),
            str(Path(__file__).parent),
        ],
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 0, (
        f"child died with {proc.returncode}: {proc.stderr.decode(errors='replace')[-2000:]}"
    )
    out = json.loads(proc.stdout)
    assert out["sources"][bpath.hex()] == ["pending", None, 1]
    assert out["items"][bpath.hex()] == [[1, None]]


def _cli_bytes(
    *args: str, data_dir: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Like conftest.cli, but stdout/stderr stay bytes (the test, not the harness, judges them)."""
    full_env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data_dir), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "vrag_desktop", *args],
        capture_output=True,
        timeout=600,
        env=full_env,
    )


# A desktop terminal (en_US.UTF-8) encodes stdout strictly; C.UTF-8 here would hide the crash.
_STRICT_UTF8 = {"PYTHONIOENCODING": "utf-8:strict"}


def test_non_utf8_name_cli_search_json(library, data_dir, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.scan import display_path

    folder = tmp_path / "docs"
    _good(make_pdf, folder)
    bpath = _write_bytes_name(
        folder, b"caf\xe9_notes.txt", b"Notes on espresso roasting temperatures and crema."
    )
    corpus, _, _ = index_paths(library, "c", [folder], minilm)
    corpus.close()
    proc = _cli_bytes(
        "search",
        "espresso roasting crema",
        "--json",
        "-k",
        "2",
        data_dir=data_dir,
        env=_STRICT_UTF8,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    assert b"Traceback" not in proc.stderr
    hits = json.loads(proc.stdout.decode("utf-8"))  # valid UTF-8 JSON
    src = hits[0]["source"]
    assert os.fsencode(src) == bpath or src == display_path(os.fsdecode(bpath)), src


def test_non_utf8_root_cli_corpus_list_json(library, data_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    broot = os.path.join(os.fsencode(tmp_path), b"Dokumente_\xfcber")
    os.mkdir(broot)
    with open(os.path.join(broot, b"note.txt"), "wb") as f:
        f.write(b"a note")
    corpus = library.open("c", create=True)
    corpus.add_paths([os.fsdecode(broot)])
    drain(corpus.scan())
    corpus.close()
    proc = _cli_bytes("corpus", "list", "--json", data_dir=data_dir, env=_STRICT_UTF8)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    [row] = json.loads(proc.stdout.decode("utf-8"))
    assert row["name"] == "c" and len(row["roots"]) == 1 and row["pending_files"] == 1


def test_non_utf8_name_index_summary(data_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The CLI problem summary prints a non-UTF-8 name readably, even on a strict terminal."""
    folder = tmp_path / "docs"
    folder.mkdir()
    # Unsupported, so it is listed in the summary and no model needs loading.
    _write_bytes_name(folder, b"\xe9t\xe9.xyz", b"summer")
    proc = _cli_bytes("index", str(folder), "--corpus", "u", data_dir=data_dir, env=_STRICT_UTF8)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-2000:]
    err = proc.stderr.decode("utf-8")
    assert f"  - {folder}/\ufffdt\ufffd.xyz: unsupported file type .xyz" in err, err


# ---------------------------------------------------------------- duplicates
def test_duplicate_files(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.manifest import S_DUPLICATE, S_INDEXED
    from vrag_desktop.core.search import SearchEngine

    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    original = make_pdf(
        "a_original.pdf",
        ["Field guide to the nesting habits of puffins on rocky cliffs."],
        folder=folder,
    )
    copy = folder / "b_copy.pdf"
    shutil.copyfile(original, copy)
    corpus, scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None and scan.duplicates == 1
    err = _assert_only_failure(corpus, copy, "duplicate of")
    assert f"duplicate of {original}" in err
    src, items = _source_items(corpus, copy)
    assert src.status == S_DUPLICATE and items == []
    assert sum("puffins" in (i.text or "") for i in corpus.manifest.items()) == 1

    def top(query: str):  # type: ignore[no-untyped-def]
        engine = SearchEngine(library, ["c"], embedder=minilm)
        try:
            return engine.search(query, 3)
        finally:
            engine.close()

    hits = top("puffins nesting on cliffs")
    assert hits[0].source == str(original)
    assert sum("puffins" in h.text for h in hits) == 1
    _assert_good_indexed(library, corpus, good, minilm)

    # The original leaves: the copy is indexed in its own right (it takes over the original's items
    # and vectors: same content, nothing embedded again), nothing of the original stays.
    vectors = sorted(corpus.manifest.vector_ids())
    original.unlink()
    scan2 = drain(corpus.scan())
    assert (scan2.removed, scan2.renamed, scan2.duplicates) == (1, 0, 0)
    assert drain(corpus.build(minilm)).items == 0
    assert sorted(corpus.manifest.vector_ids()) == vectors
    assert corpus.manifest.source_by_path(str(original)) is None
    src, items = _source_items(corpus, copy)
    assert src.status == S_INDEXED and src.duplicate_of is None and src.error is None
    assert len(items) == 1 and "puffins" in (items[0].text or "")
    assert corpus.manifest.failures() == []
    _assert_store_consistent(corpus)
    hits = top("puffins nesting on cliffs")
    assert hits[0].source == str(copy)
    assert sum("puffins" in h.text for h in hits) == 1


# ---------------------------------------------------------------- unknown extension
def test_unknown_extension(library, make_pdf, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.manifest import S_UNSUPPORTED

    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    bad = folder / "notes.xyz"
    bad.write_text("Shopping list: flour, eggs, butter.")
    corpus, scan, build = index_paths(library, "c", [folder], minilm)
    assert build is not None and scan.unsupported == 1
    err = _assert_only_failure(corpus, bad, "unsupported file type .xyz")
    assert ".pdf" in err  # says what is supported
    assert corpus.manifest.source_by_path(str(bad)).status == S_UNSUPPORTED
    _assert_good_indexed(library, corpus, good, minilm)


# ---------------------------------------------------------------- the CLI, all at once
def test_cli_reports_every_bad_file(data_dir, make_pdf, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    good = _good(make_pdf, folder)
    make_pdf(
        "a_original.pdf",
        ["Field guide to the nesting habits of puffins on rocky cliffs."],
        folder=folder,
    )
    shutil.copyfile(folder / "a_original.pdf", folder / "b_copy.pdf")
    (folder / "corrupt.pdf").write_bytes(b"%PDF-1.7\n" + random.Random(8192).randbytes(8192))
    _encrypted_pdf(folder / "locked.pdf")
    (folder / "empty.pdf").write_bytes(b"")
    (folder / "empty.png").write_bytes(b"")
    (folder / "photo.jpg").write_bytes(_truncated_jpeg())
    (folder / "bomb.png").write_bytes(_png_with_size(30000, 30000))
    (folder / "noise.mp4").write_bytes(random.Random(20_000).randbytes(20_000))  # see test_bad_video
    (folder / "nocodec.mp4").write_bytes(_codecless_mp4(_real_mp4(tmp_path / "real.mp4")))
    (folder / "notes.xyz").write_text("Shopping list: flour, eggs, butter.")
    (folder / "loop1.pdf").symlink_to("loop2.pdf")
    (folder / "loop2.pdf").symlink_to("loop1.pdf")
    (folder / "self").symlink_to(".")
    expected = {
        "b_copy.pdf": f"duplicate of {folder / 'a_original.pdf'}",
        "corrupt.pdf": "not a readable PDF (corrupt or truncated)",
        "locked.pdf": "encrypted PDF",
        "empty.pdf": "empty file (0 bytes)",
        "empty.png": "empty file (0 bytes)",
        "photo.jpg": "cannot decode image (corrupt or truncated)",
        "bomb.png": "possible decompression bomb",
        "noise.mp4": "cannot open video",
        "nocodec.mp4": "unsupported codec",
        "notes.xyz": "unsupported file type .xyz",
        "loop1.pdf": "symbolic link loop",
        "loop2.pdf": "symbolic link loop",
    }

    proc = cli("index", str(folder), "--corpus", "bad", "--quiet", data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    problems = [line for line in proc.stderr.splitlines() if line.startswith("  - ")]
    assert f"{len(expected)} problem(s):" in proc.stderr, proc.stderr
    assert len(problems) == len(expected), proc.stderr
    for name, reason in expected.items():
        prefix = f"  - {folder / name}: "
        lines = [line for line in problems if line.startswith(prefix)]
        assert len(lines) == 1, f"{name}: {lines} in\n{proc.stderr}"
        assert reason in lines[0], f"{name}: {reason!r} not in {lines[0]!r}"
    assert "Corpus 'bad': 2 file(s) indexed, 2 item(s)" in proc.stderr, proc.stderr

    listing = cli("corpus", "list", "--json", data_dir=data_dir, check=True)
    [row] = json.loads(listing.stdout)
    assert row["name"] == "bad"
    assert row["indexed_files"] == 2  # good.pdf and a_original.pdf
    assert row["duplicate_files"] == 1
    assert row["unsupported_files"] == 1
    assert row["failed_files"] == len(expected) - 2
    assert row["pending_files"] == 0
    assert row["source_files"] == len(expected) + 2
    assert row["failed_items"] == 0 and row["failures"] == row["failed_files"]
    assert row["items"] == 2 and row["vectors"] >= 2

    found = cli("search", GOOD_QUERY, "--json", "-k", "3", data_dir=data_dir, check=True)
    hits = json.loads(found.stdout)
    assert hits[0]["source"] == str(good) and hits[0]["page"] == 1 and "lighthouse keeper" in hits[0]["text"]


# ---------------------------------------------------------------- locks and the indexing job
def test_lock_left_by_a_killed_process_does_not_block_indexing(
    library, data_dir, make_pdf, tmp_path, minilm
) -> None:  # type: ignore[no-untyped-def]
    """A process killed with SIGKILL while holding a corpus's lock leaves the ``.lock`` file behind;
    the lock itself dies with the process, so the next indexing goes ahead."""
    import signal

    from vrag_desktop.core.corpus.corpus import CorpusBusy
    from vrag_desktop.core.corpus.job import IndexRequest, index_job
    from vrag_desktop.core.progress import CancelToken

    library.open("held", create=True).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from vrag_desktop.core.corpus.library import Library
            c = Library({str(data_dir)!r}).open("held")
            c.lock()
            print("locked", flush=True)
            time.sleep(600)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        corpus = library.open("held")
        with pytest.raises(CorpusBusy, match="being indexed by another process"):
            corpus.lock()  # while the holder lives, the lock holds
        corpus.close()
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(10)
    assert (library.corpus_dir("held") / ".lock").exists()  # what a crash leaves behind

    pdf = make_pdf("after.pdf", ["Written after the crash: the lighthouse keeper's log."])
    request = IndexRequest("held", paths=[str(pdf)])
    result = drain(index_job(library, request, lambda _: minilm, CancelToken()))
    assert result.stats["indexed_files"] == 1 and not result.failures


def test_index_job_refuses_bad_requests_and_keeps_nothing_half_made(library, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.corpus import CorpusError
    from vrag_desktop.core.corpus.job import IndexRequest, MissingPaths, index_job
    from vrag_desktop.core.progress import CancelToken

    def run(request: IndexRequest) -> tuple[list[object], object]:
        gen = index_job(library, request, lambda _: minilm, CancelToken())
        seen: list[object] = []
        while True:
            try:
                seen.append(next(gen))
            except StopIteration as stop:
                return seen, stop.value

    missing = str(tmp_path / "nowhere")
    with pytest.raises(CorpusError, match="not found: "):
        run(IndexRequest("typo", paths=[missing], create=True))
    assert not library.exists("typo")  # no empty corpus behind a typo
    with pytest.raises(CorpusError, match="no corpus named 'ghost'"):
        run(IndexRequest("ghost"))
    with pytest.raises(CorpusError, match="has no files yet"):
        run(IndexRequest("empty", create=True, require_files=True))
    assert not library.exists("empty")

    note = tmp_path / "note.txt"
    note.write_text("Tide tables for the harbour, spring 2024.")
    seen, result = run(IndexRequest("mixed", paths=[missing, str(note)], create=True, skip_missing=True))
    assert [s for s in seen if isinstance(s, MissingPaths)] == [MissingPaths([missing])]
    assert result.stats["indexed_files"] == 1  # type: ignore[attr-defined]


def test_embedder_mismatch_is_one_message_for_cli_and_app(library, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    """Asking for another embedder than the corpus's is refused before a model loads, with one
    sentence naming both front ends' remedy."""
    from vrag_desktop.core.corpus.corpus import CorpusError
    from vrag_desktop.core.corpus.job import IndexRequest, index_job
    from vrag_desktop.core.progress import CancelToken

    corpus = library.open("other", create=True)
    corpus.manifest.set_meta("embedder_id", "qwen3-vl-embedding-2b")
    corpus.close()
    note = tmp_path / "n.txt"
    note.write_text("Some text to index.")

    def loader(_: str | None) -> object:
        raise AssertionError("no model may load for a known mismatch")

    with pytest.raises(CorpusError) as info:
        drain(
            index_job(library, IndexRequest("other", [str(note)], embedder="minilm"), loader, CancelToken())
        )  # type: ignore[arg-type]
    message = str(info.value)
    assert "corpus 'other' is indexed with embedder 'qwen3-vl-embedding-2b', not 'minilm-l6-v2'" in message
    assert "--embedder qwen3-vl-embedding-2b" in message and "Settings" in message


def test_ignore_file_leaves_listed_files_out(library, tmp_path, minilm) -> None:  # type: ignore[no-untyped-def]
    """A folder's ``.vragignore`` (names or globs) keeps files out of the corpus: not indexed, not a
    problem; a damaged ignore file is read as far as it goes."""
    folder = tmp_path / "set"
    (folder / "sub").mkdir(parents=True)
    (folder / "keep.txt").write_text("Kept: the keeper's notes on the winter storms.")
    (folder / "questions.json").write_text("[]")
    (folder / "sub" / "draft.tmp").write_text("scratch")
    (folder / "sub" / "also.txt").write_text("Kept too: the lamp is lit at dusk.")
    (folder / ".vragignore").write_bytes(b"# test data\nquestions.json\n*.tmp\n\xff\xfe\n")
    corpus, scan, _ = index_paths(library, "ign", [folder], minilm)
    try:
        names = sorted(Path(s.path).name for s in corpus.manifest.sources())
        assert names == ["also.txt", "keep.txt"]
        assert scan.unsupported == 0 and corpus.manifest.failures() == []
    finally:
        corpus.close()
