"""The thumbnail strip under the corpora tree, refreshed every half second while a corpus indexes:
a list that only grew keeps its rows (and their decoded icons) and adds the new ones; any other
change redraws it. The cache keys (a file stat each) come from the caller, read off the GUI thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from PIL import Image

from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.status import PreviewItem
from vrag_desktop.qt.infra import thumbnails
from vrag_desktop.qt.infra.tasks import run_decode
from vrag_desktop.qt.infra.thumbnails import STATE_ROLE, ThumbnailStrip, item_keys


def page(i: int, image: Path | None, error: str | None = None) -> PreviewItem:
    return PreviewItem(
        item_id=i,
        source_id=1,
        name=f"doc.pdf p. {i}",
        kind=kinds.ITEM_PAGE,
        ordinal=i,
        image_path=str(image) if image else None,
        status="indexed",
        error=error,
        text=f"text of page {i}",
        t_start=None,
        t_end=None,
    )


def pages(folder: Path, n: int) -> list[PreviewItem]:
    out = []
    for i in range(1, n + 1):
        path = folder / f"p{i}.png"
        if not path.exists():
            Image.new("RGB", (60, 80), (20 * i % 255, 90, 160)).save(path)
        out.append(page(i, path))
    return out


def rows(strip: ThumbnailStrip) -> list[Any]:
    return [strip.item(i) for i in range(strip.count())]


def test_a_grown_list_keeps_its_rows_and_adds_the_new(qtbot: Any, tmp_path: Path, monkeypatch: Any) -> None:
    strip = ThumbnailStrip()
    qtbot.addWidget(strip)
    first = pages(tmp_path, 3)
    with qtbot.waitSignal(strip.itemsLoaded, timeout=10000):
        strip.show_items(first, item_keys(first))
    kept = rows(strip)
    assert [r.data(STATE_ROLE) for r in kept] == ["ok"] * 3

    stats: list[str] = []
    real_key = thumbnails.ThumbnailCache.key
    monkeypatch.setattr(thumbnails.ThumbnailCache, "key", lambda path: stats.append(path) or real_key(path))
    grown = pages(tmp_path, 5)
    keys = [real_key(str(tmp_path / f"p{i}.png")) for i in range(1, 6)]
    with qtbot.waitSignal(strip.itemsLoaded, timeout=10000):
        strip.show_items(grown, keys)
    assert stats == []  # the keys given were used: no stat on the GUI thread
    now = rows(strip)
    assert now[:3] == kept and len(now) == 5  # the same row objects, two added
    assert [r.text() for r in now] == [f"p. {i}" for i in range(1, 6)]
    assert [r.data(STATE_ROLE) for r in now] == ["ok"] * 5

    # the same list again: nothing redrawn
    strip.show_items(grown, keys)
    assert rows(strip) == now

    # a changed item (it failed on a re-index) redraws the strip
    changed = [grown[0], page(2, None, error="cannot render"), *grown[2:]]
    strip.show_items(changed, item_keys(changed))
    redrawn = rows(strip)
    assert len(redrawn) == 5 and redrawn[0] is not now[0]
    assert [r.data(STATE_ROLE) for r in redrawn][:2] == ["ok", "failed"]  # the first from the cache

    # fewer items (a file removed): redrawn too
    strip.show_items(grown[:2], keys[:2])
    assert [r.text() for r in rows(strip)] == ["p. 1", "p. 2"]
    strip.show_items([], [])
    assert strip.count() == 0


def test_a_missing_image_shows_as_missing(qtbot: Any, tmp_path: Path) -> None:
    strip = ThumbnailStrip()
    qtbot.addWidget(strip)
    items = [page(1, tmp_path / "gone.png"), page(2, None)]
    keys = item_keys(items)
    assert keys == [None, None]
    strip.show_items(items, keys)
    assert [r.data(STATE_ROLE) for r in rows(strip)] == ["missing", "text"]


def test_thumbnails_of_a_list_left_before_their_turn_are_never_decoded(
    qtbot: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    decoded: list[str] = []
    real = thumbnails.load_thumbnail
    monkeypatch.setattr(thumbnails, "load_thumbnail", lambda path, *a: decoded.append(path) or real(path, *a))
    strip = ThumbnailStrip()
    qtbot.addWidget(strip)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    left, shown = pages(tmp_path / "a", 12), pages(tmp_path / "b", 2)
    gate = threading.Event()
    busy = run_decode(gate.wait, 5)  # the decode lane is busy with something else
    strip.show_items(left, item_keys(left))  # a corpus picked...
    with qtbot.waitSignal(strip.itemsLoaded, timeout=10000):
        strip.show_items(shown, item_keys(shown))  # ...and another picked before its thumbnails came
        gate.set()
    qtbot.waitUntil(lambda: busy.outcome is not None)
    assert decoded == [it.image_path for it in shown]
    assert [r.data(STATE_ROLE) for r in rows(strip)] == ["ok", "ok"]
