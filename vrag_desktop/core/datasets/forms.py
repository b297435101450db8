"""The other forms a dataset comes in, read into the unified items: the verl parquet rows the
original trains on (and the app exports), and the sample corpus's question list.

Why here and not in each caller: evaluation, exports and the app's dataset view all open "a
dataset file", whichever form it is in; :func:`~.unified.load_dataset` dispatches to these.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vrag_desktop.core.datasets.unified import DatasetError, DatasetItem, _item

__all__ = ["from_parquet", "from_question_list", "is_question_list"]


def from_parquet(p: Path, need_answers: bool = True) -> list[DatasetItem]:
    """verl rows (reference §6.6): ``extra_info.question``, ``reward_model.ground_truth``, top-level
    ``file_name`` / ``reference_page`` (else those in ``extra_info``), types from ``extra_info``."""
    try:
        import pyarrow.parquet as pq

        rows = pq.read_table(p).to_pylist()
    except Exception as exc:  # pyarrow raises its own types for a file that is not parquet
        raise DatasetError(f"cannot read {p} as parquet: {exc}") from exc
    items = []
    for n, row in enumerate(rows):
        extra = row.get("extra_info") or {}
        reward = row.get("reward_model") or {}
        question = extra.get("question")
        if question is None:  # the prompt holds only the templated text: no plain question to read
            raise DatasetError(f"{p}: row {n + 1} has no extra_info.question")
        pages = row.get("reference_page", extra.get("reference_page"))
        content = extra.get("content_type") or ""
        obj: dict[str, Any] = {
            "uid": extra.get("uid", extra.get("index", n)),
            "query": question,
            "reference_answer": reward.get("ground_truth", extra.get("answer")),
            "meta_info": {
                "file_name": row.get("file_name", extra.get("file_name")) or "",
                "reference_page": [int(x) for x in pages] if pages is not None else [],
                "source_type": content.split("####") if "####" in content else content,
                "query_type": extra.get("reason_type") or "",
            },
        }
        items.append(_item(obj, n, f"{p}: row {n + 1}", need_answers))
    if not items:
        raise DatasetError(f"{p}: no rows")
    return items


def is_question_list(whole: Any) -> bool:
    """The sample corpus's ``questions.json``: a list of ``{"question", "expected": {...}}``."""
    return (
        isinstance(whole, list)
        and bool(whole)
        and all(
            isinstance(x, dict) and "question" in x and isinstance(x.get("expected"), dict) for x in whole
        )
    )


def from_question_list(p: Path, whole: list[dict[str, Any]], need_answers: bool = True) -> list[DatasetItem]:
    """``{"question", "expected": {"file", "page"}, "answer"}`` → items ``q1``, ``q2``, … whose
    ``file_name`` is the path relative to the corpus folder and ``page`` a 1-based page (or none)."""
    items = []
    for n, x in enumerate(whole):
        exp = x["expected"]
        page = exp.get("page")
        obj = {
            "uid": x.get("uid", f"q{n + 1}"),
            "query": x["question"],
            "reference_answer": x.get("answer", ""),
            "meta_info": {
                "file_name": exp.get("file") or "",
                "reference_page": [] if page is None else [page],
            },
        }
        items.append(_item(obj, n, f"{p}: question {n + 1}", need_answers))
    return items
