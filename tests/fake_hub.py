"""A small real Hugging Face Hub on loopback, for the model downloads' tests (never the internet).

It serves the part of the hub API that ``huggingface_hub`` uses for a download, with the hub's own
status codes and headers (read from huggingface_hub's source: ``hf_raise_for_status`` keys on
``X-Error-Code``; ``get_hf_file_metadata`` on ``X-Repo-Commit``, ``ETag``/``X-Linked-Etag``,
``X-Linked-Size``, ``Location``; a redirect to another host ends its metadata request):

- ``GET /api/models/{repo}[/revision/{rev}]?blobs=true``: id, commit sha, gated, siblings with size,
  git blob id and, for LFS files, ``lfs.sha256``; an unknown repo answers 401 ``RepoNotFound`` as
  the real hub does for anonymous callers, an unknown revision 404 ``RevisionNotFound``;
- ``HEAD``/``GET /{repo}/resolve/{rev}/{path}``: a file stored in git is served directly (``ETag``
  = its git blob id); an LFS file redirects (302) to ``/_cdn/{sha256}`` on ``cdn_url`` (``localhost``, another host
  name for the same server, as the hub's CDN is another host) with ``X-Linked-Etag`` and
  ``X-Linked-Size``; a gated repo answers 401 (no token) or 403 (a token without access)
  ``GatedRepo``; both honour ``Range`` (206 + ``Content-Range``).

Faults a test can switch on: ``drop_after`` (close the socket after N bytes of a file), ``throttle``
(bytes per second), ``corrupt`` (serve other bytes than the checksum the listing gives),
``on_sent`` (call a function once N bytes of a file went out). Every request is logged.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_lfs(path: str, data: bytes) -> bool:
    return path.endswith((".safetensors", ".bin")) or len(data) > 100_000


@dataclass
class FakeRepo:
    repo_id: str
    gated: bool = False
    token: str | None = None  # the token that may read a gated repo
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)

    def commit(self, files: dict[str, bytes], *refs: str) -> str:
        """Add a commit holding ``files``; point ``refs`` (default ``main``) at it."""
        sha = hashlib.sha1(repr(sorted((k, sha256(v)) for k, v in files.items())).encode()).hexdigest()
        self.commits[sha] = dict(files)
        for ref in refs or ("main",):
            self.refs[ref] = sha
        return sha

    def resolve(self, rev: str) -> str | None:
        return self.refs.get(rev) or (rev if rev in self.commits else None)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]


class FakeHub:
    """``with FakeHub() as hub:`` starts it on a free loopback port; ``hub.url`` is its endpoint."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Request] = []
        self.drop_after: dict[str, tuple[int, int]] = {}  # path -> (bytes, times)
        self.throttle: dict[str, float] = {}  # path -> bytes per second
        self.corrupt: dict[str, bytes] = {}  # path -> bytes served instead
        self.on_sent: dict[str, tuple[int, Callable[[], None]]] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.url = ""
        self.cdn_url = ""

    def repo(self, repo_id: str, **kw: object) -> FakeRepo:
        self.repos[repo_id] = FakeRepo(repo_id, **kw)  # type: ignore[arg-type]
        return self.repos[repo_id]

    def ranges(self, path: str) -> list[str | None]:
        """The ``Range`` headers of the GETs of file ``path`` (None: a whole-file GET)."""
        out = []
        for r in self.requests:
            url = urlsplit(r.path)
            if r.method == "GET" and (
                unquote(url.query) == path
                or ("/resolve/" in url.path and unquote(url.path).endswith("/" + path))
            ):
                out.append(r.headers.get("range"))
        return out

    def __enter__(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.cdn_url = f"http://localhost:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def take_drop(self, path: str) -> int | None:
        with self._lock:
            n, times = self.drop_after.get(path, (0, 0))
            if times <= 0:
                return None
            self.drop_after[path] = (n, times - 1)
            return n


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/revision/(?P<rev>[^/]+))?$")


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    # ---- dispatch -------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._handle(head=False)

    def do_HEAD(self) -> None:
        self._handle(head=True)

    def _handle(self, head: bool) -> None:
        url = urlsplit(self.path)
        path = unquote(url.path)
        self.hub.requests.append(
            Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        )
        if m := _INFO.match(path):
            return self._info(m["repo"], m["rev"] or "main")
        if m := _RESOLVE.match(path):
            return self._resolve(m["repo"], m["rev"], m["path"], head)
        if path.startswith("/_cdn/"):
            sha, file_path = path[len("/_cdn/") :], url.query
            for repo in self.hub.repos.values():
                for files in repo.commits.values():
                    for name, data in files.items():
                        if sha256(data) == sha:
                            return self._send_bytes(name, data, head, {})
            return self._error(404, "EntryNotFound", f"no blob {sha} ({file_path})")
        self._error(404, None, "not found")

    # ---- the API --------------------------------------------------------------------------------
    def _repo_or_error(self, repo_id: str, rev: str) -> tuple[FakeRepo, str] | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(401, "RepoNotFound", "Repository not found")
            return None
        commit = repo.resolve(rev)
        if commit is None:
            self._error(404, "RevisionNotFound", "Invalid rev id: " + rev)
            return None
        return repo, commit

    def _info(self, repo_id: str, rev: str) -> None:
        found = self._repo_or_error(repo_id, rev)
        if found is None:
            return
        repo, commit = found
        siblings = []
        for name, data in sorted(repo.commits[commit].items()):
            sib: dict[str, object] = {"rfilename": name, "size": len(data), "blobId": git_sha1(data)}
            if is_lfs(name, data):
                pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256(data)}\nsize {len(data)}\n"
                sib["blobId"] = git_sha1(pointer.encode())
                sib["lfs"] = {"size": len(data), "sha256": sha256(data), "pointerSize": len(pointer)}
            siblings.append(sib)
        body = json.dumps(
            {
                "_id": "x",
                "id": repo.repo_id,
                "modelId": repo.repo_id,
                "sha": commit,
                "private": False,
                "gated": "manual" if repo.gated else False,
                "disabled": False,
                "siblings": siblings,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _resolve(self, repo_id: str, rev: str, path: str, head: bool) -> None:
        found = self._repo_or_error(repo_id, rev)
        if found is None:
            return
        repo, commit = found
        if repo.gated:
            auth = self.headers.get("Authorization")
            if auth is None:
                return self._error(
                    401, "GatedRepo", "Access to model is restricted. You must be authenticated."
                )
            if auth != f"Bearer {repo.token}":
                return self._error(
                    403, "GatedRepo", "Access to model is restricted and you are not in the list."
                )
        data = repo.commits[commit].get(path)
        if data is None:
            return self._error(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": commit})
        common = {"X-Repo-Commit": commit}
        if is_lfs(path, data):
            self.send_response(302)
            for k, v in common.items():
                self.send_header(k, v)
            self.send_header("ETag", f'"{git_sha1(data)}"')
            self.send_header("X-Linked-Etag", f'"{sha256(data)}"')
            self.send_header("X-Linked-Size", str(len(data)))
            # Another host, as the hub's CDN is: huggingface_hub reads the metadata off this 302
            # and sends no token there.
            self.send_header("Location", f"{self.hub.cdn_url}/_cdn/{sha256(data)}?{path}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self._send_bytes(path, data, head, {**common, "ETag": f'"{git_sha1(data)}"'})

    # ---- bytes ----------------------------------------------------------------------------------
    def _send_bytes(self, path: str, data: bytes, head: bool, headers: dict[str, str]) -> None:
        served = self.hub.corrupt.get(path, data)
        start, status = 0, 200
        rng = self.headers.get("Range")
        if rng and (m := re.match(r"bytes=(\d+)-(\d*)$", rng.strip())):
            start, status = int(m[1]), 206
        if start > len(served):
            return self._error(416, None, "range not satisfiable")
        body = served[start:]
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(len(body)))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(served) - 1}/{len(served)}")
        self.end_headers()
        if head:
            return
        drop = self.hub.take_drop(path)
        rate = self.hub.throttle.get(path)
        hook = self.hub.on_sent.get(path)
        sent, piece = 0, 64 * 1024
        try:
            while sent < len(body):
                n = min(piece, len(body) - sent)
                if drop is not None and sent + n > drop:
                    n = drop - sent
                    if n > 0:
                        self.wfile.write(body[sent : sent + n])
                        sent += n
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)  # the peer sees the body end early
                    return
                self.wfile.write(body[sent : sent + n])
                sent += n
                if hook is not None and start + sent >= hook[0]:
                    self.hub.on_sent.pop(path, None)
                    hook[1]()
                    hook = None
                if rate:
                    time.sleep(n / rate)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _error(
        self, status: int, code: str | None, message: str, extra: dict[str, str] | None = None
    ) -> None:
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        if code:
            self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@contextmanager
def fake_hub() -> Iterator[FakeHub]:
    with FakeHub() as hub:
        yield hub
