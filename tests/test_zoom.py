"""Zoom from the source: a crop is re-made from the PDF page, the original image or the video frame.

The point of VRAG's crop action is to read what was too small in the page view. These tests prove
it with a real OCR engine: text the OCR cannot read in the search-step view is read from the crop,
and only because the crop comes from the source (the page image alone gives blur). Everything is
real: PyMuPDF renders, the app's own derive step, the agent, RapidOCR."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from test_vrag_agent import FakeModel, ListSearcher, collect

from vrag_desktop.core.agents import vrag_protocol as vp
from vrag_desktop.core.agents import zoom
from vrag_desktop.core.agents.events import Crop, ImageShown
from vrag_desktop.core.agents.searchers import SearchHit
from vrag_desktop.core.agents.vrag import VRAGAgent
from vrag_desktop.core.corpus import kinds
from vrag_desktop.core.corpus.derive import DeriveOptions, derive

#: A Qwen-VL embedder's page budget (reference §2.2): pages are indexed at 200,704 px.
EMBEDDER_PIXELS = 200_704
SECRET = "Total due 48,215 EUR"
TEXT_BOX_PT = (60.0, 400.0, 200.0, 406.0)  # where SECRET sits on the A4 page, in points (3-pt type)


@pytest.fixture(autouse=True)
def _fresh_zoom_cache() -> None:
    zoom.clear()


def _ocr(path: str | Path) -> str:
    from vrag_desktop.core.corpus.ocr import ocr_image

    return ocr_image(Path(path))


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _make_pdf(path: Path, secret: str = SECRET, rotate: int = 0, title: str = "Quarterly statement") -> None:
    import pymupdf

    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((60, 120), title, fontsize=28)
    for i in range(12):
        page.insert_text(
            (60, 180 + 16 * i), f"Line {i + 1}: ordinary body text of the statement.", fontsize=11
        )
    page.insert_text((TEXT_BOX_PT[0], TEXT_BOX_PT[3]), secret, fontsize=3)
    if rotate:
        page.set_rotation(rotate)
    doc.save(str(path))
    doc.close()


def _index_pdf(pdf: Path, out: Path) -> Path:
    """The app's own derive step at the embedder's budget: the page image a search shows."""
    items = list(
        derive(pdf, kinds.PDF, out, DeriveOptions(render_pixels=EMBEDDER_PIXELS, ocr=False), set(), None)
    )
    assert items and items[0].image_path is not None and items[0].error is None
    return items[0].image_path


def _run_zoom(
    tmp_path: Path, hit: SearchHit, box_in_page: tuple[float, float, float, float]
) -> tuple[ImageShown, Crop]:
    """A VRAG run: search (shows the page), zoom into ``box_in_page`` (page-image pixels), answer."""
    with Image.open(str(hit.image)) as im:
        pw, ph = im.size
    sw, sh = vp.fit_pixels(pw, ph)
    x1, y1, x2, y2 = box_in_page
    box = [round(x1 * sw / pw), round(y1 * sh / ph), round(x2 * sw / pw), round(y2 * sh / ph)]
    model = FakeModel(
        [
            "<think>find it</think><search>total due</search>",
            f"<think>too small, zoom</think><bbox>{box}</bbox>",
            "<think>read it</think><answer>48,215 EUR</answer>",
        ]
    )
    agent = VRAGAgent(model, ListSearcher([hit]), image_dir=tmp_path / f"run-{len(list(tmp_path.iterdir()))}")
    events = collect(agent, "What is the total due?")
    shown = [e for e in events if isinstance(e, ImageShown)]
    crops = [e for e in events if isinstance(e, Crop)]
    assert len(shown) == 1 and len(crops) == 1, [e.event for e in events]
    return shown[0], crops[0]


def _pdf_hit(pdf: Path, page_image: Path) -> SearchHit:
    return SearchHit(
        score=0.9, name="statement_1", source=str(pdf), modality="page", image=str(page_image), page=1
    )


def _text_box_px(page_image: Path) -> tuple[float, float, float, float]:
    """SECRET's box in page-image pixels, with room around it."""
    with Image.open(page_image) as im:
        s = im.width / 595
    x1, y1, x2, y2 = TEXT_BOX_PT
    return ((x1 - 10) * s, (y1 - 12) * s, (x2 + 10) * s, (y2 + 8) * s)


# ====================================================================== the point of zooming


def test_text_unreadable_in_the_page_view_is_read_from_the_zoomed_pdf_crop(tmp_path: Path) -> None:
    pdf = tmp_path / "statement.pdf"
    _make_pdf(pdf)
    page_image = _index_pdf(pdf, tmp_path / "derived")
    shown, crop = _run_zoom(tmp_path, _pdf_hit(pdf, page_image), _text_box_px(page_image))
    assert shown.width * shown.height <= vp.MAX_PIXELS
    assert "48215" not in _digits(_ocr(shown.image)), "the page view should be too coarse to read the total"
    assert crop.zoomed_from == zoom.FROM_PDF and crop.note == ""
    assert "48215" in _digits(_ocr(crop.image))
    assert vp.MIN_PIXELS <= crop.width * crop.height <= vp.MAX_PIXELS
    with Image.open(crop.image) as im:
        assert im.size == (crop.width, crop.height)
    # the region stays in the page image's pixel frame (what the evidence view draws)
    with Image.open(page_image) as im:
        pw, ph = im.size
    x1, y1, x2, y2 = crop.region
    assert 0 <= x1 < x2 <= pw and 0 <= y1 < y2 <= ph and crop.raw == str(page_image)


def test_without_the_source_the_crop_falls_back_to_the_page_image_and_says_so(tmp_path: Path) -> None:
    pdf = tmp_path / "statement.pdf"
    _make_pdf(pdf)
    page_image = _index_pdf(pdf, tmp_path / "derived")
    moved = tmp_path / "elsewhere.pdf"
    shutil.move(pdf, moved)
    _, crop = _run_zoom(tmp_path, _pdf_hit(pdf, page_image), _text_box_px(page_image))
    assert crop.zoomed_from == zoom.FROM_PAGE_IMAGE
    assert "gone" in crop.note and str(pdf) in crop.note
    # ...and this is why the source matters: up-sampling the page image does not make it readable
    assert "48215" not in _digits(_ocr(crop.image))


def test_a_different_pdf_under_the_same_name_is_not_used(tmp_path: Path) -> None:
    import pymupdf

    pdf = tmp_path / "statement.pdf"
    _make_pdf(pdf)
    page_image = _index_pdf(pdf, tmp_path / "derived")
    pdf.unlink()
    doc = pymupdf.open()  # same size, other content
    page = doc.new_page(width=595, height=842)
    for i in range(30):
        page.insert_text((300 - 6 * i, 60 + 25 * i), f"A different document, row {i}", fontsize=14)
    doc.save(str(pdf))
    _, crop = _run_zoom(tmp_path, _pdf_hit(pdf, page_image), _text_box_px(page_image))
    assert crop.zoomed_from == zoom.FROM_PAGE_IMAGE and "changed" in crop.note


def test_a_same_layout_pdf_with_other_text_is_caught_by_its_text_layer(tmp_path: Path) -> None:
    pdf = tmp_path / "statement.pdf"
    _make_pdf(pdf)
    items = list(
        derive(
            pdf,
            kinds.PDF,
            tmp_path / "d",
            DeriveOptions(render_pixels=EMBEDDER_PIXELS, ocr=False),
            set(),
            None,
        )
    )
    page_image = items[0].image_path
    assert page_image is not None and items[0].text_source == "layer"
    hit = SearchHit(0.9, "statement_1", str(pdf), "page", image=str(page_image), page=1, text=items[0].text)
    region = (20, 20, 200, 120)
    assert zoom.zoom(hit, zoom.PageImage(page_image), region, (500, 400)).origin == zoom.FROM_PDF
    zoom.clear()
    pdf.unlink()
    _make_pdf(pdf, title="Quarterly statament")  # one letter: the pixels cannot tell, the text can
    z = zoom.zoom(hit, zoom.PageImage(page_image), region, (500, 400))
    assert z.origin == zoom.FROM_PAGE_IMAGE and "changed" in z.note


def test_a_pdf_with_fewer_pages_now_falls_back(tmp_path: Path) -> None:
    pdf = tmp_path / "statement.pdf"
    _make_pdf(pdf)
    page_image = _index_pdf(pdf, tmp_path / "derived")
    hit = SearchHit(
        score=1.0, name="statement_3", source=str(pdf), modality="page", image=str(page_image), page=3
    )
    page = zoom.PageImage(page_image)
    z = zoom.zoom(hit, page, (0, 0, 100, 100), (448, 448))
    assert z.origin == zoom.FROM_PAGE_IMAGE and "no page 3" in z.note and z.image.size == (448, 448)


@pytest.mark.parametrize("rotate", [90, 270])
def test_rotated_pdf_pages_zoom_into_the_same_place(tmp_path: Path, rotate: int) -> None:
    pdf = tmp_path / "rotated.pdf"
    _make_pdf(pdf, rotate=rotate)
    page_image = _index_pdf(pdf, tmp_path / "derived")
    page = zoom.PageImage(page_image)
    hit = _pdf_hit(pdf, page_image)
    w, h = page.size
    region = (w // 8, h // 8, w * 7 // 8, h * 7 // 8)
    z = zoom.zoom(hit, page, region, (600, 500))
    assert z.origin == zoom.FROM_PDF, z.note
    fallback = zoom.zoom(SearchHit(0, "", "", "page image"), page, region, (600, 500))
    assert _correlation(z.image, fallback.image) > 0.8


def _correlation(a: Image.Image, b: Image.Image) -> float:
    x = np.asarray(a.convert("L").resize((120, 100)), dtype=np.float32).ravel()
    y = np.asarray(b.convert("L").resize((120, 100)), dtype=np.float32).ravel()
    return float(np.corrcoef(x, y)[0, 1])


# ====================================================================== images and video


def _photo(path: Path, size: tuple[int, int], exif_orientation: int = 1) -> None:
    img = Image.new("RGB", size, (235, 232, 225))
    d = ImageDraw.Draw(img)
    for i in range(0, size[0], max(1, size[0] // 9)):
        d.rectangle(
            (i, size[1] // 3, i + size[0] // 20, size[1] // 3 + size[1] // 8), fill=(40 + i % 180, 90, 140)
        )
    font = ImageFont.load_default(size=max(12, size[1] // 60))
    d.text((size[0] // 10, size[1] * 2 // 3), SECRET, fill=(0, 0, 0), font=font)
    exif = Image.Exif()
    if exif_orientation != 1:
        exif[0x0112] = exif_orientation
    img.save(path, quality=92, exif=exif)


def _derived_image(original: Path, out: Path) -> Path:
    items = list(
        derive(
            original, kinds.IMAGE, out, DeriveOptions(render_pixels=EMBEDDER_PIXELS, ocr=False), set(), None
        )
    )
    assert items[0].image_path is not None
    return items[0].image_path


@pytest.mark.parametrize("orientation", [1, 6, 3, 8])
def test_image_regions_come_from_the_original_upright(tmp_path: Path, orientation: int) -> None:
    original = tmp_path / "photo.jpg"
    _photo(original, (3000, 2000), orientation)
    derived = _derived_image(original, tmp_path / "derived")
    page = zoom.PageImage(derived)
    hit = SearchHit(0.9, "photo", str(original), "image", image=str(derived), media=str(original))
    w, h = page.size
    region = (w // 10 - 5, h * 2 // 3 - 8, w // 10 + w // 3, h * 2 // 3 + h // 20 + 4)
    if orientation in (6, 8):  # sideways originals: the text row is elsewhere once upright; any region works
        region = (w // 8, h // 8, w // 2, h // 3)
    z = zoom.zoom(hit, page, region, (700, 300))
    assert z.origin == zoom.FROM_IMAGE, z.note
    assert z.image.size == (700, 300)
    assert _correlation(z.image, page.crop(region)) > 0.8  # the same place, upright
    if orientation == 1:
        assert "48215" in _digits(_ocr_pil(z.image, tmp_path))
        assert "48215" not in _digits(_ocr_pil(page.crop(region).resize((700, 300)), tmp_path))


def _ocr_pil(img: Image.Image, tmp_path: Path) -> str:
    p = tmp_path / "ocr.png"
    img.save(p)
    return _ocr(p)


def test_a_100_megapixel_original_is_zoomed_without_decoding_it_whole(tmp_path: Path) -> None:
    original = tmp_path / "huge.jpg"
    _photo(original, (12_000, 8_400))  # 100.8 MP
    derived = tmp_path / "huge_small.jpg"
    with Image.open(original) as im:
        im.draft("RGB", (1500, 1050))
        im.convert("RGB").resize((530, 371)).save(derived)
    page = zoom.PageImage(derived)
    hit = SearchHit(0.9, "huge", str(original), "image", image=str(derived), media=str(original))
    z = zoom.zoom(hit, page, (0, 0, 530, 371), (535, 374))  # the whole picture: 1/8-scale decode suffices
    assert z.origin == zoom.FROM_IMAGE and z.image.size == (535, 374)
    z2 = zoom.zoom(hit, page, (50, 240, 200, 280), (700, 186))  # a detail: a finer decode
    assert z2.origin == zoom.FROM_IMAGE and z2.image.size == (700, 186)


def test_a_replaced_image_is_not_used(tmp_path: Path) -> None:
    original = tmp_path / "photo.jpg"
    _photo(original, (1600, 1200))
    derived = _derived_image(original, tmp_path / "derived")
    Image.effect_noise((1600, 1200), 80).convert("RGB").save(original)
    hit = SearchHit(0.9, "photo", str(original), "image", image=str(derived), media=str(original))
    z = zoom.zoom(hit, zoom.PageImage(derived), (10, 10, 200, 200), (448, 448))
    assert z.origin == zoom.FROM_PAGE_IMAGE and "changed" in z.note


def _video(path: Path, seconds: float = 4.0, fps: int = 10, size: tuple[int, int] = (320, 240)) -> None:
    import cv2

    w, h = size
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, (w, h))
    for i in range(int(seconds * fps)):
        frame = np.full((h, w, 3), 30, np.uint8)
        x = 10 + i * (w - 60) // int(seconds * fps)
        frame[h // 3 : h // 3 + 50, x : x + 50] = (40, 200, 240)
        cv2.putText(frame, f"{i:03d}", (w - 120, h - 30), cv2.FONT_HERSHEY_SIMPLEX, 1.2, (255, 255, 255), 2)
        writer.write(frame)
    writer.release()


def test_video_regions_come_from_the_keyframe_behind_the_tile(tmp_path: Path) -> None:
    src = tmp_path / "walk.mp4"
    _video(src)
    items = list(
        derive(
            src,
            kinds.VIDEO,
            tmp_path / "derived",
            DeriveOptions(render_pixels=20_000, ocr=False),
            set(),
            None,
        )
    )
    clip = items[0]
    assert clip.image_path is not None and clip.media_path is not None and len(clip.frames) == 4
    page = zoom.PageImage(clip.image_path)
    hit = SearchHit(
        0.9,
        clip.name,
        str(src),
        "clip",
        image=str(clip.image_path),
        media=str(clip.media_path),
        t_start=clip.t_start,
        t_end=clip.t_end,
    )
    w, h = page.size
    tile = (w // 2 + 2, h // 2 + 2, w - 2, h - 2)  # the 4th keyframe's tile
    z = zoom.zoom(hit, page, tile, (640, 480))
    assert z.origin == zoom.FROM_VIDEO, z.note
    assert _correlation(z.image, page.crop(tile)) > 0.8
    spanning = zoom.zoom(hit, page, (w // 4, h // 4, w * 3 // 4, h * 3 // 4), (640, 480))
    assert spanning.origin == zoom.FROM_PAGE_IMAGE and "several keyframes" in spanning.note
    Path(clip.media_path).unlink()
    gone = zoom.zoom(hit, page, tile, (640, 480))
    assert gone.origin == zoom.FROM_PAGE_IMAGE and "gone" in gone.note
