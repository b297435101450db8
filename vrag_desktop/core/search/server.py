"""HTTP search API, compatible with the original VRAG search engine's clients.

- ``POST /search`` ``{"queries": [...], "top_k": 3, "vrag_ret": false}`` →
  ``{"results": [{"score": [...], "indice": [...], "data": [record, ...]}, ...]}`` (VimRAG shape), or
  with ``vrag_ret: true`` a list per query of ``[{"idx": rank, "image_file": path}, ...]`` over image
  hits only (the legacy VRAG shape).
- ``GET /search?queries=a&queries=b[&top_k=10]`` → the legacy list-of-lists shape (the RL rollout's call).
- ``GET /health`` → status, corpora, vector count, embedder.
- ``GET /image?path=…`` and ``GET /items/{corpus}/{item_id}/image`` → image bytes, only for files the
  index knows (never an arbitrary path on the machine).

Records in ``data`` carry the original fields (``type`` image|video|text, ``file_path``, ``content``
for text) plus ours (``source``, ``page``, ``clip``, ``t_start``, ``t_end``, ``image``, ``name``…).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vrag_desktop._version import __version__
from vrag_desktop.core.search.engine import SearchEngine, SearchError
from vrag_desktop.core.search.hit import Hit

MAX_QUERIES = 256
MAX_TOP_K = 1000
LEGACY_TOP_K = 10
#: The hit's fields every record carries beside the original's (same names as on :class:`Hit`).
OUR_FIELDS = ("name", "source", "modality", "page", "clip", "t_start", "t_end", "image", "corpus", "item_id")


class SearchRequest(BaseModel):
    """Body of ``POST /search`` (the original's fields; a single string query is accepted too)."""

    model_config = ConfigDict(extra="ignore")
    queries: list[str] = Field(..., min_length=1, max_length=MAX_QUERIES)
    top_k: int = Field(3, ge=1, le=MAX_TOP_K)
    vrag_ret: bool = False

    @field_validator("queries", mode="before")
    @classmethod
    def _one_query_is_a_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v


def record(hit: Hit) -> dict[str, Any]:
    """A hit as the original engine's ``file_data_list`` record, with our fields added."""
    if hit.modality in ("page", "image"):
        rec: dict[str, Any] = {"type": "image", "file_path": hit.image}
    elif hit.modality == "clip":
        rec = {"type": "video", "file_path": hit.media}
    else:
        rec = {"type": "text", "file_path": hit.media or hit.source, "content": hit.text}
    rec.update({name: getattr(hit, name) for name in OUR_FIELDS})
    return rec


def legacy_list(hits: list[Hit]) -> list[dict[str, Any]]:
    """Image hits only, ranked from 0: the shape the VRAG demo and RL rollout parse."""
    images = [h for h in hits if h.modality in ("page", "image") and h.image]
    return [{"idx": i, "image_file": h.image} for i, h in enumerate(images)]


def create_app(engine: SearchEngine) -> Any:
    """The FastAPI app serving ``engine`` (fastapi is imported here, not at module import)."""
    from fastapi import FastAPI, HTTPException, Query, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, JSONResponse

    app = FastAPI(title="VRAG Desktop search", version=__version__)
    known: dict[str, set[str]] = {}

    def known_files() -> set[str]:
        if "files" not in known:
            known["files"] = {os.path.realpath(p) for p in engine.known_files()}
        return known["files"]

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            problems.append(f"{where}: {err.get('msg')}")
        hint = (
            'expected JSON like {"queries": ["your question"], "top_k": 3, "vrag_ret": false}'
            if request.method == "POST"
            else "expected /search?queries=your+question[&queries=…][&top_k=10]"
        )
        return JSONResponse(status_code=422, content={"detail": "; ".join(problems) + f" ({hint})"})

    def run(queries: list[str], top_k: int) -> list[list[Hit]]:
        if any(not q.strip() for q in queries):
            raise HTTPException(status_code=422, detail="queries must not be empty strings")
        try:
            return engine.search_batch(queries, top_k)
        except SearchError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except Exception as exc:  # the original answered 500 with the message; so do we
            raise HTTPException(status_code=500, detail=f"search failed: {exc}") from exc

    @app.post("/search")
    def post_search(req: SearchRequest) -> Any:
        results = run(req.queries, req.top_k)
        if req.vrag_ret:
            return [legacy_list(hits) for hits in results]
        return {
            "results": [
                {
                    "score": [h.score for h in hits],
                    "indice": [h.item_id for h in hits],
                    "data": [record(h) for h in hits],
                }
                for hits in results
            ]
        }

    @app.get("/search")
    def get_search(
        queries: list[str] = Query(..., min_length=1, max_length=MAX_QUERIES),  # noqa: B008
        top_k: int = Query(LEGACY_TOP_K, ge=1, le=MAX_TOP_K),
    ) -> Any:
        return [legacy_list(hits) for hits in run(queries, top_k)]

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "embedder": engine.embedder.info.id,
            "corpora": [c.name for c in engine.corpora],
            "vectors": engine.total_vectors(),
        }

    @app.get("/image")
    def image(path: str) -> Any:
        real = os.path.realpath(path)
        if real not in known_files() or not os.path.isfile(real):
            raise HTTPException(status_code=404, detail="no such file in the index")
        return FileResponse(real)

    @app.get("/items/{corpus}/{item_id}/image")
    def item_image(corpus: str, item_id: int) -> Any:
        for c in engine.corpora:
            if c.name == corpus:
                row = c.manifest.item(item_id)
                if row is None or not row.image_path or not os.path.isfile(row.image_path):
                    break
                return FileResponse(row.image_path)
        raise HTTPException(status_code=404, detail=f"no image for item {item_id} in corpus '{corpus}'")

    return app
