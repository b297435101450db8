"""Where the VRAG agent's ``<search>`` goes: the in-process engine, or a ``serve-search`` URL.

Why a protocol: the agent should not care whether the index lives in this process (desktop app) or
behind HTTP (a shared search server, or the original's FastAPI service), and tests can pass any
double. Both implementations return the same small :class:`SearchHit` and raise
:class:`SearchFailed` with a message fit for the person (and the model) on any failure.

Searchers are synchronous (the engine is); the agent runs them in a worker thread.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from vrag_desktop.core.search.hit import Hit

if TYPE_CHECKING:
    from vrag_desktop.core.search.engine import SearchEngine

log = logging.getLogger(__name__)


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
    """Search through a search server: ``serve-search``, or the original VRAG engine's API.

    ``url`` may be the server root (``http://host:8001``) or the ``/search`` endpoint. The first
    search POSTs ``{"queries": [q], "top_k": k}`` (the newer original API and ours) and parses the
    ``{"results": [...]}`` shape or the legacy ``vrag_ret`` list. A server that has only the older
    original API (``GET /search?queries=q``, port 8002) refuses the POST; it is then asked with GET,
    and the searcher remembers which form worked (one probe per searcher, not per query).

    Hits are made usable here: a video record (the original sends only ``file_path``) gets a
    representative frame (its middle frame, written once into ``frame_cache`` or a temp folder) as
    its image; relative paths are read against ``server_root`` (the server's working folder as this
    machine sees it) when given. Files that are not on this machine are fetched from the server's
    ``GET /image?path=…`` (ours has it; the original has none, which gets a message saying so);
    ``fetch_images=True`` always fetches them (a server on another machine whose paths may happen
    to exist here too)."""

    def __init__(
        self,
        url: str,
        timeout: float = 30.0,
        *,
        fetch_images: bool = False,
        frame_cache: str | os.PathLike[str] | None = None,
        server_root: str | os.PathLike[str] | None = None,
    ) -> None:
        parts = urlsplit(url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"search URL must be http(s)://host[:port][/search], got {url!r}")
        path = parts.path if parts.path.endswith("/search") else parts.path + "/search"
        self.url = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        self.base = urlunsplit((parts.scheme, parts.netloc, path[: -len("/search")], "", ""))
        self.timeout = timeout
        self.local_files = not fetch_images
        self.frame_cache = Path(frame_cache) if frame_cache else Path(tempfile.gettempdir()) / FRAME_DIR
        self.server_root = Path(server_root) if server_root else None
        #: "post" or "get" once a search worked; None until then (the next search probes).
        self.mode: str | None = None
        self._frames: set[str] = set()  # frames this searcher made: always read locally
        self._texts: OrderedDict[str, str] = OrderedDict()  # text the server sent, by file path
        self._client: Any = None  # one connection pool for every request (a new client costs ~40 ms)
        self._client_lock = threading.Lock()

    def close(self) -> None:
        """Close the connection pool (a later search opens a new one)."""
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    # ------------------------------------------------------------ HTTP
    def _send(self, method: str, url: str, **kw: Any) -> Any:
        """One request; network failures become :class:`SearchFailed`, HTTP statuses do not."""
        import httpx

        with self._client_lock:
            if self._client is None:
                self._client = httpx.Client(timeout=self.timeout)
            client = self._client
        try:
            return client.request(method, url, **kw)
        except httpx.TimeoutException as exc:
            raise SearchFailed(
                f"the search server at {self.base} did not answer within {self.timeout:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise SearchFailed(f"cannot reach the search server at {self.base}: {exc}") from exc

    def _request(self, method: str, url: str, **kw: Any) -> Any:
        r = self._send(method, url, **kw)
        if r.status_code >= 400:
            raise SearchFailed(f"the search server answered {r.status_code}: {_detail(r)}")
        return r

    def _json(self, r: Any) -> Any:
        try:
            return r.json()
        except ValueError as exc:
            raise SearchFailed(
                f"the search server at {self.base} did not answer JSON (it sent {_describe(r)})"
            ) from exc

    # ------------------------------------------------------------ search
    def search(self, query: str, k: int) -> list[SearchHit]:
        if self.mode == "get":
            body = self._json(self._request("GET", self.url, params={"queries": query}))
        else:
            r = self._send("POST", self.url, json={"queries": [query], "top_k": k})
            if r.status_code < 400:
                body = self._json(r)
            elif self.mode is None and _post_refused(r):
                body = self._probe_get(query, r)
            else:
                raise SearchFailed(f"the search server answered {r.status_code}: {_detail(r)}")
        hits = self._parse(body)
        if self.mode is None:
            self.mode = "post"
        return [self._localise(h) for h in hits[:k]]

    def _probe_get(self, query: str, refused: Any) -> Any:
        """The server refused the POST: try the older original API's GET form once."""
        g = self._send("GET", self.url, params={"queries": query})
        if g.status_code >= 400:
            raise SearchFailed(
                f"the search server answered {refused.status_code}: {_detail(refused)} "
                f"(and the older GET {self.url}?queries=… form answered {g.status_code}: {_detail(g)})"
            )
        body = self._json(g)
        self._parse(body)  # remember GET only once it gave a usable answer
        self.mode = "get"
        return body

    def _parse(self, body: Any) -> list[SearchHit]:
        if body == [] or (isinstance(body, dict) and body.get("results") == []):
            raise SearchFailed(
                f"the search server at {self.base} answered an empty list where one result list per "
                "query was expected: it is not a VRAG search server, or it failed silently"
            )
        return parse_search_response(body)

    def _localise(self, hit: SearchHit) -> SearchHit:
        """Paths read against ``server_root``; a video gets a frame to show; text is remembered."""
        image, media, source = (self._path(p) for p in (hit.image, hit.media, hit.source))
        if hit.modality == "clip" and image is None and media:
            # A local video is shown by its middle frame; a remote one keeps its path, so that
            # showing it explains why it cannot be (load_image).
            image = self._frame(media) if os.path.isfile(media) else media
        if hit.text and source:
            self._texts[source] = hit.text
            self._texts.move_to_end(source)
            while len(self._texts) > MAX_TEXTS:
                self._texts.popitem(last=False)
        return replace(hit, image=image, media=media, source=source or "")

    def _path(self, path: str | None) -> str | None:
        if not path or self.server_root is None or os.path.isabs(path):
            return path
        return os.path.normpath(os.path.join(self.server_root, path))

    def _frame(self, video: str) -> str | None:
        """The cached middle frame of ``video``; None if it cannot be decoded (logged)."""
        from vrag_desktop.core.corpus.original_layout import middle_frame

        frame = middle_frame(video, self.frame_cache)
        if frame is None:
            log.warning("cannot decode a frame of %s: the hit is listed without an image", video)
            return None
        self._frames.add(frame)
        return frame

    # ------------------------------------------------------------ files
    def load_image(self, path: str) -> bytes:
        if path in self._frames:
            return _read_local(path)
        local = self.local_files and os.path.isfile(path)
        if not local and path in self._texts:  # text the server already sent with the hit
            return self._texts[path].encode("utf-8")
        if local:
            return _read_local(path)
        if Path(path).suffix.lower() in VIDEO_SUFFIXES:
            raise SearchFailed(self._not_here(path, "no server sends video frames"))
        r = self._send("GET", f"{self.base}/image", params={"path": path})
        if r.status_code >= 400:
            if _no_image_endpoint(r):
                raise SearchFailed(
                    self._not_here(
                        path, "it cannot send files: the original VRAG search server has no /image endpoint"
                    )
                )
            raise SearchFailed(f"the search server answered {r.status_code}: {_detail(r)}")
        return bytes(r.content)

    def _not_here(self, path: str, why: str) -> str:
        return (
            f"the search server at {self.base} returned the path {path!r}, which is not on this machine, "
            f"and {why}. Run the search server on this machine, or share its corpus folder with this "
            "machine so that its paths resolve here."
        )


#: Where HTTP searchers keep video frames when given no folder (shared: frames are keyed by file).
FRAME_DIR = "vrag-desktop-frames"
#: How many text records' contents a searcher keeps for :meth:`HttpSearcher.load_image`.
MAX_TEXTS = 256
VIDEO_SUFFIXES = frozenset({".mp4", ".mov", ".mkv", ".avi", ".webm", ".m4v"})


def _detail(r: Any) -> str:
    """What an error answer says: FastAPI's ``detail`` (the original puts the exception there), an
    HTML page's title, or the start of the text."""
    try:
        body = r.json()
    except ValueError:
        return _describe(r)
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if not isinstance(detail, str):
        detail = json.dumps(detail, ensure_ascii=False)
    return detail[:300]


def _describe(r: Any) -> str:
    """A non-JSON answer in a few words: its type and title or first characters."""
    ctype = (r.headers.get("content-type") or "no content type").split(";")[0].strip()
    text = r.text or ""
    if "html" in ctype or text.lstrip()[:1] == "<":
        m = re.search(r"<title[^>]*>(.*?)</title>", text, re.I | re.S)
        title = " ".join(m.group(1).split())[:120] if m else ""
        return f"an HTML page{f' titled {title!r}' if title else ''} ({ctype})"
    snippet = " ".join(text.split())[:120]
    return f"{ctype}: {snippet!r}" if snippet else f"an empty {ctype} body"


def _post_refused(r: Any) -> bool:
    """The POST form is not this server's: no such route or method (404, 405, 501, FastAPI's
    "Method Not Allowed"), or FastAPI's own list-shaped 422 for a body it does not know (ours
    answers 422 with a sentence, for a bad query, which GET would not fix)."""
    if r.status_code in (404, 405, 501):
        return True
    try:
        body = r.json()
    except ValueError:
        return False
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail == "Method Not Allowed" or (r.status_code == 422 and isinstance(detail, list))


def _no_image_endpoint(r: Any) -> bool:
    """``/image`` does not exist there (as opposed to our server's 404 for an unindexed file)."""
    if r.status_code in (405, 501):
        return True
    if r.status_code != 404:
        return False
    try:
        body = r.json()
    except ValueError:
        return True
    return not isinstance(body, dict) or body.get("detail") == "Not Found"


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
    # a video's or text's own file (the original has no other field for it)
    media = rec.get("media") or (path if kind in ("video", "text") else None)
    name = rec.get("name") or (Path(str(path)).stem if path else "")
    try:
        s = float(score)
    except (TypeError, ValueError):
        s = 0.0
    try:  # where else the server has the same content; a foreign server's oddity there is dropped
        also_in = Hit(score=0.0, name="", source="", modality="", also_in=rec.get("also_in") or ()).also_in
    except TypeError:
        also_in = ()
    content_id = rec.get("content_id")
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
        media=str(media) if media else None,
        dense_score=_number(rec.get("dense_score")),
        lexical_score=_number(rec.get("lexical_score")),
        rerank_score=_number(rec.get("rerank_score")),
        content_id=content_id if isinstance(content_id, str) and content_id else None,
        also_in=also_in,
    )


def _number(value: Any) -> float | None:
    """A finite number a server sent, else None (a missing or foreign field)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


__all__ = [
    "EngineSearcher",
    "HttpSearcher",
    "SearchFailed",
    "SearchHit",
    "Searcher",
    "parse_search_response",
]
