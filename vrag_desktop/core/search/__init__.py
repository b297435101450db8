"""Search over one or more corpora: typed hits, optional BM25 fusion, the HTTP server."""

from vrag_desktop.core.search.engine import Hit, SearchEngine, SearchError

__all__ = ["Hit", "SearchEngine", "SearchError"]
