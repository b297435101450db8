"""Which dataset items a training run can use: the one rule the New-run form's count, the CLI and
the trainer process share, so the number the form shows is the number the trainer trains on.

A dataset is a file in the original's formats (unified JSON, JSON lines, verl parquet) or an app
dataset by name. Items are matched to the corpora's indexed files exactly as an evaluation does;
an item is left out, and named, when its file is not in the corpora, its page does not exist, or
it has no reference answer to judge against.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vrag_desktop.core.datasets import Dataset, DatasetItem
from vrag_desktop.core.training.config import ConfigError

__all__ = ["TrainingItems", "resolve_dataset", "training_items"]


@dataclass
class TrainingItems:
    items: list[DatasetItem]
    golden: list[tuple[str, ...]]  # each item's reference page keys, as the NDCG reward reads them
    problems: list[tuple[str, str]]  # (uid, why it is left out)
    corpora: list[str]

    @property
    def total(self) -> int:
        return len(self.items) + len(self.problems)

    def lines(self) -> list[str]:
        """For a person: how many items match, then each one left out, and why."""
        names = ", ".join(self.corpora) or "(none)"
        out = [f"{len(self.items)} of {self.total} item(s) match the corpora {names}"]
        out += [f"  left out {uid}: {why}" for uid, why in self.problems]
        return out


def resolve_dataset(spec: str, data_dir: str | os.PathLike[str]) -> Dataset:
    """A dataset file, or an app dataset by name; :class:`ConfigError` names ``dataset``."""
    from vrag_desktop.core.datasets import load_dataset
    from vrag_desktop.core.datasets.store import DatasetStore
    from vrag_desktop.core.paths import DataLayout

    if not spec.strip():
        raise ConfigError("dataset", "is required")
    path = Path(spec).expanduser()
    try:
        if path.suffix.lower() in (".json", ".jsonl", ".parquet") or path.exists():
            if not path.is_file():
                raise ConfigError("dataset", f"no such file {path}")
            return load_dataset(path)
        store = DatasetStore(DataLayout(Path(data_dir).expanduser()).datasets)
        if not store.exists(spec):
            known = ", ".join(store.names()) or "none yet"
            raise ConfigError(
                "dataset", f"{spec!r} is neither a file nor an app dataset (app datasets: {known})"
            )
        return store.load(spec)
    except ConfigError:
        raise
    except (OSError, ValueError) as exc:  # unreadable, malformed (DatasetError is a ValueError)
        raise ConfigError("dataset", f"cannot read {spec}: {exc}") from exc


def training_items(
    dataset_spec: str, corpora: Sequence[str], data_dir: str | os.PathLike[str]
) -> TrainingItems:
    """The items a run on ``corpora`` (empty: all) can train on; :class:`ConfigError` names
    ``dataset`` or ``corpora`` when one cannot be found."""
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.eval.matching import corpus_files, match_dataset

    root = Path(data_dir).expanduser()
    dataset = resolve_dataset(dataset_spec, root)
    library = Library(root)
    known = library.names()
    names = list(corpora) or known
    missing = [n for n in names if n not in known]
    if missing or not names:
        raise ConfigError(
            "corpora",
            f"{', '.join(missing) if missing else 'no corpus'} not found in {library.data_dir} "
            f"(indexed corpora: {', '.join(known) or 'none'})",
        )
    opened = []
    try:
        for n in names:
            opened.append(library.open(n, shared=True, read_only=True))
        match = match_dataset(dataset.items, corpus_files(opened))
    finally:
        for c in opened:
            c.close()
    problems = list(dataset.problems) + list(match.problems)
    usable = [m for m in match.matched if m.item.reference_answer.strip()]
    problems += [
        (m.item.uid, "it has no reference answer to judge against")
        for m in match.matched
        if not m.item.reference_answer.strip()
    ]
    return TrainingItems([m.item for m in usable], [tuple(m.golden) for m in usable], problems, names)
