"""EvidenceView: regions drawn at their raw-pixel rects, numbered badges, full-resolution crops, focus,
missing images, zoom under the mouse, opening the source — on real images, real widgets."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw
from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, QRectF, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QApplication, QGraphicsItem, QGraphicsView, QLabel

from vrag_desktop.core.agents.events import Answer, Crop, Evidence, ImageShown, SearchResults
from vrag_desktop.qt.evidence import page_images as ev_mod
from vrag_desktop.qt.evidence.evidence_view import EvidenceView
from vrag_desktop.qt.evidence.page_view import CITED_COLOUR, REGION_COLOUR

# Page 1 regions (raw pixels of a 1200×1600 page): a table, a row inside it, a cell inside the row.
TABLE = (100, 300, 1100, 900)
ROW = (120, 520, 1080, 640)
CELL = (400, 530, 700, 630)
P2 = (300, 600, 700, 850)  # a region mid-page 2 (1000×1400), taken between crops 2 and 3


def _page(path: Path, size: tuple[int, int], seed: int) -> str:
    """A page with distinct shapes so a crop's pixels can be told apart from any other region's."""
    img = Image.new("RGB", size, (250, 250, 245))
    d = ImageDraw.Draw(img)
    w, h = size
    for i in range(0, w, 97):
        d.line([(i, 0), (i, h)], fill=((i * 7 + seed) % 256, 90, 160), width=3)
    for j in range(0, h, 89):
        d.line([(0, j), (w, j)], fill=(40, (j * 5 + seed) % 256, 60), width=2)
    d.rectangle([410, 540, 690, 620], fill=(220, 30, 30))
    d.ellipse([150, 320, 350, 500], fill=(30, 160, 60))
    img.save(path)
    return str(path)


@pytest.fixture
def run(tmp_path: Path) -> dict[str, Any]:
    a = _page(tmp_path / "doc_1.png", (1200, 1600), 0)
    b = _page(tmp_path / "doc_2.png", (1000, 1400), 50)
    src = tmp_path / "doc.pdf"
    src.write_bytes(b"%PDF-1.4\n% not rendered here; only opened by the system viewer\n")
    s = str(src)

    def shown(step: int, raw: str, page: int) -> ImageShown:
        return ImageShown(step=step, image=raw, raw=raw, width=600, height=800, source=s, page=page)

    def crop(step: int, raw: str, page: int, region: tuple[int, int, int, int]) -> Crop:
        seen = tmp_path / f"seen_{step}.jpg"
        Image.open(raw).crop(region).resize((200, 120)).save(seen)
        return Crop(
            step=step, region=region, raw=raw, image=str(seen), width=200, height=120, source=s, page=page
        )

    events = [
        shown(1, a, 1),
        crop(2, a, 1, TABLE),
        crop(3, a, 1, ROW),
        shown(4, b, 2),
        crop(5, b, 2, P2),
        shown(6, a, 1),
        crop(7, a, 1, CELL),
        Answer(
            step=8, content="x", evidence=(Evidence(s, a, 1), Evidence(s, a, 1, CELL), Evidence(s, b, 2, P2))
        ),
    ]
    return {"a": a, "b": b, "src": s, "events": events}


def _view(qtbot: Any, ctx: Any = None) -> EvidenceView:
    view = EvidenceView(ctx)
    qtbot.addWidget(view)
    view.resize(1300, 850)
    view.show()
    qtbot.waitExposed(view)
    return view


def _load(qtbot: Any, view: EvidenceView, events: list) -> None:
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.load(events)


def test_regions_at_exact_pixel_rects_with_numbered_badges(qtbot: Any, run: dict[str, Any]) -> None:
    view = _view(qtbot)
    _load(qtbot, view, run["events"])
    assert view.current == run["a"]  # the first page the answer cites
    pv = view.page_view
    assert pv.sceneRect() == QRectF(0, 0, 1200, 1600)
    assert pv.pixmap_item is not None and pv.pixmap_item.pixmap().size().toTuple() == (1200, 1600)
    assert sorted(pv.region_items) == [1, 2, 4]  # region 3 is on page 2
    for number, (x1, y1, x2, y2) in {1: TABLE, 2: ROW, 4: CELL}.items():
        item = pv.region_items[number]
        assert item.mapRectToScene(item.rect()) == QRectF(x1, y1, x2 - x1, y2 - y1)
        assert item.pen().isCosmetic()
        badge = pv.badges[number]
        assert badge.toolTip() == f"Region {number}" and badge.scenePos() == QPointF(x1, y1)
        assert badge.flags() & QGraphicsItem.GraphicsItemFlag.ItemIgnoresTransformations
    assert pv.region_items[4].pen().color() == CITED_COLOUR  # the answer cites the cell
    assert pv.region_items[1].pen().color() == REGION_COLOUR

    # badges keep their on-screen size whatever the zoom
    def on_screen() -> QRectF:
        badge = pv.badges[1]
        return badge.deviceTransform(pv.viewportTransform()).mapRect(badge.boundingRect())

    before, scale = on_screen(), pv.scale_factor()
    pv.zoom_in()
    pv.zoom_in()
    after = on_screen()
    assert pv.scale_factor() == pytest.approx(scale * pv.ZOOM_STEP**2)
    assert abs(after.width() - before.width()) <= 1 and abs(after.height() - before.height()) <= 1


def test_crops_are_full_resolution_raw_pixels(qtbot: Any, run: dict[str, Any]) -> None:
    view = _view(qtbot)
    _load(qtbot, view, run["events"])
    raw = Image.open(run["a"]).convert("RGB")
    assert sorted(view.cards) == [1, 2, 4]
    for number, box in {1: TABLE, 2: ROW, 4: CELL}.items():
        pm = view.cards[number].image.pixmap
        assert pm is not None and (pm.width(), pm.height()) == (box[2] - box[0], box[3] - box[1])
        img = pm.toImage()
        for x, y in [(0, 0), (13, 7), (pm.width() - 1, pm.height() - 1), (pm.width() // 2, pm.height() // 3)]:
            assert img.pixelColor(x, y).getRgb()[:3] == raw.getpixel((box[0] + x, box[1] + y))
    assert "(400, 530) – (700, 630)" in view.cards[4].where.text()
    assert "inside" not in view.cards[1].title.text() and "cited" in view.cards[4].title.text()


def test_live_events_number_in_step_order_and_follow(qtbot: Any, run: dict[str, Any]) -> None:
    view = _view(qtbot)
    events = run["events"]
    seen_pages: list[str] = []
    view.pageChanged.connect(seen_pages.append)
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.apply(events[0])
    assert view.crop_note.isVisibleTo(view) and "No crops" in view.crop_note.text()
    for e in events[1:3]:
        view.apply(e)
    assert not view.crop_note.isVisibleTo(view)
    assert sorted(view.page_view.region_items) == [1, 2] and view.page_view.selected == 2
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.apply(events[3])  # page 2 shown: the view follows
    view.apply(events[4])
    assert view.current == run["b"] and sorted(view.page_view.region_items) == [3]
    assert view.cards[3].image.pixmap is not None and view.cards[3].image.pixmap.width() == P2[2] - P2[0]
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.apply(events[5])
    view.apply(events[6])
    view.apply(events[7])
    assert seen_pages == [run["a"], run["b"], run["a"]]
    assert sorted(view.page_view.region_items) == [1, 2, 4]
    assert view.page_view.region_items[4].pen().color() == CITED_COLOUR
    assert [view.strip.item(i).data(Qt.ItemDataRole.UserRole) for i in range(view.strip.count())] == [
        run["a"],
        run["b"],
    ]
    assert "★ cited" in view.strip.item(0).text() and "p. 1" in view.strip.item(0).text()


def test_crop_arriving_while_page_loads_is_cut_too(qtbot: Any, run: dict[str, Any]) -> None:
    view = _view(qtbot)
    events = run["events"]
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.apply(events[0])
        view.apply(events[1])  # before the decode finished
    pm = view.cards[1].image.pixmap
    assert pm is not None and (pm.width(), pm.height()) == (TABLE[2] - TABLE[0], TABLE[3] - TABLE[1])


def test_focus_selects_page_and_centres_region(qtbot: Any, run: dict[str, Any], reports: list) -> None:
    view = _view(qtbot)
    _load(qtbot, view, run["events"])
    assert view.current == run["a"]
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        assert view.focus(run["src"], 2, P2)
    assert view.current == run["b"] and view.page_view.selected == 3
    assert view.strip.currentItem().data(Qt.ItemDataRole.UserRole) == run["b"]
    pv = view.page_view
    rect = QRectF(*P2[:2], P2[2] - P2[0], P2[3] - P2[1])
    centre = pv.mapFromScene(rect.center())
    vc = pv.viewport().rect().center()
    assert pv.viewport().rect().contains(pv.mapFromScene(rect).boundingRect())
    assert pv.mapFromScene(rect).boundingRect().width() > 300  # zoomed in past the fitted page (~230 px)
    assert abs(centre.x() - vc.x()) <= 2 and abs(centre.y() - vc.y()) <= 2
    assert view.cards[3].selected
    # back on a loaded page: no reload, just the region
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.focus(run["src"], 1)
    assert view.focus(run["src"], 1, CELL) and view.page_view.selected == 4 and view.cards[4].selected
    # an answer's evidence link, as the ask panel emits it
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        assert view.focus_evidence(Evidence(source=run["src"], image=run["b"], page=2, region=P2))
    assert view.current == run["b"] and view.page_view.selected == 3
    assert not view.focus(run["src"], 9)
    assert reports and reports[-1][0] == "warning" and "doc.pdf p. 9" in reports[-1][2]


def test_click_card_or_region_links_the_two(qtbot: Any, run: dict[str, Any]) -> None:
    view = _view(qtbot)
    _load(qtbot, view, run["events"])
    qtbot.mouseClick(view.cards[2].badge, Qt.MouseButton.LeftButton)
    assert view.page_view.selected == 2 and view.cards[2].selected
    view.page_view.fit()
    # a click on the page inside the cell (innermost of three nested regions) picks the cell
    at = view.page_view.mapFromScene(QPointF(650, 600))
    qtbot.mouseClick(view.page_view.viewport(), Qt.MouseButton.LeftButton, pos=at)
    assert view.page_view.selected == 4 and view.cards[4].selected and not view.cards[2].selected


def test_missing_image_shows_placeholder(qtbot: Any, run: dict[str, Any], tmp_path: Path) -> None:
    gone = str(tmp_path / "deleted_page.png")
    seen = tmp_path / "seen_gone.jpg"
    Image.new("RGB", (120, 80), (9, 9, 9)).save(seen)
    events = [
        ImageShown(step=1, image="", raw=gone, width=600, height=800, source=run["src"], page=3),
        Crop(step=2, region=(10, 10, 300, 200), raw=gone, image=str(seen), source=run["src"], page=3),
        Crop(
            step=3,
            region=(20, 20, 100, 100),
            raw=gone,
            image=str(tmp_path / "nope.jpg"),
            source=run["src"],
            page=3,
        ),
    ]
    view = _view(qtbot)
    _load(qtbot, view, events)
    assert view.page_view.message == f"image no longer on disk: {gone}"
    assert view.page_view.pixmap_item is None and not view.page_view.region_items
    assert (
        view.cards[1].image.pixmap is not None and view.cards[1].image.pixmap.width() == 120
    )  # the model's copy
    assert "resized copy" in view.cards[1].where.text()
    assert "image is gone" in view.crop_note.text()
    assert view.cards[2].image.pixmap is None and "gone" in view.cards[2].image.text
    view.grab()  # paints the placeholder without error


def test_wheel_zoom_keeps_point_under_mouse(qtbot: Any, run: dict[str, Any]) -> None:
    view = _view(qtbot)
    _load(qtbot, view, run["events"])
    pv = view.page_view
    fit = pv.scale_factor()
    pv.zoom_in()  # make the page larger than the view, so every point can stay put
    for pos in (QPoint(200, 150), QPoint(pv.viewport().width() - 150, pv.viewport().height() - 120)):
        before = pv.mapToScene(pos)
        wheel = QWheelEvent(
            QPointF(pos),
            QPointF(pv.viewport().mapToGlobal(pos)),
            QPoint(),
            QPoint(0, 120),
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
            Qt.ScrollPhase.NoScrollPhase,
            False,
        )
        scale = pv.scale_factor()
        QApplication.sendEvent(pv.viewport(), wheel)
        assert pv.scale_factor() == pytest.approx(scale * pv.ZOOM_STEP)
        after = pv.mapToScene(pos)
        tolerance = 1.5 / pv.scale_factor()  # scroll bars move in whole screen pixels
        assert abs(after.x() - before.x()) <= tolerance and abs(after.y() - before.y()) <= tolerance
    pv.zoom_out()
    assert pv.scale_factor() < fit * pv.ZOOM_STEP**3
    pv.actual_size()
    assert pv.scale_factor() == pytest.approx(1.0)
    view.fit_button.click()
    assert pv.scale_factor() == pytest.approx(fit, rel=0.02)
    for _ in range(40):
        pv.zoom_in()
    assert pv.scale_factor() == pytest.approx(pv.MAX_SCALE)


def test_huge_page_is_downscaled_but_regions_and_crops_stay_raw(
    qtbot: Any, run: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ev_mod, "MAX_VIEW_PIXELS", 300_000)  # the 1200×1600 page now counts as huge
    view = _view(qtbot)
    _load(qtbot, view, run["events"])
    pv = view.page_view
    assert pv.pixmap_item is not None and pv.pixmap_item.pixmap().width() < 1200
    assert pv.pixmap_item.sceneBoundingRect().size().toTuple() == pytest.approx((1200, 1600), abs=2)
    item = pv.region_items[4]
    assert item.mapRectToScene(item.rect()) == QRectF(400, 530, 300, 100)
    pm = view.cards[4].image.pixmap
    assert pm is not None and (pm.width(), pm.height()) == (300, 100)
    raw = Image.open(run["a"]).convert("RGB")
    assert pm.toImage().pixelColor(37, 41).getRgb()[:3] == raw.getpixel((437, 571))


def test_vimrag_pages_from_search_results(qtbot: Any, run: dict[str, Any]) -> None:
    from vrag_desktop.core.agents.events import HitRef

    hit = HitRef(score=0.9, name="doc_2", source=run["src"], modality="page", image=run["b"], page=2)
    view = _view(qtbot)
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.apply(SearchResults(step=1, content="q", hits=(hit,), shown=(0,)))
    assert view.current == run["b"] and view.page_view.sceneRect() == QRectF(0, 0, 1000, 1400)
    assert "No crops" in view.crop_note.text()


def test_open_source_runs_a_page_viewer(
    qtbot: Any, run: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reports: list
) -> None:
    """A real subprocess: a stand-in `zathura` on PATH records the argv it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    out = tmp_path / "argv.txt"
    script = bin_dir / "zathura"
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{out}"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    view = _view(qtbot)
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.load(run["events"])
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.focus(run["src"], 2)
    assert view.open_button.isEnabled()
    view.open_button.click()
    qtbot.waitUntil(lambda: out.exists() and out.read_text().count("\n") == 3, timeout=5000)
    assert out.read_text().splitlines() == ["-P", "2", run["src"]]
    assert not reports
    os.remove(run["src"])
    assert not view.open_source()
    assert reports[-1][0] == "error" and "no longer on disk" in reports[-1][2]


def test_load_saved_run_and_clear(qtbot: Any, run: dict[str, Any], ctx: Any) -> None:
    with ctx.runs.recorder("vrag", "q") as rec:
        for e in run["events"]:
            rec.record(e)
    view = _view(qtbot, ctx)
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        view.load_run(rec.id)
    assert view.strip.count() == 2 and sorted(view.page_view.region_items) == [1, 2, 4]
    view.clear()
    assert view.strip.count() == 0 and view.current is None and not view.cards
    assert not view.open_button.isEnabled()


class _Counter(QObject):
    """Counts the events of the given types each watched object receives."""

    def __init__(self, *types: QEvent.Type) -> None:
        super().__init__()
        self.types, self.seen = types, 0

    def eventFilter(self, obj: Any, ev: Any) -> bool:
        if ev.type() in self.types:
            self.seen += 1
        return False


def test_an_event_that_changes_nothing_on_the_page_repaints_nothing(qtbot: Any, run: dict[str, Any]) -> None:
    """A live run restyles the current page at every event: unchanged regions, badges and cards must
    not be set again (each set repainted the smooth-scaled page or restyled the crop panel)."""
    view = _view(qtbot)
    for ev in run["events"][:3]:  # page 1 with its two crops, live
        view.apply(ev)
    qtbot.waitUntil(lambda: view.loaded == run["a"] and len(view.cards) == 2, timeout=5000)
    qtbot.wait(100)
    paints, styles = _Counter(QEvent.Type.Paint), _Counter(QEvent.Type.StyleChange)
    view.page_view.viewport().installEventFilter(paints)
    for card in view.cards.values():
        card.badge.installEventFilter(styles)
    for _ in range(3):
        view._refresh_current()  # what every further event of the run does to the page shown
        qtbot.wait(30)
    assert (paints.seen, styles.seen) == (0, 0)
    view.page_view.select(1)  # a real change still repaints
    qtbot.waitUntil(lambda: paints.seen > 0, timeout=2000)


def test_cards_of_a_page_left_are_reused_for_the_next_and_show_only_their_region(
    qtbot: Any, run: dict[str, Any]
) -> None:
    """A page change hands the cards it no longer shows to the next page's regions (a widget made
    from Python costs GIL round-trips on its first calls); a reused card shows nothing of before."""
    from vrag_desktop.qt.evidence.crop_cards import CropCard

    view = _view(qtbot)
    _load(qtbot, view, run["events"])  # page 1 shown: cards 1, 2, 4
    qtbot.mouseClick(view.cards[4].badge, Qt.MouseButton.LeftButton)
    made = set(view.crop_panel.findChildren(CropCard))
    assert len(made) == 3 and view.cards[4].selected
    for _ in range(3):  # page 2, page 1, ... : no card is made past the first three
        with qtbot.waitSignal(view.pageLoaded, timeout=5000):
            assert view.focus(run["src"], 2)
        with qtbot.waitSignal(view.pageLoaded, timeout=5000):
            assert view.focus(run["src"], 1)
    assert set(view.crop_panel.findChildren(CropCard)) == made
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        assert view.focus(run["src"], 2)
    card = view.cards[3]
    assert card in made and card.number == 3 and card.badge.text() == "3" and not card.selected
    assert card.where.text().startswith("(300, 600) – (700, 850)") and "cited" in card.title.text()
    assert "Region 3 · step 5" in card.title.text()
    qtbot.waitUntil(lambda: card.image.pixmap is not None, timeout=5000)
    pm = card.image.pixmap
    assert pm is not None and (pm.width(), pm.height()) == (P2[2] - P2[0], P2[3] - P2[1])
    assert card.isVisibleTo(view) and sum(c.isVisibleTo(view) for c in made) == 1
    qtbot.mouseClick(card.badge, Qt.MouseButton.LeftButton)  # its click names its new region
    assert view.page_view.selected == 3 and card.selected


def test_a_crop_is_drawn_by_a_label_scaled_once_to_the_column(qtbot: Any) -> None:
    """No Python paintEvent or resizeEvent (each was a GIL round-trip per card at every repaint or
    resize of a live run): the crop is scaled when it or the width it is given changes, smoothly
    when shrunk, at most 2× when enlarged."""
    from PySide6.QtGui import QColor, QPixmap
    from PySide6.QtWidgets import QLabel, QWidget

    from vrag_desktop.qt.evidence.crop_cards import CropImage

    assert CropImage.paintEvent is QWidget.paintEvent and CropImage.resizeEvent is QWidget.resizeEvent
    image = CropImage()
    qtbot.addWidget(image)
    label = image.findChild(QLabel)
    image.fit(300)
    image.show()
    assert label.text() == "loading…" and image.height() == CropImage.EMPTY_HEIGHT
    pm = QPixmap(100, 50)
    pm.fill(QColor("#c03030"))
    image.set_pixmap(pm)
    assert label.pixmap().size().toTuple() == (200, 100) and image.height() == 100  # capped at 2×
    image.fit(80)
    assert label.pixmap().size().toTuple() == (80, 40) and image.height() == 40
    assert label.pixmap().toImage().pixelColor(40, 20) == QColor("#c03030")
    image.set_pixmap(None, "crop unavailable")
    assert label.text() == "crop unavailable" and label.pixmap().isNull()


def test_the_column_fits_its_cards_pictures_to_its_width_and_the_stylesheet_draws_their_borders(
    qtbot: Any, run: dict[str, Any]
) -> None:
    """One Python call per resize of the column fits every picture to the width the layout gives
    it; a card has no Python paintEvent: its border, and the selected card's colour, come from
    the app stylesheet (``QFrame[card="crop"]``), so theme changes reach it as well."""
    from PySide6.QtWidgets import QApplication, QFrame, QLabel

    from vrag_desktop.qt.evidence.crop_cards import CropCard
    from vrag_desktop.qt.infra.theme import MARKS, apply_theme

    apply_theme(QApplication.instance(), "system")  # as test_theme leaves it: the app stylesheet set
    assert CropCard.paintEvent is QFrame.paintEvent
    view = _view(qtbot)
    _load(qtbot, view, run["events"])  # page 1: cards 1, 2, 4
    cards = [view.cards[n] for n in (1, 2, 4)]
    qtbot.waitUntil(lambda: all(c.image.pixmap is not None for c in cards), timeout=5000)

    def fitted() -> bool:
        return all(c.image.findChild(QLabel).pixmap().width() == c.image.width() for c in cards)

    qtbot.waitUntil(fitted, timeout=5000)
    before = cards[0].image.width()
    view.crop_scroll.setFixedWidth(view.crop_scroll.width() - 60)
    qtbot.waitUntil(lambda: cards[0].image.width() < before and fitted(), timeout=5000)
    qtbot.mouseClick(view.cards[4].badge, Qt.MouseButton.LeftButton)
    assert view.cards[4].mark == "cited" and view.cards[1].mark is None  # the answer cites region 4
    qtbot.mouseClick(view.cards[1].badge, Qt.MouseButton.LeftButton)
    assert view.cards[1].mark == "region" and view.cards[4].mark is None
    shot = view.cards[1].grab().toImage()
    assert shot.pixelColor(shot.width() // 2, 0).name() == MARKS["region"]  # the top edge of its border
    assert fitted()  # a thicker border, same picture width


def test_the_page_and_its_marks_are_items_the_scene_made(qtbot: Any, run: dict[str, Any]) -> None:
    """Not made from Python: PySide's wrapper of an item made from Python wins the GIL back at Qt's
    first call of each of its virtual methods, about ten an item, each up to 5 ms under load."""
    import shiboken6

    view = _view(qtbot)
    _load(qtbot, view, run["events"])
    pv = view.page_view
    items = [pv.pixmap_item, *pv.region_items.values(), *pv.badges.values()]
    items += [child for r in pv.region_items.values() for child in r.childItems()]  # the halos
    assert len(items) == 1 + 3 + 3 + 3
    assert not any(shiboken6.createdByPython(i) for i in items)
    pv.centre_on(2)  # the flash over the region pointed at
    assert pv._flash_item is not None and not shiboken6.createdByPython(pv._flash_item)
    assert type(pv).drawForeground is QGraphicsView.drawForeground  # the message is a label
    pv.clear_page("image no longer on disk")
    note = pv.viewport().findChild(QLabel)
    assert note.isVisible() and note.text() == pv.message == "image no longer on disk"
    pv.clear_page()
    assert not note.isVisible()


def test_a_page_left_before_its_turn_to_decode_is_never_decoded(
    qtbot: Any, run: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.qt.evidence import evidence_view as view_mod
    from vrag_desktop.qt.infra.tasks import run_decode

    decoded: list[str] = []
    real = view_mod.read_page

    def read_page(key: str, *args: Any) -> Any:
        decoded.append(key)
        return real(key, *args)

    monkeypatch.setattr(view_mod, "read_page", read_page)
    view = _view(qtbot)
    events = run["events"]
    gate, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        gate.wait(5)

    busy = run_decode(hold)  # the decode lane is busy (thumbnails, say)
    assert started.wait(5)  # running: an urgent page queued now cannot jump ahead of it
    view.apply(events[0])  # page 1 shown, queued
    view.apply(events[3])  # page 2 shown before page 1 was decoded: the view follows
    with qtbot.waitSignal(view.pageLoaded, timeout=5000):
        gate.set()
    qtbot.waitUntil(lambda: busy.outcome is not None)
    assert decoded == [run["b"]] and view.loaded == run["b"]


def test_the_strip_never_decodes_thumbnails_of_pages_it_dropped(
    qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vrag_desktop.core.run.evidence import EvidencePage
    from vrag_desktop.qt.evidence import page_strip
    from vrag_desktop.qt.infra.tasks import run_decode

    decoded: list[str] = []
    real = page_strip.read_thumb
    monkeypatch.setattr(page_strip, "read_thumb", lambda key: decoded.append(key) or real(key))
    keys = [_page(tmp_path / f"p{i}.png", (300, 400), i) for i in range(4)]
    strip = page_strip.PageStrip()
    qtbot.addWidget(strip)
    gate = threading.Event()
    busy = run_decode(gate.wait, 5)  # the decode lane is busy
    strip.sync({k: EvidencePage(k, page=i + 1) for i, k in enumerate(keys[:3])})  # a run's pages...
    strip.sync({k: EvidencePage(k) for k in keys[1:3]})  # ...one left (the run replayed from step 3)
    strip.remove_all()  # ...and the run closed before any thumbnail came
    strip.sync({keys[3]: EvidencePage(keys[3], page=1)})  # the next run's page
    gate.set()
    qtbot.waitUntil(lambda: busy.outcome is not None and bool(decoded))
    done = run_decode(lambda: None)  # the lane runs in order: everything queued before it is settled
    qtbot.waitUntil(lambda: done.outcome is not None)
    assert decoded == [keys[3]]
