"""Who may talk to the search server, and how much they may send: the checks in front of every route.

A web page on another site can make a browser send requests to 127.0.0.1 by rebinding its own
domain there (DNS rebinding); the browser then still sends that domain as ``Host``. So the
``Host`` header must name this machine. A bearer token, when set, is required on every request.
Bodies and query strings are bounded before they are read, so a huge or endless request costs the
server no memory. Nothing here logs a header.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The environment variable that carries the token (so it never shows in ``ps``).
TOKEN_ENV = "VRAG_SEARCH_TOKEN"
#: Host names that always mean this machine (besides loopback addresses: 127.x, ::1).
LOOPBACK_NAMES = frozenset({"localhost"})


def _host_name(value: str) -> str | None:
    """The host of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), lower-case, or None."""
    v = value.strip().lower()
    if v.startswith("["):
        end = v.find("]")
        rest = v[end + 1 :]
        if end < 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return v[1:end] or None
    if v.count(":") > 1:  # a bare IPv6 address: not a valid Host, but unambiguous
        return v
    name, sep, port = v.partition(":")
    if sep and not port.isdigit():
        return None
    return name.rstrip(".") or None


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def is_loopback(name: str) -> bool:
    """``name`` (a host, without port or brackets) always means this machine."""
    name = name.strip("[]").lower().rstrip(".")
    if name in LOOPBACK_NAMES:
        return True
    addr = _ip(name)
    return addr is not None and addr.is_loopback


def is_wildcard(name: str) -> bool:
    """``name`` is a bind to every address of the machine (``0.0.0.0``, ``::``)."""
    addr = _ip(name.strip("[]"))
    return name == "" or (addr is not None and addr.is_unspecified)


@dataclass(frozen=True)
class Access:
    """Who may ask: requests addressed (``Host``) to this machine by a name it answers to, with the
    token when one is set.

    A web page on another site that rebinds its domain to this machine still sends that domain as
    ``Host``, so loopback names and the bind address are accepted, and names given in
    ``allowed_hosts`` (``*`` accepts any). When bound to a non-loopback address any IP address is
    accepted as ``Host`` too: a browser sends one only for a page served from that address.
    """

    bind_host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()
    token: str | None = None

    def host_problem(self, header: str | None) -> str | None:
        """Why a request with this ``Host`` header is refused (403), or None."""
        if header is None:
            return "the request has no Host header; send one (localhost or 127.0.0.1)"
        name = _host_name(header)
        if name is None:
            return f"the Host header {header!r} is not a host name"
        bind = self.bind_host.strip("[]").lower().rstrip(".")
        allowed = {h.strip("[]").lower().rstrip(".") for h in self.allowed_hosts}
        if is_loopback(name) or name == bind or name in allowed or "*" in allowed:
            return None
        if not is_loopback(bind) and _ip(name) is not None:
            return None
        return (
            f"this search server does not answer requests addressed to '{name}' (the Host header); "
            "it answers to localhost, 127.0.0.1 and [::1]"
            + ("" if is_loopback(bind) or is_wildcard(bind) else f" and {bind}")
            + (f" and {', '.join(sorted(allowed))}" if allowed else "")
            + f". If you reach it under this name on purpose, start it with --allow-host {name}"
        )

    def token_problem(self, header: bytes | None) -> str | None:
        """Why a request with this ``Authorization`` header is refused (401), or None. Constant time."""
        if not self.token:
            return None
        scheme, _, given = (header or b"").strip().partition(b" ")
        ok = hmac.compare_digest(given.strip(), self.token.encode("utf-8", "surrogateescape"))
        if scheme.lower() == b"bearer" and ok:
            return None
        return (
            "this search server needs its token: send the header 'Authorization: Bearer <token>' "
            f"(the token serve-search was given with --token or {TOKEN_ENV})"
        )


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


async def _refuse(send: Send, status: int, detail: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"detail": detail}).encode("utf-8")
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


class _TooLarge(Exception):
    pass


@dataclass(frozen=True)
class Limits:
    """What one request may send (the server's constants say how much and what to do instead)."""

    body_bytes: int
    query_string_bytes: int
    body_advice: str = ""  # appended to the 413 message: how to send less


class Guard:
    """ASGI middleware in front of every route: ``Host`` and token checked, then the query string
    and body bounded. The body is read here, at most ``limits.body_bytes`` of it (a bigger one is
    refused with 413 as soon as it says so or sends more, never buffered), and handed on."""

    def __init__(self, app: Any, access: Access, limits: Limits) -> None:
        self.app = app
        self.access = access
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websocket routes: refuse before anything else
            await send({"type": "websocket.close", "code": 1008})
            return
        problem = self._refusal(scope)
        if problem is not None:
            await _refuse(send, *problem)
            return
        try:
            body = await self._read_body(receive)
        except _TooLarge:
            await _refuse(send, *self._too_large())
            return
        if body is None:  # the client went away
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    def _refusal(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        """What to answer instead of serving, from the request line and headers alone."""
        headers: dict[bytes, list[bytes]] = {}
        for k, v in scope.get("headers", []):
            headers.setdefault(k.lower(), []).append(v)
        hosts = headers.get(b"host", [])
        problem = (
            "the request has more than one Host header"
            if len(hosts) > 1
            else self.access.host_problem(hosts[0].decode("latin-1") if hosts else None)
        )
        if problem:
            return 403, problem, []
        problem = self.access.token_problem(next(iter(headers.get(b"authorization", [])), None))
        if problem:
            return 401, problem, [(b"www-authenticate", b'Bearer realm="vrag-search"')]
        limit = self.limits.query_string_bytes
        if len(scope.get("query_string", b"")) > limit:
            return (
                414,
                f"the URL's query is over {limit // 1024} KiB; send long queries with POST /search",
                [],
            )
        declared = next(iter(headers.get(b"content-length", [])), b"").strip()
        if declared and not declared.isdigit():
            return 400, "the Content-Length header is not a number", [(b"connection", b"close")]
        if declared and int(declared) > self.limits.body_bytes:
            return self._too_large()
        return None

    def _too_large(self) -> tuple[int, str, list[tuple[bytes, bytes]]]:
        # "Connection: close": the rest of the body is never read, so the connection cannot be reused.
        detail = f"the request body is over {self.limits.body_bytes // 1024} KiB"
        if self.limits.body_advice:
            detail += f"; {self.limits.body_advice}"
        return 413, detail, [(b"connection", b"close")]

    async def _read_body(self, receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.body_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


__all__ = ["LOOPBACK_NAMES", "TOKEN_ENV", "Access", "Guard", "Limits", "is_loopback", "is_wildcard"]
