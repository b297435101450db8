"""The update check (core/update_check.py) and ``vrag-desktop update-check`` against a real feed on
loopback: the three feed shapes, newer and current, every bad answer a feed or a network can give,
addresses refused before any connection, and offline mode making no request at all."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from conftest import cli
from feed_server import FeedServer, free_port, self_signed

from vrag_desktop.core import update_check
from vrag_desktop.core.update_check import CURRENT, ERROR, MAX_BYTES, NEWER, OFF, check, url_problem

NOTES = "Faster search.\nFixes the zoom."
OURS = {"version": "1.2.0", "url": "https://example.org/releases/1.2.0", "notes": NOTES}
LATEST = {
    "tag_name": "v1.2.0",
    "html_url": "https://github.com/example/vrag-desktop/releases/tag/v1.2.0",
    "body": NOTES,
    "draft": False,
    "prerelease": False,
}
WAIT_S = 60.0  # for answers that do come: a loaded 2-core machine may be slow to serve one


def _release(tag: str, **kw: Any) -> dict[str, Any]:
    return {**LATEST, "tag_name": tag, "html_url": f"https://example.org/{tag}", **kw}


@pytest.fixture(autouse=True)
def online(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The suite runs with HF_HUB_OFFLINE=1; these tests are about a machine that is online."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("VRAG_DESKTOP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("VRAG_DESKTOP_CONFIG_DIR", str(tmp_path / "cfg"))


@pytest.fixture
def feed() -> Any:
    with FeedServer() as server:
        yield server


def _check(url: str, **kw: Any) -> update_check.UpdateResult:
    kw.setdefault("timeout_s", WAIT_S)
    kw.setdefault("current", "1.0.0")
    return check(url, **kw)


# ---------------------------------------------------------------- the shapes


@pytest.mark.parametrize("shape", ["ours", "latest", "list"])
def test_each_feed_shape_finds_the_newer_version(feed: FeedServer, shape: str) -> None:
    data = {"ours": OURS, "latest": LATEST, "list": [LATEST, _release("v1.1.0")]}[shape]
    result = _check(feed.json("/feed", data))
    assert result.status == NEWER, result
    assert (result.current, result.latest, result.notes) == ("1.0.0", "1.2.0", NOTES)
    assert result.url == (OURS["url"] if shape == "ours" else LATEST["html_url"])
    assert "1.2.0 is available" in result.message


def test_same_or_older_feed_version_is_current(feed: FeedServer) -> None:
    assert _check(feed.json("/same", {"version": "1.0.0"})).status == CURRENT
    older = _check(feed.json("/older", {"version": "0.9"}))  # a development copy ahead of the feed
    assert (older.status, older.latest) == (CURRENT, "0.9")
    assert "up to date" in older.message


def test_this_copys_own_version_is_the_one_the_cli_prints(feed: FeedServer) -> None:
    from vrag_desktop import __version__

    result = check(feed.json("/feed", {"version": "0.0.1"}), timeout_s=WAIT_S)
    assert (result.status, result.current) == (CURRENT, __version__)


def test_a_github_list_skips_drafts_and_prereleases_and_takes_the_highest(feed: FeedServer) -> None:
    releases = [
        _release("v3.0.0", draft=True),
        _release("v2.0.0rc1", prerelease=True),
        _release("v1.1.5"),  # a fix to the older line, published last
        _release("v1.2.0"),
        _release("not-a-version"),
    ]
    result = _check(feed.json("/releases", releases))
    assert (result.status, result.latest, result.url) == (NEWER, "1.2.0", "https://example.org/v1.2.0")


def test_a_github_list_with_only_drafts_is_an_error(feed: FeedServer) -> None:
    result = _check(feed.json("/releases", [_release("v3.0.0", draft=True), _release("v4", prerelease=True)]))
    assert (result.status, result.message) == (ERROR, "the feed lists no published release")
    draft = _check(feed.json("/latest", {**LATEST, "draft": True}))
    assert draft.status == ERROR and "draft or a pre-release" in draft.message


def test_a_release_link_is_kept_only_when_it_is_https(feed: FeedServer) -> None:
    for link in ("http://example.org/r", "javascript:alert(1)", "file:///etc/passwd", "https://", 42):
        result = _check(feed.json("/feed", {"version": "2.0", "url": link}))
        assert (result.status, result.url) == (NEWER, None), link


def test_notes_lose_control_characters(feed: FeedServer) -> None:
    notes = "Fixed\x1b[2J\x1b]0;pwned\x07 things\r\nline two\x00"
    result = _check(feed.json("/feed", {"version": "2.0", "notes": notes}))
    assert result.notes == "Fixed[2J]0;pwned things\nline two"
    assert _check(feed.json("/n", {"version": "2.0", "notes": 7})).notes == ""


# ---------------------------------------------------------------- bad answers


@pytest.mark.parametrize(
    ("status", "body", "words"),
    [
        (404, b"no", "answered HTTP 404"),
        (500, b"boom", "answered HTTP 500"),
        (200, b"<html>a web page</html>", "is not JSON"),
        (200, b"\xff\xfe\x00garbage", "is not JSON"),
        (200, b'"just a string"', "none of the known shapes"),
        (200, b'{"name": "vrag", "latest": "1.2"}', "none of the known shapes"),
        (200, b'[{"name": "a release without a tag"}]', "no published release"),
        (200, b'{"version": "banana"}', "version 'banana' is not a version number"),
        (200, b'{"version": 1.2}', "the feed's version is a number, not a version number"),
        (200, b'{"tag_name": null}', "the feed's version is null"),
        (200, b'{"tag_name": "latest-and-greatest"}', "is not a version number"),
        (200, b"[" * 100_000, "larger than 64 KiB"),
    ],
)
def test_bad_answers_are_one_line_errors(feed: FeedServer, status: int, body: bytes, words: str) -> None:
    result = _check(feed.raw("/feed", status, body))
    assert result.status == ERROR, result
    assert words in result.message and "\n" not in result.message
    assert (result.latest, result.url, result.notes) == (None, None, "")


def test_a_body_over_the_cap_is_cut_off_with_or_without_a_length(feed: FeedServer) -> None:
    big = json.dumps({"version": "2.0", "notes": "x" * MAX_BYTES}).encode()
    said = _check(feed.raw("/said", 200, big))  # Content-Length: refused before reading
    unsaid = _check(feed.raw("/unsaid", 200, big, headers={}))  # only the reading shows it
    for result in (said, unsaid):
        assert (result.status, result.message) == (ERROR, f"the feed at {_where(feed)} is larger than 64 KiB")


def test_a_redirect_is_not_followed(feed: FeedServer) -> None:
    feed.json("/moved", OURS)
    result = _check(feed.raw("/feed", 302, b"", {"Location": feed.url("/moved"), "Content-Length": "0"}))
    assert result.status == ERROR and "redirects (HTTP 302)" in result.message
    assert "set that address instead" in result.message
    assert feed.requests == ["/feed"]  # the new place was never asked


def test_a_server_that_never_answers_times_out(feed: FeedServer) -> None:
    result = _check(feed.hang("/feed"), timeout_s=1.0)
    assert (result.status, result.message) == (ERROR, f"the feed at {_where(feed)} did not answer within 1 s")


@pytest.mark.parametrize("part", ["body", "headers"])
def test_a_server_that_trickles_is_cut_at_the_deadline(feed: FeedServer, part: str) -> None:
    """Bytes every 50 ms: no single read waits long, so only a deadline for the whole check ends it."""
    result = _check(feed.trickle("/feed", headers=part == "headers"), timeout_s=1.0)
    assert (result.status, result.message) == (ERROR, f"the feed at {_where(feed)} did not answer within 1 s")


def test_nothing_listening_is_unreachable() -> None:
    port = free_port()
    result = _check(f"http://127.0.0.1:{port}/feed")
    assert result.status == ERROR
    assert result.message == f"the feed at 127.0.0.1:{port} cannot be reached (connection refused)"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://example.org/feed.json", "must use https"),
        ("http://127.0.0.1.example.org/feed.json", "must use https"),
        ("ftp://example.org/feed.json", "must start with https://"),
        ("file:///etc/passwd", "must start with https://"),
        ("example.org/feed.json", "must start with https://"),
        ("https://user:secret@example.org/feed.json", "user name or password"),
        ("https://example.org/a feed.json", "spaces or control characters"),
        ("https://example.org:port/feed.json", "cannot be read"),
    ],
)
def test_refused_addresses_open_no_connection(monkeypatch: pytest.MonkeyPatch, url: str, words: str) -> None:
    tried: list[Any] = []

    def record(*args: Any, **kw: Any) -> Any:
        tried.append(args)
        raise AssertionError("a refused address must not open a connection")

    monkeypatch.setattr(socket, "create_connection", record)
    monkeypatch.setattr(socket, "getaddrinfo", record)
    result = _check(url)
    assert result.status == ERROR and words in result.message, result.message
    assert tried == []
    assert url_problem(url) == result.message


def test_loopback_hosts_may_use_plain_http() -> None:
    for url in ("http://127.0.0.1:8/f", "http://localhost/f", "http://[::1]:8/f", "http://127.1.2.3/f"):
        assert url_problem(url) is None, url
    assert url_problem("https://example.org/feed.json") is None
    assert url_problem("") == "no address given"


# ---------------------------------------------------------------- offline, no URL


def test_offline_mode_makes_no_request(feed: FeedServer, tmp_path: Path) -> None:
    from vrag_desktop.core.models.settings import update_settings
    from vrag_desktop.core.paths import DataLayout

    url = feed.json("/feed", OURS)
    update_settings(DataLayout(tmp_path / "data"), offline=True)
    result = _check(url, data_dir=tmp_path / "data")
    assert result.status == OFF and "offline mode is on" in result.message
    assert feed.requests == []
    update_settings(DataLayout(tmp_path / "data"), offline=False)
    assert _check(url, data_dir=tmp_path / "data").status == NEWER
    assert feed.requests == ["/feed"]


def test_hf_hub_offline_in_the_environment_makes_no_request(
    feed: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = _check(feed.json("/feed", OURS))
    assert result.status == OFF and "HF_HUB_OFFLINE" in result.message
    assert feed.requests == []


def test_no_url_checks_nothing() -> None:
    result = _check("  ")
    assert result.status == OFF and "no update feed is set" in result.message


# ---------------------------------------------------------------- the command


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from vrag_desktop.cli import main

    code = main(["update-check", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_exit_status_says_what_it_found(feed: FeedServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(capsys, "--url", feed.json("/new", {**OURS, "version": "99.0"}))
    assert code == 10
    assert out.startswith("VRAG Desktop 99.0 is available; this is ")
    assert f"Release page: {OURS['url']}" in out and NOTES in out
    code, out, _ = _main(capsys, "--url", feed.json("/old", {"version": "0.0.1"}))
    assert (code, "is up to date" in out) == (0, True)
    code, out, err = _main(capsys, "--url", feed.url("/missing"))
    assert (code, out) == (1, "")
    assert err.strip() == f"vrag-desktop: error: the feed at {_where(feed)} answered HTTP 404 Not Found"


def test_cli_json(feed: FeedServer, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _main(capsys, "--url", feed.json("/feed", LATEST), "--json")
    data = json.loads(out)
    assert code == 10
    assert {k: data[k] for k in ("status", "latest", "url", "notes")} == {
        "status": "newer",
        "latest": "1.2.0",
        "url": LATEST["html_url"],
        "notes": NOTES,
    }


def test_cli_without_a_url_says_how_to_set_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys)
    assert (code, out) == (2, "")
    assert "no update feed is set" in err and "Settings" in err and "--url" in err


def test_cli_offline_is_not_checked(
    feed: FeedServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = _main(capsys, "--url", feed.json("/feed", OURS))
    assert code == 2 and "HF_HUB_OFFLINE" in err
    assert feed.requests == []


def test_cli_bad_url_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _main(capsys, "--url", "http://example.org/feed.json")
    assert (code, out) == (1, "")
    assert err.startswith("vrag-desktop: error: the address must use https") and err.count("\n") == 1


def test_cli_reads_the_apps_saved_feed(feed: FeedServer, tmp_path: Path) -> None:
    """The real command, as a person runs it: the feed comes from the app's settings file, which
    it reads without changing (a reader never writes)."""
    from vrag_desktop.core.settings import AppSettings, save_settings

    settings = save_settings(AppSettings(update_url=feed.json("/feed", OURS)), tmp_path / "cfg")
    before = settings.read_bytes()
    env = {
        "VRAG_DESKTOP_CONFIG_DIR": str(tmp_path / "cfg"),
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
    }
    done = cli("update-check", data_dir=tmp_path / "data", env=env, timeout=300)
    assert done.returncode == 10, done.stderr
    assert "1.2.0 is available" in done.stdout and "Traceback" not in done.stderr
    assert feed.requests == ["/feed"]
    assert settings.read_bytes() == before
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("damaged", [b"{not json", b"\xff\xfe not text"])
def test_cli_leaves_a_damaged_models_json_as_it_is(feed: FeedServer, tmp_path: Path, damaged: bytes) -> None:
    """Offline mode is read from the Models settings; a damaged file reads as the defaults (online)
    and stays byte for byte where it is, no sibling made: moving it aside is for a save to do."""
    config = tmp_path / "data" / "config"
    config.mkdir(parents=True)
    (config / "models.json").write_bytes(damaged)
    env = {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"}
    done = cli(
        "update-check", "--url", feed.json("/feed", OURS), data_dir=tmp_path / "data", env=env, timeout=300
    )
    assert done.returncode == 10, done.stderr
    assert feed.requests == ["/feed"]
    assert [p.name for p in config.iterdir()] == ["models.json"]
    assert (config / "models.json").read_bytes() == damaged


def _where(feed: FeedServer) -> str:
    return feed.url("").split("://", 1)[1]


def test_https_goes_through_the_environments_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """``https_proxy`` is honoured (as the model downloads honour it): the tunnel is asked of the proxy,
    for the feed's host, which this machine never looks up itself."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    asked: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_CONNECT(self) -> None:
            asked.append(f"{self.path} {self.headers.get('Proxy-Authorization')}")
            self.send_error(403, "Not Allowed Here")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        for var in ("no_proxy", "NO_PROXY", "HTTPS_PROXY"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("https_proxy", f"http://me:pw@127.0.0.1:{server.server_address[1]}")
        result = _check("https://updates.example.invalid/feed.json")
    finally:
        server.shutdown()
        server.server_close()
    assert asked == ["updates.example.invalid:443 Basic bWU6cHc="]
    assert result.status == ERROR and "cannot be reached" in result.message and "403" in result.message


def test_https_feed_needs_a_certificate_this_machine_trusts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The https path for real, on loopback: an unknown certificate is refused; the same feed, its
    certificate trusted (``SSL_CERT_FILE``, as OpenSSL reads it), is read."""
    cert, key = self_signed(tmp_path)
    with FeedServer(tls=(cert, key)) as feed:
        url = feed.json("/feed", OURS)
        refused = _check(url)
        assert refused.status == ERROR and "its certificate is not trusted" in refused.message, (
            refused.message
        )
        monkeypatch.setenv("SSL_CERT_FILE", cert)
        trusted = _check(url)
        assert (trusted.status, trusted.latest) == (NEWER, "1.2.0"), trusted.message
