"""The search settings every entry point shares: ``<data>/config/search.json``.

Why a file with the data: ``vrag-desktop search``, ``serve-search``, ``eval retrieval``, the agents
and the app must rank a query alike, so what changes the ranking (the reranker) is read where each
of them builds its engine — :class:`~vrag_desktop.core.search.engine.SearchEngine` — from the data
directory they share (docs/formats.md, "Where a setting lives"). Standard library only: the cold
``vrag-desktop search`` reads it on every call.

Searching is reading: a damaged file is never moved or rewritten here; the search runs without a
reranker and says why (:attr:`SearchSettings.problem`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

SETTINGS_FILE = "search.json"
#: How many of the fused candidates a reranker reorders (issue 33: top-50 within the latency budget).
RERANK_TOP = 50
MAX_RERANK_TOP = 200


@dataclass(frozen=True)
class SearchSettings:
    """``reranker``: a model id (``owner/name`` in the models folder) or a model folder; None: off.
    ``problem``: why the file could not be used (then the defaults are), for the search to say."""

    reranker: str | None = None
    rerank_top: int = RERANK_TOP
    problem: str | None = None


def settings_path(data_dir: str | os.PathLike[str]) -> Path:
    return Path(data_dir) / "config" / SETTINGS_FILE


def load_search_settings(data_dir: str | os.PathLike[str]) -> SearchSettings:
    """The saved settings; defaults when there are none, or (with :attr:`~SearchSettings.problem`)
    when the file cannot be read."""
    path = settings_path(data_dir)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SearchSettings()
    except (OSError, ValueError) as exc:
        return SearchSettings(problem=f"{path} cannot be read ({exc}): searching without a reranker")
    if not isinstance(raw, dict):
        return SearchSettings(problem=f"{path} is not a JSON object: searching without a reranker")
    reranker, top = raw.get("reranker"), raw.get("rerank_top", RERANK_TOP)
    if reranker is not None and not isinstance(reranker, str):
        return SearchSettings(
            problem=f"{path}: 'reranker' must be a model id or null: searching without a reranker"
        )
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= MAX_RERANK_TOP:
        return SearchSettings(
            problem=f"{path}: 'rerank_top' must be a whole number from 1 to {MAX_RERANK_TOP}: "
            "searching without a reranker"
        )
    return SearchSettings((reranker or "").strip() or None, top)


def save_search_settings(data_dir: str | os.PathLike[str], settings: SearchSettings) -> None:
    """Write the settings (atomically); a reranker of "" or None is off."""
    from vrag_desktop.core.fsutil import atomic_write_json

    if not 1 <= settings.rerank_top <= MAX_RERANK_TOP:
        raise ValueError(f"rerank_top must be from 1 to {MAX_RERANK_TOP}, not {settings.rerank_top}")
    data = {"reranker": settings.reranker or None, "rerank_top": settings.rerank_top, "schema_version": 1}
    atomic_write_json(settings_path(data_dir), data, mkdir=True)
