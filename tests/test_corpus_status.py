"""core.corpus.status: what the corpora panel shows, read from real corpora (real SQLite, real MiniLM)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from conftest import drain

from vrag_desktop.core.corpus import kinds, status
from vrag_desktop.core.progress import Progress


def test_supported_types_follow_kinds() -> None:
    text = status.supported_types_text()
    assert text == "PDF, images, videos, .txt/.md"
    for ext, kind in kinds.EXTENSIONS.items():
        if kind == kinds.TEXT:
            assert ext in text
    assert status.unsupported_message("/x/report.docx") == (
        "report.docx is not a file type VRAG Desktop indexes (PDF, images, videos, .txt/.md)"
    )


def test_plan_drop_sorts_paths_and_says_why(tmp_path: Path, make_pdf) -> None:  # type: ignore[no-untyped-def]
    good = make_pdf("a.pdf", ["hello world"], folder=tmp_path / "good")
    nested = tmp_path / "deep" / "x" / "y"
    nested.mkdir(parents=True)
    (nested / "note.md").write_text("# note")
    (tmp_path / "deep" / "z.docx").write_bytes(b"PK")
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / ".hidden.pdf").write_bytes(b"%PDF")  # hidden files are not indexed, so it counts as empty
    others = tmp_path / "others"
    others.mkdir()
    (others / "a.docx").write_bytes(b"PK")
    (others / "b.xlsx").write_bytes(b"PK")
    docx = tmp_path / "report.docx"
    docx.write_bytes(b"PK")

    plan = status.plan_drop(
        [good, tmp_path / "deep", empty, others, docx, tmp_path / "gone.pdf", str(good.parent)]
    )
    assert plan.accepted == [str(good), str(tmp_path / "deep"), str(good.parent)]
    msgs = [m for _, m in plan.messages]
    assert msgs == [
        f"no files found in {empty}",
        f"no files VRAG Desktop indexes in {others} (2 other files; it indexes PDF, images, videos, .txt/.md)",
        "report.docx is not a file type VRAG Desktop indexes (PDF, images, videos, .txt/.md)",
        f"{tmp_path / 'gone.pdf'} was not found",
    ]
    assert {lvl for lvl, _ in plan.messages} == {"warning"}


def test_progress_wording() -> None:
    p = Progress("index", 120, 300, rate=5.94, eta=31.2, failed=2)
    assert status.progress_text("sample", p) == (
        "Indexing sample: 120 / 300 items · 5.9 items/s · ETA 0:31 · 2 failed"
    )
    assert status.progress_text("sample", p, short=True) == "Indexing sample: 120 / 300"
    assert status.progress_text("s", Progress("index", 0, 10)) == "Indexing s: 0 / 10 items"
    assert status.progress_text("s", Progress("scan", 150, 0)) == "Scanning s: 150 files checked"
    assert status.progress_text("s", Progress("scan", 0, 0)) == "Scanning s…"
    assert status.progress_text("s", Progress("load", 0, 5)) == "Loading the embedder for s…"
    assert [status.format_eta(x) for x in (None, 0, 59.6, 61, 3725, float("nan"))] == [
        "–",
        "0:00",
        "1:00",
        "1:01",
        "1:02:05",
        "–",
    ]


@pytest.fixture
def mixed_corpus(library, make_pdf, minilm, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A corpus with an indexed PDF, a broken one, a duplicate, an unsupported file and a pending one."""
    docs = tmp_path / "docs"
    make_pdf("good.pdf", ["The lighthouse keeper logged storms.", "Second page about tides."], folder=docs)
    shutil.copy(docs / "good.pdf", docs / "z-copy.pdf")  # walked after good.pdf: the duplicate
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a pdf")
    (docs / "notes.docx").write_bytes(b"PK\x03\x04")
    corpus = library.open("mixed", create=True)
    corpus.add_paths([docs])
    drain(corpus.scan())
    drain(corpus.build(minilm))
    later = make_pdf("later.pdf", ["Added after the build."], folder=docs / "sub")
    drain(corpus.scan())  # found, not built: pending
    yield corpus, docs, later
    corpus.close()


def test_summary_and_file_rows(mixed_corpus) -> None:  # type: ignore[no-untyped-def]
    corpus, docs, _ = mixed_corpus
    s = status.read_summary(corpus.dir)
    assert (s.name, s.files, s.indexed, s.pending, s.failed, s.duplicate, s.unsupported) == (
        "mixed",
        5,
        1,
        1,
        1,
        1,
        1,
    )
    assert s.items == 2 and s.vectors == corpus.stats()["vectors"] > 0
    assert s.pending_items == 1
    assert s.roots == (str(docs),) and s.missing_roots == ()
    assert s.state == "pending" and s.badge() == "pending 1" and s.needs_indexing
    assert s.counts_text() == "5 files · 2 items"
    assert s.details() == "1 failed · 1 duplicate · 1 unsupported"

    rows = {r.display: r for r in status.read_files(corpus.dir)}
    assert set(rows) == {
        "good.pdf",
        "z-copy.pdf",
        "broken.pdf",
        "notes.docx",
        os.path.join("sub", "later.pdf"),
    }
    good = rows["good.pdf"]
    assert (good.status, good.items, good.state_text, good.reason, good.contents()) == (
        "indexed",
        2,
        "indexed",
        "",
        "2 pages",
    )
    assert rows["broken.pdf"].status == "failed" and rows["broken.pdf"].reason  # the core's words
    assert rows["broken.pdf"].reason == corpus.manifest.source_by_path(str(docs / "broken.pdf")).error
    assert rows["z-copy.pdf"].reason == f"duplicate of {docs / 'good.pdf'} (same content; indexed once)"
    assert rows["z-copy.pdf"].short_reason == "duplicate of good.pdf (same content)"
    assert rows["z-copy.pdf"].duplicate_of_id == good.source_id
    assert rows["notes.docx"].reason.startswith("unsupported file type .docx")
    assert rows["notes.docx"].short_reason == (
        "not a file type VRAG Desktop indexes (PDF, images, videos, .txt/.md)"
    )
    assert rows["broken.pdf"].short_reason == rows["broken.pdf"].reason
    assert rows["notes.docx"].root == str(docs)
    lat = rows[os.path.join("sub", "later.pdf")]
    assert (lat.status, lat.expected, lat.contents()) == ("pending", 1, "1 page")


def test_reading_never_creates_a_corpus(tmp_path: Path) -> None:
    gone = tmp_path / "corpora" / "removed"
    with pytest.raises(FileNotFoundError):
        status.read_summary(gone)
    with pytest.raises(FileNotFoundError):
        status.read_files(gone)
    assert not gone.exists()
    assert status.read_summaries(tmp_path / "nowhere") == []


def test_resume_list_and_scan_marker(library, make_pdf, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    a = library.open("a", create=True)
    a.add_paths([make_pdf("a.pdf", ["alpha"], folder=tmp_path / "a")])
    drain(a.scan())  # pending after scan
    b = library.open("b", create=True)
    b.add_paths([make_pdf("b.pdf", ["beta"], folder=tmp_path / "b")])
    status.set_scan_needed(b.manifest, True)  # added, then the app quit before the scan
    c = library.open("c", create=True)  # empty: nothing to do
    assert status.corpora_to_resume(library.corpora_dir) == ["a", "b"]
    sb = status.read_summary(b.dir)
    assert sb.scan_needed and sb.badge() == "pending" and sb.files == 0
    status.set_scan_needed(b.manifest, False)
    assert status.corpora_to_resume(library.corpora_dir) == ["a"]
    assert status.read_summary(c.dir).badge() == "empty"
    for x in (a, b, c):
        x.close()


def test_items_for_preview(mixed_corpus) -> None:  # type: ignore[no-untyped-def]
    corpus, docs, _ = mixed_corpus
    src = corpus.manifest.source_by_path(str(docs / "good.pdf"))
    items, total = status.read_items(corpus.dir, src.id)
    assert total == 2 and [i.caption for i in items] == ["p. 1", "p. 2"]
    assert all(i.image_path and Path(i.image_path).is_file() for i in items)
    assert "lighthouse" in items[0].text
    few, total_all = status.read_items(corpus.dir, None, limit=1)
    assert len(few) == 1 and total_all == 2


def test_missing_root_message_counts_indexed_files(mixed_corpus) -> None:  # type: ignore[no-untyped-def]
    corpus, docs, _ = mixed_corpus
    assert status.indexed_under(corpus.manifest, str(docs)) == 1
    assert status.indexed_under(corpus.manifest, str(docs / "sub")) == 0
    docs.rename(docs.with_name("docs-moved"))
    s = status.read_summary(corpus.dir)
    assert s.missing_roots == (str(docs),) and "1 folder missing" in s.details()
    assert status.missing_root_message(str(docs), 1) == (
        f"{docs} is missing; its 1 indexed file is kept — reconnect it or remove it from the corpus"
    )
    assert "its 3 indexed files are kept" in status.missing_root_message(str(docs), 3)


def test_disk_errors_are_recognised(mixed_corpus) -> None:  # type: ignore[no-untyped-def]
    corpus, docs, _ = mixed_corpus
    assert status.disk_failures(corpus.manifest) == []
    src = corpus.manifest.source_by_path(str(docs / "broken.pdf"))
    corpus.manifest.update_source(src.id, error=os.strerror(28))
    assert status.disk_failures(corpus.manifest) == [(str(docs / "broken.pdf"), "No space left on device")]
    assert status.is_disk_error("database or disk is full")
    assert not status.is_disk_error("not a PDF") and not status.is_disk_error(None)
