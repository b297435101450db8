"""HTTP search API, compatible with the original VRAG search engine's clients.

- ``POST /search`` ``{"queries": [...], "top_k": 3, "vrag_ret": false}`` →
  ``{"results": [{"score": [...], "indice": [...], "data": [record, ...]}, ...]}`` (VimRAG shape), or
  with ``vrag_ret: true`` a list per query of ``[{"idx": rank, "image_file": path}, ...]`` over image
  hits only (the legacy VRAG shape).
- ``GET /search?queries=a&queries=b[&top_k=10]`` → the legacy list-of-lists shape (the RL rollout's call).
- ``GET /health`` → status, corpora, vector count, embedder.
- ``GET /image?path=…`` and ``GET /items/{corpus}/{item_id}/image`` → file bytes, only for files the
  index knows that lie inside the corpus once links are resolved (:mod:`.files`).

Records in ``data`` carry the original fields (``type`` image|video|text, ``file_path``, ``content``
for text) plus ours (``source``, ``page``, ``clip``, ``t_start``, ``t_end``, ``image``, ``name``…,
``dense_score``/``lexical_score``/``rerank_score`` beside the ranking ``score``, ``content_id`` and ``also_in``, the
other corpora holding the same file, and ``image_url``, an ASCII path to fetch the image). A file
name that is not valid UTF-8 is shown with U+FFFD in its place (JSON cannot carry it); its
``image_url`` still fetches the image.

The server trusts no request (:class:`~.guard.Guard`, in front of every route): the ``Host`` header must name
this machine (a web page that rebinds its domain to 127.0.0.1 is refused), a bearer token is
required when one is set, and bodies, queries, batches and ``top_k`` are bounded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vrag_desktop._version import __version__
from vrag_desktop.core.search.engine import SearchEngine, SearchError
from vrag_desktop.core.search.files import MAX_ITEM_ID, FilesError, Served, ServedFiles
from vrag_desktop.core.search.guard import TOKEN_ENV, Access, Guard, Limits, is_loopback
from vrag_desktop.core.search.hit import Hit

#: A request body (JSON); room for a full batch of ordinary queries, refused before it is read past this.
MAX_BODY_BYTES = 1024 * 1024
#: The query string of a request (the GET form carries its queries there).
MAX_QUERY_STRING_BYTES = 32 * 1024
#: The request line and headers together (uvicorn's parser buffers them; its default is 16 KiB).
MAX_HEAD_BYTES = MAX_QUERY_STRING_BYTES + 16 * 1024
#: One query: the original's queries are short sentences; an embedder reads a few hundred tokens.
MAX_QUERY_CHARS = 2000
#: Queries in one request (the RL rollout sends a batch of short ones).
MAX_QUERIES = 256
#: Hits per query (1 to about 20 in practice; the app offers up to 50).
MAX_TOP_K = 100
LEGACY_TOP_K = 10
#: Connections served at once; more are answered 503 instead of each holding memory.
MAX_CONNECTIONS = 128
#: The hit's fields every record carries beside the original's (same names as on :class:`Hit`).
OUR_FIELDS = (
    "name",
    "source",
    "modality",
    "page",
    "clip",
    "t_start",
    "t_end",
    "image",
    "corpus",
    "item_id",
    "dense_score",
    "lexical_score",
    "rerank_score",
    "content_id",
)

POST_HINT = 'expected JSON like {"queries": ["your question"], "top_k": 3, "vrag_ret": false}'
GET_HINT = "expected /search?queries=your+question[&queries=…][&top_k=10]"


class SearchRequest(BaseModel):
    """Body of ``POST /search`` (the original's fields; a single string query is accepted too)."""

    model_config = ConfigDict(extra="ignore")
    queries: list[str] = Field(..., min_length=1)
    top_k: int = Field(3, ge=1, le=MAX_TOP_K)
    vrag_ret: bool = False

    @field_validator("queries", mode="before")
    @classmethod
    def _one_query_is_a_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


# ---------------------------------------------------------------- records
def safe_text(s: str) -> str:
    """``s`` as valid Unicode: bytes of a non-UTF-8 file name (surrogate escapes) become U+FFFD,
    any other lone surrogate ``?`` — JSON (and so every client) can carry only real text."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        pass
    try:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return s.encode("utf-8", "replace").decode("utf-8")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, float) and not math.isfinite(value):
        return 0.0
    return value


def image_url(hit: Hit) -> str | None:
    """An ASCII URL (relative to the server) that fetches the hit's image whatever its file name."""
    if not hit.image or hit.item_id is None or not hit.corpus:
        return None
    corpus = quote(safe_text(hit.corpus).encode("utf-8"), safe="")
    return f"/items/{corpus}/{hit.item_id}/image"


def record(hit: Hit) -> dict[str, Any]:
    """A hit as the original engine's ``file_data_list`` record, with our fields added."""
    if hit.modality in ("page", "image"):
        rec: dict[str, Any] = {"type": "image", "file_path": hit.image}
    elif hit.modality == "clip":
        rec = {"type": "video", "file_path": hit.media}
    else:
        rec = {"type": "text", "file_path": hit.media or hit.source, "content": hit.text}
    rec.update({name: getattr(hit, name) for name in OUR_FIELDS})
    rec["image_url"] = image_url(hit)
    out = {k: _clean(v) for k, v in rec.items()}
    # the same content in other corpora (the engine gives it once): where else it is
    out["also_in"] = [
        {"corpus": safe_text(x.corpus), "source": safe_text(x.source), "item_id": x.item_id}
        for x in hit.also_in
    ]
    return out


def legacy_list(hits: list[Hit]) -> list[dict[str, Any]]:
    """Image hits only, ranked from 0: the shape the VRAG demo and RL rollout parse."""
    images = [h for h in hits if h.modality in ("page", "image") and h.image]
    return [{"idx": i, "image_file": safe_text(h.image or "")} for i, h in enumerate(images)]


def results(hits_per_query: list[list[Hit]]) -> dict[str, Any]:
    """The VimRAG shape of ``POST /search``."""
    return {
        "results": [
            {
                "score": [_clean(float(h.score)) for h in hits],
                "indice": [h.item_id for h in hits],
                "data": [record(h) for h in hits],
            }
            for hits in hits_per_query
        ]
    }


def query_problem(queries: Sequence[str]) -> str | None:
    """Why this batch of queries is refused (422), or None."""
    if len(queries) > MAX_QUERIES:
        return f"{len(queries)} queries in one request; at most {MAX_QUERIES} (split the batch)"
    for i, q in enumerate(queries, 1):
        where = f"query {i}" if len(queries) > 1 else "the query"
        if len(q) > MAX_QUERY_CHARS:
            return (
                f"{where} is {len(q)} characters long; at most {MAX_QUERY_CHARS} (search with a shorter text)"
            )
        try:
            q.encode("utf-8")
        except UnicodeEncodeError as exc:
            return (
                f"{where} is not valid text: character {exc.start + 1} is a lone surrogate "
                f"(U+{ord(q[exc.start]):04X}), which is no Unicode character; send UTF-8 text"
            )
        if not q.strip():
            return "queries must not be empty strings"
    return None


def uvicorn_options() -> dict[str, Any]:
    """uvicorn settings that bound what one connection and all of them together can hold."""
    return {"h11_max_incomplete_event_size": MAX_HEAD_BYTES, "limit_concurrency": MAX_CONNECTIONS}


# ---------------------------------------------------------------- app
def create_app(
    engine: SearchEngine,
    *,
    bind_host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
    token: str | None = None,
) -> Any:
    """The FastAPI app serving ``engine`` (fastapi is imported here, not at module import).

    ``bind_host`` is the address the server listens on (its name is accepted as ``Host``);
    ``allowed_hosts`` more names to accept; ``token`` the bearer token every request must carry."""
    from fastapi import FastAPI, HTTPException, Query, Request
    from fastapi import Path as PathParam
    from fastapi.concurrency import run_in_threadpool
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, JSONResponse
    from pydantic import ValidationError

    app = FastAPI(title="VRAG Desktop search", version=__version__)
    limits = Limits(
        body_bytes=MAX_BODY_BYTES,
        query_string_bytes=MAX_QUERY_STRING_BYTES,
        body_advice=f"send at most {MAX_QUERIES} queries of at most {MAX_QUERY_CHARS} characters per request",
    )
    access = Access(bind_host=bind_host, allowed_hosts=tuple(allowed_hosts), token=token or None)
    app.add_middleware(Guard, access=access, limits=limits)
    files = ServedFiles(engine.corpora)

    def fail(status: int, detail: str) -> HTTPException:
        return HTTPException(status_code=status, detail=safe_text(detail))

    def hint(request: Request) -> str:
        if request.url.path.startswith("/items/"):
            return "expected /items/{corpus}/{item_id}/image with a whole-number item id"
        if request.url.path.startswith("/image"):
            return "expected /image?path=<a file_path or image from a search result>"
        return POST_HINT if request.method == "POST" else GET_HINT

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {err.get('msg')}")
        detail = "; ".join(problems) + f" ({hint(request)})"
        return JSONResponse(status_code=422, content={"detail": safe_text(detail)})

    def run(queries: list[str], top_k: int) -> list[list[Hit]]:
        problem = query_problem(queries)
        if problem:
            raise fail(422, problem)
        try:
            return engine.search_batch(queries, top_k)
        except SearchError as exc:
            raise fail(400, str(exc)) from exc
        except Exception as exc:  # the original answered 500 with the message; so do we
            raise fail(500, f"search failed: {exc}") from exc

    request_schema = {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": SearchRequest.model_json_schema()}},
        }
    }

    async def post_search(request: Request) -> Any:
        """The body is parsed here, not by FastAPI: text that is not UTF-8 or not JSON is a 422
        with a message (FastAPI answers 400 to the first), and nesting or huge numbers cannot crash it."""
        raw = await request.body()  # bounded by the Guard
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise fail(
                422, f"the request body is not valid UTF-8 (byte {exc.start + 1}); {POST_HINT}"
            ) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise fail(
                422, f"the request body is not JSON ({exc.msg}, line {exc.lineno}); {POST_HINT}"
            ) from exc
        except RecursionError as exc:
            raise fail(422, f"the request body's JSON is nested too deeply; {POST_HINT}") from exc
        except ValueError as exc:  # an integer of thousands of digits
            raise fail(422, f"the request body is not usable JSON ({exc}); {POST_HINT}") from exc
        try:
            req = SearchRequest.model_validate(data)
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_input=False)) from exc
        hits = await run_in_threadpool(run, req.queries, req.top_k)
        return JSONResponse([legacy_list(h) for h in hits] if req.vrag_ret else results(hits))

    # FastAPI reads annotations by name from the module's globals; Request is imported here (lazily).
    post_search.__annotations__["request"] = Request
    app.add_api_route("/search", post_search, methods=["POST"], openapi_extra=request_schema)

    @app.get("/search")
    def get_search(
        queries: list[str] = Query(..., min_length=1),  # noqa: B008
        top_k: int = Query(LEGACY_TOP_K, ge=1, le=MAX_TOP_K),
    ) -> Any:
        return JSONResponse([legacy_list(hits) for hits in run(queries, top_k)])

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "embedder": engine.embedder.info.id,
            "reranker": engine.reranker,  # None: the fused order (a reranker that failed is in problems)
            "corpora": [safe_text(c.name) for c in engine.corpora],
            "vectors": engine.total_vectors(),
            # corpora left out (unreadable) or searched without a damaged index file, in words
            "problems": [safe_text(p) for p in engine.problems],
        }

    def send(lookup: Callable[[], Served]) -> Any:
        try:
            found = lookup()
        except FilesError as exc:
            raise fail(503, str(exc)) from exc
        if found.path is None:
            raise fail(found.status, found.why)
        return FileResponse(found.path)

    @app.get("/image")
    def image(path: str) -> Any:
        return send(lambda: files.by_path(path))

    @app.get("/items/{corpus}/{item_id}/image")
    def item_image(corpus: str, item_id: int = PathParam(..., ge=0, le=MAX_ITEM_ID)) -> Any:
        return send(lambda: files.item_image(corpus, item_id))

    return app


__all__ = [
    "MAX_BODY_BYTES",
    "MAX_QUERIES",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_STRING_BYTES",
    "MAX_TOP_K",
    "TOKEN_ENV",
    "create_app",
    "is_loopback",
    "legacy_list",
    "record",
    "safe_text",
    "uvicorn_options",
]
