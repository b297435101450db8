"""Corpora panel: real Library/Corpus/SQLite, real MiniLM, real files; drops as real QDropEvents.

Bad inputs from the issue, each with a test: an unsupported file or an empty folder dropped, a
corpus folder that disappears while the app runs, the window closed during indexing, a data
directory that cannot be written (a path under a regular file / a file where a folder should be)
or that is full. "Full" is real ENOSPC twice over: a 1 MiB tmpfs filled up (where this machine lets
the tests mount one), and, everywhere, the index's next segment file linked to ``/dev/full`` — the
kernel's always-full device — so the checkpoint write fails exactly as on a full disk.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from doubles import tmpfs
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel
from vrag_desktop.qt.corpora.corpora_rows import KIND_ROLE, STATE_ROLE, SUB_ROLE, TONE_ROLE
from vrag_desktop.qt.infra.tasks import live_tasks

SUPPORTED = "PDF, images, videos, .txt/.md"
BIG = 40  # pages: more than one embedding batch (MiniLM takes 32), so a build can stop half-way


def page_texts(n: int, topic: str = "retrieval") -> list[str]:
    # >= 20 characters a page: a real text layer, so no OCR (which would make the tests slow)
    return [f"Page {i + 1} of the lecture notes on {topic} augmented generation." for i in range(n)]


@pytest.fixture
def panel(qtbot: Any, ctx: AppContext, minilm: Any) -> Iterator[CorporaPanel]:
    ctx.embedder = lambda: minilm  # the session's real MiniLM; no second load
    p = make_panel(qtbot, ctx)
    yield p
    p.shutdown(10)


def make_panel(qtbot: Any, ctx: AppContext) -> CorporaPanel:
    p = CorporaPanel(ctx)
    p.confirmations: list[tuple[str, str]] = []  # type: ignore[misc]

    def confirm(title: str, text: str) -> bool:
        p.confirmations.append((title, text))  # type: ignore[attr-defined]
        return True

    p.confirm = confirm
    p.resize(380, 620)
    qtbot.addWidget(p)
    p.show()
    qtbot.waitUntil(lambda: not p.reader.reading, timeout=5000)
    return p


def drop(panel: CorporaPanel, paths: list[Path], at: QPoint | None = None) -> None:
    """A real drag and drop of file URLs: enter, move, drop, in the order the platform sends them
    (Qt refuses a drop whose drag-enter was not accepted)."""
    md = QMimeData()
    md.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    pt = at if at is not None else QPoint(5, panel.height() - 5)
    rest = (Qt.DropAction.CopyAction, md, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    with warnings.catch_warnings():  # PySide6 flags the QPoint constructors (the only ones it binds)
        warnings.simplefilter("ignore", DeprecationWarning)
        events = (QDragEnterEvent(pt, *rest), QDragMoveEvent(pt, *rest), QDropEvent(QPointF(pt), *rest))
    for event in events:
        QApplication.sendEvent(panel, event)
        assert event.isAccepted(), event


def row_point(panel: CorporaPanel, name: str) -> QPoint:
    item = panel.corpus_item(name)
    assert item is not None
    rect = panel.tree.visualItemRect(item)
    return panel.tree.viewport().mapTo(panel, rect.center())


def index_and_wait(
    qtbot: Any, panel: CorporaPanel, name: str, paths: list[Path], timeout: int = 30000
) -> None:
    with qtbot.waitSignal(panel.indexed, timeout=timeout, check_params_cb=lambda n: n == name):
        panel.add_and_index(name, paths)
    settle(qtbot, panel)


def settle(qtbot: Any, panel: CorporaPanel) -> None:
    """Wait for a fresh read of the corpora to be on screen."""
    with qtbot.waitSignal(panel.viewRefreshed, timeout=5000):
        panel.refresh()


def expand(qtbot: Any, panel: CorporaPanel, name: str) -> None:
    settle(qtbot, panel)
    item = panel.corpus_item(name)
    assert item is not None
    item.setExpanded(True)
    qtbot.waitUntil(lambda: name in panel.tree.files, timeout=5000)
    settle(qtbot, panel)


class FirstBatchGate:
    """Holds the indexing thread right after its first embedded batch until released, so a cancel
    or a window close lands mid-build however fast or loaded the machine is (the build itself is
    the real one; only its pace is held)."""

    def __init__(self, panel: CorporaPanel) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()
        worker = panel.indexer._worker
        assert worker is not None
        post = worker._post

        def post_then_hold(kind: str, value: object = None) -> None:  # on the indexing thread
            post(kind, value)
            if kind == "progress":
                self._on_progress(value)

        worker._post = post_then_hold  # type: ignore[method-assign]

    def _on_progress(self, p: Any) -> None:  # on the indexing thread
        if getattr(p, "phase", "") == "index" and p.done and not self.reached.is_set():
            self.reached.set()
            self.release.wait(20)

    def wait(self, qtbot: Any) -> None:
        qtbot.waitUntil(self.reached.is_set, timeout=120_000)


def chip(item: Any) -> str:
    return str(item.data(0, STATE_ROLE))


def open_corpus(ctx: AppContext, name: str) -> Any:
    return ctx.library.open(name)


def assert_consistent(ctx: AppContext, name: str) -> dict[str, Any]:
    """Index and manifest agree; every source's items are unique by ordinal."""
    c = open_corpus(ctx, name)
    try:
        assert sorted(c.store().ids().tolist()) == sorted(c.manifest.vector_ids())
        for src in c.manifest.sources():
            ords = [i.ordinal for i in c.manifest.items(src.id)]
            assert len(ords) == len(set(ords)), src.path
        return c.stats()
    finally:
        c.close()


# ---------------------------------------------------------------- create / rename / remove
def test_create_rename_remove_with_inline_name_errors(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, reports: list[Any]
) -> None:
    assert panel.stack.currentWidget() is panel.empty  # first start: the empty state explains what to do

    panel.new_corpus()
    assert panel.editor.isVisible()
    panel.name_edit.setText(".hidden/../x")
    assert panel.name_error.isVisible() and "Invalid corpus name" in panel.name_error.text()
    assert not panel.name_ok.isEnabled()
    assert not panel.create_corpus("   ")

    panel.name_edit.setText("notes")
    assert not panel.name_error.isVisible() and panel.name_ok.isEnabled()
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        panel.name_ok.click()
    assert panel.corpus_names() == ["notes"] and ctx.library.exists("notes")
    assert not panel.editor.isVisible()
    assert panel.selected_corpus() == "notes" and panel.stack.currentWidget() is panel.tree
    assert chip(panel.corpus_item("notes")) == "empty"

    panel.new_corpus()
    panel.name_edit.setText("notes")
    assert panel.name_error.text() == "A corpus named 'notes' already exists"
    assert not panel.create_corpus("notes")

    panel.start_rename()
    assert panel.name_edit.text() == "notes" and panel.name_ok.text() == "Rename"
    panel.name_edit.setText("papers")
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        panel.name_ok.click()
    assert panel.corpus_names() == ["papers"] and ctx.library.names() == ["papers"]
    assert panel.selected_corpus() == "papers"

    panel.confirm = lambda title, text: False  # the person says no: nothing happens
    assert not panel.remove_corpus("papers")
    assert ctx.library.exists("papers")
    asked: list[tuple[str, str]] = []
    panel.confirm = lambda title, text: asked.append((title, text)) or True
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        assert panel.remove_corpus("papers")
    assert (
        asked[0][0] == "Remove corpus 'papers'?"
        and "Your own files and folders are not touched" in asked[0][1]
    )
    assert panel.corpus_names() == [] and ctx.library.names() == []
    assert panel.stack.currentWidget() is panel.empty
    assert not [r for r in reports if r[0] == "error"]


# ---------------------------------------------------------------- drop, index, states, thumbnails
def test_drop_indexes_and_shows_every_state(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, make_pdf: Any, tmp_path: Path, reports: list[Any]
) -> None:
    docs = tmp_path / "docs"
    good = make_pdf("good.pdf", page_texts(2), folder=docs)
    make_pdf("other.pdf", page_texts(1, "tides"), folder=docs / "sub")
    shutil.copy(good, docs / "z-copy.pdf")
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (docs / "letter.docx").write_bytes(b"PK\x03\x04")

    busy: list[tuple[bool, str]] = []
    panel.busyChanged.connect(lambda b, t: busy.append((b, t)))
    with qtbot.waitSignal(panel.indexed, timeout=120_000) as sig:
        drop(panel, [docs])  # nothing selected, no corpus yet: "default"
    assert sig.args == ["default"]
    assert busy[0][0] and busy[0][1].startswith("Indexing default") and busy[-1] == (False, "")
    assert any(t.startswith("Indexing default: ") for b, t in busy if b)  # "Indexing default: 3 / 3"

    settle(qtbot, panel)
    top = panel.corpus_item("default")
    assert chip(top) == "failed 1" and top.data(0, TONE_ROLE) == "error"
    assert top.data(0, SUB_ROLE) == "5 files · 3 items · 1 duplicate · 1 unsupported"

    expand(qtbot, panel, "default")
    folder = top.child(0)
    assert folder.data(0, KIND_ROLE) == "root" and folder.text(0) == "docs" and chip(folder) == "failed 1"
    rows = {folder.child(i).text(0): folder.child(i) for i in range(folder.childCount())}
    assert set(rows) == {
        "broken.pdf",
        "good.pdf",
        "letter.docx",
        os.path.join("sub", "other.pdf"),
        "z-copy.pdf",
    }
    assert chip(rows["good.pdf"]) == "indexed" and rows["good.pdf"].data(0, SUB_ROLE) == "PDF · 2 pages"
    c = open_corpus(ctx, "default")
    err = c.manifest.source_by_path(str(docs / "broken.pdf")).error
    c.close()
    assert chip(rows["broken.pdf"]) == "failed" and rows["broken.pdf"].data(0, SUB_ROLE) == err
    assert err and html.escape(err) in rows["broken.pdf"].toolTip(0)  # the reason, in the core's words
    assert chip(rows["letter.docx"]) == "unsupported"
    assert rows["letter.docx"].data(0, SUB_ROLE) == f"not a file type VRAG Desktop indexes ({SUPPORTED})"
    assert chip(rows["z-copy.pdf"]) == "duplicate"
    assert rows["z-copy.pdf"].data(0, SUB_ROLE) == "duplicate of good.pdf (same content)"
    assert ("warning", "Indexing", f"broken.pdf in 'default' could not be indexed: {err}") in reports

    # thumbnails of the selected file, decoded off the GUI thread
    panel.tree.setCurrentItem(rows["good.pdf"])
    qtbot.waitUntil(lambda: panel.strip.count() == 2 and panel.strip.states() == ["ok", "ok"], timeout=5000)
    assert [panel.strip.item(i).text() for i in range(2)] == ["p. 1", "p. 2"]
    assert panel.preview_label.text() == "good.pdf · 2 items"
    icon = panel.strip.item(0).icon().pixmap(200, 200)
    assert 0 < max(icon.width(), icon.height()) <= 160
    # a duplicate shows its original's pages; a lost page image shows a placeholder that says so
    page1 = Path(panel.strip.item(0).data(Qt.ItemDataRole.UserRole))
    page1.unlink()
    panel.tree.setCurrentItem(rows["z-copy.pdf"])
    qtbot.waitUntil(lambda: panel.strip.states() == ["missing", "ok"], timeout=5000)
    assert panel.strip.item(0).toolTip() == f"image not found: {page1}"

    # a second corpus; a drop on its row goes there, not to the selected one
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        panel.create_corpus("tides")
    panel.tree.setCurrentItem(panel.corpus_item("default"))
    note = tmp_path / "tide-table.md"
    note.write_text("High tide at the harbour is at six in the morning, low tide at noon.")
    with qtbot.waitSignal(panel.indexed, timeout=120_000) as sig:
        drop(panel, [note], at=row_point(panel, "tides"))
    assert sig.args == ["tides"]
    settle(qtbot, panel)
    assert panel.summary("tides").indexed == 1 and panel.summary("default").files == 5

    # removing a corpus never touches the person's files
    assert panel.remove_corpus("default")
    qtbot.waitUntil(lambda: "default" not in panel.corpus_names(), timeout=5000)
    assert good.exists() and (docs / "broken.pdf").exists() and not ctx.library.corpus_dir("default").exists()


# ---------------------------------------------------------------- cancel, resume, shutdown
def test_cancel_mid_build_keeps_work_and_resume_finishes(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, make_pdf: Any, reports: list[Any]
) -> None:
    big = make_pdf("big.pdf", page_texts(BIG))
    ended: list[tuple[str, str]] = []
    panel.indexer.jobEnded.connect(lambda n, o: ended.append((n, o)))
    progress: list[Any] = []

    panel.indexer.progress.connect(lambda name, p: progress.append(p))
    panel.add_and_index("big", [big])
    gate = FirstBatchGate(panel)
    gate.wait(qtbot)
    qtbot.waitUntil(lambda: any(p.phase == "index" and p.done for p in progress), timeout=5000)
    # once the embedder is loaded the panel says so, before the first batch is derived and embedded
    assert next(p for p in progress if p.phase == "index").done == 0
    done = next(p.done for p in progress if p.phase == "index" and p.done)
    assert panel.progress_box.isVisible() and panel.progress_bar.value() == done
    text = panel.progress_label.text()
    assert text.startswith(f"<b>Indexing big: {done} / {BIG} items</b><br>") and "items/s · ETA" in text
    # the tree refreshes at most every 0.5 s (off the GUI thread): wait for it
    qtbot.waitUntil(lambda: panel.corpus_item("big") is not None, timeout=5000)
    qtbot.waitUntil(lambda: chip(panel.corpus_item("big")) == f"indexing {done * 100 // BIG}%", timeout=5000)
    panel.cancel_button.click()
    assert not panel.cancel_button.isEnabled()  # one click is enough; it says it is stopping
    gate.release.set()
    qtbot.waitUntil(lambda: bool(ended), timeout=120_000)
    assert ended == [("big", "cancelled")]
    assert [p.phase for p in progress][:2] == ["scan", "scan"] and "load" in [p.phase for p in progress]
    assert any(
        r[0] == "info" and "Indexing of 'big' stopped: everything indexed so far is kept" in r[2]
        for r in reports
    )
    settle(qtbot, panel)
    s = panel.summary("big")
    assert s.pending == 1 and 0 < s.items < BIG and chip(panel.corpus_item("big")) == "pending 1"
    assert not panel.progress_box.isVisible()
    kept = s.items
    assert assert_consistent(ctx, "big")["vectors"] == kept

    with qtbot.waitSignal(panel.indexed, timeout=120_000, check_params_cb=lambda n: n == "big"):
        panel.resume_pending()
    settle(qtbot, panel)
    assert panel.summary("big").items == BIG and chip(panel.corpus_item("big")) == "indexed"
    assert assert_consistent(ctx, "big")["vectors"] == BIG


def test_rename_then_remove_while_indexing(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, make_pdf: Any, tmp_path: Path, reports: list[Any]
) -> None:
    big = make_pdf("big.pdf", page_texts(BIG))
    panel.add_and_index("big", [big])
    gate = FirstBatchGate(panel)
    gate.wait(qtbot)
    settle(qtbot, panel)
    panel.tree.setCurrentItem(panel.corpus_item("big"))
    panel.start_rename()
    panel.name_edit.setText("lectures")
    threading.Timer(0.3, gate.release.set).start()
    with qtbot.waitSignal(panel.indexed, timeout=120_000, check_params_cb=lambda n: n == "lectures"):
        panel.name_ok.click()  # stops the build, renames, resumes under the new name
    assert ctx.library.names() == ["lectures"]
    assert assert_consistent(ctx, "lectures")["items"] == BIG
    c = open_corpus(ctx, "lectures")
    assert all(str(ctx.library.corpus_dir("lectures")) in (i.image_path or "") for i in c.manifest.items())
    c.close()
    assert not [r for r in reports if r[0] in ("error", "warning")]

    panel.add_and_index("lectures", [make_pdf("more.pdf", page_texts(BIG), folder=tmp_path / "more")])
    gate = FirstBatchGate(panel)
    gate.wait(qtbot)
    threading.Timer(0.3, gate.release.set).start()
    with qtbot.waitSignal(panel.corporaChanged, timeout=120_000):
        assert panel.remove_corpus("lectures")  # stops the build first, then deletes
    assert ctx.library.names() == [] and not panel.is_busy()
    assert big.exists() and (tmp_path / "more" / "more.pdf").exists()


def test_closing_during_indexing_then_next_start_resumes(
    qtbot: Any, ctx: AppContext, minilm: Any, make_pdf: Any
) -> None:
    ctx.embedder = lambda: minilm
    big = make_pdf("big.pdf", page_texts(BIG))
    first = make_panel(qtbot, ctx)
    first.add_and_index("big", [big])
    gate = FirstBatchGate(first)
    gate.wait(qtbot)
    threading.Timer(0.3, gate.release.set).start()  # the batch in flight finishes while we wait
    assert first.shutdown(10)  # the window closes: stop at the next batch, keep what was done
    assert not [w for w in live_tasks() if w.name == "index-big"]  # the thread is gone
    c = open_corpus(ctx, "big")
    done = len(c.manifest.items())
    c.close()
    assert 0 < done < BIG

    second = make_panel(qtbot, ctx)  # the next start, same data directory
    with qtbot.waitSignal(second.indexed, timeout=120_000, check_params_cb=lambda n: n == "big"):
        second.resume_pending()
    assert assert_consistent(ctx, "big")["items"] == BIG
    second.shutdown(5)


# ---------------------------------------------------------------- bad drops
def test_unsupported_file_and_empty_folder_are_explained(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, tmp_path: Path, reports: list[Any]
) -> None:
    docx = tmp_path / "report.docx"
    docx.write_bytes(b"PK\x03\x04")
    empty = tmp_path / "empty"
    empty.mkdir()
    drop(panel, [docx, empty])
    qtbot.waitUntil(lambda: len(reports) >= 2, timeout=5000)
    assert reports[:2] == [
        (
            "warning",
            "Not added to default",
            f"report.docx is not a file type VRAG Desktop indexes ({SUPPORTED})",
        ),
        ("warning", "Not added to default", f"no files found in {empty}"),
    ]
    assert panel.hint.text() == "Nothing was added: see the messages."
    settle(qtbot, panel)
    assert ctx.library.names() == [] and not panel.is_busy()  # no corpus made for nothing

    note = tmp_path / "ok.txt"  # the app keeps working: "Add files…" (the dialog, replaced)
    note.write_text("A perfectly ordinary note about lighthouse keepers and storms.")
    panel.choose_files = lambda: [str(note)]
    with qtbot.waitSignal(panel.indexed, timeout=120_000):
        panel.act_add_files.trigger()
    folder = tmp_path / "more"
    folder.mkdir()
    (folder / "tides.md").write_text("Spring tides follow the full and the new moon, twice a month.")
    panel.choose_folder = lambda: str(folder)
    with qtbot.waitSignal(panel.indexed, timeout=120_000):
        panel.act_add_folder.trigger()
    settle(qtbot, panel)
    assert panel.summary("default").indexed == 2 and panel.summary("default").roots == (
        str(folder),
        str(note),
    )


def test_folder_that_disappears_is_kept_and_explained(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, make_pdf: Any, tmp_path: Path, reports: list[Any]
) -> None:
    drive = tmp_path / "usb"
    make_pdf("a.pdf", page_texts(2), folder=drive)
    make_pdf("b.pdf", page_texts(1, "storms"), folder=drive)
    index_and_wait(qtbot, panel, "usb", [drive])
    drive.rename(tmp_path / "unplugged")  # the drive is unplugged while the app runs

    with qtbot.waitSignal(panel.indexer.jobEnded, timeout=120_000):
        panel.rescan("usb")
    assert (
        "warning",
        "Corpus folder missing",
        f"{drive} is missing; its 2 indexed files are kept — reconnect it or remove it from the corpus",
    ) in reports
    expand(qtbot, panel, "usb")
    s = panel.summary("usb")
    assert (s.items, s.indexed, s.missing_roots) == (3, 2, (str(drive),))
    folder = panel.corpus_item("usb").child(0)
    assert chip(folder) == "missing"
    assert folder.data(0, SUB_ROLE) == "missing · 2 indexed files kept — reconnect it or remove it"
    assert html.escape(f"{drive} is missing; its 2 indexed files are kept") in folder.toolTip(0)
    assert "1 folder missing" in panel.corpus_item("usb").data(0, SUB_ROLE)
    assert assert_consistent(ctx, "usb")["vectors"] == 3

    (tmp_path / "unplugged").rename(drive)  # plugged back in
    with qtbot.waitSignal(panel.indexer.jobEnded, timeout=120_000):
        panel.rescan("usb")
    settle(qtbot, panel)
    assert panel.summary("usb").missing_roots == () and chip(panel.corpus_item("usb").child(0)) == "indexed"

    with qtbot.waitSignal(panel.indexer.jobEnded, timeout=120_000):  # "…or remove it from the corpus"
        assert panel.remove_folder("usb", str(drive))
    settle(qtbot, panel)
    assert panel.summary("usb").files == 0 and drive.exists()


def test_corpus_busy_in_another_process(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, reports: list[Any]
) -> None:
    ctx.library.open("shared", create=True).close()
    other = ctx.library.open("shared")  # another process's write lock (a separate lock file handle)
    other.lock()
    try:
        with qtbot.waitSignal(panel.indexer.jobEnded, timeout=10000) as sig:
            panel.rescan("shared")
        assert sig.args == ["shared", "failed"]
        assert (
            "warning",
            "Corpus busy",
            "corpus 'shared' is being indexed by another process. Nothing was changed; "
            "press Re-scan once it has finished.",
        ) in reports
    finally:
        other.close()
    with qtbot.waitSignal(panel.indexer.jobEnded, timeout=10000) as sig:
        panel.rescan("shared")
    assert sig.args == ["shared", "done"]


def test_embedder_that_cannot_load(qtbot: Any, ctx: AppContext, tmp_path: Path, reports: list[Any]) -> None:
    ctx.settings.embedder = "no-such-model"  # the real loader, failing
    panel = make_panel(qtbot, ctx)
    note = tmp_path / "n.md"
    note.write_text("Notes that wait for an embedder which cannot be loaded right now.")
    with qtbot.waitSignal(panel.indexer.jobEnded, timeout=10000) as sig:
        panel.add_and_index("notes", [note])
    assert sig.args == ["notes", "failed"]
    [err] = [r for r in reports if r[0] == "error"]
    assert err[1] == "Could not load the embedder"
    assert err[2].startswith("could not load the embedder 'no-such-model': unknown embedder")
    assert err[2].endswith("Nothing indexed so far is lost.")
    settle(qtbot, panel)
    assert chip(panel.corpus_item("notes")) == "pending 1"  # found and kept, waiting for a model
    panel.shutdown(5)


# ---------------------------------------------------------------- data directory problems
@pytest.mark.parametrize("where", ["under-a-file", "file-instead-of-folder"])
def test_unwritable_data_dir_is_explained_and_the_panel_keeps_working(
    qtbot: Any, tmp_path: Path, minilm: Any, reports: list[Any], where: str
) -> None:
    # Tests run as root (chmod cannot forbid writes): a path the OS refuses to create instead.
    blocker = tmp_path / "blocker"
    if where == "under-a-file":
        blocker.write_text("a regular file")
        data = blocker / "data"
    else:
        data = tmp_path / "data"
        data.mkdir()
        (data / "corpora").write_text("a file where the corpora folder should be")
    ctx = AppContext.for_dirs(data_dir=data, config_dir=tmp_path / "cfg")
    ctx.embedder = lambda: minilm
    panel = make_panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.banner.isVisible(), timeout=5000)
    word = "Not a directory" if where == "under-a-file" else "File exists"
    [(level, _title, text)] = [r for r in reports if r[1] == "Data directory unusable"]
    assert level == "error" and text == f"cannot create the data directory {data}: {word}"
    assert word in panel.banner_label.text()

    panel.new_corpus()
    panel.name_edit.setText("papers")  # a valid name; the disk refuses it
    panel.name_ok.click()
    qtbot.waitUntil(lambda: any(r[1] == "Cannot create the corpus" for r in reports), timeout=5000)
    assert panel.name_error.isVisible() and word in panel.name_error.text()
    with qtbot.waitSignal(panel.indexer.jobEnded, timeout=5000) as sig:
        panel.add_and_index("papers", [tmp_path])
    assert sig.args == ["papers", "failed"]

    good = tmp_path / "good-data"  # another data directory (Settings): everything works again
    ctx.set_data_dir(good)
    ctx.embedder = lambda: minilm
    panel.reload()
    qtbot.waitUntil(lambda: not panel.banner.isVisible(), timeout=5000)
    panel.close_editor()
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        panel.create_corpus("papers")
    assert (good / "corpora" / "papers" / "manifest.sqlite").is_file()

    ctx.set_data_dir(data)  # back to the unusable one: nothing from elsewhere is shown as if it were there
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        panel.reload()
    assert panel.corpus_names() == [] and panel.banner.isVisible()
    assert panel.stack.currentWidget() is panel.empty and "Corpora unavailable" in panel.empty.text()
    ctx.set_data_dir(good)
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        panel.reload()
    assert panel.corpus_names() == ["papers"] and not panel.banner.isVisible()
    panel.shutdown(5)


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs of our own (needs permission to mount; skipped elsewhere — the /dev/full
    variant below covers the same path on every machine)."""
    with tmpfs(tmp_path / "disk", "1m") as mnt:
        yield mnt


def test_read_only_disk_keeps_corpora_visible_and_explains(
    qtbot: Any, tiny_disk: Path, tmp_path: Path, minilm: Any, make_pdf: Any, reports: list[Any]
) -> None:
    ctx = AppContext.for_dirs(data_dir=tiny_disk / "data", config_dir=tmp_path / "cfg")
    ctx.embedder = lambda: minilm
    panel = make_panel(qtbot, ctx)
    docs = tmp_path / "docs"
    index_and_wait(qtbot, panel, "papers", [make_pdf("a.pdf", page_texts(2), folder=docs)])
    panel.shutdown(5)
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    try:
        again = make_panel(qtbot, ctx)  # the next start, on a disk that became read-only
        s = again.summary("papers")
        assert s is not None and (s.indexed, s.items) == (1, 2)  # still listed, with its counts
        make_pdf("b.pdf", page_texts(1, "tides"), folder=docs)
        with qtbot.waitSignal(again.indexer.jobEnded, timeout=10000) as sig:
            again.rescan("papers")
        assert sig.args == ["papers", "failed"]
        [(_, title, text)] = [r for r in reports if r[0] == "error"]
        assert title == "Cannot write to the data directory"
        assert text.startswith(
            f"Indexing 'papers' stopped: Read-only file system — data directory {ctx.data_dir}"
        )
        settle(qtbot, again)
        assert again.summary("papers").items == 2
        again.shutdown(5)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(tiny_disk)], check=False)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with pytest.raises(OSError), open(filler, "wb", buffering=0) as fh:
        while True:
            fh.write(b"\0" * 4096)
    return filler


def _full_disk_round(
    qtbot: Any,
    panel: CorporaPanel,
    ctx: AppContext,
    make_pdf: Any,
    tmp_path: Path,
    reports: list[Any],
    fill: Any,
) -> None:
    """Index one file; make the disk full; add another: a clear error, the first is intact; free
    the space, Re-scan: the second is indexed too."""
    docs = tmp_path / "docs"
    index_and_wait(qtbot, panel, "papers", [make_pdf("first.pdf", page_texts(1), folder=docs)])
    before = assert_consistent(ctx, "papers")
    undo = fill()
    second = make_pdf("second.pdf", page_texts(2, "tides"), folder=docs)
    with qtbot.waitSignal(panel.indexer.jobEnded, timeout=120_000):
        panel.add_and_index("papers", [second])
    errors = [r for r in reports if r[0] == "error"]
    assert errors, reports
    title, text = errors[-1][1], errors[-1][2]
    assert title in ("Cannot write to the data directory", "Data directory full or read-only")
    assert ("No space left on device" in text or "database or disk is full" in text) and str(
        ctx.data_dir
    ) in text
    assert "Everything indexed before is kept" in text
    undo()
    c = open_corpus(ctx, "papers")
    src = c.manifest.source_by_path(str(docs / "first.pdf"))
    assert src.status == "indexed" and len(c.manifest.items(src.id)) == 1
    c.close()
    assert assert_consistent(ctx, "papers")["vectors"] >= before["vectors"]

    with qtbot.waitSignal(panel.indexer.jobEnded, timeout=120_000) as sig:  # space again: Re-scan
        panel.rescan("papers")
    assert sig.args == ["papers", "done"]
    settle(qtbot, panel)
    s = panel.summary("papers")
    assert (s.indexed, s.items, s.failed) == (2, 3, 0)
    assert assert_consistent(ctx, "papers")["vectors"] == 3


def test_full_disk_tmpfs(
    qtbot: Any, tiny_disk: Path, tmp_path: Path, minilm: Any, make_pdf: Any, reports: list[Any]
) -> None:
    ctx = AppContext.for_dirs(data_dir=tiny_disk / "data", config_dir=tmp_path / "cfg")
    ctx.embedder = lambda: minilm
    panel = make_panel(qtbot, ctx)

    def fill() -> Any:
        filler = _fill(tiny_disk)
        return filler.unlink

    _full_disk_round(qtbot, panel, ctx, make_pdf, tmp_path, reports, fill)
    panel.shutdown(5)


def test_full_disk_dev_full(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, make_pdf: Any, tmp_path: Path, reports: list[Any]
) -> None:
    index_dir = ctx.library.corpus_dir("papers") / "index"

    def fill() -> Any:
        # the index's next segment files are written through /dev/full: ENOSPC on write
        links = [index_dir / f".seg-{n:08d}.npz.tmp" for n in range(1, 40)]
        for link in links:
            link.symlink_to("/dev/full")

        def undo() -> None:
            for link in links:
                link.unlink(missing_ok=True)

        return undo

    _full_disk_round(qtbot, panel, ctx, make_pdf, tmp_path, reports, fill)
