"""Add to dataset… on real saved runs: pre-filled dialog, the answer to be checked, evidence ticked
in the dialog or picked in the evidence view, the item written to disk, and the refusals."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from shiboken6 import isValid

from qt.test_history_panel import record, vrag_events
from vrag_desktop.core.agents.events import AgentEvent, Answer, SearchResults
from vrag_desktop.core.datasets.store import DatasetStore
from vrag_desktop.qt.datasets.add_to_dataset import add_run_to_dataset
from vrag_desktop.qt.datasets.item_dialog import CHECK_NOTE, ItemDialog
from vrag_desktop.qt.evidence.evidence_view import EvidenceView

QUESTION = "How heavy a load can the Atlas robot carry?"
REGION = {"file": "robots.pdf", "page": 2, "bbox": [20, 30, 100, 120]}


def page_events(image_dir: Path) -> list[AgentEvent]:
    """History's VRAG run, its hit a PDF page and its answer citing the page's region (as agents
    record a document page)."""
    out: list[AgentEvent] = []
    for ev in vrag_events(image_dir):
        if isinstance(ev, SearchResults):
            ev = dataclasses.replace(ev, hits=tuple(dataclasses.replace(h, modality="page") for h in ev.hits))
        if isinstance(ev, Answer):
            page = str(image_dir / "page-2.png")
            ev = dataclasses.replace(
                ev, evidence=tuple(dataclasses.replace(e, image=page) for e in ev.evidence)
            )
        out.append(ev)
    return out


@pytest.fixture
def run_id(ctx: Any) -> str:
    return record(ctx.runs, QUESTION, page_events)


_OPENED: list[ItemDialog] = []


@pytest.fixture(autouse=True)
def _close_dialogs() -> Iterator[None]:
    """Close the dialogs a test left open. Not ``qtbot.addWidget``: the dialog deletes itself when
    saved, and pytest-qt's teardown closes a widget whose Python wrapper outlived it (a reference
    cycle not yet collected), which raises on the deleted C++ object."""
    yield
    while _OPENED:
        dialog = _OPENED.pop()
        if isValid(dialog):
            dialog.close()


def _open(qtbot: Any, ctx: Any, run_id: str, view: EvidenceView | None = None, **kw: Any) -> ItemDialog:
    got: list[ItemDialog] = []
    add_run_to_dataset(ctx, run_id, view=view, opened=got.append, **kw)
    qtbot.waitUntil(lambda: bool(got), timeout=5000)
    _OPENED.append(got[0])
    return got[0]


def _view(qtbot: Any, ctx: Any, run_id: str) -> EvidenceView:
    view = EvidenceView(ctx)
    qtbot.addWidget(view)
    view.resize(1100, 700)
    view.show()
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.load_run(run_id)
    return view


def _save(qtbot: Any, dialog: ItemDialog) -> tuple[str, Any]:
    with qtbot.waitSignal(dialog.saved, timeout=5000) as blocker:
        assert dialog.submit()
    return blocker.args[0], blocker.args[1]


def test_dialog_prefilled_from_the_run_and_the_answer_marked_to_check(
    qtbot: Any, ctx: Any, run_id: str
) -> None:
    dialog = _open(qtbot, ctx, run_id)
    assert dialog.question.toPlainText() == QUESTION
    assert dialog.answer.toPlainText() == "450 kg"  # the agent's answer, pre-filled...
    assert dialog.note.text() == CHECK_NOTE and not dialog.note.isHidden()  # ...and marked as such
    assert not dialog.checked.isChecked()
    page = dialog.evidence.chosen()[0].key
    assert dialog.picks() == [(page, 1)]  # the answer cited region 1 of page 2
    assert dialog.file_name.text() == "robots.pdf" and dialog.pages.text() == "2"
    assert "1 region picked" in dialog.regions_label.text()
    assert dialog.dataset.currentText() == "" and "new dataset" in dialog.dataset_hint.text()


def test_refusals_are_shown_in_the_dialog_and_nothing_is_written(
    qtbot: Any, ctx: Any, run_id: str, reports: list[Any]
) -> None:
    dialog = _open(qtbot, ctx, run_id)
    dialog.show()
    dialog.dataset.setCurrentText("gold")
    assert not dialog.submit()  # the answer is not confirmed yet
    assert dialog.message.isVisible() and "I checked the reference answer" in dialog.message.text()
    dialog.checked.setChecked(True)
    dialog.question.setPlainText("   ")
    assert not dialog.submit()
    assert "question is empty" in dialog.message.text()
    dialog.question.setPlainText(QUESTION)
    dialog.answer.setPlainText("")
    assert not dialog.submit()
    assert "reference answer is empty" in dialog.message.text()
    dialog.answer.setPlainText("450 kg")
    dialog.dataset.setCurrentText("a/b")
    assert not dialog.submit()
    assert "invalid dataset name" in dialog.message.text()
    assert not ctx.layout.datasets.exists()  # nothing written by any refusal
    assert dialog.isVisible()  # what was typed is still there


def test_item_written_with_the_regions_picked_in_the_evidence_view(qtbot: Any, ctx: Any, run_id: str) -> None:
    view = _view(qtbot, ctx, run_id)
    dialog = _open(qtbot, ctx, run_id, view=view, parent=None)
    assert view.picking and view.pick_button.isVisible()
    page = view.current
    assert view.picked == {(page, 1)}
    assert "picked as evidence: region 1" in view.title.text()
    assert "Click a region" in view.crop_note.text() and view.crop_note.isVisible()
    view.pick_button.click()  # "Page is evidence": the whole page too
    assert (page, None) in dialog.picks() and view.pick_button.isChecked()
    view.page_view.regionClicked.emit(1)  # a click on region 1 unticks it
    assert dialog.picks() == [(page, None)]
    view.page_view.regionClicked.emit(1)  # and ticks it again
    assert set(dialog.picks()) == {(page, None), (page, 1)}
    dialog.answer.setPlainText("450 kg (payload)")  # the person corrects the answer
    dialog.checked.setChecked(True)
    dialog.dataset.setCurrentText("robots gold")
    dialog.query_type.setCurrentText("Single-Hop")
    name, item = _save(qtbot, dialog)
    assert name == "robots gold" and item.uid == "item-1"
    raw = json.loads((ctx.layout.datasets / "robots gold.json").read_text())["examples"]
    assert raw == [
        {
            "uid": "item-1",
            "query": QUESTION,
            "reference_answer": "450 kg (payload)",
            "meta_info": {
                "file_name": "robots.pdf",
                "reference_page": [2],
                "source_type": "",
                "query_type": "Single-Hop",
                "doc_type": "",
                "answer_format": "",
                "evidence_regions": [REGION],
            },
        }
    ]
    qtbot.waitUntil(lambda: not view.picking, timeout=2000)  # pick mode ends with the dialog
    assert view.pick_button.isHidden()


def test_damaged_dataset_refused_in_the_dialog_and_left_untouched(
    qtbot: Any, ctx: Any, run_id: str, reports: list[Any]
) -> None:
    folder = ctx.layout.datasets
    folder.mkdir(parents=True)
    damaged = '{"examples": [{"uid": "a", "query": "q"'
    (folder / "gold.json").write_text(damaged)
    dialog = _open(qtbot, ctx, run_id, dataset="gold")
    dialog.show()
    assert dialog.dataset.currentText() == "gold"
    dialog.checked.setChecked(True)
    assert dialog.submit()  # the fields are fine; the write is refused
    qtbot.waitUntil(lambda: dialog.message.isVisible(), timeout=5000)
    assert "gold.json" in dialog.message.text() and "not JSON" in dialog.message.text()
    assert (folder / "gold.json").read_text() == damaged
    assert dialog.isVisible()


def test_second_item_in_an_existing_dataset_gets_its_own_uid(qtbot: Any, ctx: Any, run_id: str) -> None:
    store: DatasetStore = ctx.datasets
    store.create("gold")
    for _ in range(2):
        dialog = _open(qtbot, ctx, run_id)
        assert dialog.dataset.currentText() == "gold"  # the one dataset there is, offered
        dialog.checked.setChecked(True)
        _save(qtbot, dialog)
    assert [i.uid for i in store.load("gold")] == ["item-1", "item-2"]


def test_main_window_history_to_dialog_to_datasets_view(qtbot: Any, ctx: Any, run_id: str) -> None:
    from vrag_desktop.qt.main_window import MainWindow

    w = MainWindow(ctx, first_run=False)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitUntil(lambda: w.history.model.rowCount() == 1, timeout=5000)
    assert w.history.select_run(run_id)
    assert w.history.label_action.isEnabled()
    w.history.label_action.trigger()
    qtbot.waitUntil(lambda: getattr(w, "add_dialog", None) is not None, timeout=5000)
    dialog = w.add_dialog
    qtbot.waitUntil(lambda: w.evidence.picking and w.evidence.current is not None, timeout=5000)
    dialog.checked.setChecked(True)
    dialog.dataset.setCurrentText("gold")
    with qtbot.waitSignal(w.datasets.itemsShown, timeout=5000, check_params_cb=lambda n: n == "gold"):
        _save(qtbot, dialog)
    assert w.datasets.model.rowCount() == 1
    assert w.datasets_dock.windowTitle() == "Datasets"
    assert Path(ctx.layout.datasets / "gold.json").is_file()
