"""Bad input: phone photos stored sideways with an EXIF Orientation tag (274), one per orientation.

Each must be indexed upright (size and pixels), OCR'd (the text is found: sideways text is not read
without the turn), shown upright by the app's image decoding, and cropped upright by the VRAG agent
(a box the model draws on the upright view returns that part of the upright picture).
"""

from __future__ import annotations

import asyncio
import base64
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import index_paths
from PIL import Image, ImageChops, ImageDraw, ImageFont, ImageStat

from vrag_desktop.core.images import open_upright, orientation, stored_box, upright_size

W, H = 800, 400
RED = (0, 0, 160, 110)  # top-left block of the upright picture
BLUE = (640, 290, 800, 400)  # bottom-right block
WORDS = ("HARBOR", "1871")
T = Image.Transpose
# stored = upright turned the other way, so that the EXIF turn brings it back
TO_STORED = {
    1: None,
    2: T.FLIP_LEFT_RIGHT,
    3: T.ROTATE_180,
    4: T.FLIP_TOP_BOTTOM,
    5: T.TRANSPOSE,
    6: T.ROTATE_90,
    7: T.TRANSVERSE,
    8: T.ROTATE_270,
}


def upright_picture() -> Image.Image:
    """Asymmetric in both axes, with a line of text: any wrong turn or flip shows."""
    im = Image.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(im)
    draw.rectangle((RED[0], RED[1], RED[2] - 1, RED[3] - 1), fill=(220, 0, 0))
    draw.rectangle((BLUE[0], BLUE[1], BLUE[2] - 1, BLUE[3] - 1), fill=(0, 0, 220))
    font = ImageFont.truetype("DejaVuSans-Bold.ttf", 72)
    draw.text((190, 160), " ".join(WORDS), fill="black", font=font)
    return im


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("exif") / "photos"
    folder.mkdir()
    up = upright_picture()
    out = {}
    for turn, method in TO_STORED.items():
        stored = up if method is None else up.transpose(method)
        exif = Image.Exif()
        exif[274] = turn
        path = folder / f"photo_o{turn}.jpg"
        stored.save(path, exif=exif, quality=95)
        out[turn] = path
    return out


def mean_diff(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference per channel (0–255)."""
    assert a.size == b.size, (a.size, b.size)
    return float(sum(ImageStat.Stat(ImageChops.difference(a.convert("RGB"), b.convert("RGB"))).mean) / 3)


def assert_upright(im: Image.Image, what: str) -> None:
    """``im`` is the upright picture at any scale (JPEG tolerance), not a turned or mirrored one."""
    expect = upright_picture().resize(im.size, Image.Resampling.BILINEAR)
    diff = mean_diff(im, expect)
    assert diff < 8, f"{what}: differs from the upright picture by {diff:.1f}"


def test_fixture_photos_are_really_stored_sideways(photos: dict[int, Path]) -> None:
    for turn, path in photos.items():
        with Image.open(path) as im:
            assert orientation(im) == turn
            assert im.size == ((H, W) if turn >= 5 else (W, H))
            assert upright_size(im) == (W, H)
            if turn != 1:  # the stored pixels are not upright: the checks below can fail
                assert mean_diff(im.convert("RGB").resize((W, H)), upright_picture()) > 20
        assert_upright(open_upright(path), path.name)


def test_indexed_and_ocrd_upright(photos: dict[int, Path], library, minilm) -> None:  # type: ignore[no-untyped-def]
    folder = photos[1].parent
    corpus, _scan, _build = index_paths(library, "exif", [folder], minilm)
    for turn, path in photos.items():
        src = corpus.manifest.source_by_path(str(path))
        assert src is not None, path
        (item,) = corpus.manifest.items(src.id)
        assert item.error is None, (turn, item.error)
        assert (item.width, item.height) == (W, H), (turn, item.width, item.height)
        with Image.open(str(item.image_path)) as derived:  # what search shows and the agent crops
            assert derived.size[0] > derived.size[1], turn
            assert_upright(derived, f"derived image of orientation {turn}")
        text = (item.text or "").upper()
        assert item.text_source == "ocr" and all(w in text for w in WORDS), (turn, item.text)


def qimage_to_pil(image: Any) -> Image.Image:
    from PySide6.QtCore import QBuffer, QIODevice

    buf = QBuffer()
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    assert image.save(buf, "PNG")
    return Image.open(io.BytesIO(bytes(buf.data().data()))).convert("RGB")


def test_app_draws_pages_crops_and_thumbnails_upright(photos: dict[int, Path]) -> None:
    from vrag_desktop.qt.evidence.page_images import cut_crops, read_page, read_thumb
    from vrag_desktop.qt.infra.thumbnails import load_thumbnail

    expect_red = upright_picture().crop(RED)
    for turn, path in photos.items():
        page = read_page(str(path), [(1, RED, "")])
        assert page.error is None and page.image is not None, (turn, page.error)
        assert page.size == (W, H), (turn, page.size)
        assert_upright(qimage_to_pil(page.image), f"page of orientation {turn}")
        assert mean_diff(qimage_to_pil(page.crops[1]), expect_red) < 8, turn
        # huge pages are not decoded whole: the crop is read by clip rectangle from the stored grid
        clipped = cut_crops(str(path), None, [(1, RED), (2, BLUE)])
        assert mean_diff(qimage_to_pil(clipped[1]), expect_red) < 8, turn
        assert mean_diff(qimage_to_pil(clipped[2]), upright_picture().crop(BLUE)) < 8, turn
        for thumb in (read_thumb(str(path)), load_thumbnail(str(path), 120)):
            assert_upright(qimage_to_pil(thumb), f"thumbnail of orientation {turn}")


def test_evidence_page_size_is_upright(photos: dict[int, Path]) -> None:
    from vrag_desktop.core.run.evidence import EvidencePage

    for path in photos.values():
        assert EvidencePage(key=str(path)).size() == (W, H)


@pytest.mark.parametrize("turn", range(1, 9))
def test_stored_box_maps_upright_boxes_to_the_stored_grid(photos: dict[int, Path], turn: int) -> None:
    with Image.open(photos[turn]) as im:
        stored = im.convert("RGB")
    for box in (RED, BLUE, (100, 50, 700, 300)):
        got = stored.crop(stored_box(box, turn, stored.size))
        method = {
            2: T.FLIP_LEFT_RIGHT,
            3: T.ROTATE_180,
            4: T.FLIP_TOP_BOTTOM,
            5: T.TRANSPOSE,
            6: T.ROTATE_270,
            7: T.TRANSVERSE,
            8: T.ROTATE_90,
        }.get(turn)
        got = got if method is None else got.transpose(method)
        assert mean_diff(got, upright_picture().crop(box)) < 8, (turn, box)


class ScriptedModel:
    """A ChatModel that replies from a script; a callable reply sees the messages sent so far."""

    model_name = "scripted"

    def __init__(self, replies: Sequence[Any]) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, Any]]] = []

    async def chat(self, messages: Sequence[dict[str, Any]], **_: Any) -> Any:
        from vrag_desktop.core.endpoints.base import ChatResult

        self.calls.append(list(messages))
        reply = self.replies.pop(0)
        text = reply if isinstance(reply, str) else reply(list(messages))
        return ChatResult(content=text, prompt_tokens=1, completion_tokens=1, model_seconds=0.0)


def last_image(messages: Sequence[dict[str, Any]]) -> Image.Image:
    for m in reversed(messages):
        if m["role"] == "user" and isinstance(m["content"], list):
            for part in m["content"]:
                if part["type"] == "image_url":
                    return Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"].split(",", 1)[1])))
    raise AssertionError("no image was shown")


@pytest.mark.parametrize("turn", range(1, 9))
def test_vrag_crop_is_upright(photos: dict[int, Path], tmp_path: Path, turn: int) -> None:
    from vrag_desktop.core.agents.events import Crop, ImageShown
    from vrag_desktop.core.agents.searchers import SearchHit
    from vrag_desktop.core.agents.vrag import VRAGAgent

    path = photos[turn]

    class OneHit:
        local_files = True

        def search(self, query: str, k: int) -> list[SearchHit]:
            return [SearchHit(score=0.9, name=path.stem, source=str(path), modality="image", image=str(path))]

        def load_image(self, p: str) -> bytes:
            return Path(p).read_bytes()

    def box_on_red(messages: list[dict[str, Any]]) -> str:
        w, h = last_image(messages).size  # the upright view the model was shown
        assert w > h
        x2, y2 = round(RED[2] * w / W), round(RED[3] * h / H)
        return f"<think>the red corner</think><bbox>[0, 0, {x2}, {y2}]</bbox>"

    model = ScriptedModel(
        [
            "<think>find it</think><search>harbor</search>",
            box_on_red,
            "<think>done</think><answer>red</answer>",
        ]
    )
    agent = VRAGAgent(model, OneHit(), image_dir=tmp_path / "img", max_steps=4)  # type: ignore[arg-type]

    async def go() -> list[Any]:
        return [ev async for ev in agent.run("What colour is the corner?")]

    events = asyncio.run(asyncio.wait_for(go(), 60))
    shown = next(e for e in events if isinstance(e, ImageShown))
    assert shown.width > shown.height, (turn, shown.width, shown.height)
    assert_upright(Image.open(shown.image), f"view of orientation {turn}")
    crop = next(e for e in events if isinstance(e, Crop))
    x1, y1, x2, y2 = crop.region
    assert (x1, y1) == (0, 0) and abs(x2 - RED[2] - 56) <= 2 and abs(y2 - RED[3] - 56) <= 2, (
        turn,
        crop.region,
    )
    expect = upright_picture().crop(crop.region).resize((crop.width, crop.height), Image.Resampling.BICUBIC)
    sent = last_image(model.calls[-1])
    assert mean_diff(sent, expect) < 8, turn
    assert mean_diff(Image.open(crop.image), expect) < 8, turn
