"""A stand-in for the original VRAG search server: real HTTP on 127.0.0.1, the original's contracts only.

Why: :class:`~vrag_desktop.core.agents.searchers.HttpSearcher` must work against the servers VRAG
users already run, which differ from ours (reference §2.4): the older API answers only
``GET /search?queries=a&queries=b`` with ``[[{"idx", "image_file"}, ...], ...]`` (top 10, image hits);
the newer one only ``POST /search {"queries", "top_k", "vrag_ret"}`` with ``{"results": [{"score",
"indice", "data"}]}`` or, with ``vrag_ret``, the list shape over image hits. Neither has ``/image``
or ``/health``; like FastAPI, a wrong method is 405 ``{"detail": "Method Not Allowed"}`` and an
unknown path 404 ``{"detail": "Not Found"}``.

Records are the original's ``file_data_list`` records (``type``, ``file_path``, ``content``) plus a
``caption`` only this double reads: ranking is the number of query words found in the caption
(ties keep record order), a deterministic stand-in for the embedding search.

``fault`` makes every ``/search`` answer fail the way real servers do: ``{"status": 500, "body":
{"detail": "CUDA out of memory"}}``, an HTML page (``"body": "<html>…", "content_type":
"text/html"``), a truncated JSON text, an empty list … Requests are recorded in ``requests`` as
``(method, path)`` pairs.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

GET_TOP_K = 10  # the older API's fixed top-k


class OriginalSearchServer:
    """``api="get"``: the older GET-only API. ``api="post"``: the newer POST-only API."""

    def __init__(
        self,
        records: list[dict[str, Any]],
        *,
        api: str = "get",
        fault: dict[str, Any] | None = None,
        wrong_method: tuple[int, Any] = (405, {"detail": "Method Not Allowed"}),
    ) -> None:
        """``wrong_method``: the answer to the method this API lacks (FastAPI's 405 by default; a
        proxy or another framework may answer 404, 501, or a 422 for a body it does not know)."""
        if api not in ("get", "post"):
            raise ValueError("api must be 'get' or 'post'")
        self.records = records
        self.api = api
        self.fault = fault
        self.wrong_method = wrong_method
        self.requests: list[tuple[str, str]] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle
    def __enter__(self) -> OriginalSearchServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                owner._handle(self, "GET")

            def do_POST(self) -> None:
                owner._handle(self, "POST")

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._httpd is not None and self._thread is not None
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    # ---- search (the double's stand-in for the embedding model)
    def rank(self, query: str, top_k: int) -> list[tuple[float, int]]:
        words = set(re.findall(r"\w+", query.lower()))
        scored = []
        for i, rec in enumerate(self.records):
            caption = set(re.findall(r"\w+", str(rec.get("caption", "")).lower()))
            scored.append((len(words & caption) / max(len(words), 1), i))
        scored.sort(key=lambda t: (-t[0], t[1]))
        return scored[: min(top_k, len(self.records))]

    def public(self, i: int) -> dict[str, Any]:
        return {k: v for k, v in self.records[i].items() if k != "caption"}

    def legacy(self, query: str, top_k: int) -> list[dict[str, Any]]:
        images = [i for _, i in self.rank(query, len(self.records)) if self.records[i]["type"] == "image"]
        return [{"idx": n, "image_file": self.records[i]["file_path"]} for n, i in enumerate(images[:top_k])]

    # ---- HTTP
    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(h.path)
        self.requests.append((method, parts.path))
        body = b""
        if method == "POST":
            body = h.rfile.read(int(h.headers.get("content-length") or 0))
        if parts.path != "/search":
            return self._send(h, 404, {"detail": "Not Found"})
        if (method == "GET") != (self.api == "get"):
            return self._send(h, *self.wrong_method)
        if self.fault is not None:
            f = self.fault
            return self._send(h, int(f.get("status", 200)), f["body"], f.get("content_type"))
        if method == "GET":
            queries = parse_qs(parts.query).get("queries")
            if not queries:
                return self._send(
                    h, 422, {"detail": [{"loc": ["query", "queries"], "msg": "field required"}]}
                )
            return self._send(h, 200, [self.legacy(q, GET_TOP_K) for q in queries])
        try:
            req = json.loads(body)
            queries, top_k = list(req["queries"]), int(req.get("top_k", 3))
        except (ValueError, KeyError, TypeError):
            return self._send(h, 422, {"detail": [{"loc": ["body"], "msg": "invalid request"}]})
        if req.get("vrag_ret"):
            return self._send(h, 200, [self.legacy(q, top_k) for q in queries])
        results = []
        for q in queries:
            ranked = self.rank(q, top_k)
            results.append(
                {
                    "score": [s for s, _ in ranked],
                    "indice": [i for _, i in ranked],
                    "data": [self.public(i) for _, i in ranked],
                }
            )
        return self._send(h, 200, {"results": results})

    @staticmethod
    def _send(h: BaseHTTPRequestHandler, status: int, body: Any, content_type: str | None = None) -> None:
        if isinstance(body, str | bytes):
            data = body.encode() if isinstance(body, str) else body
            ctype = content_type or "text/plain; charset=utf-8"
        else:
            data = json.dumps(body).encode()
            ctype = content_type or "application/json"
        h.send_response(status)
        h.send_header("content-type", ctype)
        h.send_header("content-length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
