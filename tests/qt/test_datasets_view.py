"""The Datasets dock on real dataset files: listing with counts, items, edit, delete, import, export,
matching against an indexed corpus, and the bad inputs (damaged file, unwritable export place)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vrag_desktop.core.datasets import DatasetItem, load_dataset
from vrag_desktop.core.datasets.store import DatasetStore, with_regions
from vrag_desktop.qt.datasets.datasets_panel import EMPTY_DATASET, NO_DATASETS, DatasetsPanel

ITEMS = [
    with_regions(
        DatasetItem(
            "a1", "How heavy a load can Atlas carry?", "450 kg", "robots.pdf", (2,), query_type="Single-Hop"
        ),
        [{"file": "robots.pdf", "page": 2, "bbox": [20, 30, 100, 120]}],
    ),
    DatasetItem("a2", "Battery life of Atlas?", "14 hours", "robots.pdf", (9,)),  # no page 9
    DatasetItem("a3", "Who wrote the letter?", "The CEO", "letters.pdf", (1,)),  # not indexed
]


def _panel(qtbot: Any, ctx: Any) -> DatasetsPanel:
    panel = DatasetsPanel(ctx)
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    return panel


def _shown(qtbot: Any, panel: DatasetsPanel, action: Any, name: str | None = None) -> None:
    """Do ``action`` and wait until the panel shows ``name`` (any dataset when None)."""
    with qtbot.waitSignal(
        panel.itemsShown, timeout=5000, check_params_cb=(lambda n: n == name) if name is not None else None
    ):
        action()


@pytest.fixture
def store(ctx: Any) -> DatasetStore:
    s = ctx.datasets
    for item in ITEMS:
        s.add_item("gold", item, create=True)
    return s


def test_empty_state_says_what_to_do(qtbot: Any, ctx: Any) -> None:
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.message.text() == NO_DATASETS, timeout=3000)
    assert panel.stack.currentWidget() is panel.message and "Add to dataset" in panel.message.text()
    assert not panel.more_button.isEnabled() and not panel.edit_button.isEnabled()


def test_lists_datasets_with_counts_and_items(qtbot: Any, ctx: Any, store: DatasetStore) -> None:
    store.create("empty")
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.list.count() == 2, timeout=3000)
    assert [panel.list.item(r).text() for r in range(2)] == ["empty  ·  0 items", "gold  ·  3 items"]
    _shown(qtbot, panel, lambda: panel.list.setCurrentRow(1), "gold")
    assert panel.stack.currentWidget() is panel.table and panel.model.rowCount() == 3
    row = [panel.model.index(0, c).data() for c in range(6)]
    assert row == ["a1", ITEMS[0].query, "450 kg", "robots.pdf", "2 (1 region)", "Single-Hop"]
    qtbot.waitUntil(lambda: "No indexed corpora" in panel.match_label.text(), timeout=5000)
    _shown(qtbot, panel, lambda: panel.list.setCurrentRow(0), "empty")
    assert panel.message.text() == EMPTY_DATASET


def test_matching_against_the_indexed_corpus(qtbot: Any, indexed: Any, store: DatasetStore) -> None:
    panel = _panel(qtbot, indexed)
    qtbot.waitUntil(lambda: "match the corpora" in panel.match_label.text(), timeout=20000)
    assert panel.match_label.text().startswith("1 of 3 items match the corpora (robots) · a2: page(s) [9]")
    assert panel.match_label.text().endswith("(and 1 more: hover)")
    tip = panel.match_label.toolTip()
    assert "a2: page(s) [9] of robots.pdf do not exist" in tip and "a3: letters.pdf is not in" in tip


def test_new_rename_delete_dataset(qtbot: Any, ctx: Any, store: DatasetStore) -> None:
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.list.count() == 1, timeout=3000)
    panel.ask_name = lambda *_: "second"
    _shown(qtbot, panel, panel.new_dataset, "second")
    assert panel.names() == ["gold", "second"] and panel.current_name() == "second"
    panel.ask_name = lambda *_: "gold"  # taken: refused, reported
    with qtbot.waitSignal(panel.refreshed, timeout=3000):
        panel.rename_selected()
    assert store.names() == ["gold", "second"]
    panel.ask_name = lambda *_: "2nd"
    _shown(qtbot, panel, panel.rename_selected, "2nd")
    assert store.names() == ["2nd", "gold"]
    asked: list[str] = []
    panel.confirm = lambda _t, text: asked.append(text) is None and False  # says no
    panel.delete_dataset_selected()
    assert asked and "2nd" in asked[0] and store.names() == ["2nd", "gold"]
    panel.confirm = lambda *_: True
    _shown(qtbot, panel, panel.delete_dataset_selected, "gold")
    assert store.names() == ["gold"]


def test_edit_and_delete_items(qtbot: Any, ctx: Any, store: DatasetStore) -> None:
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 3, timeout=3000)
    panel.table.selectRow(0)
    dialog = panel.edit_selected()
    assert dialog is not None and dialog.question.toPlainText() == ITEMS[0].query
    assert dialog.note.isHidden() and "1 picked region kept" in dialog.regions_label.text()
    dialog.answer.setPlainText("")
    assert not dialog.submit() and "reference answer is empty" in dialog.message.text()
    dialog.answer.setPlainText("450 kilograms")
    dialog.pages.setText("two")
    assert not dialog.submit() and "counted from 1" in dialog.message.text()
    dialog.pages.setText("2, 3")
    with qtbot.waitSignal(panel.itemsShown, timeout=5000), qtbot.waitSignal(dialog.saved, timeout=5000):
        assert dialog.submit()
    edited = store.load("gold").items[0]
    assert edited.reference_answer == "450 kilograms" and edited.reference_page == (2, 3)
    assert edited.extra_meta["evidence_regions"] == ITEMS[0].extra_meta["evidence_regions"]  # kept
    qtbot.waitUntil(lambda: panel.model.rowCount() == 3, timeout=3000)
    panel.table.selectRow(1)
    panel.confirm = lambda *_: True
    with qtbot.waitSignal(panel.itemsShown, timeout=5000):
        panel.delete_items_selected()
    qtbot.waitUntil(lambda: panel.model.rowCount() == 2, timeout=3000)
    assert [i.uid for i in store.load("gold")] == ["a1", "a3"]


def test_import_renames_taken_uids_and_reports(
    qtbot: Any, ctx: Any, store: DatasetStore, tmp_path: Path, reports: list[Any]
) -> None:
    src = tmp_path / "more.jsonl"
    src.write_text(
        json.dumps(ITEMS[0].to_dict()) + "\n" + json.dumps({**ITEMS[1].to_dict(), "uid": "b1"}) + "\n"
    )
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 3, timeout=3000)
    panel.choose_open = lambda _title: str(src)
    asked: list[tuple[str, list[str], str | None]] = []
    panel.choose_target = lambda *a: asked.append(a) and None  # cancelled: nothing imported
    panel.import_selected()
    assert asked == [(str(src), ["gold"], "gold")] and len(store.load("gold")) == 3
    panel.choose_target = lambda *_: "gold"  # the person picks the existing dataset
    with qtbot.waitSignal(panel.itemsShown, timeout=5000):
        panel.import_selected()
    qtbot.waitUntil(lambda: panel.model.rowCount() == 5, timeout=3000)
    assert [i.uid for i in store.load("gold")] == ["a1", "a2", "a3", "a1-2", "b1"]
    assert any(t == "Imported into gold" and "imported as 'a1-2'" in m for _l, t, m in reports)


def test_import_asks_for_the_target_a_new_dataset_named_after_the_file_by_default(
    qtbot: Any, ctx: Any, store: DatasetStore, tmp_path: Path
) -> None:
    from vrag_desktop.qt.datasets.import_target import ImportTargetDialog, new_name

    src = tmp_path / "gold.jsonl"
    src.write_text(json.dumps({**ITEMS[0].to_dict(), "uid": "n1"}) + "\n")
    dlg = ImportTargetDialog(str(src), ["gold", "gold-2"], "gold")
    qtbot.addWidget(dlg)
    ok = dlg.buttons.button(dlg.buttons.StandardButton.Ok)
    assert dlg.new_button.isChecked() and dlg.new_name.text() == "gold-3" == new_name(
        str(src), ["gold", "gold-2"]
    )
    assert dlg.target() == "gold-3" and ok.isEnabled()
    dlg.new_name.setText("gold")  # taken: said, and Import waits for another name or the existing one
    assert dlg.target() is None and not ok.isEnabled() and "exists" in dlg.note.text()
    dlg.new_name.setText("")
    assert not ok.isEnabled() and "name" in dlg.note.text()
    dlg.existing_button.setChecked(True)
    assert dlg.existing.currentText() == "gold" and dlg.target() == "gold" and ok.isEnabled()

    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 3, timeout=3000)
    panel.choose_open = lambda _title: str(src)
    panel.choose_target = lambda source, names, current: new_name(source, names)  # the default
    panel.import_selected()
    qtbot.waitUntil(lambda: "gold-2" in store.names(), timeout=5000)
    assert [i.uid for i in store.load("gold-2")] == ["n1"] and len(store.load("gold")) == 3  # untouched


def test_damaged_dataset_is_said_and_never_overwritten(
    qtbot: Any, ctx: Any, store: DatasetStore, reports: list[Any]
) -> None:
    path = ctx.layout.datasets / "gold.json"
    damaged = path.read_text()[:-40]
    path.write_text(damaged)
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: "cannot be read" in panel.message.text(), timeout=3000)
    assert panel.list.item(0).text() == "gold  ·  ⚠ damaged"
    assert "gold.json" in panel.message.text() and "nothing will be written" in panel.message.text()
    assert not panel.import_button.isEnabled() and not panel.edit_button.isEnabled()
    assert not any(a.isEnabled() for a in panel.export_actions.values())
    assert panel.rename_action.isEnabled() and panel.delete_dataset_action.isEnabled()
    assert any("damaged" in t for _l, t, _m in reports)
    assert path.read_text() == damaged


def test_export_json_lines_and_to_an_unwritable_place(
    qtbot: Any, ctx: Any, store: DatasetStore, tmp_path: Path, reports: list[Any]
) -> None:
    panel = _panel(qtbot, ctx)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 3, timeout=3000)
    out = tmp_path / "out" / "gold.jsonl"
    panel.choose_save = lambda *_: str(out)
    panel.export_selected("jsonl")
    qtbot.waitUntil(lambda: any(t == "Exported gold" for _l, t, _m in reports), timeout=5000)
    assert [i.uid for i in load_dataset(out)] == ["a1", "a2", "a3"]
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file")
    panel.choose_save = lambda *_: str(blocker / "gold.json")
    panel.export_selected("json")
    qtbot.waitUntil(lambda: any(t == "Could not export gold" for _l, t, _m in reports), timeout=5000)
    [(level, _t, message)] = [r for r in reports if r[1] == "Could not export gold"]
    assert level == "error" and "cannot write" in message and "not-a-folder" in message


def test_dataset_picker_lists_datasets_then_files_then_the_file_entry(qtbot: Any, monkeypatch: Any) -> None:
    from PySide6.QtWidgets import QFileDialog

    from vrag_desktop.qt.datasets.dataset_picker import DatasetPicker

    picker = DatasetPicker("Datasets (*.json)")
    qtbot.addWidget(picker)
    assert picker.chosen() == ""
    picker.set_datasets([("gold", "/d/gold.json")])
    assert [picker.itemText(i) for i in range(picker.count())] == ["gold", "Other file…"]
    assert picker.chosen() == "/d/gold.json"
    answers = iter([("/x/a.jsonl", ""), ("", "")])
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *_a, **_k: next(answers))
    for _ in range(2):  # a file is listed before the file entry; a dialog cancelled goes back to the first
        picker.setCurrentIndex(picker.count() - 1)
        picker.activated.emit(picker.count() - 1)
    assert [picker.itemText(i) for i in range(picker.count())] == ["gold", "/x/a.jsonl", "Other file…"]
    assert picker.chosen() == "/d/gold.json"
    picker.set_file("/x/a.jsonl")  # picked again, not listed twice
    assert picker.count() == 3 and picker.chosen() == "/x/a.jsonl"
