"""Kept page views (core/agents/page_views.py): the same bytes as a fresh decode, made again when the
page or the cache file changes, and a cache that cannot be used only costs speed."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from vrag_desktop.core.agents import imaging, page_views
from vrag_desktop.core.agents.searchers import SearchHit
from vrag_desktop.core.agents.vrag import VRAGAgent
from vrag_desktop.core.agents.vrag import _Run as VragRun
from vrag_desktop.core.progress import CancelToken

SPEC = page_views.ViewSpec()


@pytest.fixture
def views(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "views"
    monkeypatch.setenv(page_views.CACHE_ENV, str(d))
    imaging.clear()
    return d


def _page(path: Path, seed: int = 0, size: tuple[int, int] = (1400, 1960)) -> Path:
    rng = np.random.default_rng(seed)
    a = np.full((size[1], size[0], 3), 255, np.uint8)
    for y in range(0, size[1], 30):
        a[y : y + 10, 50 : size[0] - 50] = rng.integers(0, 255, (10, size[0] - 100, 1), dtype=np.uint8)
    Image.fromarray(a).save(path, "JPEG", quality=90)
    return path


def _files(d: Path) -> list[Path]:
    return sorted(p for p in d.rglob("*.jpg")) if d.exists() else []


def test_kept_view_is_the_fresh_view_and_is_used(views: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    page = _page(tmp_path / "p.jpg")
    fresh = page_views.make(page, SPEC)
    first = page_views.view(page, SPEC)
    page_views.flush()
    assert first == fresh and len(_files(views)) == 1
    assert first.raw_size == (1400, 1960)
    assert first.shown_size[0] * first.shown_size[1] <= SPEC.max_pixels

    def no_decode(*_a: object) -> None:
        raise AssertionError("decoded although the view is kept")

    monkeypatch.setattr(page_views, "make", no_decode)
    assert page_views.view(page, SPEC) == fresh


def test_changed_page_or_settings_make_a_new_view(views: Path, tmp_path: Path) -> None:
    page = _page(tmp_path / "p.jpg")
    old = page_views.view(page, SPEC)
    page_views.flush()
    _page(page, seed=1, size=(1000, 1500))  # replaced under the same name
    os.utime(page, ns=(1, 1))
    new = page_views.view(page, SPEC)
    assert new.raw_size == (1000, 1500) and new.jpeg != old.jpeg
    smaller = page_views.view(page, page_views.ViewSpec(max_pixels=200_704))
    page_views.flush()
    assert smaller.shown_size[0] * smaller.shown_size[1] <= 200_704
    assert len(_files(views)) == 3


def test_damaged_kept_view_is_made_again(views: Path, tmp_path: Path) -> None:
    page = _page(tmp_path / "p.jpg")
    good = page_views.view(page, SPEC)
    page_views.flush()
    (kept,) = _files(views)
    kept.write_bytes(good.jpeg[:100])  # torn by a crash
    assert page_views.cached(page, SPEC) is None and not kept.exists()
    assert page_views.view(page, SPEC) == good
    page_views.flush()
    assert kept.read_bytes() == good.jpeg


def test_unwritable_or_disabled_cache_only_costs_speed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    page = _page(tmp_path / "p.jpg")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(page_views.CACHE_ENV, str(blocker / "views"))  # cannot be created, even by root
    assert page_views.view(page, SPEC) == page_views.make(page, SPEC)
    page_views.flush()  # the failed write is skipped quietly
    monkeypatch.setenv(page_views.CACHE_ENV, "off")
    assert page_views.cache_dir() is None
    assert page_views.view(page, SPEC) == page_views.make(page, SPEC)


def test_prepare_makes_missing_views_skips_bad_files_and_cancels(views: Path, tmp_path: Path) -> None:
    pages = [_page(tmp_path / f"p{i}.jpg", seed=i, size=(600, 800)) for i in range(10)]
    page_views.view(pages[0], SPEC)  # kept already
    page_views.flush()
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 not really a jpeg")
    gen = page_views.prepare([*pages, broken, tmp_path / "missing.jpg"], SPEC)
    reports = []
    try:
        while True:
            reports.append(next(gen))
    except StopIteration as stop:
        made = stop.value
    assert made == 9 and reports[-1].done == reports[-1].total == 11  # the missing file is not counted
    assert len(_files(views)) == 10
    token = CancelToken()
    token.cancel()
    assert list(page_views.prepare([_page(tmp_path / "q.jpg")], SPEC, token)) == []


def test_search_step_shows_the_kept_view(views: Path, tmp_path: Path) -> None:
    page = _page(tmp_path / "p.jpg")

    class Local:
        local_files = True

    (tmp_path / "out").mkdir()
    agent = VRAGAgent(model=None, searcher=Local(), image_dir=tmp_path / "out")  # type: ignore[arg-type]
    hit = SearchHit(score=1.0, name="p", source=str(page), modality="page", image=str(page), page=1)
    assert agent.view_spec == page_views.ViewSpec()  # what an imported index's views are made for
    path, uri = VragRun(agent, "q").show_page(hit)
    page_views.flush()
    kept = page_views.cached(page, agent.view_spec)
    assert kept is not None and path.read_bytes() == kept.jpeg == page_views.make(page, agent.view_spec).jpeg
    imaging.clear()
    run = VragRun(agent, "q")
    path2, uri2 = run.show_page(hit)
    assert uri2 == uri and path2.read_bytes() == kept.jpeg
    assert run.current is not None and run.current.view.shown_size == kept.shown_size
