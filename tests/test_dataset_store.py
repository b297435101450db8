"""The app's dataset store on real files: create, items, import, export, and the bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vrag_desktop.core.datasets import DatasetError, DatasetItem, load_dataset
from vrag_desktop.core.datasets.store import (
    DatasetStore,
    DatasetStoreError,
    check_name,
    evidence_regions,
    with_regions,
)
from vrag_desktop.core.paths import DataLayout

REGION = {"file": "robots.pdf", "page": 2, "bbox": [20, 30, 100, 120]}


def _item(uid: str = "", q: str = "How heavy a load can Atlas carry?", a: str = "450 kg") -> DatasetItem:
    return DatasetItem(uid, q, a, file_name="robots.pdf", reference_page=(2,), query_type="Single-Hop")


@pytest.fixture
def store(tmp_path: Path) -> DatasetStore:
    return DatasetStore(DataLayout(tmp_path / "data").datasets)


def test_layout_names_the_datasets_folder(tmp_path: Path) -> None:
    assert DataLayout(tmp_path).datasets == tmp_path / "datasets"


def test_create_add_update_delete_round_trip(store: DatasetStore) -> None:
    assert store.infos() == []
    p = store.create("gold")
    assert p == store.root / "gold.json" and json.loads(p.read_text()) == {"examples": []}
    first = store.add_item("gold", with_regions(_item(), [REGION]))
    second = store.add_item("gold", _item(q="Battery life?", a="14 hours"))
    assert first.uid == "item-1" and second.uid == "item-2"
    raw = json.loads(p.read_text())["examples"][0]
    assert raw["meta_info"]["evidence_regions"] == [REGION]  # the original's form, regions kept
    ds = store.load("gold")
    assert evidence_regions(ds.items[0]) == [REGION] and ds.items[0].reference_page == (2,)
    store.update_item("gold", "item-2", _item("battery", "Battery life?", "14 h"))
    assert [i.uid for i in store.load("gold")] == ["item-1", "battery"]
    assert store.load("gold").items[1].reference_answer == "14 h"
    with pytest.raises(DatasetStoreError, match="taken"):
        store.add_item("gold", _item("battery"))
    with pytest.raises(DatasetStoreError, match="taken"):
        store.update_item("gold", "item-1", _item("battery"))
    assert store.delete_items("gold", ["item-1"]) == 1
    assert [(i.name, i.count) for i in store.infos()] == [("gold", 1)]
    store.rename("gold", "gold v2")
    assert store.names() == ["gold v2"]
    with pytest.raises(DatasetStoreError, match="already exists"):
        store.create("gold v2")
    store.delete("gold v2")
    assert store.names() == []


def test_add_creates_on_request_and_refuses_empty_fields(store: DatasetStore) -> None:
    with pytest.raises(DatasetStoreError, match="no dataset"):
        store.add_item("new", _item())
    assert store.add_item("new", _item(), create=True).uid == "item-1"
    for bad in (_item(q="  "), _item(a="")):
        with pytest.raises(DatasetStoreError, match="empty"):
            store.add_item("new", bad)
    assert len(store.load("new")) == 1


@pytest.mark.parametrize("name", ["", "   ", "a/b", "..", "../up", "a\\b", ".hidden"])
def test_bad_names_refused(store: DatasetStore, name: str) -> None:
    with pytest.raises(DatasetStoreError, match="invalid dataset name"):
        store.create(name)
    assert not store.root.exists() or list(store.root.iterdir()) == []
    assert check_name(" ok name ") == "ok name"


def test_damaged_dataset_reported_and_never_overwritten(store: DatasetStore) -> None:
    store.create("gold")
    p = store.root / "gold.json"
    damaged = '{"examples": [{"uid": "a", "query": "q", "reference_answer": "x"}, {"uid": '
    p.write_text(damaged)
    [info] = store.infos()
    assert info.count is None and "gold.json" in info.error and "not JSON" in info.error
    for write in (
        lambda: store.add_item("gold", _item()),
        lambda: store.delete_items("gold", ["a"]),
        lambda: store.update_item("gold", "a", _item()),
        lambda: store.import_file("gold", p),
    ):
        with pytest.raises(DatasetError, match=r"gold\.json"):
            write()
    assert p.read_text() == damaged  # untouched


def test_unwritable_folder_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the data folder should be")  # no folder can be made (even as root)
    store = DatasetStore(DataLayout(blocker).datasets)
    with pytest.raises(DatasetStoreError, match="cannot write the dataset"):
        store.create("gold")
    with pytest.raises(DatasetStoreError, match="cannot write the dataset"):
        store.add_item("gold", _item(), create=True)
    assert blocker.read_text().startswith("a file")


def test_import_renames_taken_uids_or_refuses(store: DatasetStore, tmp_path: Path) -> None:
    store.add_item("gold", _item("q1"), create=True)
    src = tmp_path / "in.jsonl"
    rows = [_item("q1", "Top speed?", "2 m/s"), _item("q2", "Maker?", "Northwind")]
    src.write_text("".join(json.dumps(i.to_dict()) + "\n" for i in rows))
    with pytest.raises(DatasetStoreError, match=r"'q1'.*nothing imported"):
        store.import_file("gold", src, refuse_duplicates=True)
    assert [i.uid for i in store.load("gold")] == ["q1"]
    report = store.import_file("gold", src)
    assert report.added == 2 and report.renamed == [("q1", "q1-2")]
    assert "imported as 'q1-2'" in "\n".join(report.lines())
    assert [i.uid for i in store.load("gold")] == ["q1", "q1-2", "q2"]
    again = store.import_file("gold", src)
    assert again.renamed == [("q1", "q1-3"), ("q2", "q2-2")]
    # a new dataset from an import; a source with its own duplicate uids is refused by the reader
    assert store.import_file("fresh", src).added == 2
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps({"examples": [rows[0].to_dict(), rows[0].to_dict()]}))
    with pytest.raises(DatasetError, match="share the uid"):
        store.import_file("fresh", dup)


def test_export_json_and_lines_and_unwritable_place(store: DatasetStore, tmp_path: Path) -> None:
    store.add_item("gold", with_regions(_item("a"), [REGION]), create=True)
    out = store.export("gold", tmp_path / "out" / "gold.json")
    assert [i.uid for i in load_dataset(out)] == ["a"]
    lines = store.export("gold", tmp_path / "gold.jsonl", "jsonl")
    [item] = load_dataset(lines)
    assert evidence_regions(item) == [REGION]
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(DatasetStoreError, match=r"cannot write .*blocker"):
        store.export("gold", blocker / "gold.json")
    with pytest.raises(DatasetStoreError, match="unknown export format"):
        store.export("gold", tmp_path / "x.csv", "csv")
