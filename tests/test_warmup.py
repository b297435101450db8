"""The start-up warm-up: imports, then the app's own last step (loading a small embedder).

Why it matters: the first indexing used to load the embedder next to the window's busiest moment;
its tokenizer's JSON is parsed in C calls that hold the GIL. The app now loads the small default in
the warm-up thread, and only that one: a vision-language embedder takes gigabytes.
"""

from __future__ import annotations

import logging
import sys

import pytest

from vrag_desktop.core import warmup
from vrag_desktop.core.embedders import DEFAULT_EMBEDDER, loads_quickly
from vrag_desktop.qt.context import AppContext


@pytest.mark.parametrize(
    ("spec", "quick"),
    [
        (None, True),
        ("", True),
        (DEFAULT_EMBEDDER, True),
        (" All-MiniLM-L6-v2 ", True),
        ("sentence-transformers/all-MiniLM-L6-v2", True),
        ("Qwen/Qwen3-VL-Embedding-2B", False),
        ("Alibaba-NLP/GVE-3B", False),
        ("/models/my-gve", False),
    ],
)
def test_only_the_small_text_model_loads_quickly(spec: str | None, quick: bool) -> None:
    assert loads_quickly(spec) is quick


def test_then_runs_after_the_imports_and_is_timed() -> None:
    seen: list[bool] = []

    def load_model() -> None:
        seen.append("colorsys" in sys.modules)

    sys.modules.pop("colorsys", None)
    timings = warmup.warm(modules=("colorsys",), then=load_model)
    assert seen == [True]  # called once, after the module was imported
    assert set(timings) >= {"native", "colorsys", "load_model"}


def test_a_failing_last_step_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    def load_model() -> None:
        raise OSError("no weights here")

    with caplog.at_level(logging.INFO, logger="vrag_desktop.core.warmup"):
        timings = warmup.warm(modules=(), then=load_model)
    assert "load_model" in timings
    assert "warm-up: load_model failed: no weights here" in caplog.text


def test_the_app_preloads_the_default_embedder_once(tmp_path) -> None:
    ctx = AppContext.for_dirs(data_dir=tmp_path / "data", config_dir=tmp_path / "cfg")
    assert loads_quickly(ctx.settings.embedder)
    ctx.preload_embedder()
    loaded = ctx._cache.get("embedder")
    assert loaded is not None and loaded[0] == ctx.settings.embedder
    assert ctx.embedder() is loaded[1]  # the first job or search finds it loaded


def test_a_large_embedder_is_not_preloaded(tmp_path) -> None:
    ctx = AppContext.for_dirs(data_dir=tmp_path / "data", config_dir=tmp_path / "cfg")
    ctx.settings.embedder = "Qwen/Qwen3-VL-Embedding-2B"
    ctx.preload_embedder()  # would fail offline, and take gigabytes online
    assert "embedder" not in ctx._cache


FIRST_INDEXING = r"""
import importlib.machinery, json, sys
from vrag_desktop.core import warmup
from vrag_desktop.core.corpus.job import IndexRequest, index_job
from vrag_desktop.core.corpus.library import Library
from vrag_desktop.core.embedders import create_embedder
from vrag_desktop.core.progress import CancelToken

loaded = []
warmup.warm(then=lambda: loaded.append(create_embedder(None)))  # what the app's warm-up does
before = set(sys.modules)
gen = index_job(Library(sys.argv[1]), IndexRequest("first", paths=[sys.argv[2]], create=True),
                lambda _: loaded[0], CancelToken())
try:
    while True:
        next(gen)
except StopIteration as stop:
    indexed = stop.value.stats["indexed_files"]
native = sorted(
    name for name in set(sys.modules) - before
    if str(getattr(sys.modules[name], "__file__", "") or "").endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
)
print(json.dumps({"indexed": indexed, "native": native}))
"""


def test_after_the_warm_up_a_first_indexing_imports_no_native_module(tmp_path, make_pdf) -> None:  # type: ignore[no-untyped-def]
    """An extension module is imported with the GIL held from its first byte to its last (pymupdf's:
    ~0.16 s, at the first indexing's scan): the window froze. The warm-up imports them all first."""
    import json
    import subprocess

    make_pdf("a.pdf", ["The lighthouse keeper logs the storm.", "Page two: the harbour."])
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_INDEXING, str(tmp_path / "data"), str(tmp_path / "docs")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"indexed": 1, "native": []}


def test_a_warm_up_told_to_wait_starts_once_the_window_has_settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """``after``: nothing is imported until the event is set (the app sets it once its window's
    deferred panels are made: torch's start holds the GIL), then the warm-up runs as before."""
    import threading

    monkeypatch.setattr(warmup, "_started", None)  # once per process: this test's own start
    monkeypatch.delenv("VRAG_DESKTOP_NO_WARMUP", raising=False)
    settled, done = threading.Event(), threading.Event()
    sys.modules.pop("colorsys", None)
    thread = warmup.start(delay=0, then=done.set, after=settled, modules=("colorsys",))
    assert thread is not None
    assert not done.wait(0.5) and "colorsys" not in sys.modules  # still waiting
    settled.set()
    assert done.wait(30) and "colorsys" in sys.modules
    thread.join(5)
    import gc

    gc.unfreeze()  # what the warm-up froze goes back to the collector, as in test_long_lived.py
