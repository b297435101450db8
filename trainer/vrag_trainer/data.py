"""The run's questions and where the agent searches.

Data: the original's unified JSON, JSON lines and verl parquet (read by the app's own reader,
:func:`vrag_desktop.core.datasets.load_dataset`), or an app dataset by name. Every item is matched
to the corpora's indexed files exactly as an evaluation does; items whose files are not in the
corpus are named and left out (their NDCG could not be computed), and a run with none left is
refused before any model loads.

Search: the agents search the project's search server over HTTP — a running one (``search_url``)
or one this process serves on a loopback port over the run's corpora.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from vrag_desktop.core.datasets import Dataset, DatasetItem, load_dataset
from vrag_desktop.core.training.config import TrainConfig

__all__ = ["DataError", "TrainData", "load_train_data", "serve_search"]


class DataError(ValueError):
    """The dataset or the corpora cannot be used for this run (the message says what to do)."""


@dataclass
class TrainData:
    items: list[DatasetItem]
    golden: list[tuple[str, ...]]
    problems: list[tuple[str, str]]
    corpora: list[str]

    def lines(self) -> list[str]:
        total = len(self.items) + len(self.problems)
        out = [
            f"{len(self.items)} of {total} item(s) match the corpora {', '.join(self.corpora) or '(none)'}"
        ]
        out += [f"  left out {uid}: {why}" for uid, why in self.problems]
        return out


def _dataset(cfg: TrainConfig, data_root: Path) -> Dataset:
    from vrag_desktop.core.datasets.store import DatasetStore
    from vrag_desktop.core.paths import DataLayout

    path = Path(cfg.dataset).expanduser()
    if path.suffix.lower() in (".json", ".jsonl", ".parquet") or path.exists():
        if not path.is_file():
            raise DataError(f"dataset: no such file {path}")
        return load_dataset(path)
    store = DatasetStore(DataLayout(data_root).datasets)
    if not store.exists(cfg.dataset):
        known = ", ".join(store.names()) or "none yet"
        raise DataError(
            f"dataset: {cfg.dataset!r} is neither a file nor an app dataset (app datasets: {known})"
        )
    return store.load(cfg.dataset)


def load_train_data(cfg: TrainConfig, data_root: Path) -> TrainData:
    """Read, match and report; raises :class:`DataError` when no item can be trained on."""
    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.eval.matching import corpus_files, match_dataset

    dataset = _dataset(cfg, data_root)
    library = Library(data_root)
    names = list(cfg.corpora) or library.names()
    missing = [n for n in names if n not in library.names()]
    if missing or not names:
        raise DataError(
            f"corpora: {', '.join(missing) if missing else 'none'} not found in {library.data_dir} "
            f"(indexed corpora: {', '.join(library.names()) or 'none'})"
        )
    corpora = [library.open(n, shared=True) for n in names]
    match = match_dataset(dataset.items, corpus_files(corpora))
    problems = list(dataset.problems) + list(match.problems)
    no_answer = [m for m in match.matched if not m.item.reference_answer.strip()]
    problems += [(m.item.uid, "it has no reference answer to judge against") for m in no_answer]
    matched = [m for m in match.matched if m.item.reference_answer.strip()]
    data = TrainData([m.item for m in matched], [tuple(m.golden) for m in matched], problems, names)
    if not data.items:
        raise DataError("\n".join(["no dataset item can be trained on:", *data.lines()[1:]]))
    return data


def serve_search(
    data_root: Path, corpora: list[str], device: str | None = None
) -> tuple[str, Callable[[], None]]:
    """Serve ``corpora`` with the project's search server on a free loopback port; returns the URL
    and a function that stops it."""
    import socket

    import uvicorn

    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.search.engine import SearchEngine
    from vrag_desktop.core.search.server import create_app

    engine = SearchEngine(Library(data_root), corpora or None, device=device)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(create_app(engine), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, name="search-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            engine.close()
            raise DataError(f"the search server did not start on 127.0.0.1:{port}")
        time.sleep(0.05)

    def stop() -> None:
        server.should_exit = True
        thread.join(10)
        engine.close()

    return f"http://127.0.0.1:{port}", stop
