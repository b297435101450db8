"""Search over one or more corpora: typed hits, optional BM25 fusion, the HTTP server.

``Hit`` (:mod:`.hit`) is light; the engine (numpy, the corpus store) loads only when asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vrag_desktop.core.search.hit import Hit

if TYPE_CHECKING:
    from vrag_desktop.core.search.engine import SearchEngine, SearchError

__all__ = ["Hit", "SearchEngine", "SearchError"]


def __getattr__(name: str) -> Any:
    if name in ("SearchEngine", "SearchError"):
        from vrag_desktop.core.search import engine

        return getattr(engine, name)
    raise AttributeError(name)
