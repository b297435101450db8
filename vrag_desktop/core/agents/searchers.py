"""Where the VRAG agent's ``<search>`` goes: the in-process engine, or a ``serve-search`` URL.

Why a protocol: the agent should not care whether the index lives in this process (desktop app) or
behind HTTP (a shared search server, or the original's FastAPI service), and tests can pass any
double. Both implementations return the same small :class:`SearchHit` and raise
:class:`SearchFailed` with a message fit for the person (and the model) on any failure.

Searchers are synchronous (the engine is); the agent runs them in a worker thread.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from vrag_desktop.core.search.hit import Hit

if TYPE_CHECKING:
    from vrag_desktop.core.search.engine import SearchEngine


class SearchFailed(RuntimeError):
    """The search (or fetching a hit's image) did not work; the message says why."""


#: One hit, whatever the backend: the engine's own :class:`Hit`. ``image`` is a local path, or a path
#: the server knows (then :meth:`Searcher.load_image` fetches it).
SearchHit = Hit


class Searcher(Protocol):
    #: True when hit image paths are files on this machine (the agent then crops them in place);
    #: False when they are the server's paths (the agent keeps a local copy of what it fetched).
    local_files: bool

    def search(self, query: str, k: int) -> list[SearchHit]: ...

    def load_image(self, path: str) -> bytes:
        """Bytes of a hit's image (the raw the agent crops)."""
        ...


def _read_local(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SearchFailed(f"cannot read the image of a hit: {exc}") from exc


class EngineSearcher:
    """In-process search over a :class:`SearchEngine`."""

    local_files = True

    def __init__(self, engine: SearchEngine) -> None:
        self.engine = engine

    def search(self, query: str, k: int) -> list[SearchHit]:
        try:
            hits = self.engine.search(query, k)
        except Exception as exc:  # any engine failure is reported, never raised into the agent
            raise SearchFailed(f"search failed: {exc}") from exc
        return hits

    def load_image(self, path: str) -> bytes:
        return _read_local(path)


class HttpSearcher:
    """Search through ``POST {url} {"queries": [q], "top_k": k}`` (``serve-search`` or the original API).

    ``url`` may be the server root (``http://host:8001``) or the ``/search`` endpoint. Parses the
    ``{"results": [...]}`` shape and also the legacy ``vrag_ret`` list shape. Images that are not
    on this machine are fetched from the server's ``GET /image?path=…``; ``fetch_images=True`` always
    fetches them (a server on another machine whose paths may happen to exist here too)."""

    def __init__(self, url: str, timeout: float = 30.0, *, fetch_images: bool = False) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"search URL must be http(s)://host[:port][/search], got {url!r}")
        path = parts.path if parts.path.endswith("/search") else parts.path + "/search"
        self.url = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        self.base = urlunsplit((parts.scheme, parts.netloc, path[: -len("/search")], "", ""))
        self.timeout = timeout
        self.local_files = not fetch_images

    def _request(self, method: str, url: str, **kw: Any) -> Any:
        import httpx

        try:
            r = httpx.request(method, url, timeout=self.timeout, **kw)
        except httpx.TimeoutException as exc:
            raise SearchFailed(
                f"the search server at {self.base} did not answer within {self.timeout:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise SearchFailed(f"cannot reach the search server at {self.base}: {exc}") from exc
        if r.status_code >= 400:
            try:
                body = r.json()
            except ValueError:
                body = None
            detail = body.get("detail", r.text) if isinstance(body, dict) else r.text
            raise SearchFailed(f"the search server answered {r.status_code}: {str(detail)[:300]}")
        return r

    def search(self, query: str, k: int) -> list[SearchHit]:
        r = self._request("POST", self.url, json={"queries": [query], "top_k": k})
        try:
            body = r.json()
        except ValueError as exc:
            raise SearchFailed(f"the search server at {self.base} did not answer JSON") from exc
        return parse_search_response(body)[:k]

    def load_image(self, path: str) -> bytes:
        if self.local_files and os.path.isfile(path):
            return _read_local(path)
        return self._request("GET", f"{self.base}/image", params={"path": path}).content


def parse_search_response(body: Any) -> list[SearchHit]:
    """Hits of the first query from either response shape; raises :class:`SearchFailed` otherwise."""
    if isinstance(body, dict) and isinstance(body.get("results"), list):
        results = body["results"]
        if not results:
            return []
        first = results[0]
        if not isinstance(first, dict):
            raise SearchFailed("unexpected search response: 'results' items must be objects")
        scores = first.get("score") or []
        data = first.get("data") or []
        return [
            _from_record(rec, scores[i] if i < len(scores) else 0.0)
            for i, rec in enumerate(data)
            if isinstance(rec, dict)
        ]
    if isinstance(body, list):  # legacy vrag_ret: a list per query of {"idx", "image_file"}
        items = body[0] if body and isinstance(body[0], list) else body
        hits = []
        for rec in items:
            if not isinstance(rec, dict) or not rec.get("image_file"):
                raise SearchFailed("unexpected legacy search response: items need 'image_file'")
            path = str(rec["image_file"])
            hits.append(SearchHit(score=0.0, name=Path(path).stem, source=path, modality="image", image=path))
        return hits
    raise SearchFailed('unexpected search response: expected {"results": [...]} or a list of image hits')


def _from_record(rec: dict[str, Any], score: Any) -> SearchHit:
    kind = rec.get("type")
    modality = rec.get("modality") or {"image": "image", "video": "clip", "text": "text"}.get(
        str(kind), "text"
    )
    path = rec.get("file_path")
    image = rec.get("image") or (path if kind == "image" else None)
    name = rec.get("name") or (Path(str(path)).stem if path else "")
    try:
        s = float(score)
    except (TypeError, ValueError):
        s = 0.0
    return SearchHit(
        score=s,
        name=str(name),
        source=str(rec.get("source") or path or ""),
        modality=str(modality),
        image=str(image) if image else None,
        page=rec.get("page"),
        clip=rec.get("clip"),
        t_start=rec.get("t_start"),
        t_end=rec.get("t_end"),
        corpus=str(rec.get("corpus") or ""),
        item_id=rec.get("item_id"),
        text=str(rec.get("content") or ""),
    )


__all__ = ["EngineSearcher", "HttpSearcher", "SearchFailed", "SearchHit", "Searcher", "parse_search_response"]
