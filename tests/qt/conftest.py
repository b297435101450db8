"""Fixtures for the Qt tests: offscreen, private data/config directories, an in-memory keyring.

The offscreen platform is chosen in ``tests/conftest.py`` before any QApplication exists.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import pytest
from doubles import MemoryKeyring


@pytest.fixture(autouse=True)
def qt_isolation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    """Private config/data dirs and keyring for every Qt test; a clean error sink."""
    monkeypatch.setenv("VRAG_DESKTOP_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("VRAG_DESKTOP_DATA_DIR", str(tmp_path / "data"))
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    from vrag_desktop.qt.infra.errors import error_sink

    error_sink().clear()
    yield backend
    keyring.set_keyring(previous)


@pytest.fixture(autouse=True)
def collect_qt_leftovers() -> Iterator[None]:
    """After each Qt test (and after pytest-qt closed its widgets): collect its Python/Qt cycles and
    deliver what they left queued, here and now, rather than at a random allocation in a later test."""
    yield
    from PySide6.QtWidgets import QApplication

    if QApplication.instance() is None:
        return
    QApplication.processEvents()
    gc.collect()
    QApplication.processEvents()


@pytest.fixture(autouse=True)
def gui_loop(qapp: Any) -> Iterator[asyncio.AbstractEventLoop]:
    """The GUI thread's qasync loop, running as in the app: GUI-side ``async`` handlers run (and
    await tasks) whenever a test lets Qt process events."""
    import qasync

    loop = qasync.QEventLoop(qapp, already_running=True)
    yield loop
    qapp.aboutToQuit.disconnect(loop._after_run_forever)
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in left:
        t.cancel()
    for _ in range(100):  # let them wind down (bounded)
        if all(t.done() for t in left):
            break
        qapp.processEvents()
    loop._QEventLoop__is_running = False  # not loop.stop(): its app.exit() would end later tests' waits
    asyncio.events._set_running_loop(None)
    loop.close()


@pytest.fixture
def ctx(tmp_path: Path) -> Any:
    """An AppContext on private directories."""
    from vrag_desktop.qt.context import AppContext

    return AppContext.for_dirs(data_dir=tmp_path / "data", config_dir=tmp_path / "cfg")


@pytest.fixture
def indexed(ctx: Any, minilm: Any, make_pdf: Any) -> Any:
    """``ctx`` with corpus 'robots' indexed (a 2-page PDF: page 2 holds the Atlas robot's specs), and
    the session's loaded embedder as the app's, so no test reloads it."""
    from conftest import index_paths

    pdf = make_pdf(
        "robots.pdf",
        [
            "Northwind annual report. Letter to shareholders about a good year.",
            "Atlas warehouse robot specifications: payload 450 kg, battery 14 hours, top speed 2 m/s.",
        ],
    )
    index_paths(ctx.library, "robots", [pdf], minilm)
    ctx._cache["embedder"] = (ctx.settings.embedder, minilm)
    return ctx


@pytest.fixture
def reports(qtbot: Any) -> list[tuple[str, str, str]]:
    """Everything reported to the error sink during the test, as (level, title, message)."""
    from vrag_desktop.qt.infra.errors import error_sink

    got: list[tuple[str, str, str]] = []
    error_sink().reported.connect(lambda *a: got.append(a))
    return got


@pytest.fixture
def graph_view(qtbot: Any) -> Any:
    """A shown 800×600 reasoning-graph view (the graph tests' canvas)."""
    from vrag_desktop.qt.graph.graph_view import GraphView

    v = GraphView()
    v.resize(800, 600)
    qtbot.addWidget(v)
    v.show()
    qtbot.waitExposed(v)
    return v
