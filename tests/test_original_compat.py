"""HttpSearcher against servers that speak only the original VRAG search API (reference §2.4).

The servers are :class:`OriginalSearchServer` (real HTTP on 127.0.0.1) over a tiny corpus written
here: PNG pages, an mp4 written with cv2, a text record. The VRAG agent runs end to end through the
GET-only server with the real OpenAI client against a scripted model server."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import free_port
from original_search_server import OriginalSearchServer
from PIL import Image
from scripted_openai import ScriptedOpenAI

from vrag_desktop.core.agents.events import AgentError, Answer, ImageShown, SearchResults
from vrag_desktop.core.agents.searchers import HttpSearcher, SearchFailed
from vrag_desktop.core.agents.vrag import VRAGAgent
from vrag_desktop.core.endpoints.client import OpenAIChatModel

PAGES = {  # name: (colour, caption)
    "alpine_guide_1": ((200, 30, 30), "edelweiss woolly hairs alpine flower"),
    "alpine_guide_2": ((30, 160, 40), "gentian blue trumpet meadow"),
    "harbor_report_1": ((30, 40, 200), "lighthouse granite harbor lamp"),
}
N_FRAMES = 30


def write_video(path: Path) -> None:
    """30 frames whose grey level is 8·index: the middle frame (15) is grey 120."""
    import cv2

    path.parent.mkdir(parents=True, exist_ok=True)
    w = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 10, (64, 48))
    for i in range(N_FRAMES):
        w.write(np.full((48, 64, 3), 8 * i, np.uint8))
    w.release()


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """(root, records): files under ``root/search_engine/corpus`` and records with absolute paths."""
    root = tmp_path / "vrag"
    img = root / "search_engine" / "corpus" / "img"
    img.mkdir(parents=True)
    records: list[dict[str, Any]] = []
    for name, (colour, caption) in PAGES.items():
        p = img / f"{name}.png"
        Image.new("RGB", (600, 800), colour).save(p)
        records.append({"type": "image", "file_path": str(p), "caption": caption})
    video = root / "search_engine" / "corpus" / "video" / "lecture_3.mp4"
    write_video(video)
    records.append({"type": "video", "file_path": str(video), "caption": "lidar calibration lecture video"})
    records.append(
        {
            "type": "text",
            "file_path": str(root / "notes" / "pancakes.txt"),  # not on disk: only the server has it
            "content": "Let the pancake batter rest for thirty minutes.",
            "caption": "pancake batter rest",
        }
    )
    return root, records


# ====================================================================== GET-only (older API)


def test_get_only_server_is_probed_once_and_remembered(corpus: tuple[Path, list[dict[str, Any]]]) -> None:
    _, records = corpus
    with OriginalSearchServer(records, api="get") as srv:
        searcher = HttpSearcher(srv.url)
        hits = searcher.search("edelweiss hairs", 2)
        assert searcher.mode == "get"
        assert [(h.name, h.modality, h.score) for h in hits] == [
            ("alpine_guide_1", "image", 0.0),
            ("alpine_guide_2", "image", 0.0),
        ]
        assert hits[0].image == records[0]["file_path"] and Path(str(hits[0].image)).is_file()
        again = searcher.search("lighthouse granite", 3)
        assert again[0].name == "harbor_report_1" and len(again) == 3
        # one POST probe for the searcher's life, then GET only
        assert srv.requests == [("POST", "/search"), ("GET", "/search"), ("GET", "/search")]
        assert searcher.load_image(str(hits[0].image)) == Path(records[0]["file_path"]).read_bytes()


@pytest.mark.parametrize(
    "refusal",
    [
        (404, {"detail": "Not Found"}),
        (422, {"detail": [{"loc": ["body", "search_corpus"], "msg": "field required"}]}),
        (501, "Unsupported method ('POST')"),
        (400, {"detail": "Method Not Allowed"}),
    ],
)
def test_other_ways_a_get_only_server_refuses_the_post(
    corpus: tuple[Path, list[dict[str, Any]]], refusal: tuple[int, Any]
) -> None:
    _, records = corpus
    with OriginalSearchServer(records, api="get", wrong_method=refusal) as srv:
        searcher = HttpSearcher(srv.url)
        assert searcher.search("harbor lamp", 1)[0].name == "harbor_report_1"
        assert searcher.mode == "get"


def test_a_bad_query_is_not_taken_for_a_get_only_server(corpus: tuple[Path, list[dict[str, Any]]]) -> None:
    """Our server answers 422 with a sentence for a bad query: GET would not fix it, so none is tried."""
    _, records = corpus
    fault = {"status": 422, "body": {"detail": "queries must not be empty strings"}}
    with OriginalSearchServer(records, api="post", fault=fault) as srv:
        searcher = HttpSearcher(srv.url)
        with pytest.raises(SearchFailed, match="answered 422: queries must not be empty strings"):
            searcher.search("   ", 1)
        assert searcher.mode is None and srv.requests == [("POST", "/search")]


def test_get_only_relative_paths_resolve_against_the_server_root(
    corpus: tuple[Path, list[dict[str, Any]]],
) -> None:
    root, records = corpus
    relative = [{**r, "file_path": "./" + str(Path(r["file_path"]).relative_to(root))} for r in records]
    with OriginalSearchServer(relative, api="get") as srv:
        hit = HttpSearcher(srv.url, server_root=root).search("gentian meadow", 1)[0]
        assert hit.image == records[1]["file_path"] and Path(hit.image).is_file()
        # without the root, the server's relative path is not on this machine: a clear message
        plain = HttpSearcher(srv.url)
        path = str(plain.search("gentian meadow", 1)[0].image)
        assert path == "./search_engine/corpus/img/alpine_guide_2.png"
        with pytest.raises(SearchFailed) as err:
            plain.load_image(path)
        msg = str(err.value)
        assert path in msg and "not on this machine" in msg and "no /image endpoint" in msg
        assert "Run the search server on this machine, or share its corpus folder" in msg


def test_paths_the_original_server_knows_but_this_machine_does_not(
    corpus: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, records = corpus
    remote = [{**r, "file_path": "/srv/elsewhere/" + Path(r["file_path"]).name} for r in records]
    with OriginalSearchServer(remote, api="post") as srv:
        searcher = HttpSearcher(srv.url)
        page = searcher.search("lighthouse granite", 1)[0]
        with pytest.raises(SearchFailed, match="not on this machine") as err:
            searcher.load_image(str(page.image))
        assert "/srv/elsewhere/harbor_report_1.png" in str(err.value)
        video = searcher.search("lidar calibration video", 1)[0]
        assert video.modality == "clip" and video.media == "/srv/elsewhere/lecture_3.mp4"
        with pytest.raises(SearchFailed, match=r"lecture_3\.mp4.*not on this machine"):
            searcher.load_image(str(video.image))
        # text needs no file: the server sent its content with the hit
        text = searcher.search("pancake batter", 1)[0]
        assert text.modality == "text" and "thirty minutes" in text.text
        assert searcher.load_image(text.source) == records[4]["content"].encode()
        assert ("GET", "/image") in srv.requests  # asked once for the page; the original has none


# ====================================================================== POST-only (newer API)


def test_post_server_video_hit_gets_its_middle_frame(
    corpus: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _, records = corpus
    cache = tmp_path / "frames"
    with OriginalSearchServer(records, api="post") as srv:
        searcher = HttpSearcher(srv.url, frame_cache=cache)
        hits = searcher.search("lidar calibration lecture video", 3)
        assert searcher.mode == "post" and all(m == "POST" for m, _ in srv.requests)
        clip = hits[0]
        assert (clip.modality, clip.media, clip.name) == ("clip", records[3]["file_path"], "lecture_3")
        frame = Path(str(clip.image))
        assert frame.parent == cache and frame.suffix == ".jpg"
        grey = np.asarray(Image.open(frame).convert("L"), dtype=float).mean()
        assert abs(grey - 8 * (N_FRAMES // 2)) < 6  # the middle frame, not the first (0) or last (232)
        written = frame.stat().st_mtime_ns
        again = searcher.search("lidar video", 1)[0]
        assert again.image == str(frame) and frame.stat().st_mtime_ns == written  # written once
        assert searcher.load_image(str(frame)) == frame.read_bytes()
        assert [h.modality for h in hits[:1]] == ["clip"] and hits[0].score > hits[-1].score
        text = searcher.search("pancake batter rest", 1)[0]
        assert text.modality == "text" and text.text == records[4]["content"]
        assert text.media == records[4]["file_path"]


def test_post_server_vrag_ret_shape_is_parsed(corpus: tuple[Path, list[dict[str, Any]]]) -> None:
    import httpx

    from vrag_desktop.core.agents.searchers import parse_search_response

    _, records = corpus
    with OriginalSearchServer(records, api="post") as srv:
        body = httpx.post(
            f"{srv.url}/search", json={"queries": ["harbor lamp"], "top_k": 2, "vrag_ret": True}
        ).json()
        assert [h["idx"] for h in body[0]] == [0, 1]
        hits = parse_search_response(body)
        assert hits[0].name == "harbor_report_1" and hits[0].image == records[2]["file_path"]
        # and the searcher never probes GET against a POST server
        HttpSearcher(srv.url).search("harbor lamp", 2)
        assert ("GET", "/search") not in srv.requests


# ====================================================================== bad answers


@pytest.mark.parametrize("api", ["get", "post"])
@pytest.mark.parametrize(
    ("fault", "needle"),
    [
        ({"status": 500, "body": {"detail": "CUDA out of memory"}}, "answered 500: CUDA out of memory"),
        (
            {
                "status": 200,
                "body": "<html><title>Welcome to nginx</title></html>",
                "content_type": "text/html",
            },
            "did not answer JSON (it sent an HTML page titled 'Welcome to nginx' (text/html))",
        ),
        (
            {"status": 502, "body": "<html><head><title>502 Bad Gateway</title></head></html>"},
            "answered 502: an HTML page titled '502 Bad Gateway'",
        ),
        ({"status": 200, "body": []}, "answered an empty list"),
        ({"status": 200, "body": {"results": []}}, "answered an empty list"),
        (
            {"status": 200, "body": '{"results": [{"score": [0.5', "content_type": "application/json"},
            "did not answer JSON",
        ),
        ({"status": 200, "body": {"detail": "no index loaded"}}, "unexpected search response"),
    ],
)
def test_bad_answers_are_clear_search_failures(
    corpus: tuple[Path, list[dict[str, Any]]], api: str, fault: dict[str, Any], needle: str
) -> None:
    _, records = corpus
    with OriginalSearchServer(records, api=api, fault=fault) as srv:
        searcher = HttpSearcher(srv.url, timeout=5)
        with pytest.raises(SearchFailed) as err:
            searcher.search("edelweiss", 3)
        assert needle in str(err.value)
        assert searcher.mode is None  # nothing learnt from a broken answer


def test_unreachable_and_no_search_api() -> None:
    with pytest.raises(SearchFailed, match=r"cannot reach the search server at http://127\.0\.0\.1"):
        HttpSearcher(f"http://127.0.0.1:{free_port()}", timeout=2).search("q", 3)
    # a server that refuses both forms: both answers are in the message
    with OriginalSearchServer([], api="get") as srv, pytest.raises(SearchFailed) as err:
        HttpSearcher(srv.url + "/api").search("q", 3)
    msg = str(err.value)
    assert "answered 404: Not Found" in msg and "GET" in msg and "answered 404" in msg.split("GET", 1)[1]


# ====================================================================== the VRAG agent, end to end


def test_vrag_agent_searches_through_the_get_only_server(
    corpus: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _, records = corpus

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return {"content": "<think>The page says it.</think><answer>woolly hairs</answer>"}

    turns = [{"content": "<think>Look it up.</think><search>edelweiss woolly hairs</search>"}, answer]
    with OriginalSearchServer(records, api="get") as search_srv, ScriptedOpenAI(turns) as model_srv:

        async def go() -> list[Any]:
            async with OpenAIChatModel(model_srv.base_url, "scripted-model", max_attempts=1) as model:
                agent = VRAGAgent(model, HttpSearcher(search_srv.url), image_dir=tmp_path / "run")
                return [ev async for ev in agent.run("Why is edelweiss woolly?")]

        events = asyncio.run(asyncio.wait_for(go(), 60))
        requests = list(search_srv.requests)
        bodies = model_srv.chat_bodies
    assert not [e for e in events if isinstance(e, AgentError)]
    results = next(e for e in events if isinstance(e, SearchResults))
    assert results.hits[0].name == "alpine_guide_1" and results.shown == (0,)
    shown = next(e for e in events if isinstance(e, ImageShown))
    assert shown.raw == records[0]["file_path"] and shown.source == records[0]["file_path"]
    # the model was shown that page: its image is the red page, resized
    url = [p for m in bodies[1]["messages"] if isinstance(m["content"], list) for p in m["content"]][-1]
    sent = Image.open(io.BytesIO(base64.b64decode(url["image_url"]["url"].split(",", 1)[1]))).convert("RGB")
    r, g, b = (float(c) for c in np.asarray(sent, dtype=float).reshape(-1, 3).mean(axis=0))
    assert r > 180 and g < 60 and b < 60
    assert next(e for e in events if isinstance(e, Answer)).content == "woolly hairs"
    assert requests == [("POST", "/search"), ("GET", "/search")]


def test_vrag_agent_shows_a_video_hit_by_its_frame(
    corpus: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    _, records = corpus
    turns = [
        {"content": "<think>Find the lecture.</think><search>lidar calibration video</search>"},
        {"content": "<think>Seen.</think><answer>a lecture</answer>"},
    ]
    with OriginalSearchServer(records, api="post") as search_srv, ScriptedOpenAI(turns) as model_srv:

        async def go() -> list[Any]:
            async with OpenAIChatModel(model_srv.base_url, "scripted-model", max_attempts=1) as model:
                searcher = HttpSearcher(search_srv.url, frame_cache=tmp_path / "frames")
                agent = VRAGAgent(model, searcher, image_dir=tmp_path / "run")
                return [ev async for ev in agent.run("What is the video about?")]

        events = asyncio.run(asyncio.wait_for(go(), 60))
    results = next(e for e in events if isinstance(e, SearchResults))
    assert results.hits[0].modality == "clip" and results.shown == (0,)
    shown = next(e for e in events if isinstance(e, ImageShown))
    assert Path(shown.raw).parent == tmp_path / "frames" and shown.source == records[3]["file_path"]
