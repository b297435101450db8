"""Files and folders the app is opened with (``vrag-desktop gui <folder>``) go where the person says:
a new corpus named after the folder or an existing one, asked, never the selected one silently;
what was given is said as "1 folder (N files)". A new corpus gets its embedder when it is made,
and indexing uses that one, not whatever the default is then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.core.corpus.scan import paths_summary
from vrag_desktop.qt.context import AppContext
from vrag_desktop.qt.corpora.add_to_corpus import ask_and_add
from vrag_desktop.qt.corpora.corpora_panel import CorporaPanel


@pytest.fixture
def panel(qtbot: Any, ctx: AppContext, minilm: Any) -> Iterator[CorporaPanel]:
    ctx.embedder = lambda spec=None: minilm  # the session's real MiniLM; no second load
    p = CorporaPanel(ctx)
    p.resize(380, 620)
    qtbot.addWidget(p)
    p.show()
    qtbot.waitUntil(lambda: not p.reader.reading, timeout=5000)
    yield p
    p.shutdown(10)


def _folder(make_pdf: Any, tmp_path: Path) -> Path:
    folder = tmp_path / "reports"
    for name in ("q1.pdf", "q2.pdf"):
        make_pdf(name, [f"Quarterly report {name}: revenue grew by a lot this quarter."], folder)
    (folder / "notes.xyz").write_text("not a kind the app indexes")
    (folder / ".hidden.pdf").write_bytes(b"skipped: hidden")
    return folder


def test_paths_are_said_as_folders_and_their_files(make_pdf: Any, tmp_path: Path) -> None:
    folder = _folder(make_pdf, tmp_path)
    loose = make_pdf("memo.pdf", ["A memo about the quarterly reports and their numbers."])
    assert paths_summary([str(folder)]) == "1 folder (2 files)"
    assert paths_summary([str(folder), str(loose)]) == "1 folder (2 files) and 1 file"
    assert paths_summary([str(loose)]) == "1 file"
    assert paths_summary([str(folder)], limit=1) == "1 folder (1+ files)"


def test_a_folder_opened_with_the_app_asks_and_goes_to_a_new_corpus_named_after_it(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, make_pdf: Any, tmp_path: Path
) -> None:
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        panel.create_corpus("papers")
    qtbot.waitUntil(lambda: panel.selected_corpus() == "papers", timeout=5000)
    folder = _folder(make_pdf, tmp_path)

    dlg = ask_and_add(panel, [str(folder)])
    assert dlg is not None and dlg.isVisible() and dlg.isModal()
    assert dlg.new_radio.isChecked() and dlg.new_name.text() == "reports"  # not the selected corpus
    assert dlg.existing.currentText() in ("papers", "")
    qtbot.waitUntil(lambda: dlg.what.text() == "Add 1 folder (2 files) to:", timeout=10_000)
    with qtbot.waitSignal(panel.indexed, timeout=120_000, check_params_cb=lambda n: n == "reports"):
        dlg.ok_button.click()
    qtbot.waitUntil(lambda: (s := panel.summary("reports")) is not None and s.indexed == 2, timeout=10_000)
    assert panel.summary("papers").files == 0  # type: ignore[union-attr]

    # the folder's corpus exists now: opening it again offers that one; a file can go to another
    again = ask_and_add(panel, [str(folder)])
    assert again is not None and again.existing_radio.isChecked()
    assert again.existing.currentText() == "reports"
    again.reject()
    memo = make_pdf("memo.pdf", ["A memo about the quarterly reports and their numbers."])
    third = ask_and_add(panel, [str(memo)])
    assert third is not None and third.new_name.text() == "memo"
    third.new_name.setText("no/slashes")
    assert not third.ok_button.isEnabled() and third.problem.isVisible()
    third.existing.setCurrentText("papers")
    third.existing_radio.setChecked(True)
    assert third.ok_button.isEnabled()
    with qtbot.waitSignal(panel.indexed, timeout=120_000, check_params_cb=lambda n: n == "papers"):
        third.ok_button.click()
    assert ctx.library.names() == ["papers", "reports"]


def test_cancel_adds_nothing(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, make_pdf: Any, tmp_path: Path
) -> None:
    dlg = ask_and_add(panel, [str(_folder(make_pdf, tmp_path))])
    assert dlg is not None
    dlg.reject()
    qtbot.wait(200)
    assert ctx.library.names() == [] and not panel.is_busy()


def test_a_new_corpus_gets_its_embedder_and_indexing_uses_it(
    qtbot: Any, panel: CorporaPanel, ctx: AppContext, minilm: Any, make_pdf: Any
) -> None:
    from vrag_desktop.core.embedders import KNOWN_EMBEDDERS

    panel.new_corpus()
    combo = panel.editor.embedder_combo
    assert panel.editor.embedder_row.isVisible()
    assert [combo.itemText(i) for i in range(combo.count())] == [s for s, _t in KNOWN_EMBEDDERS]
    assert combo.currentText() == ctx.settings.embedder == "minilm"  # the default first
    combo.setCurrentText("Alibaba-NLP/GVE-3B")
    panel.editor.name_edit.setText("videos")
    with qtbot.waitSignal(panel.corporaChanged, timeout=5000):
        panel.editor.name_ok.click()
    corpus = ctx.library.open("videos", read_only=True)
    try:
        assert corpus.manifest.get_meta("embedder_model") == "Alibaba-NLP/GVE-3B"
    finally:
        corpus.close()
    qtbot.waitUntil(lambda: (s := panel.summary("videos")) is not None and s.embedder == "Alibaba-NLP/GVE-3B")

    asked: list[str | None] = []
    ctx.embedder = lambda spec=None: asked.append(spec) or minilm  # the test's stand-in for GVE
    pdf = make_pdf("clip-notes.pdf", ["Notes about the clips in the video corpus, with enough text."])
    with qtbot.waitSignal(panel.indexed, timeout=120_000, check_params_cb=lambda n: n == "videos"):
        panel.add_and_index("videos", [pdf])
    assert asked == ["Alibaba-NLP/GVE-3B"]  # the corpus's own, not the default (minilm)
    panel.start_rename()
    assert not panel.editor.embedder_row.isVisible()  # renaming keeps the embedder it has
