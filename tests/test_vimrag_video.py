"""VimRAG shows a video clip as the original does (issue 9): frames sampled from the clip's video.

``n = min(max(1, ⌊duration·fps⌋), 32)`` frames at ``linspace(0, total − 1, n)``, each after
``<t seconds>`` (t from the clip's start), all within ``max_pixels_video`` together and ≤ 38,000
bytes each; key_timestamp values are matched against those same times. Real videos written with
OpenCV; every frame is painted a gray level of its own index, so the frames picked can be checked.
A clip whose video is gone falls back to the corpus's key frames, with a note, and the run goes on.
"""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agent_script import RecordingModel
from PIL import Image

from vrag_desktop.core.agents import imaging
from vrag_desktop.core.agents.events import AgentError, Answer, Memorize, SearchResults
from vrag_desktop.core.agents.searchers import SearchHit
from vrag_desktop.core.agents.vimrag import VimRAGAgent
from vrag_desktop.core.agents.vimrag import _Run as VimRun

LEVEL = 12  # gray level step per frame index: frame i is painted 12·(i mod 20)


def write_video(path: Path, seconds: float, rate: int, size: tuple[int, int] = (64, 48)) -> Path:
    import cv2

    w, h = size
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), rate, (w, h))
    for i in range(round(seconds * rate)):
        writer.write(np.full((h, w, 3), LEVEL * (i % 20), np.uint8))
    writer.release()
    return path


def frame_index(im: Image.Image) -> int:
    """Which frame (mod 20) a decoded picture is: the gray level it was painted with (codec noise < 3)."""
    level = float(np.asarray(im.convert("L"), dtype=np.float32).mean())
    return round(level / LEVEL)


def expected(total: int, rate: float, n: int) -> list[int]:
    return [int(i) for i in np.linspace(0, total - 1, n).round()]


class ClipSearcher:
    """One clip hit, from local files, as the engine returns it."""

    local_files = True

    def __init__(self, hit: SearchHit) -> None:
        self.hit = hit

    def search(self, query: str, k: int) -> list[SearchHit]:
        return [self.hit]

    def load_image(self, path: str) -> bytes:
        return Path(path).read_bytes()


def clip_hit(
    folder: Path, media: Path | None, source: Path, t: tuple[float, float], keyframes: int = 4
) -> SearchHit:
    """A clip hit with a contact sheet and ``keyframes`` key frames beside it (as the corpus writes)."""
    sheet = folder / "tour_1.jpg"
    Image.new("RGB", (128, 96), (200, 30, 30)).save(sheet)
    for j in range(keyframes):
        Image.new("RGB", (64, 48), (30, 30 + 40 * j, 200)).save(folder / f"tour_1_f{j + 1}.jpg")
    return SearchHit(
        score=0.9,
        name="tour_1",
        source=str(source),
        modality="clip",
        image=str(sheet),
        clip=1,
        t_start=t[0],
        t_end=t[1],
        media=str(media) if media else None,
    )


def shown(parts: list[dict[str, Any]]) -> list[tuple[float, Image.Image, int]]:
    """(time, picture, JPEG bytes) of every frame of a tool response's video."""
    out = []
    for label, image in itertools.pairwise(parts):
        if label["type"] == "text" and label["text"].startswith("<") and image["type"] == "image_url":
            data = base64.b64decode(image["image_url"]["url"].split(",", 1)[1])
            t = float(label["text"].removeprefix("<").removesuffix(" seconds>"))
            out.append((t, Image.open(io.BytesIO(data)), len(data)))
    return out


def prepared(hit: SearchHit, tmp_path: Path, **kw: Any) -> Any:
    agent = VimRAGAgent(None, ClipSearcher(hit), image_dir=tmp_path / "images", **kw)  # type: ignore[arg-type]
    agent.image_dir.mkdir(parents=True, exist_ok=True)
    return VimRun(agent, "What is shown?").prepare([hit])


def test_a_short_clip_gives_one_frame_per_second(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "tour_1.mp4", 3.5, 10)  # 35 frames: ⌊3.5 · 1⌋ = 3 of them
    frames = imaging.sample_video(str(clip), 1.0, 32)
    assert [round(t, 3) for t, _ in frames] == [0.0, 1.7, 3.4]
    assert expected(35, 10, 3) == [0, 17, 34]
    assert [frame_index(im) for _, im in frames] == [0, 17, 34 % 20]

    hit = clip_hit(tmp_path, clip, tmp_path / "tour.mp4", (12.0, 15.5))
    prep = prepared(hit, tmp_path)
    assert prep.problems == []
    texts = [p["text"] for p in prep.parts if p["type"] == "text"]
    assert texts[1:5] == [
        "\nVideo 1:",
        "<0.0 seconds>",
        "<1.7 seconds>",
        "<3.4 seconds>",
    ]  # from the clip's start
    got = shown(prep.parts)
    assert [frame_index(im) for _, im, _ in got] == [0, 17, 34 % 20]
    assert [f.timestamp for f in prep.items["Video 1"].frames] == [0.0, 1.7, 3.4]


def test_a_long_clip_gives_32_frames_within_the_video_budget(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "tour_1.mp4", 60, 4, size=(640, 480))  # 240 frames
    budget = 401_408
    prep = prepared(
        clip_hit(tmp_path, clip, tmp_path / "tour.mp4", (0.0, 60.0)), tmp_path, max_pixels_video=budget
    )
    got = shown(prep.parts)
    picks = expected(240, 4, 32)
    assert len(got) == 32 and [frame_index(im) for _, im, _ in got] == [i % 20 for i in picks]
    assert [t for t, _, _ in got] == [round(i / 4, 1) for i in picks]
    assert sum(im.width * im.height for _, im, _ in got) <= budget  # the frames share the budget
    assert all(im.width * im.height <= budget // 32 and size <= 38_000 for _, im, size in got)
    assert max(im.width * im.height for _, im, _ in got) > budget // 32 * 0.9  # and use it


def test_a_clip_of_the_source_video_is_cut_to_its_span(tmp_path: Path) -> None:
    source = write_video(tmp_path / "tour.mp4", 10, 10)  # no clip file: media is the source itself
    prep = prepared(clip_hit(tmp_path, source, source, (1.0, 4.5)), tmp_path)
    got = shown(prep.parts)
    assert [t for t, _, _ in got] == [0.0, 1.7, 3.4]  # relative to the clip's 1.0 s start
    assert [frame_index(im) for _, im, _ in got] == [10, 27 % 20, 44 % 20]  # frames 10, 27 and 44


def test_sampling_rate_and_limit_follow_the_agent(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "tour_1.mp4", 6, 5)  # 30 frames, 6 s
    assert [t for t, _ in imaging.sample_video(str(clip), 0.5, 32)] == [0.0, 14 / 5, 29 / 5]  # ⌊6 · 0.5⌋ = 3
    assert len(imaging.sample_video(str(clip), 2.0, 5)) == 5
    assert imaging.video_frame_count(3, 10.0, 1.0, 32) == 1  # 0.3 s: at least one frame
    assert imaging.video_frame_count(35, 10.0, 1.0, 32) == 3
    assert imaging.video_frame_count(30, 30.0, 100.0, 32) == 30  # never more frames than there are


def test_unreadable_videos_say_why(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="does not exist"):
        imaging.sample_video(str(tmp_path / "gone.mp4"), 1.0, 32)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video at all" * 10)
    with pytest.raises(OSError, match=r"junk\.mp4"):
        imaging.sample_video(str(junk), 1.0, 32)


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


def run_agent(hit: SearchHit, tmp_path: Path, stamps: list[float]) -> tuple[list[Any], RecordingModel]:
    model = RecordingModel(
        [
            call("add_search_node", id="Tour", parent_ids=["root"], query="harbor tour"),
            call(
                "summarize_and_memorize",
                summarize="The tour shows the quay.",
                memorize=[
                    {
                        "information_id": "Video 1",
                        "is_useful": True,
                        "key_timestamp": stamps,
                        "priority_score": 4,
                    }
                ],
            ),
            call("add_answer_node", parent_ids=["Tour"], answer="The quay"),
        ]
    )
    agent = VimRAGAgent(model, ClipSearcher(hit), image_dir=tmp_path / "images")  # type: ignore[arg-type]
    requests: list[Any] = []
    original = model.chat

    async def chat(messages: Any, **kw: Any) -> Any:
        requests.append(messages)
        return await original(messages, **kw)

    model.chat = chat  # type: ignore[method-assign]

    async def go() -> list[Any]:
        return [ev async for ev in agent.run("What does the tour show?")]

    events = asyncio.run(go())
    model.requests = requests  # type: ignore[attr-defined]
    return events, model


def test_key_timestamps_match_the_times_shown(tmp_path: Path) -> None:
    clip = write_video(tmp_path / "tour_1.mp4", 3.5, 10)
    events, model = run_agent(clip_hit(tmp_path, clip, tmp_path / "tour.mp4", (0.0, 3.5)), tmp_path, [1.7])
    assert isinstance(events[-1], Answer) and not any(isinstance(e, AgentError) for e in events)
    memo = next(e for e in events if isinstance(e, Memorize)).items[0]
    assert memo.timestamps == (1.7,)
    rebuilt = model.requests[2][1]["content"]  # type: ignore[attr-defined]
    assert [p.get("text") for p in rebuilt[1:]] == ["Node: Tour\n", "<1.7 seconds>", None]
    assert frame_index(shown(rebuilt)[0][1]) == 17


def test_a_missing_video_falls_back_to_the_key_frames(tmp_path: Path) -> None:
    gone = tmp_path / "tour_1.mp4"  # never written: the corpus was moved, or the clip deleted
    hit = clip_hit(tmp_path, gone, tmp_path / "tour.mp4", (0.0, 4.0))
    events, model = run_agent(hit, tmp_path, [1.3])
    assert isinstance(events[-1], Answer) and events[-1].content == "The quay"
    notes = [e for e in events if isinstance(e, AgentError)]
    assert len(notes) == 1 and notes[0].kind == "search" and notes[0].recoverable
    assert (
        "Video 1: the clip's video cannot be read" in notes[0].content
        and "does not exist" in notes[0].content
    )
    assert next(e for e in events if isinstance(e, SearchResults)).shown == (0,)
    response = model.requests[1][3]["content"]  # type: ignore[attr-defined]
    frames = shown(response)
    assert [t for t, _, _ in frames] == [0.0, 1.3, 2.7, 4.0]  # the 4 key frames over the 4 s clip
    assert [round((im.getpixel((5, 5))[1] - 30) / 40) for _, im, _ in frames] == [0, 1, 2, 3]  # the corpus's
    assert next(e for e in events if isinstance(e, Memorize)).items[0].timestamps == (1.333,)
    assert math.isclose(sum(im.width * im.height for _, im, _ in frames), 4 * 64 * 48)
