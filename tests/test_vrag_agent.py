"""The VRAG agent: protocol rules pixel by pixel, and whole runs against a real MiniLM index.

The model is a scripted double (its words are what a test controls); everything else is real: the
index, the page renders, the crops, the JPEGs sent, the HTTP search server."""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import io
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import free_port, index_paths
from PIL import Image, ImageChops, ImageStat

from vrag_desktop.core.agents import vrag_protocol as vp
from vrag_desktop.core.agents.events import (
    AgentError,
    AgentEvent,
    Answer,
    BBox,
    ContentDelta,
    Crop,
    Evidence,
    GraphChanged,
    ImageShown,
    MaxSteps,
    SearchResults,
    ThinkDelta,
    Timing,
    Usage,
    event_from_dict,
)
from vrag_desktop.core.agents.model_turn import TurnPolicy
from vrag_desktop.core.agents.searchers import (
    EngineSearcher,
    HttpSearcher,
    SearchFailed,
    SearchHit,
    parse_search_response,
)
from vrag_desktop.core.agents.vrag import VRAGAgent
from vrag_desktop.core.endpoints.base import ChatResult, EndpointError

REFERENCE = Path("/work/shared/reference/vrag-original.md")
PROMPT_SHA256 = "12e72a1e76d417723ccdbf5bee7943fabfe198712517c55b5b2856e80bac4642"  # of the 683-byte template


# ====================================================================== protocol: prompt


def test_prompt_is_byte_identical() -> None:
    p = vp.VRAG_PROMPT
    assert p.startswith(
        "Answer the given question. You must conduct reasoning inside <think> and </think> first"
    )
    assert "You can search as many times as your want." in p  # the original's typo stays
    assert "<bbox>[x1, y1, x2, y2]</bbox>" in p and p.endswith(
        "For example, <answer> Beijing </answer>. Question: {question}"
    )
    assert len(p) == 683 and p.count("\n") == 0
    assert hashlib.sha256(p.encode()).hexdigest() == PROMPT_SHA256
    if REFERENCE.exists():  # the reference's fenced block is the template followed by one newline
        text = REFERENCE.read_text(encoding="utf-8")
        start = text.index("```text\nAnswer the given") + len("```text\n")
        block = text[start : text.index("```", start)]
        assert block == p + "\n"


def test_build_prompt_variants() -> None:
    q = "What is {x} in 2024?"
    demo = vp.build_prompt(q)
    assert demo == vp.VRAG_PROMPT.replace("{question}", q) + "\n" and demo.endswith(
        "Question: What is {x} in 2024?\n"
    )
    assert vp.build_prompt(q, trailing_newline=False) == demo[:-1]


# ====================================================================== protocol: tags


@pytest.mark.parametrize(
    ("text", "think", "action", "arg", "n_problems"),
    [
        (
            "<think>need data</think>\n<search>edelweiss hairs</search>",
            "need data",
            "search",
            "edelweiss hairs",
            0,
        ),
        (
            "<think>look closer</think><bbox>[10, 20, 300, 400]</bbox>",
            "look closer",
            "bbox",
            "[10, 20, 300, 400]",
            0,
        ),
        ("<think>done</think><answer> Beijing </answer>", "done", "answer", "Beijing", 0),
        (
            "<search>no thought first</search>",
            None,
            "search",
            "no thought first",
            0,
        ),  # missing <think>: tolerated
        (
            "<THINK> a </Think>\n< Search >  spaced  </ SEARCH >",
            "a",
            "search",
            "spaced",
            0,
        ),  # case, whitespace
        ("<think>x</think><answer>Paris, Fr", "x", "answer", "Paris, Fr", 0),  # unclosed final tag at the end
        ("<think>x</think><answer>\n  multi\n line \n</answer>", "x", "answer", "multi\n line", 0),
        ("reasoning without tags</think><search>q</search>", "reasoning without tags", "search", "q", 0),
        (
            "<think>a <search>fake</search> b</think><answer>real</answer>",
            "a <search>fake</search> b",
            "answer",
            "real",
            0,
        ),  # tags inside the thought are not actions
        ("<think>a</think><search>q1</search><bbox>[1,2,3,4]</bbox>", "a", "search", "q1", 1),  # two actions
        ("<think>a</think>I think the answer is Paris.", "a", None, "", 1),  # no action
        ("", None, None, "", 1),
        ("<think>a</think><search>   </search>", "a", None, "", 1),  # empty query
        ("<think>a</think><search>q <answer>b</answer>", "a", "answer", "b", 1),  # unclosed tag, then another
    ],
)
def test_parse_turn(text: str, think: str | None, action: str | None, arg: str, n_problems: int) -> None:
    turn = vp.parse_turn(text)
    assert (turn.think, turn.action, turn.argument) == (think, action, arg)
    assert len(turn.problems) == n_problems, turn.problems


def test_parse_turn_problem_wording() -> None:
    assert "no action tag" in vp.parse_turn("just words").problems[0]
    two = vp.parse_turn("<think>t</think><bbox>[1,2,3,4]</bbox><search>q</search>")
    assert two.action == "bbox" and two.actions_found == ("bbox", "search")
    assert "2 actions" in two.problems[0] and "only the first, <bbox>" in two.problems[0]
    msg = vp.invalid_action_message(vp.parse_turn("words").problems[0])
    assert (
        msg.startswith("Your previous action is invalid. No action tag") is False
    )  # problem text kept as is
    assert msg.startswith("Your previous action is invalid. no action tag was found")
    assert msg.endswith("Please try again.") and "<search> query </search>" in msg


# ====================================================================== protocol: bbox

SHOWN = (535, 749)


@pytest.mark.parametrize(
    ("text", "box"),
    [
        ("[10, 20, 300, 400]", (10, 20, 300, 400)),
        ("10, 20, 300, 400", (10, 20, 300, 400)),  # plain comma list
        ("(10.5, 20, 300, 400.25)", (10.5, 20, 300, 400.25)),
        ("[[10, 20, 300, 400]]", (10, 20, 300, 400)),
        ('[{"bbox_2d": [10, 20, 300, 400], "label": "table"}]', (10, 20, 300, 400)),  # Qwen grounding habit
        ("[0, 0, 535, 749]", (0, 0, 535, 749)),  # the whole image
        ("[100, 100, 560, 780]", (100, 100, 535, 749)),  # overshoot < 5 %: clamped
    ],
)
def test_parse_bbox_accepts(text: str, box: tuple[float, ...]) -> None:
    assert vp.parse_bbox(text, SHOWN) == box


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("[10, 20, 300]", "has 3 numbers; it needs exactly 4"),
        ("[10, 20, 300, 400, 5]", "has 5 numbers"),
        ("[-5, 20, 300, 400]", "non-negative"),
        ("[10, 20, 600, 400]", "outside the image: the last image is 535x749 pixels"),  # 600 > 535·1.05
        ("[10, 20, 300, 800]", "outside the image"),  # 800 > 749·1.05 = 786.45
        ("[540, 20, 560, 400]", "outside the image"),  # starts beyond the right edge
        ("[100, 20, 100, 400]", "x2 (100) must be greater than x1 (100)"),  # zero width
        ("[100, 400, 200, 400]", "y2 (400) must be greater than y1 (400)"),  # zero height
        ("[300, 20, 100, 400]", "x2 (100) must be greater than x1 (300)"),  # inverted
        ("[10, 20, abc, 400]", "'abc' in the bbox is not a number"),
        ('["a", 2, 3, 4]', "'a' in the bbox is not a number"),
        ("[10, 20, NaN, 400]", "not a finite number"),
        ("[0.1, 0.2, 0.5, 0.6]", "looks normalised to 0..1"),
        ("the table at the top", "contains no numbers"),
        ('{"x": 1}', "is not a list of 4 numbers"),
        ("", "has 0 numbers"),
    ],
)
def test_parse_bbox_rejects_with_actionable_message(text: str, needle: str) -> None:
    with pytest.raises(vp.BBoxError) as err:
        vp.parse_bbox(text, SHOWN)
    assert needle in str(err.value), str(err.value)


# ====================================================================== protocol: sizing, crop math


def test_fit_pixels_page_2000x2800() -> None:
    w, h = vp.fit_pixels(2000, 2800)
    # √(401408 / 5.6e6) = 0.267731… → floor(535.46) × floor(749.65)
    assert (w, h) == (535, 749)
    assert vp.MIN_PIXELS <= w * h <= vp.MAX_PIXELS == 401_408
    assert abs(w / h - 2000 / 2800) < 0.005


def test_fit_pixels_bounds_and_edges() -> None:
    assert vp.fit_pixels(600, 500) == (600, 500)  # 300,000 px: inside the bounds, unchanged
    assert vp.fit_pixels(132, 132) == (448, 448)  # 448² = 200,704 exactly (no float-noise extra pixel)
    assert vp.fit_pixels(100, 100) == (448, 448)  # any square goes to 448² = the minimum
    assert vp.fit_pixels(300, 100) == (776, 259)  # ×√(200704/30000) = 2.5866: ceil(775.98), ceil(258.66)
    for w, h in [(100, 100), (37, 900), (5000, 10), (1, 1), (3000, 1), (1, 10**6), (640, 313), (401409, 1)]:
        nw, nh = vp.fit_pixels(w, h)
        assert nw >= 1 and nh >= 1
        assert nw * nh <= vp.MAX_PIXELS, (w, h, nw, nh)
        if w * h < vp.MIN_PIXELS:
            assert nw * nh >= vp.MIN_PIXELS, (w, h, nw, nh)
    with pytest.raises(ValueError):
        vp.fit_pixels(0, 10)


def test_fit_pixels_snap_to_qwen_grid() -> None:
    w, h = vp.fit_pixels(2000, 2800, snap=28)
    assert w % 28 == 0 and h % 28 == 0 and vp.MIN_PIXELS <= w * h <= vp.MAX_PIXELS
    assert (w, h) == (532, 728)


def test_crop_region_hand_computed() -> None:
    # scale exactly 2: box (100,200,300,400) → raw (200,400,600,800) → pad 56 → (144,344,656,856)
    assert vp.crop_region((100, 200, 300, 400), (500, 700), (1000, 1400)) == (144, 344, 656, 856)
    # padding clamped at every edge
    assert vp.crop_region((10, 10, 490, 690), (500, 700), (1000, 1400)) == (0, 0, 1000, 1400)
    assert vp.crop_region((0, 0, 20, 20), (500, 700), (1000, 1400)) == (0, 0, 96, 96)
    # non-integer scale 2000/535 = 3.738317…: 100·s − 56 = 317.83 → 317 (floor); 200·s + 56 = 803.66 → 804 (ceil)
    # y: 2800/749 = 3.738318…: the same numbers
    assert vp.crop_region((100, 100, 200, 200), (535, 749), (2000, 2800)) == (317, 317, 804, 804)
    # different x and y scales (4 and 2), pad 0
    assert vp.crop_region((10, 10, 20, 20), (100, 100), (400, 200), pad=0) == (40, 20, 80, 40)


def test_view_nested_zoom_composes_offsets() -> None:
    page = vp.View(shown_size=(500, 700), raw_size=(1000, 1400))
    region1, crop1 = page.zoom((100, 200, 300, 400))
    assert region1 == (144, 344, 656, 856)
    assert crop1.raw_size == (512, 512) and crop1.origin == (144, 344)
    assert crop1.shown_size == (512, 512)  # 262,144 px: already inside the bounds
    # second box in the crop's frame (scale 1): (0,0,256,256) → pad → (0,0,312,312) local → + (144,344)
    region2, crop2 = crop1.zoom((0, 0, 256, 256))
    assert region2 == (144, 344, 456, 656)
    assert crop2.raw_size == (312, 312)
    assert crop2.shown_size == (448, 448)  # 97,344 px up-scaled to 448² = 200,704: the zoom effect
    # third, in the up-scaled frame: scale 312/448; (100,100,200,200) → 69.64−56 → 13; 139.29+56 → 196
    region3, crop3 = crop2.zoom((100, 100, 200, 200))
    assert region3 == (144 + 13, 344 + 13, 144 + 196, 344 + 196)
    assert crop3.origin == (157, 357) and crop3.raw_size == (183, 183)


def test_think_splitter_handles_split_tags() -> None:
    text = "pre <think>I need <b>data</b> here</think><search>q</search> <think>again</think>"
    for size in (1, 2, 3, 5, 8, 100):
        sp = vp.ThinkSplitter()
        got = "".join(sp.feed(text[i : i + size]) for i in range(0, len(text), size)) + sp.flush()
        assert got == "I need <b>data</b> hereagain", size
    sp = vp.ThinkSplitter()
    assert sp.feed("<think>cut off <") + sp.flush() == "cut off <"  # an unfinished thought is kept


def test_encode_image_data_uri() -> None:
    img = Image.new("RGB", (40, 30), (200, 10, 10))
    uri = vp.encode_image(img)
    assert uri.startswith("data:image/jpeg;base64,")
    back = Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))
    assert back.format == "JPEG" and back.size == (40, 30)


# ====================================================================== doubles

Reply = str | Exception | Callable[[list[dict[str, Any]]], str]


class FakeModel:
    """A scripted ChatModel: returns the next reply (or raises it), streaming it in small chunks,
    and records every message list it was sent."""

    model_name = "fake-vrag"

    def __init__(self, replies: Sequence[Reply], *, stream: bool = True, chunk: int = 7) -> None:
        self.replies = list(replies)
        self.stream = stream
        self.chunk = chunk
        self.calls: list[list[dict[str, Any]]] = []
        self.params: list[dict[str, Any]] = []

    async def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        stream: bool = True,
        on_delta: Callable[[str, str], None] | None = None,
        **params: Any,
    ) -> ChatResult:
        self.calls.append(copy.deepcopy(list(messages)))
        self.params.append(params)
        reply = self.replies.pop(0) if self.replies else "<think>script ended</think><answer>none</answer>"
        if isinstance(reply, Exception):
            raise reply
        text = reply if isinstance(reply, str) else reply(list(messages))
        if self.stream and on_delta:
            for i in range(0, len(text), self.chunk):
                on_delta("content", text[i : i + self.chunk])
                await asyncio.sleep(0)
        return ChatResult(
            content=text,
            prompt_tokens=100 * len(self.calls),
            completion_tokens=len(text) // 4,
            model_seconds=0.01,
        )


class ListSearcher:
    """A searcher returning fixed hits (or raising) — for the failure paths."""

    local_files = True

    def __init__(self, hits: list[SearchHit] | Exception) -> None:
        self.hits = hits

    def search(self, query: str, k: int) -> list[SearchHit]:
        if isinstance(self.hits, Exception):
            raise self.hits
        return self.hits[:k]

    def load_image(self, path: str) -> bytes:
        return Path(path).read_bytes()


def last_image(messages: list[dict[str, Any]]) -> Image.Image:
    """The last image the model was shown, decoded from its data URI."""
    for m in reversed(messages):
        if m["role"] == "user" and isinstance(m["content"], list):
            for part in m["content"]:
                if part["type"] == "image_url":
                    return decode(part["image_url"]["url"])
    raise AssertionError("no image in the conversation")


def decode(uri: str) -> Image.Image:
    assert uri.startswith("data:image/jpeg;base64,")
    return Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1])))


def images_of(message: dict[str, Any]) -> list[str]:
    return [p["image_url"]["url"] for p in message["content"] if p["type"] == "image_url"]


def texts_of(message: dict[str, Any]) -> list[str]:
    return [p["text"] for p in message["content"] if p["type"] == "text"]


def collect(agent: VRAGAgent, question: str) -> list[AgentEvent]:
    async def go() -> list[AgentEvent]:
        return [ev async for ev in agent.run(question)]

    return asyncio.run(asyncio.wait_for(go(), 60))


def without_stream(events: list[AgentEvent]) -> list[str]:
    return [
        e.event
        for e in events
        if not isinstance(e, ThinkDelta | ContentDelta | GraphChanged | Timing | Usage)
    ]


# ====================================================================== a real small index

DOCS = {
    "alpine.pdf": [
        "Edelweiss grows above the tree line. Its leaves are covered in white woolly hairs that protect "
        "the plant from cold, drying wind and strong ultraviolet light.",
        "Gentians flower in deep blue trumpets in early summer on limestone meadows.",
    ],
    "harbor.pdf": [
        "The harbor lighthouse was built in 1871 from local granite. Its lamp is visible 18 nautical "
        "miles out to sea.",
        "Fishing boats unload cod and haddock at the north quay every morning.",
    ],
    "robots.pdf": [
        "The Atlas warehouse robot carries a payload of 25 kilograms and its battery lasts 9 hours."
    ],
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, minilm):  # type: ignore[no-untyped-def]
    import pymupdf

    from vrag_desktop.core.corpus.library import Library
    from vrag_desktop.core.search import SearchEngine

    root = tmp_path_factory.mktemp("vrag-agent")
    paths = []
    for name, pages in DOCS.items():
        doc = pymupdf.open()
        for text in pages:
            page = doc.new_page()
            page.insert_textbox(pymupdf.Rect(50, 50, 550, 800), text, fontsize=12)
        path = root / "docs" / name
        path.parent.mkdir(exist_ok=True)
        doc.save(str(path))
        doc.close()
        paths.append(path)
    library = Library(root / "data")
    index_paths(library, "docs", paths, minilm)
    eng = SearchEngine(library, ["docs"], embedder=minilm)
    yield eng
    eng.close()


def test_engine_searcher_hits(engine) -> None:  # type: ignore[no-untyped-def]
    hits = EngineSearcher(engine).search("why is edelweiss woolly", 3)
    assert len(hits) == 3 and hits[0].page == 1 and Path(hits[0].source).name == "alpine.pdf"
    assert hits[0].modality == "page" and Path(str(hits[0].image)).is_file()
    assert hits[0].score >= hits[1].score >= hits[2].score


# ====================================================================== runs


def box_in(messages: list[dict[str, Any]], frac: tuple[float, float, float, float]) -> str:
    """A bbox given as fractions of the last image the model saw, in its pixels (as a model would)."""
    w, h = last_image(messages).size
    return "[" + ", ".join(str(round(f * s)) for f, s in zip(frac, (w, h, w, h), strict=True)) + "]"


def test_search_zoom_zoom_answer(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    boxes: list[str] = []

    def bbox1(msgs: list[dict[str, Any]]) -> str:
        boxes.append(box_in(msgs, (0.05, 0.05, 0.60, 0.20)))
        return f"<think>The first paragraph mentions the hairs.</think><bbox>{boxes[-1]}</bbox>"

    def bbox2(msgs: list[dict[str, Any]]) -> str:
        boxes.append(box_in(msgs, (0.10, 0.20, 0.70, 0.60)))
        return f"<think>Closer.</think>\n<bbox>{boxes[-1]}</bbox>"

    model = FakeModel(
        [
            "<think>I need the alpine guide.</think>\n<search>edelweiss white woolly hairs</search>",
            bbox1,
            bbox2,
            "<think>It protects against cold and UV.</think>\n<answer> cold, wind and UV light </answer>",
        ]
    )
    agent = VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path / "img", max_steps=5, temperature=0.2)
    events = collect(agent, "Why is edelweiss woolly?")

    assert without_stream(events) == [
        "search",
        "search_results",
        "search_image",
        "bbox",
        "crop_image",
        "bbox",
        "crop_image",
        "answer",
    ]
    assert isinstance(events[0], GraphChanged) and [n.kind for n in events[0].nodes] == ["root"]
    assert events[-1].event == "answer" and events[-1].content == "cold, wind and UV light"
    assert not [e for e in events if isinstance(e, AgentError)]
    assert model.params[0] == {"temperature": 0.2}

    # conversation: one user prompt, then assistant/user alternating, one image per observation
    msgs = model.calls[-1]
    assert [m["role"] for m in msgs] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert msgs[0]["content"] == [{"type": "text", "text": vp.build_prompt("Why is edelweiss woolly?")}]
    assert all(len(images_of(m)) == 1 and not texts_of(m) for m in msgs[2::2])
    assert msgs[1]["content"].startswith("<think>I need the alpine guide.")

    results = next(e for e in events if isinstance(e, SearchResults))
    assert len(results.hits) == 3 and results.shown == (0,) and results.hits[0].label == "Image 1"
    assert Path(results.hits[0].source).name == "alpine.pdf" and results.hits[0].page == 1
    shown = next(e for e in events if isinstance(e, ImageShown))
    raw = Image.open(shown.raw)
    assert shown.raw == results.hits[0].image and Path(shown.image).parent == tmp_path / "img"
    assert (shown.width, shown.height) == vp.fit_pixels(*raw.size)
    # the file written is exactly what the model was sent
    sent = [images_of(m)[0] for m in msgs[2::2]]
    assert base64.b64decode(sent[0].split(",", 1)[1]) == Path(shown.image).read_bytes()
    for uri in sent:
        w, h = decode(uri).size
        assert vp.MIN_PIXELS <= w * h <= vp.MAX_PIXELS

    # crop regions, pixel-exact, computed here by hand (page raw pixels); the original pads 56 pixels
    # of its 200-dpi page raster, which is this many pixels of our page image:
    rw, rh = raw.size
    import pymupdf

    with pymupdf.open(shown.source) as doc:
        pad = round(56 * rw / (doc[0].rect.width * 200 / 72))
    assert 0 < pad < 56
    sw, sh = shown.width, shown.height
    b1 = [float(v) for v in boxes[0].strip("[]").split(",")]
    r1 = (
        max(0, math.floor(b1[0] * rw / sw - pad)),
        max(0, math.floor(b1[1] * rh / sh - pad)),
        min(rw, math.ceil(b1[2] * rw / sw + pad)),
        min(rh, math.ceil(b1[3] * rh / sh + pad)),
    )
    crops = [e for e in events if isinstance(e, Crop)]
    assert crops[0].region == r1 and crops[0].raw == shown.raw
    c1w, c1h = r1[2] - r1[0], r1[3] - r1[1]
    assert (crops[0].width, crops[0].height) == vp.fit_pixels(c1w, c1h)
    b2 = [float(v) for v in boxes[1].strip("[]").split(",")]
    fx, fy = c1w / crops[0].width, c1h / crops[0].height
    local = (
        max(0, math.floor(b2[0] * fx - pad)),
        max(0, math.floor(b2[1] * fy - pad)),
        min(c1w, math.ceil(b2[2] * fx + pad)),
        min(c1h, math.ceil(b2[3] * fy + pad)),
    )
    r2 = (r1[0] + local[0], r1[1] + local[1], r1[0] + local[2], r1[1] + local[3])
    assert crops[1].region == r2
    assert r1[0] <= r2[0] < r2[2] <= r1[2] and r1[1] <= r2[1] < r2[3] <= r1[3]  # nested inside the first

    # the pixels sent are that region of the page (JPEG tolerance), re-rendered from the PDF
    for crop, uri in zip(crops, sent[1:], strict=True):
        assert crop.zoomed_from == "pdf" and not crop.note
        expect = raw.convert("RGB").crop(crop.region).resize((crop.width, crop.height))
        got = decode(uri).convert("RGB")
        assert got.size == expect.size
        diff = sum(ImageStat.Stat(ImageChops.difference(got, expect)).mean) / 3
        assert diff < 4, diff  # mean absolute difference per channel, 0–255
        wrong = raw.convert("RGB").crop((0, 0, crop.width, crop.height))  # a different region: far off
        assert sum(ImageStat.Stat(ImageChops.difference(got, wrong)).mean) / 3 > diff + 2
        assert Path(crop.image).is_file()

    bboxes = [e for e in events if isinstance(e, BBox)]
    assert [e.content for e in bboxes] == boxes

    answer = events[-1]
    assert isinstance(answer, Answer) and not answer.forced
    assert answer.evidence == (
        Evidence(source=shown.source, image=shown.raw, page=1),
        Evidence(source=shown.source, image=shown.raw, page=1, region=r1),
        Evidence(source=shown.source, image=shown.raw, page=1, region=r2),
    )

    # streaming: content deltas rebuild each reply; think deltas are the text inside <think>
    step1 = "".join(e.content for e in events if isinstance(e, ContentDelta) and e.step == 1)
    assert step1 == msgs[1]["content"]
    think1 = "".join(e.content for e in events if isinstance(e, ThinkDelta) and e.step == 1)
    assert think1 == "I need the alpine guide."
    assert [e.step for e in events if isinstance(e, Timing)] == [1, 2, 3, 4]
    assert [e.prompt_tokens for e in events if isinstance(e, Usage)] == [100, 200, 300, 400]

    graph = [e for e in events if isinstance(e, GraphChanged)][-1]
    assert [n.kind for n in graph.nodes] == [
        "root",
        "think",
        "search",
        "think",
        "crop",
        "think",
        "crop",
        "think",
        "answer",
    ]
    assert all(n.parents == (graph.nodes[i].id,) for i, n in enumerate(graph.nodes[1:]))
    # every event survives the saved-run JSON form
    assert [event_from_dict(e.to_dict()) for e in events] == events


def test_step_limit_forces_an_answer(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = FakeModel([f"<think>more</think><search>query {i}</search>" for i in range(5)])
    agent = VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path, max_steps=2)
    events = collect(agent, "What is the answer?")
    assert len(model.calls) == 3  # two steps, then one last chance
    last_user = model.calls[2][-1]
    assert texts_of(last_user) == [vp.ANSWER_NOW] and len(images_of(last_user)) == 1
    assert not any(vp.ANSWER_NOW in t for m in model.calls[1][1:] if m["role"] == "user" for t in texts_of(m))
    kinds = without_stream(events)
    assert kinds[-2:] == ["max_steps", "answer"]
    answer = events[-1]
    assert isinstance(answer, Answer) and answer.forced and answer.content == vp.FALLBACK_ANSWER
    assert len(answer.evidence) == 2  # the two pages it was shown


def test_answer_after_the_hint_is_not_forced(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = FakeModel(
        ["<think>a</think><search>lighthouse built</search>", "<think>b</think><answer>1871</answer>"]
    )
    events = collect(VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path, max_steps=1), "When?")
    assert texts_of(model.calls[1][-1]) == [vp.ANSWER_NOW]
    assert isinstance(events[-1], Answer) and events[-1].content == "1871" and not events[-1].forced
    assert not [e for e in events if isinstance(e, MaxSteps)]


def test_no_tag_gets_a_corrective_turn_without_consuming_a_step(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = FakeModel(
        [
            "The answer is probably 1871.",
            "<think>ok</think><search>lighthouse</search>",
            "<think>ok</think><answer>1871</answer>",
        ]
    )
    events = collect(VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path, max_steps=1), "When?")
    errors = [e for e in events if isinstance(e, AgentError)]
    assert [(e.kind, e.recoverable, e.step) for e in errors] == [("parse", True, 1)]
    corrective = model.calls[1][-1]
    assert texts_of(corrective)[0].startswith("Your previous action is invalid. no action tag was found")
    assert texts_of(corrective)[0].endswith("Please try again.") and not images_of(corrective)
    assert vp.ANSWER_NOW not in texts_of(corrective)  # the invalid turn did not use up the single step
    assert isinstance(events[-1], Answer) and events[-1].content == "1871" and not events[-1].forced


def test_invalid_replies_cannot_loop_forever(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = FakeModel(["no tags"] * 20)
    events = collect(
        VRAGAgent(
            model, EngineSearcher(engine), image_dir=tmp_path, max_steps=2, turns=TurnPolicy(max_invalid=2)
        ),
        "Q?",
    )
    assert len(model.calls) == 5  # 2 free corrections, 2 steps, 1 last chance
    assert isinstance(events[-1], Answer) and events[-1].forced


def test_two_actions_runs_the_first_and_says_so(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = FakeModel(
        [
            "<think>t</think><search>harbor lighthouse granite</search><answer>1871</answer>",
            "<think>t</think><answer>1871</answer>",
        ]
    )
    events = collect(VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path), "When?")
    assert without_stream(events) == ["error", "search", "search_results", "search_image", "answer"]
    err = next(e for e in events if isinstance(e, AgentError))
    assert err.kind == "parse" and err.recoverable and "2 actions" in err.content
    obs = model.calls[1][-1]
    assert len(images_of(obs)) == 1 and texts_of(obs)[0].startswith("Note: the reply has 2 actions")
    shown = next(e for e in events if isinstance(e, ImageShown))
    assert Path(shown.source).name == "harbor.pdf"


def test_bad_bboxes_are_reported_and_corrected(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = FakeModel(
        [
            "<think>zoom first</think><bbox>[1, 2, 3, 4]</bbox>",  # nothing shown yet
            "<think>s</think><search>atlas robot payload</search>",
            "<think>z</think><bbox>[10, 20, 300]</bbox>",
            "<think>z</think><bbox>[10, 20, 5000, 400]</bbox>",
            "<think>z</think><bbox>[300, 20, 100, 400]</bbox>",
            "<think>z</think><bbox>[10, 20, 300, 400]</bbox>",
            "<think>a</think><answer>25 kg</answer>",
        ]
    )
    agent = VRAGAgent(
        model, EngineSearcher(engine), image_dir=tmp_path, max_steps=3, turns=TurnPolicy(max_invalid=5)
    )
    events = collect(agent, "Payload?")
    errors = [e for e in events if isinstance(e, AgentError)]
    assert [e.kind for e in errors] == ["bbox"] * 4 and all(e.recoverable for e in errors)
    assert "before any image" in errors[0].content
    assert "has 3 numbers" in errors[1].content
    assert "outside the image" in errors[2].content
    assert "x2 (100) must be greater than x1 (300)" in errors[3].content
    shown = next(e for e in events if isinstance(e, ImageShown))
    corrective = texts_of(model.calls[3][-1])[0]
    assert corrective.startswith("Your previous action is invalid. The bbox has 3 numbers")
    assert f"({shown.width}x{shown.height})" in corrective and corrective.endswith("Please try again.")
    assert len([e for e in events if isinstance(e, Crop)]) == 1
    assert isinstance(events[-1], Answer) and events[-1].content == "25 kg"


def test_empty_failed_and_exhausted_searches(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # nothing found
    model = FakeModel(
        ["<think>s</think><search>anything</search>", "<think>a</think><answer>unknown</answer>"]
    )
    events = collect(VRAGAgent(model, ListSearcher([]), image_dir=tmp_path), "Q?")
    assert without_stream(events) == ["search", "search_results", "error", "answer"]
    err = next(e for e in events if isinstance(e, AgentError))
    assert err.kind == "search" and err.recoverable and "returned nothing" in err.content
    assert texts_of(model.calls[1][-1])[0].startswith("The search returned no results.")

    # the search service fails
    model = FakeModel(
        ["<think>s</think><search>anything</search>", "<think>a</think><answer>unknown</answer>"]
    )
    events = collect(
        VRAGAgent(
            model, ListSearcher(SearchFailed("cannot reach the search server at x")), image_dir=tmp_path
        ),
        "Q?",
    )
    err = next(e for e in events if isinstance(e, AgentError))
    assert err.kind == "search" and "cannot reach the search server" in err.content
    assert "The search failed (cannot reach the search server at x)" in texts_of(model.calls[1][-1])[0]
    assert isinstance(events[-1], Answer)

    # every hit already shown: one new image per search, never a repeat
    model = FakeModel(
        [
            "<think>s</think><search>edelweiss</search>",
            "<think>s</think><search>edelweiss</search>",
            "<think>a</think><answer>x</answer>",
        ]
    )
    events = collect(VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path, top_k=1), "Q?")
    results = [e for e in events if isinstance(e, SearchResults)]
    assert [r.shown for r in results] == [(0,), ()]
    assert len([e for e in events if isinstance(e, ImageShown)]) == 1
    second = model.calls[2][-1]
    assert not images_of(second) and "already been shown" in texts_of(second)[0]

    # with top_k=3 the same query shows the next unseen page
    model = FakeModel(
        [
            "<think>s</think><search>edelweiss</search>",
            "<think>s</think><search>edelweiss</search>",
            "<think>a</think><answer>x</answer>",
        ]
    )
    events = collect(VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path, top_k=3), "Q?")
    shown = [e for e in events if isinstance(e, ImageShown)]
    assert [r.shown for r in events if isinstance(r, SearchResults)] == [(0,), (1,)]
    assert len({s.raw for s in shown}) == 2


def test_endpoint_errors(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # a transient failure: reported, retried, the run goes on
    model = FakeModel(
        [EndpointError("server said 503", kind="server", status=503), "<think>t</think><answer>fine</answer>"]
    )
    agent = VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path, turns=TurnPolicy(retry_delay=0))
    events = collect(agent, "Q?")
    err = next(e for e in events if isinstance(e, AgentError))
    assert (err.kind, err.recoverable) == ("endpoint", True) and "503" in err.content
    assert isinstance(events[-1], Answer) and events[-1].content == "fine" and len(model.calls) == 2

    # auth: fatal at once, the run ends cleanly with a final unrecoverable error
    model = FakeModel([EndpointError("401 Unauthorized", kind="auth", status=401)])
    events = collect(
        VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path, turns=TurnPolicy(retry_delay=0)), "Q?"
    )
    errors = [e for e in events if isinstance(e, AgentError)]
    assert [(e.kind, e.recoverable) for e in errors] == [("endpoint", False)] and events[-1] is errors[0]
    assert "401" in errors[0].content and not [e for e in events if isinstance(e, Answer)]
    assert len(model.calls) == 1

    # still failing after the agent's retry (here an unexpected exception type): fatal, no exception
    model = FakeModel([RuntimeError("stream cut"), RuntimeError("stream cut again")])
    events = collect(
        VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path, turns=TurnPolicy(retry_delay=0)), "Q?"
    )
    errors = [e for e in events if isinstance(e, AgentError)]
    assert [(e.kind, e.recoverable) for e in errors] == [("endpoint", True), ("endpoint", False)]
    assert events[-1] is errors[-1] and "stream cut again" in errors[-1].content


def test_internal_failure_is_an_event_not_an_exception(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    model = FakeModel(["<think>t</think><answer>x</answer>"])
    events = collect(VRAGAgent(model, EngineSearcher(engine), image_dir=blocker / "img"), "Q?")
    assert [(e.event, e.kind, e.recoverable) for e in events] == [("error", "internal", False)]


def test_non_streaming_model_still_gets_delta_events(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = FakeModel(["<think>plain</think><answer>ok</answer>"], stream=False)
    events = collect(VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path), "Q?")
    assert (
        "".join(e.content for e in events if isinstance(e, ContentDelta))
        == "<think>plain</think><answer>ok</answer>"
    )
    assert "".join(e.content for e in events if isinstance(e, ThinkDelta)) == "plain"


def test_think_deltas_survive_one_character_chunks(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    reply = "<think>a<b </think>x<answer>y</answer>"
    model = FakeModel([reply], chunk=1)
    events = collect(VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path), "Q?")
    assert "".join(e.content for e in events if isinstance(e, ContentDelta)) == reply
    assert "".join(e.content for e in events if isinstance(e, ThinkDelta)) == "a<b "


class HangingModel:
    """Streams a little, then hangs until cancelled (a slow endpoint); records the cancellation."""

    model_name = "hang"

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.calls = 0

    async def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        stream: bool = True,
        on_delta: Callable[[str, str], None] | None = None,
        **params: Any,
    ) -> ChatResult:
        self.calls += 1
        if self.calls == 1:
            return ChatResult(content="<think>look</think><search>edelweiss</search>")
        assert on_delta
        on_delta("content", "<think>reading the")
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("not reached")


def test_cancel_mid_run_by_closing_the_stream(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = HangingModel()

    async def go() -> tuple[list[AgentEvent], float]:
        seen: list[AgentEvent] = []
        stream = VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path).run("Q?")
        async for ev in stream:
            seen.append(ev)
            if isinstance(ev, ContentDelta) and ev.step == 2:
                break
        t = time.monotonic()
        await stream.aclose()
        await asyncio.sleep(0.05)
        assert model.cancelled.is_set()  # the model request itself was cancelled, not left running
        return seen, time.monotonic() - t

    seen, took = asyncio.run(go())
    assert took < 1
    assert "search_image" in [e.event for e in seen] and seen[-1].event == "content"


def test_cancel_mid_run_by_cancelling_the_task(engine, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = HangingModel()

    async def go() -> tuple[list[AgentEvent], int, float]:
        seen: list[AgentEvent] = []
        started = asyncio.Event()

        async def consume() -> None:
            async for ev in VRAGAgent(model, EngineSearcher(engine), image_dir=tmp_path).run("Q?"):
                seen.append(ev)
                if isinstance(ev, ContentDelta) and ev.step == 2:
                    started.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(started.wait(), 30)
        n = len(seen)
        t = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        took = time.monotonic() - t
        await asyncio.sleep(0.1)
        assert model.cancelled.is_set()
        return seen, n, took

    seen, n, took = asyncio.run(go())
    assert took < 1
    assert len(seen) == n  # nothing emitted after the cancel


# ====================================================================== HTTP searcher


@pytest.fixture(scope="module")
def http_url(engine) -> Iterator[str]:  # type: ignore[no-untyped-def]
    import uvicorn

    from vrag_desktop.core.search.server import create_app

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(engine), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_http_searcher_matches_the_engine(engine, http_url: str) -> None:  # type: ignore[no-untyped-def]
    local = EngineSearcher(engine).search("lighthouse granite", 3)
    for url in (http_url, http_url + "/search", http_url + "/"):
        remote = HttpSearcher(url, timeout=10).search("lighthouse granite", 3)
        assert [(h.name, h.source, h.page, h.image, h.modality) for h in remote] == [
            (h.name, h.source, h.page, h.image, h.modality) for h in local
        ]
        assert [round(h.score, 5) for h in remote] == [round(h.score, 5) for h in local]
    searcher = HttpSearcher(http_url)
    assert searcher.load_image(str(local[0].image)) == Path(str(local[0].image)).read_bytes()


def test_http_searcher_fetches_remote_images(engine, http_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    searcher = HttpSearcher(http_url, fetch_images=True)  # as if the server were another machine
    assert searcher.local_files is False
    hit = searcher.search("atlas robot battery", 1)[0]
    assert searcher.load_image(str(hit.image)) == Path(str(hit.image)).read_bytes()
    # a path this machine does not have is asked of the server, which serves indexed files only
    with pytest.raises(SearchFailed, match="404"):
        HttpSearcher(http_url).load_image(str(tmp_path / "not-indexed.jpg"))


def test_http_searcher_failures(http_url: str) -> None:
    with pytest.raises(SearchFailed, match="cannot reach the search server"):
        HttpSearcher(f"http://127.0.0.1:{free_port()}", timeout=2).search("q", 3)
    with pytest.raises(SearchFailed, match="answered 422"):
        HttpSearcher(http_url).search("   ", 3)
    with pytest.raises(ValueError):
        HttpSearcher("ftp://host/search")


def test_parse_search_response_shapes() -> None:
    legacy = [[{"idx": 0, "image_file": "/c/img/a_1.jpg"}, {"idx": 1, "image_file": "/c/img/b_2.jpg"}]]
    hits = parse_search_response(legacy)
    assert [(h.name, h.image, h.score, h.modality) for h in hits] == [
        ("a_1", "/c/img/a_1.jpg", 0.0, "image"),
        ("b_2", "/c/img/b_2.jpg", 0.0, "image"),
    ]
    assert parse_search_response(legacy[0]) == hits  # a bare list for one query
    original = {
        "results": [
            {
                "score": [0.9, 0.5],
                "indice": [3, 7],
                "data": [
                    {"type": "image", "file_path": "/x/p_3.jpg"},
                    {"type": "text", "file_path": "/x/n.txt", "content": "hi"},
                ],
            }
        ]
    }
    a, b = parse_search_response(original)
    assert (a.name, a.image, a.score, a.modality) == ("p_3", "/x/p_3.jpg", 0.9, "image")
    assert (b.modality, b.image, b.score) == ("text", None, 0.5)
    assert parse_search_response({"results": []}) == []
    for bad in ({"detail": "x"}, "text", [[{"idx": 0}]], {"results": ["x"]}):
        with pytest.raises(SearchFailed):
            parse_search_response(bad)


def test_agent_over_http(engine, http_url: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model = FakeModel(
        [
            "<think>s</think><search>edelweiss hairs</search>",
            lambda m: f"<think>z</think><bbox>{box_in(m, (0.1, 0.1, 0.5, 0.3))}</bbox>",
            "<think>a</think><answer>protection</answer>",
        ]
    )
    events = collect(
        VRAGAgent(model, HttpSearcher(http_url, fetch_images=True), image_dir=tmp_path), "Why woolly?"
    )
    assert without_stream(events) == [
        "search",
        "search_results",
        "search_image",
        "bbox",
        "crop_image",
        "answer",
    ]
    shown = next(e for e in events if isinstance(e, ImageShown))
    crop = next(e for e in events if isinstance(e, Crop))
    # the fetched raw is kept beside the run, and crops are cut from (and drawn on) that copy
    assert Path(shown.raw).parent == tmp_path and shown.raw == crop.raw
    hit = next(e for e in events if isinstance(e, SearchResults)).hits[0]
    assert Path(shown.raw).read_bytes() == Path(str(hit.image)).read_bytes()
    assert Path(crop.source).name == "alpine.pdf" and crop.region[2] > crop.region[0]


def test_agent_never_names_a_model() -> None:
    """The served model name belongs to the ChatModel (configurable), never to the agent."""
    src = (Path(vp.__file__).parent / "vrag.py").read_text()
    assert "Qwen" not in src and "model_name" not in src


@pytest.mark.parametrize("bad", [{"max_invalid": -1}, {"endpoint_retries": -1}, {"retry_delay": -0.5}])
def test_a_negative_turn_policy_is_refused_by_name(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="need max_invalid >= 0, endpoint_retries >= 0, retry_delay >= 0"):
        TurnPolicy(**bad)  # type: ignore[arg-type]
