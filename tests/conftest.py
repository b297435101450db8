"""Shared fixtures. Everything runs offline: no model hub, only what ships in packages or is built here."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Kept page views (core/agents/page_views.py) go to a throwaway folder, never the user's cache.
os.environ.setdefault("VRAG_DESKTOP_VIEW_CACHE", tempfile.mkdtemp(prefix="vrag-views-"))
# The app's worker threads at the tests' priority: the suite runs three test processes and a build
# on two cores, where a nice-10 indexing job of 5 s took over 60 (CI). tests/qt/test_tasks.py
# checks the niceness itself with the ceiling lifted.
os.environ.setdefault("VRAG_THREAD_NICE_MAX", "0")

from vllm_support import tiny_qwen2, vllm_python, vllm_vision  # the fixtures: a real vLLM, built once per run

__all__ = ["tiny_qwen2", "vllm_python", "vllm_vision"]

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "resources" / "sample_corpus"


@pytest.fixture(scope="session")
def minilm():  # type: ignore[no-untyped-def]
    """The real offline default embedder, loaded once per test session."""
    from vrag_desktop.core.embedders.minilm import MiniLMEmbedder

    return MiniLMEmbedder(device="cpu")


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private data directory (never the user's real one)."""
    d = tmp_path / "data"
    monkeypatch.setenv("VRAG_DESKTOP_DATA_DIR", str(d))
    return d


@pytest.fixture
def library(data_dir: Path):  # type: ignore[no-untyped-def]
    from vrag_desktop.core.corpus.library import Library

    return Library(data_dir)


def drain(gen):  # type: ignore[no-untyped-def]
    """Run a progress generator to the end; return its value."""
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            return stop.value


def index_paths(library, name, paths, embedder, **build_kw):  # type: ignore[no-untyped-def]
    """Add paths to corpus ``name`` and index them in-process; return (corpus, scan, build reports)."""
    corpus = library.open(name, create=True)
    corpus.add_paths(paths)
    scan = drain(corpus.scan())
    build = drain(corpus.build(embedder, **build_kw))
    return corpus, scan, build


def index_texts(library, name, folder: Path, texts: dict[str, str], embedder) -> None:  # type: ignore[no-untyped-def]
    """Write ``texts`` (file name → text) into ``folder`` and index them as corpus ``name``."""
    folder.mkdir()
    for file_name, text in texts.items():
        (folder / file_name).write_text(text)
    corpus, _scan, _build = index_paths(library, name, [folder], embedder)
    corpus.close()


def cli(
    *args: str, data_dir: Path, timeout: float = 600, env: dict[str, str] | None = None, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the real ``vrag-desktop`` command in a subprocess, as a user would."""
    full_env = {**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data_dir), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-m", "vrag_desktop", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"vrag-desktop {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_search(data_dir: Path, *args: str, wait: float = 120) -> Iterator[str]:
    """A real ``vrag-desktop serve-search`` over ``data_dir`` on a free loopback port, once healthy:
    its URL. Stopped (SIGTERM) on leaving."""
    import httpx

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrag_desktop", "serve-search", "--port", str(port), *args],
        env={**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data_dir)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"serve-search exited: {proc.stderr.read() if proc.stderr else ''}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"serve-search did not become healthy in {wait:.0f} s")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def make_pdf(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Write a PDF with a real text layer: one page per string."""

    def make(name: str, pages: list[str], folder: Path | None = None) -> Path:
        import pymupdf

        folder = folder or tmp_path / "docs"
        folder.mkdir(parents=True, exist_ok=True)
        doc = pymupdf.open()
        for text in pages:
            page = doc.new_page()
            page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=12)
        path = folder / name
        doc.save(str(path))
        doc.close()
        return path

    return make


@pytest.fixture
def sample_corpus() -> Iterator[Path]:
    assert SAMPLE.exists(), "resources/sample_corpus is missing (scripts/make_sample_corpus.py builds it)"
    yield SAMPLE


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data dir where the real CLI indexed the bundled sample corpus (PDFs, scans, images, a video,
    notes) as corpus 'sample'. Built once per session: OCR of the scanned pages takes a while."""
    d = tmp_path_factory.mktemp("sample-data")
    proc = cli("index", str(SAMPLE), "--corpus", "sample", "--quiet", data_dir=d, timeout=900)
    assert proc.returncode == 0, proc.stderr
    (d / "index-stderr.txt").write_text(proc.stderr)  # what a new user read
    return d
