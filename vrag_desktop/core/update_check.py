"""Is a newer VRAG Desktop out? Read the one feed URL a person (or whoever packaged the app) set,
and compare its newest version with this one.

Why no built-in URL: the project publishes no release feed yet, and an address made up here could be
registered by anyone and then be trusted by every copy. Until a URL is set, nothing is checked.

The check only reads; it never downloads or installs anything. It trusts nothing it is sent: HTTPS
only (plain http only to this machine: a local mirror, the tests), no redirects followed, at most
64 KiB read within one 5 s deadline, JSON of a known shape, a version :mod:`packaging` can read, and
a release link kept only when it is https. Offline mode (the Models settings, ``HF_HUB_OFFLINE``: the
one switch the downloads obey) means no connection at all.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from vrag_desktop.core.search.guard import is_loopback  # the only hosts plain http may reach

if TYPE_CHECKING:
    from packaging.version import Version

TIMEOUT_S = 5.0  # for the whole check: connect, headers and body
MAX_BYTES = 64 * 1024
NOTES_MAX_CHARS = 4000
NEWER, CURRENT, ERROR, OFF = "newer", "current", "error", "off"
_SHAPES = '{"version": …}, a GitHub release, or a list of GitHub releases'


@dataclass(frozen=True)
class UpdateResult:
    """``status``: newer | current | error | off (no check made: no URL set, or offline mode).
    ``url`` is the release page, only ever an https address; ``message`` is one line for a person."""

    status: str
    current: str
    latest: str | None = None
    url: str | None = None
    notes: str = ""
    message: str = ""


class UpdateCheckError(Exception):
    """The check failed; the message is one line for a person."""


@dataclass(frozen=True)
class _Release:
    version: Version
    url: str | None
    notes: str


def current_version() -> str:
    """This copy's version: the one ``vrag-desktop --version`` prints."""
    from vrag_desktop._version import __version__

    return __version__


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an update feed (one sentence), or None when it can."""
    text = url.strip()
    if not text:
        return "no address given"
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in text):
        return "the address must not contain spaces or control characters"
    try:
        parts = urlsplit(text)
        host, _port = parts.hostname, parts.port  # a port that is not a number raises here
    except ValueError as exc:
        return f"the address cannot be read ({exc})"
    if parts.scheme not in ("https", "http") or not host:
        return f"the address must start with https:// and name a host, not {_short(text)!r}"
    if parts.username is not None or parts.password is not None:
        return "the address must not carry a user name or password"
    if parts.scheme == "http" and not is_loopback(host):
        return f"the address must use https (plain http only to this machine), not {_short(text)!r}"
    return None


def offline_reason(data_dir: str | Path | None = None) -> str | None:
    """Why nothing may go to the network (the Models settings of ``data_dir``, or the environment)."""
    from vrag_desktop.core.models.settings import load_settings
    from vrag_desktop.core.paths import DataLayout, resolve_data_dir

    return load_settings(DataLayout(resolve_data_dir(data_dir))).offline_reason()


def check(
    url: str,
    *,
    data_dir: str | Path | None = None,
    current: str | None = None,
    timeout_s: float = TIMEOUT_S,
) -> UpdateResult:
    """Read the feed at ``url`` and compare its newest version with ``current`` (this copy's by
    default). Never raises for anything the feed or the network does: the result says it."""
    mine = current or current_version()
    if not url.strip():
        return UpdateResult(OFF, mine, message="no update feed is set, so nothing was checked")
    reason = offline_reason(data_dir)
    if reason:
        return UpdateResult(OFF, mine, message=f"no update check was made; {reason}")
    try:
        from packaging.version import InvalidVersion, Version

        try:
            running = Version(mine)
        except InvalidVersion:
            raise UpdateCheckError(f"this copy's version {_short(mine)!r} is not a version number") from None
        release = parse_feed(fetch_feed(url, timeout_s=timeout_s))
    except UpdateCheckError as exc:
        return UpdateResult(ERROR, mine, message=str(exc))
    latest = str(release.version)
    if release.version > running:
        message = f"VRAG Desktop {latest} is available; this is {mine}"
        return UpdateResult(NEWER, mine, latest, release.url, release.notes, message)
    message = f"VRAG Desktop {mine} is up to date (the newest release is {latest})"
    return UpdateResult(CURRENT, mine, latest, release.url, release.notes, message)


# ---------------------------------------------------------------- reading the feed


def fetch_feed(url: str, *, timeout_s: float = TIMEOUT_S) -> Any:
    """The feed's JSON. Raises :class:`UpdateCheckError` (one line) for a refused address, no answer
    within ``timeout_s`` in all, an HTTP status other than 200 (a redirect included), a body over
    :data:`MAX_BYTES`, or a body that is not JSON."""
    problem = url_problem(url)
    if problem:
        raise UpdateCheckError(problem)
    where = urlsplit(url.strip()).netloc
    body = _get(url.strip(), timeout_s)
    try:
        return json.loads(body.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise UpdateCheckError(f"the feed at {where} is not JSON") from None


def _get(url: str, timeout_s: float) -> bytes:
    """GET once, no redirects, at most MAX_BYTES, everything within ``timeout_s``. httpx's timeouts
    are per read, so a timer shuts the socket at the deadline: a server that trickles bytes cannot
    hold the check longer. HTTPS goes through the environment's proxy (``https_proxy``, ``no_proxy``)
    as the model downloads do; this machine is always reached directly."""
    import httpx

    from vrag_desktop._version import __version__

    parts = urlsplit(url)
    where = parts.netloc
    expired = threading.Event()
    streams: list[Any] = []  # httpcore's network streams, as the trace below hands them over

    def shut(stream: Any) -> None:  # the base class's shutdown: an SSLSocket's own would unwrap it
        with contextlib.suppress(OSError):
            socket.socket.shutdown(stream.get_extra_info("socket"), socket.SHUT_RDWR)

    def cut() -> None:
        expired.set()
        for stream in list(streams):
            shut(stream)

    def trace(event: str, info: dict[str, Any]) -> None:
        if event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            streams.append(info["return_value"])
            if expired.is_set():
                shut(info["return_value"])

    timer = threading.Timer(timeout_s, cut)
    timer.daemon = True
    timer.start()
    too_big = UpdateCheckError(f"the feed at {where} is larger than {MAX_BYTES // 1024} KiB")
    late = UpdateCheckError(f"the feed at {where} did not answer within {timeout_s:g} s")
    try:
        with (
            httpx.Client(
                verify=_tls_context(),
                trust_env=not is_loopback(parts.hostname or ""),  # proxies come from it
                timeout=timeout_s,
                follow_redirects=False,
            ) as client,
            client.stream(
                "GET",
                url,
                headers={
                    "Accept": "application/json",
                    "Accept-Encoding": "identity",  # the cap counts the bytes the feed is
                    "User-Agent": f"vrag-desktop/{__version__} (update check)",
                },
                extensions={"trace": trace},
            ) as resp,
        ):
            if 300 <= resp.status_code < 400:
                to = resp.headers.get("Location") or "?"
                raise UpdateCheckError(
                    f"the feed at {where} redirects (HTTP {resp.status_code}) to {_short(to)!r}; "
                    "redirects are not followed: set that address instead"
                )
            if resp.status_code != 200:
                raise UpdateCheckError(
                    f"the feed at {where} answered HTTP {resp.status_code} {_short(resp.reason_phrase)}"
                )
            length = resp.headers.get("Content-Length", "").strip()
            if length.isdigit() and int(length) > MAX_BYTES:
                raise too_big
            chunks: list[bytes] = []
            size = 0
            for chunk in resp.iter_raw():
                size += len(chunk)
                if size > MAX_BYTES:
                    raise too_big
                chunks.append(chunk)
        if expired.is_set():  # the cut socket read as the body's end
            raise late
        return b"".join(chunks)
    except UpdateCheckError:
        raise
    # ValueError, ImportError: a proxy in the environment that httpx cannot use (socks without socksio)
    except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError, ImportError) as exc:
        if expired.is_set() or isinstance(exc, httpx.TimeoutException | TimeoutError):
            raise late from None
        raise UpdateCheckError(f"the feed at {where} cannot be reached ({_network_reason(exc)})") from None
    finally:
        timer.cancel()


def _tls_context() -> Any:
    """The system's trusted certificates; where none were found (a bundled OpenSSL looking in another
    distribution's folder), the bundle the model downloads trust: httpx's, from certifi."""
    import ssl

    context = ssl.create_default_context()
    if not context.cert_store_stats().get("x509_ca"):
        import httpx

        return httpx.create_ssl_context()
    return context


def _network_reason(exc: BaseException) -> str:
    """Why, in words, from the socket's or TLS's own error: httpx's wraps it (httpcore's too)."""
    import ssl

    cause = exc
    while (inner := cause.__cause__ or cause.__context__) is not None:
        cause = inner
    if isinstance(cause, ssl.SSLCertVerificationError):
        return f"its certificate is not trusted: {cause.verify_message or cause.reason}"
    if isinstance(cause, socket.gaierror):
        return "the host name is unknown"
    if isinstance(cause, ConnectionRefusedError):
        return "connection refused"
    return _short(str(exc).strip() or type(exc).__name__)


# ---------------------------------------------------------------- understanding it


def parse_feed(data: Any) -> _Release:
    """The newest release the feed names: ours (``{"version", "url", "notes"}``), a GitHub
    ``releases/latest`` object, or a GitHub releases list (the highest version among those that are
    neither drafts nor pre-releases: the list is in creation order, and a fix to an older line can
    come last)."""
    if isinstance(data, dict) and "version" in data:
        return _Release(_version(data["version"]), _https(data.get("url")), _notes(data.get("notes")))
    if isinstance(data, dict) and "tag_name" in data:
        if data.get("draft") or data.get("prerelease"):
            raise UpdateCheckError("the feed's release is a draft or a pre-release")
        return _github(data)
    if isinstance(data, list):
        published = [
            r
            for r in data
            if isinstance(r, dict) and "tag_name" in r and not r.get("draft") and not r.get("prerelease")
        ]
        if not published:
            raise UpdateCheckError("the feed lists no published release")
        releases: list[_Release] = []
        first_error: UpdateCheckError | None = None
        for r in published:
            try:
                releases.append(_github(r))
            except UpdateCheckError as exc:
                first_error = first_error or exc
        if not releases:
            raise first_error or UpdateCheckError("the feed lists no published release")
        return max(releases, key=lambda r: r.version)
    raise UpdateCheckError(f"the feed has none of the known shapes ({_SHAPES})")


def _github(release: dict[str, Any]) -> _Release:
    return _Release(
        _version(release.get("tag_name")), _https(release.get("html_url")), _notes(release.get("body"))
    )


def _version(value: object) -> Version:
    from packaging.version import InvalidVersion, Version

    if isinstance(value, str):
        try:
            return Version(value.strip())
        except InvalidVersion:
            pass
    if not isinstance(value, str):
        kind = {bool: "true/false", int: "a number", float: "a number", type(None): "null"}.get(
            type(value), f"a JSON {'list' if isinstance(value, list) else 'object'}"
        )
        raise UpdateCheckError(f'the feed\'s version is {kind}, not a version number such as "1.2.0"')
    raise UpdateCheckError(f"the feed's version {_short(value)!r} is not a version number")


def _https(value: object) -> str | None:
    """The release page only when it is a plain https address (no script: or http: link is shown)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if len(text) > 2000 or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in text):
        return None
    try:
        parts = urlsplit(text)
        ok = parts.scheme == "https" and bool(parts.hostname) and parts.username is None
    except ValueError:
        return None
    return text if ok else None


def _notes(value: object) -> str:
    """Release notes as plain text: control characters (a terminal's escape sequences) removed, cut."""
    if not isinstance(value, str):
        return ""
    text = value.replace("\r\n", "\n").replace("\r", "\n")
    text = "".join(ch for ch in text if ch in "\n\t" or (ord(ch) >= 32 and not 127 <= ord(ch) < 160))
    text = text.strip()
    return text if len(text) <= NOTES_MAX_CHARS else text[: NOTES_MAX_CHARS - 1].rstrip() + "…"


def _short(text: str, limit: int = 80) -> str:
    """One line, bounded: what a feed or a person sent, quoted in a message."""
    flat = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
