"""A release feed on loopback for the update check's tests: a real HTTP server in a thread that
answers each path as told (JSON, any status and body, a redirect, a hang, a trickle) and counts
every request it gets, so a test can show that none was made."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HANG, TRICKLE = "hang", "trickle"


class FeedServer:
    """``with FeedServer() as feed: feed.json("/f", {...}); check(feed.url("/f"))``."""

    def __init__(self, tls: tuple[str, str] | None = None) -> None:
        """``tls``: (certificate file, key file) to serve https instead of http."""
        self.tls = tls
        self.routes: dict[str, Any] = {}
        self.requests: list[str] = []
        self.release = threading.Event()  # set when the server stops: hanging handlers end
        self.waiting = threading.Event()  # a request reached a hanging route
        self._server: ThreadingHTTPServer | None = None

    # ---- what each path answers
    def json(self, path: str, data: Any) -> str:
        return self.raw(path, 200, json.dumps(data).encode(), {"Content-Type": "application/json"})

    def raw(self, path: str, status: int, body: bytes, headers: dict[str, str] | None = None) -> str:
        """``headers`` without Content-Length: the body is sent whole and the connection closed, so
        only its end says how long it was."""
        self.routes[path] = (
            status,
            headers if headers is not None else {"Content-Length": str(len(body))},
            body,
        )
        return self.url(path)

    def hang(self, path: str, then: Any = None) -> str:
        """Say nothing until :attr:`release` is set, then answer ``then`` as JSON (if given)."""
        self.routes[path] = (HANG, then)
        return self.url(path)

    def trickle(self, path: str, *, headers: bool = False) -> str:
        """Headers at once, then a space every 50 ms, forever (``headers``: a header line every 50 ms,
        forever): never idle long enough for a per-read timeout, so only a deadline for the whole
        check ends it."""
        self.routes[path] = (TRICKLE, headers)
        return self.url(path)

    def url(self, path: str) -> str:
        assert self._server is not None, "start the server first"
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}{path}"

    # ---- life
    def __enter__(self) -> FeedServer:
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_GET(self) -> None:
                feed.requests.append(self.path)
                route = feed.routes.get(self.path)
                if route is None:
                    self.send_error(404, "Not Found")
                elif route[0] == HANG:
                    feed.waiting.set()
                    feed.release.wait(120)
                    if route[1] is not None and not feed._stopping:
                        body = json.dumps(route[1]).encode()
                        self._send(200, {"Content-Length": str(len(body))}, body)
                elif route[0] == TRICKLE:
                    self.send_response(200)
                    if not route[1]:
                        self.send_header("Content-Type", "application/json")
                        self.end_headers()
                    else:
                        self.flush_headers()
                    with contextlib.suppress(OSError):  # the client cut it: what the test wants
                        n = 0
                        while not feed.release.wait(0.05):
                            n += 1
                            self.wfile.write(f"X-Slow-{n}: 1\r\n".encode() if route[1] else b" ")
                            self.wfile.flush()
                else:
                    self._send(*route)

            def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                with contextlib.suppress(OSError):  # the client stopped reading (an oversize body)
                    self.wfile.write(body)

        self._stopping = False
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.tls:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*self.tls)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(target=self._server.serve_forever, name="feed-server", daemon=True).start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stopping = True
        self.release.set()
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def wait_for_request(self, timeout_s: float = 60) -> None:
        """Until a request reached a hanging route (the test then knows the check is under way)."""
        assert self.waiting.wait(timeout_s), "no request reached the feed"


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def self_signed(folder: Path) -> tuple[str, str]:
    """A certificate for 127.0.0.1 that no one trusts unless told to: (certificate file, key file)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "vrag feed test")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "feed-cert.pem", folder / "feed-key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return str(cert_file), str(key_file)
