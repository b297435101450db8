"""`vrag-desktop serve-search` over real HTTP: both of the original's request/response shapes, the
legacy GET form, health, image bytes for indexed files only, and clear 4xx for malformed requests.
What it refuses (foreign Host, no token, oversized requests, files outside a corpus) is in
test_server_security.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import serve_search


@pytest.fixture(scope="module")
def server(sample_index: Path) -> Iterator[str]:
    with serve_search(sample_index, wait=90) as url:
        yield url


def test_health(server: str) -> None:
    body = httpx.get(f"{server}/health").json()
    assert body["status"] == "ok" and body["corpora"] == ["sample"] and body["vectors"] > 20
    assert body["embedder"] == "minilm-l6-v2"


def test_post_results_shape(server: str) -> None:
    r = httpx.post(
        f"{server}/search",
        json={"queries": ["Atlas robot payload and battery", "edelweiss hairs"], "top_k": 3},
    )
    assert r.status_code == 200
    results = r.json()["results"]
    assert len(results) == 2
    for res in results:
        assert set(res) == {"score", "indice", "data"}
        assert len(res["score"]) == len(res["indice"]) == len(res["data"]) == 3
        assert res["score"] == sorted(res["score"], reverse=True)
    first = results[0]["data"][0]
    assert first["type"] == "image" and first["page"] == 3
    assert Path(first["file_path"]).name == "northwind_annual_report_2024_3.jpg"
    assert Path(results[1]["data"][0]["source"]).name == "field_guide_alpine_plants.pdf"


def test_post_text_and_video_records(server: str) -> None:
    data = httpx.post(f"{server}/search", json={"queries": ["pancake batter rest"], "top_k": 1}).json()
    rec = data["results"][0]["data"][0]
    assert rec["type"] == "text" and "content" in rec and "batter" in rec["content"].lower()
    data = httpx.post(
        f"{server}/search", json={"queries": ["lidar calibration room reflective targets"], "top_k": 3}
    ).json()
    videos = [d for d in data["results"][0]["data"] if d["type"] == "video"]
    assert videos and videos[0]["file_path"].endswith(".mp4")


def test_post_vrag_ret_legacy_shape(server: str) -> None:
    r = httpx.post(
        f"{server}/search", json={"queries": ["Atlas robot payload"], "top_k": 5, "vrag_ret": True}
    )
    assert r.status_code == 200
    (hits,) = r.json()
    assert [h["idx"] for h in hits] == list(range(len(hits))) and hits
    assert all(set(h) == {"idx", "image_file"} for h in hits)
    assert Path(hits[0]["image_file"]).name == "northwind_annual_report_2024_3.jpg"
    assert all(Path(h["image_file"]).exists() for h in hits)


def test_get_legacy_form(server: str) -> None:
    r = httpx.get(
        f"{server}/search", params=[("queries", "Atlas robot payload"), ("queries", "gentian flowers")]
    )
    assert r.status_code == 200
    lists = r.json()
    assert len(lists) == 2 and all(isinstance(x, list) for x in lists)
    assert Path(lists[1][0]["image_file"]).name == "field_guide_alpine_plants_3.jpg"


def test_image_bytes_only_for_indexed_files(server: str) -> None:
    hits = httpx.post(
        f"{server}/search", json={"queries": ["Atlas robot"], "top_k": 1, "vrag_ret": True}
    ).json()[0]
    r = httpx.get(f"{server}/image", params={"path": hits[0]["image_file"]})
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg" and r.content[:2] == b"\xff\xd8"
    for path in ("/etc/passwd", hits[0]["image_file"] + "/../../../manifest.sqlite"):
        r = httpx.get(f"{server}/image", params={"path": path})
        assert r.status_code == 404 and "no such file" in r.json()["detail"]
    rec = httpx.post(f"{server}/search", json={"queries": ["Atlas robot"], "top_k": 1}).json()["results"][0][
        "data"
    ][0]
    r = httpx.get(f"{server}/items/{rec['corpus']}/{rec['item_id']}/image")
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
    assert rec["image_url"] == f"/items/{rec['corpus']}/{rec['item_id']}/image"  # what a client follows
    assert httpx.get(f"{server}/items/sample/999999/image").status_code == 404


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"queries": []}, "queries"),
        ({"top_k": 3}, "queries"),
        ({"queries": ["x"], "top_k": 0}, "top_k"),
        ({"queries": ["x"], "top_k": "many"}, "top_k"),
        ({"queries": [1, 2]}, "queries"),
        ({"queries": ["   "]}, "empty"),
        ({"queries": ["x"], "vrag_ret": "perhaps"}, "vrag_ret"),
    ],
)
def test_malformed_post_is_4xx_with_message(server: str, body: dict, needle: str) -> None:
    r = httpx.post(f"{server}/search", json=body)
    assert 400 <= r.status_code < 500
    assert needle in r.json()["detail"]


def test_non_json_and_bad_get(server: str) -> None:
    r = httpx.post(f"{server}/search", content=b"queries=hello", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "JSON" in r.json()["detail"]
    r = httpx.get(f"{server}/search")
    assert r.status_code == 422 and "queries" in r.json()["detail"]
    r = httpx.get(f"{server}/search", params={"queries": "x", "top_k": -1})
    assert r.status_code == 422 and "top_k" in r.json()["detail"]


def test_single_string_query_is_accepted(server: str) -> None:
    r = httpx.post(f"{server}/search", json={"queries": "Atlas robot payload", "top_k": 1})
    assert r.status_code == 200 and len(r.json()["results"]) == 1
