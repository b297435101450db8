"""Folder watching (issue 27): a corpus folder that changes while the app runs is rescanned.

The policy (debounce, which paths matter) is checked on its own with given times and real files;
the app's side with the real watcher (watchdog on inotify), the real panel, indexer and MiniLM: a
file added, changed and removed is picked up within seconds; nothing is when watching is off; a
change during indexing is rescanned once after the job; reading the folder (indexing) is no change.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from qt.test_corpora_panel import BIG, FirstBatchGate, index_and_wait, make_panel, page_texts, settle
from vrag_desktop.core.corpus.status import read_items
from vrag_desktop.core.corpus.watch import Debounce, FolderWatcher, Place, Relevance, Watched, plan_places
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel
from vrag_desktop.qt.corpora.corpora_toolbar import row_menu
from vrag_desktop.qt.corpora.folder_watch import FolderWatch

QUIET_S = 0.4  # the tests' quiet time (the app's is 2 s); the policy itself is tested with its own


# ---------------------------------------------------------------- the policy
def test_debounce_waits_for_quiet_but_never_past_the_maximum() -> None:
    d: Debounce[str] = Debounce(quiet_s=2.0, max_wait_s=20.0)
    assert d.next_due() is None and d.take_due(100.0) == []
    assert d.touch("a", 0.0) is True  # first change: the caller arms its timer
    assert d.touch("a", 1.5) is False  # more changes: no second wake-up
    assert d.next_due() == 3.5 and d.take_due(3.4) == []
    for t in range(2, 40):  # a folder that never goes quiet (a change a second)
        d.touch("a", float(t))
        if d.take_due(float(t)):
            break
    assert t == 20  # still rescanned, 20 s after its first change
    d.touch("b", 50.0)
    d.touch("c", 50.5)
    assert d.take_due(52.2) == ["b"] and d.pending() == ["c"]
    assert d.touch("b", 53.0) is True  # due and taken: a new change starts afresh
    d.forget("c")
    assert d.take_due(60.0) == ["b"] and d.next_due() is None


def test_which_changes_matter(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub" / "skipped").mkdir(parents=True)
    (docs / ".vragignore").write_text("questions.json\n")
    (docs / "sub" / ".vragignore").write_text("skipped\n*.tmp\n")
    alone = tmp_path / "alone.pdf"
    alone.write_bytes(b"%PDF")
    data = docs / "app-data"
    r = Relevance([Watched("c", (str(docs), str(alone))), Watched("d", (str(docs / "sub"),))], data)

    def who(path: Path) -> set[str]:
        return set(r.corpora_touched(str(path)))

    assert who(docs / "a.pdf") == {"c"}
    assert who(docs / "sub" / "b.pdf") == {"c", "d"}  # in both corpora's folders
    assert who(docs / ".a.pdf.swp") == set() and who(docs / ".git" / "index") == set()  # hidden
    assert who(docs / "questions.json") == set()  # .vragignore
    assert who(docs / "sub" / "skipped" / "x.pdf") == set() and who(docs / "sub" / "y.tmp") == set()
    assert who(docs / "sub" / ".vragignore") == {"c", "d"}  # what is indexed changes with it
    assert who(data / "corpora" / "c" / "derived" / "p1.jpg") == set()  # the app's own writes
    assert who(alone) == {"c"} and who(tmp_path / "other.pdf") == set()
    assert who(docs) == who(tmp_path) == {"c", "d"}  # a folder itself, or one above it, came or went
    (docs / "sub" / ".vragignore").write_text("nothing\n")
    r.corpora_touched(str(docs / "sub" / ".vragignore"))  # its change forgets the old rules
    assert who(docs / "sub" / "y.tmp") == {"c", "d"}

    gone = tmp_path / "usb" / "photos"
    places = plan_places(
        [
            Watched("c", (str(docs), str(alone))),
            Watched("d", (str(docs / "sub"),)),
            Watched("e", (str(gone),)),
        ]
    )
    # one tree for docs (sub is inside it), the folder of a file added alone, and the nearest
    # existing parent of a missing folder, to see it come back
    assert places == {Place(str(docs), True), Place(str(tmp_path), False)}


def test_the_watcher_reports_writes_but_never_reads(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("first")
    woke = threading.Event()
    w = FolderWatcher(woke.set, quiet_s=0.2, max_wait_s=5)
    try:
        assert w.sync([Watched("c", (str(docs),))], tmp_path / "data") == []
        assert w.places() == {Place(str(docs), True)}
        (docs / "a.md").read_text()
        os.listdir(docs)
        assert not woke.wait(0.5) and w.next_due() is None
        (docs / "a.md").write_text("second")
        assert woke.wait(5)
        due = w.next_due()
        assert due is not None and w.take_due(due - 0.05) == {}
        assert w.take_due(due) == {"c": {str(docs)}}
        w.sync([], None)
        assert w.places() == set()
        (docs / "b.md").write_text("not watched any more")
        time.sleep(0.4)
        assert w.next_due() is None
    finally:
        w.close()


# ---------------------------------------------------------------- the app
@pytest.fixture
def panel(
    qtbot: Any, ctx: AppContext, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CorporaPanel]:
    monkeypatch.setattr(FolderWatch, "QUIET_S", QUIET_S)
    ctx.embedder = lambda: minilm
    p = make_panel(qtbot, ctx)
    yield p
    p.shutdown(10)


def watched(qtbot: Any, panel: CorporaPanel, folder: Path) -> None:
    qtbot.waitUntil(lambda: Place(str(folder), True) in panel.watch.places(), timeout=10000)


def texts(ctx: AppContext, name: str) -> list[str]:
    items, _ = read_items(ctx.library.corpus_dir(name))
    return sorted(i.text for i in items)


def test_a_watched_folder_is_rescanned_when_files_come_change_and_go(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, tmp_path: Path, reports: list[Any]
) -> None:
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "tides.md").write_text("High tide at the harbour is at six in the morning.")
    index_and_wait(qtbot, panel, "notes", [docs])
    watched(qtbot, panel, docs)
    assert panel.summary("notes").watch
    qtbot.wait(int(4 * QUIET_S * 1000))  # events processed meanwhile
    assert panel.watch.rescans == []  # indexing read the folder: that is no change

    (docs / "storms.md").write_text("Storms in the north sea bring waves of nine metres.")
    (docs / ".storms.md.swp").write_text("an editor's hidden file")
    qtbot.waitUntil(
        lambda: (panel.summary("notes").files, panel.summary("notes").indexed) == (2, 2), timeout=20000
    )
    assert texts(ctx, "notes") == [
        "High tide at the harbour is at six in the morning.",
        "Storms in the north sea bring waves of nine metres.",
    ]

    (docs / "tides.md").write_text("Low tide at the harbour is at noon.")
    qtbot.waitUntil(lambda: "Low tide at the harbour is at noon." in texts(ctx, "notes"), timeout=20000)
    (docs / "storms.md").unlink()
    qtbot.waitUntil(lambda: panel.summary("notes").files == 1, timeout=20000)
    settle(qtbot, panel)
    assert texts(ctx, "notes") == ["Low tide at the harbour is at noon."]
    assert panel.watch.rescans == ["notes"] * 3  # one rescan per change, none of its own making
    assert not [r for r in reports if r[0] in ("error", "warning")]


def test_nothing_is_picked_up_when_watching_is_off(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, tmp_path: Path
) -> None:
    docs = tmp_path / "notes"
    docs.mkdir()
    (docs / "a.md").write_text("Lighthouses guide ships past the rocky northern coast.")
    index_and_wait(qtbot, panel, "notes", [docs])
    watched(qtbot, panel, docs)

    switch = next(a for a in row_menu(panel, panel.corpus_item("notes")).actions() if a.isCheckable())
    assert switch.text() == "Watch folders for changes" and switch.isChecked() and switch.isEnabled()
    switch.toggle()  # off: kept in the corpus's manifest
    qtbot.waitUntil(lambda: not panel.summary("notes").watch, timeout=10000)
    qtbot.waitUntil(lambda: panel.watch.places() == set(), timeout=10000)
    c = ctx.library.open("notes")
    assert c.manifest.get_meta("watch") == "0"
    c.close()
    assert "not watching its folders" in panel.corpus_item("notes").toolTip(0)
    (docs / "b.md").write_text("Honeybees dance to tell the hive where the flowers are.")
    qtbot.wait(int(5 * QUIET_S * 1000))  # events processed meanwhile
    assert panel.watch.rescans == [] and not panel.is_busy()
    settle(qtbot, panel)
    assert panel.summary("notes").files == 1

    switch = next(a for a in row_menu(panel, panel.corpus_item("notes")).actions() if a.isCheckable())
    assert not switch.isChecked()
    with qtbot.waitSignal(panel.indexed, timeout=30000):
        switch.toggle()  # back on: rescanned once, so what changed meanwhile is picked up
    settle(qtbot, panel)
    assert panel.summary("notes").watch and panel.summary("notes").files == 2
    watched(qtbot, panel, docs)


def test_a_change_during_indexing_is_rescanned_once_after_the_job(
    qtbot: Any, panel: CorporaPanel, make_pdf: Any, tmp_path: Path
) -> None:
    docs = tmp_path / "lectures"
    make_pdf("intro.pdf", page_texts(1), folder=docs)
    index_and_wait(qtbot, panel, "lectures", [docs])
    watched(qtbot, panel, docs)
    ended: list[tuple[str, str]] = []
    panel.indexer.jobEnded.connect(lambda n, o: ended.append((n, o)))

    gates: list[FirstBatchGate] = []  # set on the job's worker as soon as the watch starts it
    panel.indexer.jobStarted.connect(
        lambda _n: gates.append(FirstBatchGate(panel)) if not gates else None,
        Qt.ConnectionType.QueuedConnection,
    )
    make_pdf("big.pdf", page_texts(BIG, "tides"), folder=docs)  # picked up by the watch...
    qtbot.waitUntil(lambda: bool(gates), timeout=20000)
    gate = gates[0]
    gate.wait(qtbot)  # ...and held mid-build, while another file arrives
    (docs / "late.md").write_text("A note written while the lecture slides were being indexed.")
    qtbot.wait(int(4 * QUIET_S * 1000))  # events processed meanwhile
    assert panel.indexer.current() == "lectures" and panel.indexer.queued() == []  # not while indexing
    gate.release.set()
    qtbot.waitUntil(lambda: len(ended) == 2, timeout=180_000)  # two builds of BIG pages on a busy CPU
    settle(qtbot, panel)
    assert ended == [("lectures", "done"), ("lectures", "done")]
    assert panel.watch.rescans == ["lectures", "lectures"]
    s = panel.summary("lectures")
    assert (s.files, s.indexed, s.items) == (3, 3, 1 + BIG + 1)
    qtbot.wait(int(4 * QUIET_S * 1000))  # events processed meanwhile
    assert len(ended) == 2 and not panel.is_busy()  # and then quiet: no loop
