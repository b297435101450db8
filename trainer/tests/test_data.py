"""Training data: the original's formats (unified JSON, verl parquet) and the app's datasets by
name, matched to the corpora; what cannot be used is named."""

from __future__ import annotations

from pathlib import Path

import pytest
from vrag_trainer.data import DataError, load_train_data

from vrag_desktop.core.datasets import load_dataset
from vrag_desktop.core.datasets.store import DatasetStore
from vrag_desktop.core.paths import DataLayout
from vrag_desktop.core.run.export import export_dataset_rl
from vrag_desktop.core.training.config import TrainConfig


def _cfg(dataset: str, toy_data: Path, **over: object) -> TrainConfig:
    return TrainConfig.from_mapping(
        {"model": "m", "dataset": dataset, "corpora": ["toy"], "data_dir": str(toy_data), **over}
    )


def test_unified_json_verl_parquet_and_app_datasets_read_the_same(toy_data, dataset_file, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from_json = load_train_data(_cfg(str(dataset_file), toy_data), toy_data)
    parquet = tmp_path / "train.parquet"
    export_dataset_rl(load_dataset(dataset_file).items, parquet)
    from_parquet = load_train_data(_cfg(str(parquet), toy_data), toy_data)
    store = DatasetStore(DataLayout(toy_data).datasets)
    for item in load_dataset(dataset_file).items:
        store.add_item("my-labels", item, create=True)
    from_app = load_train_data(_cfg("my-labels", toy_data), toy_data)
    for data in (from_json, from_parquet, from_app):
        assert [i.query for i in data.items] == [i.query for i in from_json.items]
        assert [i.reference_answer for i in data.items] == ["42 million dollars", "Oslo"]
        assert data.golden == [("alpha_1",), ("beta_2",)] and data.problems == []
    assert [i.uid for i in from_app.items] == ["q1", "q2"]  # verl rows carry an index, not the uid


def test_unknown_datasets_and_corpora_are_named(toy_data, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DataError, match="neither a file nor an app dataset"):
        load_train_data(_cfg("no-such-labels", toy_data), toy_data)
    with pytest.raises(DataError, match="no such file"):
        load_train_data(_cfg(str(tmp_path / "gone.json"), toy_data), toy_data)
    empty = tmp_path / "x.json"
    empty.write_text('{"examples": []}', encoding="utf-8")
    with pytest.raises(DataError, match="nope not found"):
        load_train_data(_cfg(str(empty), toy_data, corpora=["nope"]), toy_data)
