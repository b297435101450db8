"""`vrag-desktop serve-search` trusts no one, over real HTTP (issue 27, items 6, 7, 8 and 11).

A small corpus is built here with the real MiniLM embedder: text files, one of them with a file name
that is not valid UTF-8, two images (one with such a name), a symlink from a corpus folder to a file
outside it, a file and a derived image swapped for symlinks to outside files after indexing, and a
second root reached through a symlinked folder. Two real servers run over it: one as a person starts
it (loopback, no token) and one bound to every address with a token from the environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
from conftest import cli, free_port, index_paths

from vrag_desktop.core.search.server import (
    MAX_BODY_BYTES,
    MAX_QUERIES,
    MAX_QUERY_CHARS,
    MAX_QUERY_STRING_BYTES,
    MAX_TOP_K,
)

TOKEN = "s3cret-token-for-tests-only"
CAFE = "espresso croissant and quiche lorraine served at the corner cafe"
SECRET = "the launch codes are hidden under the old oak tree"
SWAPPED_SECRET = "the spare key lies beneath the third flower pot"
LAKE = "a quiet alpine lake reflects the granite peaks at dawn"


@dataclass
class Corpus:
    data: Path
    root: Path
    outside: Path
    linked_root: Path  # a symlink to a folder: added to the corpus under this name


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, minilm) -> Corpus:  # type: ignore[no-untyped-def]
    from PIL import Image

    from vrag_desktop.core.corpus.library import Library

    base = tmp_path_factory.mktemp("odd")
    root, outside, real_docs = base / "root", base / "outside", base / "real_docs"
    for d in (root, outside, real_docs):
        d.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (outside / "swapped_secret.txt").write_text(SWAPPED_SECRET)
    Image.new("RGB", (48, 48), (0, 200, 0)).save(outside / "outside.jpg")
    os.symlink(outside / "secret.txt", root / "outside_link.txt")
    (root / "swapped.txt").write_text("zebras migrate across the savanna in the dry season")
    (root / "plain.txt").write_text("a recipe for slow cooked lentil soup with cumin")
    broot = os.fsencode(root)
    with open(os.path.join(broot, b"caf\xe9 menu.txt"), "w") as f:  # Latin-1 name: not UTF-8
        f.write(CAFE)
    Image.new("RGB", (64, 64), (200, 30, 30)).save(os.path.join(broot, b"r\xf6d.png"))
    Image.new("RGB", (64, 64), (30, 30, 200)).save(root / "blue.png")
    (real_docs / "lake.txt").write_text(LAKE)
    linked_root = base / "linked_docs"
    os.symlink(real_docs, linked_root)

    library = Library(base / "data")
    c, _, _ = index_paths(library, "odd", [root, linked_root], minilm)
    try:
        items = {os.path.basename(r.media_path or ""): r for r in c.manifest.items()}
        blue_image = items["blue.png"].image_path
    finally:
        c.close()
    # After indexing, a file and a derived image become links to files outside the corpus.
    os.replace(root / "swapped.txt", base / "swapped.orig")
    os.symlink(outside / "swapped_secret.txt", root / "swapped.txt")
    assert blue_image
    os.remove(blue_image)
    os.symlink(outside / "outside.jpg", blue_image)
    return Corpus(base / "data", root, outside, linked_root)


def _launch(data: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[str]]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vrag_desktop", "serve-search", "--port", str(port), *args],
        env={**os.environ, "VRAG_DESKTOP_DATA_DIR": str(data), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    return f"http://127.0.0.1:{port}", proc


def _wait(url: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stdout.read() if proc.stdout else ''}")
        try:
            httpx.get(f"{url}/health", timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError("server did not answer in 90 s")


def _stop(proc: subprocess.Popen[str]) -> str:
    if proc.returncode is not None:
        return ""
    proc.terminate()
    out, _ = proc.communicate(timeout=15)
    return out


Server = tuple[str, subprocess.Popen[str]]


@pytest.fixture(scope="module")
def servers(corpus: Corpus) -> Iterator[tuple[Server, Server]]:
    """Both servers, started together: one as a person starts it (loopback, no token); one bound to
    every address, named search.lan too, with a token given by environment variable."""
    plain = _launch(corpus.data)
    tokened = _launch(
        corpus.data, "--host", "0.0.0.0", "--allow-host", "search.lan", env={"VRAG_SEARCH_TOKEN": TOKEN}
    )
    try:
        for s in (plain, tokened):
            _wait(*s)
        yield plain, tokened
    finally:
        for _, proc in (plain, tokened):
            if proc.poll() is None:
                proc.kill()
            proc.wait(15)


@pytest.fixture(scope="module")
def server(servers: tuple[Server, Server]) -> Server:
    return servers[0]


@pytest.fixture(scope="module")
def url(server: Server) -> str:
    return server[0]


@pytest.fixture(scope="module")
def token_server(servers: tuple[Server, Server]) -> Server:
    return servers[1]


def _hits(url: str, query: str, k: int = 8) -> list[dict]:  # type: ignore[type-arg]
    r = httpx.post(f"{url}/search", json={"queries": [query], "top_k": k})
    assert r.status_code == 200, r.text
    return r.json()["results"][0]["data"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------- Host header (DNS rebinding)
@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.nip.io", "localhost.evil.example:{port}", ""]
)
def test_foreign_host_is_refused_on_every_route(url: str, host: str) -> None:
    host = host.format(port=url.rsplit(":", 1)[1])
    for method, path, kw in [
        ("GET", "/health", {}),
        ("POST", "/search", {"json": {"queries": ["espresso"], "top_k": 1}}),
        ("GET", "/search", {"params": {"queries": "espresso"}}),
        ("GET", "/image", {"params": {"path": "/etc/passwd"}}),
        ("GET", "/items/odd/1/image", {}),
    ]:
        r = httpx.request(method, f"{url}{path}", headers={"Host": host}, **kw)
        assert r.status_code == 403, (host, path, r.status_code, r.text)
        detail = r.json()["detail"]
        assert "Host" in detail
        if host:
            assert f"--allow-host {host.split(':')[0]}" in detail


@pytest.mark.parametrize(
    "host", ["localhost:{port}", "LOCALHOST", "127.0.0.1:{port}", "127.8.9.10", "[::1]:{port}"]
)
def test_loopback_hosts_are_served(url: str, host: str) -> None:
    r = httpx.get(f"{url}/health", headers={"Host": host.format(port=url.rsplit(":", 1)[1])})
    assert r.status_code == 200 and r.json()["corpora"] == ["odd"]


def test_non_loopback_bind_needs_the_token(
    token_server: Server,
) -> None:
    url, proc = token_server
    r = httpx.get(f"{url}/health")
    assert r.status_code == 401 and "Authorization: Bearer" in r.json()["detail"]
    assert r.headers["www-authenticate"].startswith("Bearer")
    for bad in (f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}", f"Basic {TOKEN}", TOKEN, "Bearer"):
        r = httpx.post(f"{url}/search", json={"queries": ["espresso"]}, headers={"Authorization": bad})
        assert r.status_code == 401, bad
        assert TOKEN not in r.text
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(f"{url}/health", headers=auth).status_code == 200
    assert httpx.get(f"{url}/health", headers={"Authorization": f"bearer {TOKEN}"}).status_code == 200
    r = httpx.post(f"{url}/search", json={"queries": [CAFE], "top_k": 1}, headers=auth)
    assert r.status_code == 200 and CAFE in r.json()["results"][0]["data"][0]["content"]
    # The token came from the environment: it is in no process listing.
    assert TOKEN not in " ".join(psutil.Process(proc.pid).cmdline())


def test_non_loopback_bind_hosts(token_server: Server) -> None:
    url, _ = token_server
    port = url.rsplit(":", 1)[1]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for host in (
        f"search.lan:{port}",
        "SEARCH.LAN",
        f"192.0.2.7:{port}",
        "[2001:db8::5]",
        f"localhost:{port}",
    ):
        assert httpx.get(f"{url}/health", headers={**auth, "Host": host}).status_code == 200, host
    r = httpx.get(f"{url}/health", headers={**auth, "Host": f"evil.example:{port}"})
    assert r.status_code == 403 and "--allow-host evil.example" in r.json()["detail"]


def test_token_never_logged(token_server: Server) -> None:
    url, proc = token_server
    httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {TOKEN}"})
    httpx.get(f"{url}/health", headers={"Authorization": "Bearer wrong"})
    output = _stop(proc)  # the last test of this server
    assert "token required" in output
    assert TOKEN not in output and "wrong" not in output
    assert "Warning" not in output  # a token is set: no warning


def test_non_loopback_bind_without_token_warns(tmp_path: Path) -> None:
    # No corpus here: the command stops after its checks, which come first.
    proc = cli(
        "serve-search", "--host", "0.0.0.0", "--port", str(free_port()), data_dir=tmp_path, timeout=120
    )
    assert "without a token" in proc.stderr and "VRAG_SEARCH_TOKEN" in proc.stderr
    proc = cli("serve-search", "--port", str(free_port()), data_dir=tmp_path, timeout=120)
    assert "without a token" not in proc.stderr  # loopback: no warning
    proc = cli(
        "serve-search",
        "--port",
        str(free_port()),
        data_dir=tmp_path,
        env={"VRAG_SEARCH_TOKEN": " "},
        timeout=120,
    )
    assert proc.returncode != 0 and "token is empty" in proc.stderr


# ---------------------------------------------------------------- bounds
def test_body_over_the_limit_by_content_length(url: str) -> None:
    r = httpx.post(
        f"{url}/search", content=b"x" * (MAX_BODY_BYTES + 1), headers={"content-type": "application/json"}
    )
    assert r.status_code == 413 and "KiB" in r.json()["detail"]


def test_chunked_100mb_body_is_refused_without_buffering(server: Server) -> None:
    url, proc = server
    me = psutil.Process(proc.pid)
    before = me.memory_info().rss
    sent = 0

    def body() -> Iterator[bytes]:
        nonlocal sent
        chunk = b'{"queries": ["' + b"a" * (1024 * 1024)
        for _ in range(100):
            sent += len(chunk)
            yield chunk

    t = time.monotonic()
    r = httpx.post(f"{url}/search", content=body(), timeout=60)  # no length: sent chunked
    took = time.monotonic() - t
    assert r.status_code == 413 and "body is over" in r.json()["detail"]
    assert took < 10
    assert sent < 50 * 1024 * 1024  # refused long before the end
    assert me.memory_info().rss - before < 40 * 1024 * 1024
    assert httpx.get(f"{url}/health").status_code == 200  # and it still serves


def test_query_length_batch_size_and_top_k(url: str) -> None:
    ok = httpx.post(f"{url}/search", json={"queries": ["a" * MAX_QUERY_CHARS], "top_k": MAX_TOP_K})
    assert ok.status_code == 200
    for body, needle in [
        ({"queries": ["a" * (MAX_QUERY_CHARS + 1)]}, f"at most {MAX_QUERY_CHARS}"),
        ({"queries": ["lake"] * (MAX_QUERIES + 1)}, f"at most {MAX_QUERIES}"),
        ({"queries": ["lake"], "top_k": MAX_TOP_K + 1}, "top_k"),
    ]:
        r = httpx.post(f"{url}/search", json=body)
        assert r.status_code == 422 and needle in r.json()["detail"], (r.status_code, r.text)
    # the GET form has the same bounds, and a bound on its query string
    r = httpx.get(f"{url}/search", params={"queries": "a" * (MAX_QUERY_CHARS + 1)})
    assert r.status_code == 422 and f"at most {MAX_QUERY_CHARS}" in r.json()["detail"]
    r = httpx.get(f"{url}/search", params=[("queries", "lake")] * (MAX_QUERIES + 1))
    assert r.status_code == 422 and f"at most {MAX_QUERIES}" in r.json()["detail"]
    r = httpx.get(f"{url}/search", params={"queries": "lake", "top_k": MAX_TOP_K + 1})
    assert r.status_code == 422 and "top_k" in r.json()["detail"]
    r = httpx.get(f"{url}/search", params={"queries": "a" * (MAX_QUERY_STRING_BYTES + 1)})
    assert r.status_code == 414 and "POST /search" in r.json()["detail"]


# ---------------------------------------------------------------- clear errors, not 500s
def test_non_utf8_file_names_are_served(url: str) -> None:
    hits = _hits(url, CAFE)
    cafe = next(h for h in hits if h.get("content") == CAFE)
    assert cafe["source"].endswith("caf\ufffd menu.txt") and cafe["file_path"] == cafe["source"]
    red = next(h for h in hits if h["source"].endswith("r\ufffdd.png"))
    assert red["type"] == "image" and red["image_url"].isascii()
    r = httpx.get(f"{url}{red['image_url']}")
    assert r.status_code == 200 and r.content[:2] == b"\xff\xd8"
    r = httpx.post(f"{url}/search", json={"queries": [CAFE], "top_k": 8, "vrag_ret": True})
    assert r.status_code == 200 and r.json()[0]
    assert httpx.get(f"{url}/search", params={"queries": CAFE, "top_k": 8}).status_code == 200


def test_lone_surrogate_query_is_422(url: str) -> None:
    for raw in (b'{"queries": ["\\ud800"]}', b'{"queries": ["ok", "caf\\udce9"], "top_k": 2}'):
        r = httpx.post(f"{url}/search", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "not valid text" in r.json()["detail"]


def test_item_id_past_sqlite_range_is_4xx(url: str) -> None:
    for path in ("/items/bad/99999999999999999999999/image", "/items/odd/99999999999999999999999/image"):
        r = httpx.get(f"{url}{path}")
        assert r.status_code in (404, 422) and "item" in r.json()["detail"]
    r = httpx.get(f"{url}/items/odd/123456789/image")
    assert r.status_code == 404 and "no image for item" in r.json()["detail"]


def test_bad_bodies_are_422(url: str) -> None:
    for raw, needle in [
        (b'{"queries": ["caf\xe9"]}', "not valid UTF-8"),
        (b"[" * 200_000, "nested too deeply"),
        (b'{"queries": ["x"], "top_k": ' + b"9" * 5000 + b"}", "not usable JSON"),
    ]:
        r = httpx.post(f"{url}/search", content=raw, headers={"content-type": "application/json"})
        assert r.status_code == 422 and needle in r.json()["detail"], r.text


# ---------------------------------------------------------------- served files stay inside the corpus
def test_paths_outside_the_index_are_never_served(url: str, corpus: Corpus) -> None:
    passwd = Path("/etc/passwd").read_bytes() if Path("/etc/passwd").exists() else b"root:"
    probes = [
        "/etc/passwd",
        "//etc/passwd",
        "../../etc/passwd",
        f"{corpus.root}/../../../../../../etc/passwd",
        f"{corpus.root}/plain.txt/../../outside/secret.txt",
        str(corpus.outside / "secret.txt"),
        str(corpus.data / "corpora" / "odd" / "manifest.sqlite"),
    ]
    for p in probes:
        r = httpx.get(f"{url}/image", params={"path": p})
        assert r.status_code == 404 and "no such file" in r.json()["detail"], p
        assert passwd not in r.content
    r = httpx.get(f"{url}/image?path=..%2f..%2f..%2fetc%2fpasswd")
    assert r.status_code == 404
    r = httpx.get(f"{url}/image?path=%2F%2Fetc%2Fpasswd")
    assert r.status_code == 404


def test_links_out_of_the_corpus_are_not_served(url: str, corpus: Corpus) -> None:
    # indexed through a link to a file outside: known to the index, never sent
    r = httpx.get(f"{url}/image", params={"path": str(corpus.root / "outside_link.txt")})
    assert r.status_code in (403, 404) and SECRET not in r.text
    # a file that became a link after indexing
    r = httpx.get(f"{url}/image", params={"path": str(corpus.root / "swapped.txt")})
    assert r.status_code == 403 and "outside" in r.json()["detail"] and SWAPPED_SECRET not in r.text
    # a derived image that became a link: neither route sends the outside picture
    blue = next(h for h in _hits(url, "blue") if h["source"].endswith("blue.png"))
    outside_jpg = (corpus.outside / "outside.jpg").read_bytes()
    for r in (
        httpx.get(f"{url}/image", params={"path": blue["image"]}),
        httpx.get(f"{url}{blue['image_url']}"),
    ):
        assert r.status_code == 403 and r.content != outside_jpg


def test_corpus_files_are_served(url: str, corpus: Corpus) -> None:
    r = httpx.get(f"{url}/image", params={"path": str(corpus.root / "plain.txt")})
    assert r.status_code == 200 and b"lentil soup" in r.content
    # a root added through a symlinked folder: its files lie inside it once resolved
    r = httpx.get(f"{url}/image", params={"path": str(corpus.linked_root / "lake.txt")})
    assert r.status_code == 200 and r.text == LAKE


def test_served_files_follow_the_manifest(url: str, corpus: Corpus, minilm) -> None:  # type: ignore[no-untyped-def]
    """Files are looked up per request: one indexed while the server runs is served at once (a list
    made at the first request would miss it)."""
    from vrag_desktop.core.corpus.library import Library

    assert httpx.get(f"{url}/image", params={"path": str(corpus.root / "plain.txt")}).status_code == 200
    later = corpus.root.parent / "later"
    later.mkdir()
    (later / "late.txt").write_text("a note indexed while the search server runs")
    c, _, _ = index_paths(Library(corpus.data), "odd", [later], minilm)
    c.close()
    r = httpx.get(f"{url}/image", params={"path": str(later / "late.txt")})
    assert r.status_code == 200 and b"search server runs" in r.content
    shutil.rmtree(later)
    r = httpx.get(f"{url}/image", params={"path": str(later / "late.txt")})
    assert r.status_code == 404
