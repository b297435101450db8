"""The run's questions and where the agent searches.

Data: the original's unified JSON, JSON lines and verl parquet, or an app dataset by name, matched
to the corpora by the app's own rule (:func:`vrag_desktop.core.training.data.training_items`, which
the New-run form counts with too): items whose files are not in the corpus are named and left out
(their NDCG could not be computed), and a run with none left is refused before any model loads.

Search: the agents search the project's search server over HTTP — a running one (``search_url``)
or one this process serves on a loopback port over the run's corpora.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from vrag_desktop.core.training.config import ConfigError, TrainConfig
from vrag_desktop.core.training.data import TrainingItems, training_items
from vrag_desktop.core.training.validation import ValidationSplit, validation_split

__all__ = ["DataError", "TrainData", "load_train_data", "load_validation", "serve_search"]


class DataError(ValueError):
    """The dataset or the corpora cannot be used for this run (the message says what to do)."""


#: What a run trains on (items, their golden page keys, what was left out and why).
TrainData = TrainingItems


def load_train_data(cfg: TrainConfig, data_root: Path) -> TrainingItems:
    """Read, match and report with the app's own rule; :class:`DataError` when no item is usable."""
    try:
        data = training_items(cfg.dataset, list(cfg.corpora), data_root)
    except ConfigError as exc:
        raise DataError(str(exc)) from exc
    if not data.items:
        raise DataError("\n".join(["no dataset item can be trained on:", *data.lines()[1:]]))
    return data


def load_validation(cfg: TrainConfig, data_root: Path, data: TrainingItems) -> ValidationSplit | None:
    """What the run validates on, by the app's own rule (a held-out split of ``data`` or
    ``validation.dataset``); None when validation is off. :class:`DataError` when it cannot be made."""
    if not cfg.validation.eval_steps:
        return None
    try:
        return validation_split(cfg, data, data_root)
    except ConfigError as exc:
        raise DataError(str(exc)) from exc


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
        uvicorn.Config(
            create_app(engine, bind_host="127.0.0.1"), host="127.0.0.1", port=port, log_level="warning"
        )
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
